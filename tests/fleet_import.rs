//! From board to host: runs recorded on "boards" (here: other databases,
//! with the machine identity rewritten as a board's would be) are exported,
//! imported on the host and read with runs/show/compare/report; re-imports
//! are no-ops; bad files import nothing. On SQLite always, and on
//! PostgreSQL when `TUNELAB_TEST_PG` holds a server URL.

mod common;

use std::path::{Path, PathBuf};

use common::{json, stderr, Env};

/// Run a small io.file-read on `db` and return the run as exported JSON.
fn record(env: &Env, db: &str, label: &str) -> serde_json::Value {
    let out = env
        .cmd()
        .env("TUNELAB_DB", db)
        .args(["run", "io.file-read", "--quiet-check", "0", "--warmup", "0"])
        .args(["--trials", "3", "-p", "size=4M", "-p", "chunk=64k"])
        .args(["--label", label, "--target"])
        .arg(env.target())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let exp = env
        .cmd()
        .env("TUNELAB_DB", db)
        .args(["export", "last", "--format", "json"])
        .output()
        .unwrap();
    assert!(exp.status.success(), "{}", stderr(&exp));
    json(&exp)
}

/// The run as a board would have recorded it: its own name, machine id and run id.
fn as_board(run: &serde_json::Value, host: &str, id_suffix: &str) -> serde_json::Value {
    let mut r = run.clone();
    r["environment"]["host.name"] = host.into();
    r["environment"]["machine.id"] = format!("{:0>32}", host.len()).into();
    r["environment"]["kernel.release"] = "6.1.0-board-arm64".into();
    r["environment"]["cpu.model"] = "Cortex-A53".into();
    let id = r["id"].as_str().unwrap().to_string();
    r["id"] = format!("{}{id_suffix}", &id[..id.len() - id_suffix.len()]).into();
    r
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn scenario(env: &Env, host_db: &str) {
    let cmd = |args: &[&str]| {
        env.cmd()
            .env("TUNELAB_DB", host_db)
            .args(args)
            .output()
            .unwrap()
    };
    let import = |files: &[&Path]| {
        let mut c = env.cmd();
        c.env("TUNELAB_DB", host_db).arg("import");
        for f in files {
            c.arg(f);
        }
        c.output().unwrap()
    };
    let dir = env.dir.path();
    let board_db = dir.join("board.db");
    let board_db = board_db.to_str().unwrap();
    let raw = record(env, board_db, "on the board");
    let host = record(env, host_db, "on the host");
    let a = as_board(&raw, "board-a", "aaaa");
    let b = as_board(&raw, "board-b", "bbbb");
    let fa = write(dir, "a.json", &serde_json::to_string_pretty(&a).unwrap());
    let fb = write(dir, "b.json", &serde_json::to_string(&[&b]).unwrap());

    // A corrupt or foreign file next to good ones: exit 2, nothing imported.
    let corrupt = write(
        dir,
        "corrupt.json",
        &serde_json::to_string(&a).unwrap()[..200],
    );
    let foreign = write(
        dir,
        "fio.json",
        r#"{"fio version": "fio-3.33", "jobs": []}"#,
    );
    let mut newer = b.clone();
    newer["schema"] = "tunelab.run/2".into();
    let newer = write(dir, "newer.json", &newer.to_string());
    for (bad, says) in [
        (&corrupt, "not JSON"),
        (&foreign, "no \"schema\""),
        (&newer, "newer tunelab"),
    ] {
        let out = import(&[&fa, bad, &fb]);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains(says) && err.contains("nothing was imported"),
            "{err}"
        );
        let listed = json(&cmd(&["runs", "--json"]));
        assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    }
    // A missing file is bad input too.
    let out = import(&[&fa, &dir.join("no-such-file.json")]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("nothing was imported"));
    // A foreign SQLite database too.
    let other = dir.join("other.sqlite");
    rusqlite_free_db(&other);
    let out = import(&[&fa, &other]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("not a tunelab results database"));

    // Both boards' exports import with their ids and machines.
    let out = import(&[&fa, &fb]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("2 run(s) imported, 0 already stored"));
    // Again, and the board's whole results.db (holding the unrewritten run):
    // the exports are already stored, the database's run is new.
    let out = import(&[&fa, &fb, Path::new(board_db)]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(text.matches("already stored").count(), 2, "{text}");
    assert!(stderr(&out).contains("1 run(s) imported, 2 already stored"));
    let out = import(&[Path::new(board_db)]);
    assert!(stderr(&out).contains("0 run(s) imported, 1 already stored"));

    // runs: a machine column naming each run's machine.
    let listed = json(&cmd(&["runs", "--json"]));
    let machines: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["machine"].as_str().unwrap())
        .collect();
    assert_eq!(machines.len(), 4, "{listed}");
    assert!(machines.contains(&"board-a") && machines.contains(&"board-b"));
    let table = String::from_utf8_lossy(&cmd(&["runs"]).stdout).to_string();
    assert!(
        table.contains("machine") && table.contains("board-a"),
        "{table}"
    );

    // show: the machine it was recorded on; the stored run equals the export.
    let id_a = a["id"].as_str().unwrap();
    let shown = cmd(&["show", id_a]);
    assert!(shown.status.success(), "{}", stderr(&shown));
    assert!(String::from_utf8_lossy(&shown.stdout).contains("recorded on: board-a"));
    let back = json(&cmd(&["show", id_a, "--json"]));
    assert_eq!(back["environment"], a["environment"]);
    assert_eq!(back["results"], a["results"]);

    // compare board vs board and board vs host: the machines in the diff.
    let id_b = b["id"].as_str().unwrap();
    let host_id = host["id"].as_str().unwrap();
    for (x, y, other) in [(id_a, id_b, "board-b"), (id_a, host_id, "")] {
        let c = cmd(&["compare", x, y, "--json"]);
        assert!(c.status.success(), "{}", stderr(&c));
        let c = json(&c);
        let diff = c["environment_diff"].as_array().unwrap();
        let name = diff.iter().find(|d| d["key"] == "host.name");
        let name = name.unwrap_or_else(|| panic!("no host.name in {diff:?}"));
        assert_eq!(name["base"], "board-a");
        if !other.is_empty() {
            assert_eq!(name["new"], other);
        }
        assert!(c["pairs"][0]["metrics"][0]["ratio"].as_f64().unwrap() > 0.0);
    }
    // report across machines names both.
    let md = dir.join(format!("across-{}.md", host_db.len()));
    let r = cmd(&["report", host_id, "--vs", id_a, "-o", md.to_str().unwrap()]);
    assert!(r.status.success(), "{}", stderr(&r));
    let text = std::fs::read_to_string(&md).unwrap();
    assert!(text.contains("on board-a"), "{text}");
}

