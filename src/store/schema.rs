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
    // 3: per-result parameter kinds and storage (JSON, NULL for older runs).
    "ALTER TABLE results ADD COLUMN param_kinds TEXT;
     ALTER TABLE results ADD COLUMN storage TEXT;",
];

pub fn version() -> i64 {
    MIGRATIONS.len() as i64
}

/// Apply every migration the database has not seen, each in a transaction.
/// A database from a newer tunelab is refused rather than misread.
pub fn migrate(conn: &Connection) -> Result<(), String> {
    let current: i64 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .map_err(|e| e.to_string())?;
    if current > version() {
        return Err(format!(
            "it was written by a newer tunelab (schema {current}, this build knows {}); upgrade tunelab",
            version()
        ));
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(current as usize) {
        let v = i as i64 + 1;
        let run = || -> rusqlite::Result<()> {
            conn.execute_batch("BEGIN")?;
            conn.execute_batch(sql)?;
            conn.pragma_update(None, "user_version", v)?;
            conn.execute_batch("COMMIT")
        };
        if let Err(e) = run() {
            let _ = conn.execute_batch("ROLLBACK");
            return Err(format!("migration to schema {v} failed: {e}"));
        }
    }
    Ok(())
}
