//! The foundation's outcomes, through the real binary: JSON run documents,
//! storage, comparison verdicts, interruption, bad input.

mod common;

use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{json, stderr, Env};

const FAST: &[&str] = &["--quiet-check", "0", "--warmup", "0"];

fn file_read(env: &Env, chunk: &str, trials: &str) -> std::process::Output {
    let t = env.target();
    let mut args = vec![
        "run",
        "io.file-read",
        "--json",
        "--target",
        t.to_str().unwrap(),
    ];
    args.extend(FAST);
    args.extend(["--trials", trials, "-p", "size=4M", "-p"]);
    let p = format!("chunk={chunk}");
    args.push(&p);
    env.run(&args)
}

#[test]
fn run_prints_a_valid_document_and_is_stored() {
    let env = Env::new();
    let out = file_read(&env, "64k", "3");
    assert!(out.status.success(), "{}", stderr(&out));
    let doc = json(&out);
    assert_eq!(doc["schema"], "tunelab.run/1");
    assert_eq!(doc["status"], "complete");
    let r = &doc["results"][0];
    assert_eq!(r["experiment"], "io.file-read");
    assert_eq!(r["params"]["chunk"], 65536);
    let m = &r["metrics"][0];
    assert_eq!(m["name"], "read_throughput");
    assert_eq!(m["unit"], "B/s");
    assert_eq!(m["samples"].as_array().unwrap().len(), 3);
    assert!(m["summary"]["median"].as_f64().unwrap() > 0.0);
    assert_eq!(m["summary"]["stop_reason"], "fixed");
    for k in [
        "kernel.release",
        "cpu.model",
        "target.fs",
        "tool.version",
        "vm.dirty_ratio",
    ] {
        assert!(doc["environment"][k].is_string(), "environment lacks {k}");
    }
    assert!(doc["samples"].is_array());
    assert!(
        env.leftovers().is_empty(),
        "scratch left behind: {:?}",
        env.leftovers()
    );

    let runs = json(&env.run(&["runs", "--json"]));
    assert_eq!(runs[0]["id"], doc["id"]);
    let shown = json(&env.run(&["show", doc["id"].as_str().unwrap(), "--json"]));
    assert_eq!(shown["results"], doc["results"]);
}