/// A SQLite file that is not tunelab's.
fn rusqlite_free_db(path: &Path) {
    let c = rusqlite::Connection::open(path).unwrap();
    c.execute_batch("CREATE TABLE songs (title TEXT); INSERT INTO songs VALUES ('x');")
        .unwrap();
}

#[test]
fn board_runs_import_into_a_sqlite_host_store() {
    let env = Env::new();
    let db = env.db();
    scenario(&env, db.to_str().unwrap());
}

#[test]
fn board_runs_import_into_a_postgres_host_store() {
    let Some(schema) = common::pg::PgSchema::new() else {
        return common::skip("set TUNELAB_TEST_PG to a PostgreSQL server URL");
    };
    let env = Env::new();
    scenario(&env, &schema.url());
}

#[test]
fn labels_with_escape_codes_and_newlines_stay_inert() {
    let env = Env::new();
    let label = "x\u{1b}]0;pwned\u{7}\u{1b}[2Jline one\nline two|";
    let out = env
        .cmd()
        .args(["run", "io.file-read", "--quiet-check", "0", "--warmup", "0"])
        .args([
            "--trials", "3", "-p", "size=4M", "--label", label, "--target",
        ])
        .arg(env.target())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    for args in [&["runs"][..], &["show", "last"][..]] {
        let out = env.run(args);
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(
            !out.stdout.contains(&0x1b) && !out.stdout.contains(&0x07),
            "{args:?} printed raw control characters: {:?}",
            String::from_utf8_lossy(&out.stdout)
        );
        assert!(String::from_utf8_lossy(&out.stdout).contains("line one\\nline two"));
    }
    let md = env.run(&["export", "last", "--format", "md"]);
    let text = String::from_utf8_lossy(&md.stdout).to_string();
    let line = text.lines().find(|l| l.starts_with("Label:")).unwrap();
    assert!(
        line.contains("line one line two") && line.ends_with("**"),
        "{text}"
    );
    assert!(!md.stdout.contains(&0x1b), "{text}");
    // The JSON export keeps the label exactly as given.
    let j = json(&env.run(&["export", "last", "--format", "json"]));
    assert_eq!(j["label"], label);
}
