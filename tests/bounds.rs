//! Issue 42 (parts 3-8): input bounded and checked like command-line input,
//! interrupted measurements kept, pseudo file systems and absurd plans
//! refused, dry runs that say how long. Each test is one of the issue's
//! probes; timings are not compared here (bench/ has the scale figures).

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{json, stderr, Env};

/// One real run, exported: the template the import probes edit.
fn exported(env: &Env) -> serde_json::Value {
    let out = env.run(&[
        "run",
        "ipc.pipe",
        "--trials",
        "2",
        "--warmup",
        "0",
        "--quiet-check",
        "0",
        "--trial-time",
        "1ms",
        "-p",
        "test=latency",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = env.run(&["export", "last", "--format", "json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    json(&out)
}

fn with_id(run: &serde_json::Value, n: usize) -> serde_json::Value {
    let mut r = run.clone();
    r["id"] = format!("20260101-000000-{n:04x}").into();
    r
}

fn write(dir: &Path, name: &str, v: &serde_json::Value) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, serde_json::to_vec(v).unwrap()).unwrap();
    p
}

fn listed(env: &Env) -> Vec<serde_json::Value> {
    json(&env.run(&["runs", "--json"]))
        .as_array()
        .unwrap()
        .clone()
}

#[test]
fn imports_are_checked_like_command_line_input() {
    let env = Env::new();
    let base = exported(&env);
    let dir = env.dir.path();
    let mut bad = Vec::new();
    let mut r = with_id(&base, 1);
    r["results"][0]["experiment"] = "../../etc/passwd".into();
    bad.push((r, "not an experiment name"));
    let mut r = with_id(&base, 2);
    r["results"][0]["params"]["test"] = "../../etc".into();
    bad.push((r, "parameter test"));
    let mut r = with_id(&base, 3);
    r["started"] = "yesterday".into();
    bad.push((r, "not an RFC 3339 time"));
    let mut r = with_id(&base, 4);
    r["label"] = "x".repeat(201).into();
    bad.push((r, "200 characters"));
    let mut r = with_id(&base, 5);
    r["results"][0]["metrics"][0]["summary"]["n"] = (-3).into();
    bad.push((r, "not a valid tunelab run"));
    let mut r = with_id(&base, 6);
    r["results"][0]["elapsed_s"] = (-1.0).into();
    bad.push((r, "not a time"));
    let before = listed(&env).len();
    for (i, (run, says)) in bad.iter().enumerate() {
        let f = write(dir, &format!("bad{i}.json"), run);
        let out = env.run(&["import", f.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(2), "{says}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains(says) && err.contains("nothing was imported"),
            "{says}: {err}"
        );
        assert!(err.len() < 2000, "the message quotes the bad field whole");
    }
    assert_eq!(listed(&env).len(), before, "a refused run was stored");
}

#[test]
fn last_is_the_run_stored_last_not_the_latest_claimed_start() {
    let env = Env::new();
    let base = exported(&env);
    let dir = env.dir.path();
    let mut future = with_id(&base, 7);
    future["started"] = "2099-01-01T00:00:00Z".into();
    let mut past = with_id(&base, 8);
    past["started"] = "2001-01-01T00:00:00Z".into();
    for (name, run) in [("future.json", &future), ("past.json", &past)] {
        let f = write(dir, name, run);
        let out = env.run(&["import", f.to_str().unwrap()]);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let runs = listed(&env);
    assert_eq!(runs[0]["id"], past["id"], "{runs:?}");
    assert_eq!(runs[1]["id"], future["id"]);
    let shown = json(&env.run(&["show", "last", "--json"]));
    assert_eq!(shown["id"], past["id"]);
}

#[test]
fn a_label_at_the_cap_lists_and_a_bar_keeps_its_column() {
    let env = Env::new();
    let base = exported(&env);
    let mut r = with_id(&base, 9);
    let label = format!("a|b{}", "é".repeat(197));
    assert_eq!(label.chars().count(), 200);
    r["label"] = label.clone().into();
    let f = write(env.dir.path(), "cap.json", &r);
    let out = env.run(&["import", f.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = env.run(&["runs"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    let row = text.lines().find(|l| l.contains("a\\|b")).expect(&text);
    let header = text.lines().next().unwrap();
    let bars = |l: &str| l.replace("\\|", "").matches('|').count();
    assert_eq!(bars(row), bars(header), "{text}");
    // On the command line the same cap, named.
    let long = "y".repeat(201);
    let out = env.run(&["run", "ipc.pipe", "--dry-run", "--label", &long]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("at most 200 characters"));
}

#[test]
fn a_run_past_the_result_cap_is_refused_and_nothing_is_kept() {
    let env = Env::new();
    let base = exported(&env);
    let mut r = with_id(&base, 10);
    let one = r["results"][0].clone();
    r["results"] = vec![one; 5_001].into();
    let f = write(env.dir.path(), "many.json", &r);
    let before = listed(&env).len();
    let out = env.run(&["import", f.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("5000"), "{}", stderr(&out));
    assert_eq!(listed(&env).len(), before);
}

fn interrupt_after(env: &Env, args: &[&str], after: Duration) -> (Option<i32>, serde_json::Value) {
    let mut child = env.background().args(args).spawn().unwrap();
    std::thread::sleep(after);
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait().unwrap();
    let runs = listed(env);
    assert!(!runs.is_empty(), "{args:?}: nothing was stored");
    (status.code(), runs[0].clone())
}

#[test]
fn an_interrupted_run_keeps_its_finished_trials() {
    let env = Env::new();
    let t = env.target();
    let (code, info) = interrupt_after(
        &env,
        &[
            "run",
            "ipc.pipe",
            "--target",
            t.to_str().unwrap(),
            "--trials",
            "1000000",
            "--warmup",
            "0",
            "--quiet-check",
            "0",
            "--trial-time",
            "1ms",
        ],
        Duration::from_secs(3),
    );
    assert_eq!(code, Some(130));
    assert_eq!(info["status"], "interrupted", "{info}");
    let run = json(&env.run(&["show", info["id"].as_str().unwrap(), "--json"]));
    let m = &run["results"][0]["metrics"][0];
    assert!(!m["samples"].as_array().unwrap().is_empty(), "{m}");
    assert_eq!(m["summary"]["stop_reason"], "interrupted", "{m}");
}

#[test]
fn an_interrupted_diagnosis_keeps_the_interval_it_covered() {
    let env = Env::new();
    let (code, info) = interrupt_after(&env, &["diagnose", "--for", "10m"], Duration::from_secs(4));
    assert_eq!(code, Some(130));
    assert_eq!(info["status"], "interrupted", "{info}");
    let run = json(&env.run(&["show", info["id"].as_str().unwrap(), "--json"]));
    let covered = run["diagnosis"]["interval_s"].as_f64().unwrap();
    assert!(covered > 0.0 && covered < 600.0, "{covered}");
}

#[test]
fn kernel_trees_are_refused_as_targets() {
    let env = Env::new();
    for t in ["/proc", "/sys", "/sys/fs/cgroup", "/dev"] {
        let out = env.run(&["run", "ipc.pipe", "--dry-run", "--target", t]);
        assert_eq!(out.status.code(), Some(2), "{t}: {}", stderr(&out));
        assert!(stderr(&out).contains("kernel"), "{t}: {}", stderr(&out));
    }
}

#[test]
fn absurd_plans_are_refused_with_the_limit_named() {
    let env = Env::new();
    for (flag, value, says) in [
        ("--trials", "1000000000000", "1000000"),
        ("--warmup", "5000000", "1000000"),
        ("--budget", "3153600000s", "7 days"),
    ] {
        let out = env.run(&["run", "ipc.pipe", "--dry-run", flag, value]);
        assert_eq!(out.status.code(), Some(2), "{flag}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{flag}: {}", stderr(&out));
    }
    let profile = env.dir.path().join("p.toml");
    std::fs::write(
        &profile,
        "name = \"p\"\ntitle = \"p\"\n[[issue]]\nname = \"i\"\nquestion = \"q\"\n\
         experiment = \"ipc.pipe\"\ntrials = 1000000000000\n",
    )
    .unwrap();
    let out = env.run(&["study", profile.to_str().unwrap(), "--dry-run"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("1000000"), "{}", stderr(&out));
}

#[test]
fn dry_runs_honour_json_and_say_the_longest() {
    let env = Env::new();
    let out = env.run(&["run", "ipc.pipe", "--dry-run", "--json", "--budget", "20s"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let plan = json(&out);
    assert_eq!(plan["schema"], "tunelab.run-plan/1");
    assert_eq!(plan["longest_s"], 20.0, "{plan}");
    let out = env.run(&["run", "ipc.pipe", "--dry-run", "--trials", "5"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("no time limit"), "{text}");
    let out = env.run(&["study", "quick", "--dry-run", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let plan = json(&out);
    assert_eq!(plan["schema"], "tunelab.study-plan/1");
    let issues = plan["issues"].as_array().unwrap();
    assert!(!issues.is_empty());
    if issues.iter().all(|i| i["longest_s"].is_number()) {
        let sum: f64 = issues
            .iter()
            .map(|i| i["longest_s"].as_f64().unwrap())
            .sum();
        assert!(
            (plan["longest_s"].as_f64().unwrap() - sum).abs() < 1e-6,
            "{plan}"
        );
    } else {
        assert!(plan["longest_s"].is_null(), "{plan}");
    }
    let out = env.run(&["study", "quick", "--dry-run"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("longest: "));
}

/// `remote --inventory` over hosts that cannot be reached: each is reported
/// unreachable with the cause named (refused, no answer, no such name) by
/// the in-process probe, without an ssh per host. (bench/bounds_scale.sh
/// times 10,000 of them; no time is asserted here.)
#[test]
fn unreachable_inventory_hosts_are_each_named_with_their_cause() {
    let env = Env::new();
    let inv = env.dir.path().join("dead.ini");
    let mut text = String::from("[refuse]\n");
    for i in 0..300 {
        text += &format!(
            "r{i} ansible_host=127.0.{}.{} ansible_port=1\n",
            i / 250,
            1 + i % 250
        );
    }
    // A port that never answers: a listener whose accept queue is full
    // (never accepted) drops further SYNs, as a host behind a firewall.
    let hole = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let at = hole.local_addr().unwrap();
    // SAFETY: re-listening on our own socket with a backlog of 0.
    assert_eq!(
        unsafe { libc::listen(std::os::fd::AsRawFd::as_raw_fd(&hole), 0) },
        0
    );
    let _fill: Vec<_> = (0..3)
        .filter_map(|_| std::net::TcpStream::connect_timeout(&at, Duration::from_millis(300)).ok())
        .collect();
    text += "[blackhole]\n";
    for i in 1..=40 {
        text += &format!("b{i} ansible_host=127.0.0.1 ansible_port={}\n", at.port());
    }
    text += "[noname]\nn1 ansible_host=no-such-host.invalid\n";
    std::fs::write(&inv, text).unwrap();
    let out = env.run(&[
        "--json",
        "remote",
        "--allow-dynamic",
        "--no-store",
        "--parallel",
        "16",
        "--inventory",
        inv.to_str().unwrap(),
        // No user or system ssh configuration: nothing redirects the hosts.
        "-o",
        "-F /dev/null",
        "--",
        "inspect",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("341 of 341 host(s) did not complete"),
        "{}",
        stderr(&out)
    );
    let doc = json(&out);
    let hosts = doc["hosts"].as_array().unwrap();
    assert_eq!(hosts.len(), 341);
    for h in hosts {
        assert_eq!(h["status"], "unreachable", "{h}");
        let name = h["host"].as_str().unwrap();
        let err = h["error"].as_str().unwrap_or_default();
        match &name[..1] {
            // The probe's words (ssh's would be "connect to host … port 1").
            "r" => assert!(err.starts_with("connection refused on 127.0."), "{h}"),
            // No answer in the wait, or a network that says it has no route.
            "b" => assert!(
                err.starts_with(&format!("no answer from {at} within")),
                "{h}"
            ),
            _ => assert!(err.contains("resolve"), "{h}"),
        }
    }
}
