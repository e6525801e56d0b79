//! Versioned schema: migration N brings a database from user_version N-1 to N.

use rusqlite::Connection;

const MIGRATIONS: &[&str] = &[
    // 1: runs, point results, metrics with raw samples, monitor samples.
    "CREATE TABLE runs (
        id TEXT PRIMARY KEY, label TEXT NOT NULL, status TEXT NOT NULL,
        started TEXT NOT NULL, finished TEXT NOT NULL, tool_version TEXT NOT NULL,
        argv TEXT NOT NULL, environment TEXT NOT NULL, quietness TEXT NOT NULL,
        warnings TEXT NOT NULL, experiments TEXT NOT NULL);
     CREATE TABLE results (
        run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE, idx INTEGER NOT NULL,
        experiment TEXT NOT NULL, params TEXT NOT NULL, series TEXT NOT NULL,
        histograms TEXT NOT NULL, notes TEXT NOT NULL, elapsed_s REAL NOT NULL,
        PRIMARY KEY (run_id, idx));
     CREATE INDEX results_by_experiment ON results(experiment);
     CREATE TABLE metrics (
        run_id TEXT NOT NULL, result_idx INTEGER NOT NULL, idx INTEGER NOT NULL,
        name TEXT NOT NULL, unit TEXT NOT NULL, better TEXT NOT NULL,
        samples TEXT NOT NULL, warmup TEXT NOT NULL, summary TEXT NOT NULL,
        PRIMARY KEY (run_id, result_idx, idx),
        FOREIGN KEY (run_id, result_idx) REFERENCES results(run_id, idx) ON DELETE CASCADE);
     CREATE TABLE monitor_samples (
        run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE, idx INTEGER NOT NULL,
        t REAL NOT NULL, data TEXT NOT NULL, PRIMARY KEY (run_id, idx));",
    // 2: study verdicts (JSON, NULL for plain runs).
    "ALTER TABLE runs ADD COLUMN study TEXT;",
    // 3: the validity guard's per-trial checks of each point (JSON, NULL
    // for points stored before it existed).
    "ALTER TABLE results ADD COLUMN validity TEXT;",
    // 4: per-result parameter kinds and storage (JSON, NULL for older runs).
    "ALTER TABLE results ADD COLUMN param_kinds TEXT;
     ALTER TABLE results ADD COLUMN storage TEXT;",
    // 5: a `diagnose` run's sections (JSON, NULL for other runs).
    "ALTER TABLE runs ADD COLUMN diagnosis TEXT;",
    // 6: settings `tunelab apply` made persistent (one JSON record each).
    "CREATE TABLE applied_changes (
        id TEXT PRIMARY KEY, run_id TEXT NOT NULL, knob TEXT NOT NULL,
        state TEXT NOT NULL, applied_at TEXT NOT NULL, record TEXT NOT NULL);",
];

pub(crate) fn version() -> i64 {
    MIGRATIONS.len() as i64
}

/// Apply every migration the database has not seen, in one exclusive
/// transaction (BEGIN IMMEDIATE takes the write lock at once) that reads the
/// schema version again inside it: several processes opening a new database
/// together migrate it exactly once; the others wait (busy timeout) and then
/// find it current. A database from a newer tunelab is refused rather than
/// misread.
pub(crate) fn migrate(conn: &Connection) -> Result<(), String> {
    let read = || -> Result<i64, String> {
        conn.pragma_query_value(None, "user_version", |r| r.get(0))
            .map_err(|e| e.to_string())
    };
    let newer = |current: i64| {
        format!(
            "it was written by a newer tunelab (schema {current}, this build knows {}); upgrade tunelab",
            version()
        )
    };
    // Fast path without the write lock: current databases (also read-only ones).
    let current = read()?;
    if current > version() {
        return Err(newer(current));
    }
    if current == version() {
        return Ok(());
    }
    conn.execute_batch("BEGIN IMMEDIATE")
        .map_err(|e| format!("cannot lock it to migrate the schema: {e}"))?;
    let run = || -> Result<(), String> {
        let current = read()?;
        if current > version() {
            return Err(newer(current));
        }
        for (i, sql) in MIGRATIONS.iter().enumerate().skip(current as usize) {
            let v = i as i64 + 1;
            conn.execute_batch(sql)
                .map_err(|e| format!("migration to schema {v} failed: {e}"))?;
        }
        conn.pragma_update(None, "user_version", version())
            .map_err(|e| e.to_string())?;
        conn.execute_batch("COMMIT").map_err(|e| e.to_string())
    };
    run().inspect_err(|_| {
        let _ = conn.execute_batch("ROLLBACK");
    })
}