#[test]
fn precision_rule_stops_and_says_why() {
    let env = Env::new();
    let t = env.target();
    let mut args = vec![
        "run",
        "io.file-read",
        "--json",
        "--no-store",
        "--target",
        t.to_str().unwrap(),
    ];
    args.extend(FAST);
    args.extend([
        "-p",
        "size=4M",
        "--min-trials",
        "3",
        "--max-trials",
        "4",
        "--precision",
        "50%",
    ]);
    let doc = json(&env.run(&args));
    let reason = doc["results"][0]["metrics"][0]["summary"]["stop_reason"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(reason == "precision" || reason == "max_trials", "{reason}");
}

#[test]
fn a_slowed_variant_is_a_regression_and_fails_on_request() {
    let env = Env::new();
    assert!(file_read(&env, "64k", "6").status.success());
    assert!(file_read(&env, "64", "6").status.success());
    let out = env.run(&["compare", "last~1", "last", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let c = json(&out);
    let m = &c["pairs"][0]["metrics"][0];
    assert_eq!(m["verdict"], "regressed", "{m}");
    assert!(m["ratio"].as_f64().unwrap() < 0.9);
    // --trust-suspect: on a busy machine the guard flags these trials, and
    // a suspect regression alone does not fail a pipeline.
    let out = env.run(&[
        "compare",
        "last~1",
        "last",
        "--fail-on-regression",
        "--trust-suspect",
    ]);
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    // A run against itself is never a change (noisy samples may leave it inconclusive).
    let c = json(&env.run(&["compare", "last", "last", "--json"]));
    let v = &c["pairs"][0]["metrics"][0];
    assert!(
        v["verdict"] == "no_change" || v["verdict"] == "inconclusive",
        "{v}"
    );
    assert_eq!(v["ratio"], 1.0);
    // Text view names the verdict too.
    let text = env.run(&["compare", "last~1", "last"]);
    assert!(String::from_utf8_lossy(&text.stdout).contains("regressed"));
    // A gate that compared nothing does not pass: runs of other experiments.
    let o = env.run(&["run", "ipc.pipe", "--trials", "2", "-q"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = env.run(&["compare", "last~1", "last", "--fail-on-regression"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("nothing was compared"),
        "{}",
        stderr(&out)
    );
    let out = env.run(&["compare", "last~1", "last"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "without the gate, a warning only"
    );
}

#[test]
fn sigint_leaves_nothing_behind_and_exits_130() {
    let env = Env::new();
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("tunelab"))
        .env("TUNELAB_DB", env.db())
        .args(["run", "io.file-read", "--quiet-check", "0", "--target"])
        .arg(env.target())
        .args([
            "-p",
            "size=64M",
            "-p",
            "chunk=4k,8k,16k,32k,64k",
            "--trials",
            "30",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the scratch directory exists, then interrupt.
    let t0 = Instant::now();
    while env.leftovers().is_empty() && t0.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(700));
    unsafe { libc_kill(child.id() as i32, 2) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    assert!(
        env.leftovers().is_empty(),
        "left behind: {:?}",
        env.leftovers()
    );
    // Stored as interrupted or not at all, and the database is readable.
    let runs = json(&env.run(&["runs", "--json"]));
    for r in runs.as_array().unwrap() {
        assert_eq!(r["status"], "interrupted");
        let shown = env.run(&["show", r["id"].as_str().unwrap(), "--json"]);
        assert!(shown.status.success());
    }
}

extern "C" {
    #[link_name = "kill"]
    fn libc_kill(pid: i32, sig: i32) -> i32;
}

fn expect_error(env: &Env, args: &[&str], code: i32, needle: &str) {
    let out = env.run(args);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(code), "{args:?}: {err}");
    assert!(
        err.contains(needle),
        "{args:?}: stderr lacks '{needle}': {err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(
        err.trim().lines().count(),
        1,
        "one-line error expected: {err}"
    );
}

#[test]
fn bad_input_gets_a_clear_error_and_the_documented_code() {
    let env = Env::new();
    let t = env.target();
    let t = t.to_str().unwrap();
    expect_error(&env, &["run", "io.nope"], 2, "unknown experiment 'io.nope'");
    expect_error(
        &env,
        &["run", "io.file-read", "-p", "colour=red", "--target", t],
        2,
        "unknown parameter 'colour'",
    );
    expect_error(
        &env,
        &["run", "io.file-read", "-p", "size=12q", "--target", t],
        2,
        "'12q' is not a size",
    );
    expect_error(
        &env,
        &["run", "io.file-read", "-p", "size=4k", "-p", "chunk=1M"],
        2,
        "larger than the file size",
    );
    expect_error(
        &env,
        &[
            "run",
            "io.file-read",
            "--quiet-check",
            "0",
            "--target",
            "/does/not/exist",
        ],
        2,
        "does not exist",
    );
    expect_error(
        &env,
        &[
            "run",
            "io.file-read",
            "--quiet-check",
            "0",
            "--target",
            "/dev/null",
        ],
        2,
        "not a directory",
    );
    expect_error(&env, &["show", "nope"], 2, "no run 'nope'");
    expect_error(
        &env,
        &["export", "nope", "--format", "csv"],
        2,
        "no run 'nope'",
    );
    let out = env.run(&["run", "io.file-read", "--trials", "abc"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(env.leftovers().is_empty());
}

#[test]
fn read_only_and_full_targets_are_environment_errors() {
    if !common::is_root() {
        return common::skip("read-only/full target test needs root to mount tmpfs");
    }
    let env = Env::new();
    let ro = env.dir.path().join("ro");
    let full = env.dir.path().join("full");
    std::fs::create_dir_all(&ro).unwrap();
    std::fs::create_dir_all(&full).unwrap();
    let mount = |args: &[&str]| {
        std::process::Command::new("mount")
            .args(args)
            .status()
            .unwrap()
            .success()
    };
    if !mount(&[
        "-t",
        "tmpfs",
        "-o",
        "size=1m,ro",
        "tunelab-ro",
        ro.to_str().unwrap(),
    ]) {
        return common::skip("cannot mount tmpfs");
    }
    assert!(mount(&[
        "-t",
        "tmpfs",
        "-o",
        "size=2m",
        "tunelab-full",
        full.to_str().unwrap()
    ]));
    let ro_out = env.run(&[
        "run",
        "io.file-read",
        "--quiet-check",
        "0",
        "--target",
        ro.to_str().unwrap(),
    ]);
    let full_out = env.run(&[
        "run",
        "io.file-read",
        "--quiet-check",
        "0",
        "--target",
        full.to_str().unwrap(),
    ]);
    let full_left = common::list(&full);
    for d in [&ro, &full] {
        std::process::Command::new("umount")
            .arg(d)
            .status()
            .unwrap();
    }
    assert_eq!(ro_out.status.code(), Some(4), "{}", stderr(&ro_out));
    assert!(stderr(&ro_out).contains("read-only"));
    assert_eq!(full_out.status.code(), Some(4), "{}", stderr(&full_out));
    // Refused either when the file is fitted (half the free space is below
    // the experiment's floor) or by the scratch's free-space check.
    let why = stderr(&full_out);
    assert!(
        why.contains("not enough free space") || why.contains("storage space"),
        "{why}"
    );
    assert!(
        full_left.is_empty(),
        "left behind on the full target: {full_left:?}"
    );
}

/// Each point of a sweep is fitted to the free space, and a point's file
/// goes when the point ends: on a 20 MiB partition every record size gets
/// a file of about 10 MiB (it used to halve point after point, and the
/// scratch check's fixed 16 MiB reserve refused the first point).
#[test]
fn a_small_partition_fits_every_point_of_a_sweep() {
    if !common::is_root() {
        return common::skip("small-partition test needs root to mount tmpfs");
    }
    let env = Env::new();
    let small = env.dir.path().join("small");
    std::fs::create_dir_all(&small).unwrap();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=20m", "tunelab-small"])
        .arg(&small)
        .status()
        .unwrap()
        .success();
    if !mounted {
        return common::skip("cannot mount tmpfs");
    }
    let out = env.run(&[
        "run",
        "io.record-size",
        "-p",
        "mode=buffered",
        "-p",
        "record=256k,512k,1m",
        "--trials",
        "1",
        "--quiet-check",
        "0",
        "--no-store",
        "--target",
        small.to_str().unwrap(),
    ]);
    let left = common::list(&small);
    std::process::Command::new("umount")
        .arg(&small)
        .status()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), stderr(&out));
    assert_eq!(out.status.code(), Some(0), "{text}");
    let sizes: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("was measured (fitted: free space"))
        .collect();
    assert_eq!(sizes.len(), 3, "{text}");
    // Each size is half the free space rounded down to its record size (9-10
    // MiB); the files of earlier points left in place would halve it again
    // at every point (10, 5, 2.5).
    let mib: Vec<f64> = sizes
        .iter()
        .filter_map(|l| l.split("size=").nth(1)?.split(" MiB").next()?.parse().ok())
        .collect();
    assert_eq!(mib.len(), 3, "{sizes:?}");
    assert!(mib.iter().all(|&m| (8.5..=10.0).contains(&m)), "{sizes:?}");
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn exports_in_every_format() {
    let env = Env::new();
    assert!(file_read(&env, "64k", "2").status.success());
    let csv = env.run(&["export", "last", "--format", "csv"]);
    let csv = String::from_utf8(csv.stdout).unwrap();
    assert!(csv.starts_with("run_id,experiment,params,metric"));
    assert_eq!(csv.lines().count(), 2);
    let md = String::from_utf8(env.run(&["export", "last", "--format", "md"]).stdout).unwrap();
    assert!(md.contains("## io.file-read") && md.contains("| read_throughput |"));
    let js = json(&env.run(&["export", "last", "--format", "json"]));
    assert_eq!(js["schema"], "tunelab.run/1");
    // --output never overwrites an existing file.
    let existing = env.dir.path().join("exists.csv");
    std::fs::write(&existing, "keep me").unwrap();
    let out = env.run(&[
        "export",
        "last",
        "--format",
        "csv",
        "-o",
        existing.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(std::fs::read_to_string(&existing).unwrap(), "keep me");
}

#[test]
fn help_completions_and_man_page_come_from_the_definitions() {
    let env = Env::new();
    let out = env.run(&["run", "io.file-read", "--help"]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("chunk") && text.contains("default 64k") && text.contains("bytes"),
        "{text}"
    );
    let out = env.run(&["list", "--json"]);
    assert!(json(&out)
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["name"] == "io.file-read"));
    let bash = env.run(&["completions", "bash"]);
    assert!(String::from_utf8_lossy(&bash.stdout).contains("tunelab"));
    let man = env.run(&["completions", "man"]);
    assert!(String::from_utf8_lossy(&man.stdout).contains(".TH tunelab"));
    let v = env.run(&["--version"]);
    assert!(String::from_utf8_lossy(&v.stdout).starts_with("tunelab "));
}

#[test]
fn a_sweep_runs_every_point_and_cleans_each_up() {
    let env = Env::new();
    let t = env.target();
    let mut args = vec![
        "run",
        "io.file-read",
        "--json",
        "--no-store",
        "--target",
        t.to_str().unwrap(),
    ];
    args.extend(FAST);
    args.extend([
        "--trials",
        "2",
        "-p",
        "size=2M",
        "-p",
        "chunk=4k,64k",
        "-p",
        "open=once,each",
    ]);
    let out = env.run(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    let doc = json(&out);
    assert_eq!(doc["results"].as_array().unwrap().len(), 4);
    assert!(env.leftovers().is_empty());
}

#[test]
fn a_huge_warmup_is_bounded_by_the_budget() {
    let env = Env::new();
    let t = env.target();
    let out = env.run(&[
        "run",
        "io.file-read",
        "--json",
        "--no-store",
        "--quiet-check",
        "0",
        "--warmup",
        "1000000",
        "--budget",
        "1s",
        "-p",
        "size=1M",
        "--target",
        t.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let doc = json(&out);
    let notes = doc["results"][0]["notes"].to_string();
    assert!(notes.contains("warm-up stopped after"), "{notes}");
}
