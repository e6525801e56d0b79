//! The PostgreSQL fleet store through the real binary: several machines
//! (here: processes started together) saving into one database, then every
//! reading verb on it. Needs a server: `TUNELAB_TEST_PG` holds its URL
//! (`.ci/run` installs and starts one); without it the test says it skips.

mod common;

use common::{json, stderr, Env};

#[test]
fn machines_share_one_postgres_store() {
    let Some(schema) = common::pg::PgSchema::new() else {
        return common::skip("set TUNELAB_TEST_PG to a PostgreSQL server URL");
    };
    let url = schema.url();
    let env = Env::new();
    let t = env.target();
    // Two "machines" start at once on a fresh database: both migrate and save.
    let runs: Vec<_> = ["64k", "4k"]
        .iter()
        .map(|chunk| {
            env.background()
                .env("TUNELAB_DB", &url)
                .args(["run", "io.file-read", "--quiet-check", "0", "--warmup", "0"])
                .args(["--trials", "3", "-p", "size=4M", "--label", chunk])
                .arg("-p")
                .arg(format!("chunk={chunk}"))
                .arg("--target")
                .arg(&t)
                .spawn()
                .expect("spawn tunelab")
        })
        .collect();
    for mut r in runs {
        assert!(r.wait().unwrap().success());
    }
    let db = |args: &[&str]| {
        env.cmd()
            .env("TUNELAB_DB", &url)
            .args(args)
            .output()
            .unwrap()
    };
    let out = db(&["runs", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let listed = json(&out);
    let labels: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["label"].as_str().unwrap())
        .collect();
    assert_eq!(labels.len(), 2, "{labels:?}");
    assert!(labels.contains(&"64k") && labels.contains(&"4k"));
    // Every reading verb works on it.
    let shown = json(&db(&["show", "last", "--json"]));
    assert_eq!(shown["results"][0]["experiment"], "io.file-read");
    assert!(!shown["results"][0]["metrics"][0]["samples"]
        .as_array()
        .unwrap()
        .is_empty());
    let c = db(&["compare", "last~1", "last", "--json"]);
    assert!(c.status.success(), "{}", stderr(&c));
    assert!(
        json(&c)["pairs"][0]["metrics"][0]["ratio"]
            .as_f64()
            .unwrap()
            > 0.0
    );
    let csv = db(&["export", "last", "--format", "csv"]);
    assert!(String::from_utf8_lossy(&csv.stdout).contains("read_throughput"));
    let html = env.dir.path().join("fleet.html");
    let r = db(&[
        "report",
        "last",
        "--vs",
        "last~1",
        "-o",
        html.to_str().unwrap(),
    ]);
    assert!(r.status.success(), "{}", stderr(&r));
    assert!(std::fs::metadata(&html).unwrap().len() > 1000);
    // Messages name the database without its password.
    let missing = db(&["show", "nope"]);
    assert_eq!(missing.status.code(), Some(2));
    if let Some(pw) = url.split('@').next().and_then(|u| u.rsplit(':').next()) {
        if !pw.is_empty() && !pw.contains('/') {
            assert!(
                !stderr(&missing).contains(&format!(":{pw}@")),
                "{}",
                stderr(&missing)
            );
        }
    }
    assert!(env.leftovers().is_empty());
}

/// `tunelab apply`'s record in a PostgreSQL store: saved, listed newest
/// first, updated in place by id when unapplied (what `applied`, `verify`,
/// `unapply`, `compare` and `report --vs` read).
#[test]
fn applied_changes_are_kept_in_postgres() {
    use tunelab::model::applied::{AppliedChange, AppliedFile};
    let Some(schema) = common::pg::PgSchema::new() else {
        return common::skip("set TUNELAB_TEST_PG to a PostgreSQL server URL");
    };
    let url = schema.url();
    let mut store = tunelab::store::Store::open(std::path::Path::new(&url)).unwrap();
    assert!(store.changes().unwrap().is_empty());
    let change = |id: &str, at: &str| AppliedChange {
        id: id.into(),
        run_id: "20261125-100000-test".into(),
        knob: id.split('@').next().unwrap().into(),
        device: id.split('@').nth(1).unwrap_or("").into(),
        old: "10".into(),
        new: "5".into(),
        live: vec!["/proc/sys/vm/dirty_background_ratio".into()],
        partners: vec![],
        verdict: "+20% write_throughput (95% CI +19%…+21%)".into(),
        files: vec![AppliedFile {
            path: "/etc/sysctl.d/90-tunelab-x.conf".into(),
            content: "x = 5\n".into(),
        }],
        fstab_line: None,
        remeasure: "tunelab run io.record-size".into(),
        root: "/".into(),
        notes: vec!["the kernel set 4 instead of 0".into()],
        machine_id: "0123456789abcdef0123456789abcdef".into(),
        state: "applied".into(),
        applied_at: at.into(),
        unapplied_at: None,
    };
    let first = change("vm.dirty_background_ratio", "2026-11-25T10:00:00Z");
    let second = change("read_ahead_kb@sda", "2026-11-25T11:00:00Z");
    store.save_change(&first).unwrap();
    store.save_change(&second).unwrap();
    let all = store.changes().unwrap();
    assert_eq!(all, vec![second.clone(), first.clone()], "newest first");
    // unapply updates the same record, not a second one.
    let mut gone = first.clone();
    gone.state = "unapplied".into();
    gone.unapplied_at = Some("2026-11-25T12:00:00Z".into());
    store.save_change(&gone).unwrap();
    assert_eq!(store.changes().unwrap(), vec![second, gone]);
}
