//! `tunelab diagnose` with the real binary: a stored run for the whole
//! machine and for a command, shown with its skipped sections' reasons;
//! exit codes for bad input; lock_stat and latencytop switched on through
//! the knob journal and put back — at the end, and by `tunelab restore`
//! after a SIGKILL — on a fake /proc tree (TUNELAB_DIAGNOSE_ROOT).

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{json, stderr, Env};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/diagnose");

fn state(env: &Env) -> PathBuf {
    env.dir.path().join("state")
}

fn cmd(env: &Env) -> assert_cmd::Command {
    let mut c = env.cmd();
    c.env("TUNELAB_STATE_DIR", state(env));
    c
}

fn section<'a>(d: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    &d["diagnosis"][name]
}

#[test]
fn whole_machine_for_one_second_is_stored_and_shown() {
    let env = Env::new();
    let out = cmd(&env)
        .args(["--json", "diagnose", "--for", "1s"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v = json(&out);
    let run = &v["run"];
    let d = &run["diagnosis"];
    assert_eq!(d["target"]["kind"], "system");
    let interval = d["interval_s"].as_f64().unwrap();
    assert!((0.95..5.0).contains(&interval), "{interval}");
    // Every section is either present with its overhead or skipped with a reason.
    for s in [
        "resources",
        "profile",
        "counters",
        "cache_profile",
        "locks",
        "blocking",
        "slab",
        "wakeups",
        "startup",
    ] {
        let sec = section(run, s);
        match sec["status"].as_str() {
            Some("present") => {
                let o = &sec["overhead"];
                assert!(o["cpu_s"].as_f64().unwrap() >= 0.0, "{s}: {o}");
                assert!(!o["words"].as_str().unwrap().is_empty(), "{s}");
            }
            Some("skipped") => {
                assert!(!sec["reason"].as_str().unwrap().is_empty(), "{s}")
            }
            other => panic!("{s}: status {other:?}"),
        }
    }
    assert_eq!(section(run, "resources")["status"], "present");
    let cpu = &section(run, "resources")["data"]["rows"][0];
    assert_eq!(cpu["kind"], "cpu");
    assert!(!section(run, "resources")["data"]["standouts"]
        .as_array()
        .unwrap()
        .is_empty());
    assert_eq!(section(run, "wakeups")["status"], "present");
    // tunelab's own threads are not the machine's load: their samples are
    // left out of the profile and counted in its summary (other tests'
    // tunelab processes may run meanwhile, so the stacks are not checked).
    let prof = section(run, "profile");
    if prof["status"] == "present" {
        let summary = prof["data"]["overhead"]["summary"].as_str().unwrap();
        assert!(
            summary.contains("samples of tunelab itself left out"),
            "{summary}"
        );
    }
    assert!(section(run, "startup")["reason"]
        .as_str()
        .unwrap()
        .contains("diagnose -- CMD"));

    let id = run["id"].as_str().unwrap();
    let shown = cmd(&env).args(["show", id]).output().unwrap();
    assert_eq!(shown.status.code(), Some(0), "{}", stderr(&shown));
    let text = String::from_utf8_lossy(&shown.stdout);
    assert!(text.contains("== Resources, machine-wide (USE"), "{text}");
    assert!(text.contains("== Wake-ups and idle states =="), "{text}");
    assert!(text.contains("skipped: start-up anatomy is for"), "{text}");
    if !Path::new("/proc/lock_stat").exists() {
        assert!(text.contains("CONFIG_LOCK_STAT"), "{text}");
    }
}

#[test]
fn a_command_from_exec_to_exit_with_its_start_up() {
    let env = Env::new();
    let out = cmd(&env)
        .args([
            "--json",
            "diagnose",
            "--startup-runs",
            "3",
            "--",
            "sh",
            "-c",
            "true",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v = json(&out);
    let run = &v["run"];
    let t = &run["diagnosis"]["target"];
    assert_eq!(t["kind"], "command");
    assert_eq!(t["exit"], "exit 0");
    assert!(t["pid"].as_i64().unwrap() > 0);
    let st = section(run, "startup");
    assert_eq!(st["status"], "present", "{st}");
    let def = &st["data"]["default"];
    assert_eq!(def["runs"], 3);
    assert!(def["wall_s"].as_f64().unwrap() > 0.0);
    assert!(def["minor_faults"].as_u64().unwrap() > 0);
    assert_eq!(st["data"]["bind_now"]["mode"], "LD_BIND_NOW=1");

    // A failing command is diagnosed too, and its status recorded.
    let out = cmd(&env)
        .args([
            "--json",
            "diagnose",
            "--startup-runs",
            "0",
            "--",
            "sh",
            "-c",
            "exit 3",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v = json(&out);
    assert_eq!(v["run"]["diagnosis"]["target"]["exit_code"], 3);

    let shown = cmd(&env).args(["show", "last"]).output().unwrap();
    let text = String::from_utf8_lossy(&shown.stdout);
    assert!(text.contains("ended with exit 3"), "{text}");
    assert!(
        text.contains("skipped: start-up anatomy switched off"),
        "{text}"
    );
}

#[test]
fn bad_input_exits_2_with_the_reason() {
    let env = Env::new();
    for (args, want) in [
        (vec!["diagnose"], "say what to diagnose"),
        (vec!["diagnose", "--"], "no command after --"),
        (vec!["diagnose", "--for", "soon"], "not a duration"),
        (vec!["diagnose", "--for", "0s"], "not a duration"),
        (
            vec!["diagnose", "--pid", "2147483646"],
            "no process with pid",
        ),
        (
            vec!["diagnose", "--for", "1s", "--", "true"],
            "exclude each other",
        ),
        (
            vec!["diagnose", "--", "/nonexistent/tunelab-no-such-program"],
            "cannot run",
        ),
    ] {
        let out = cmd(&env).args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(want), "{args:?}: {}", stderr(&out));
    }
    assert!(
        !env.db().exists() || {
            let l = cmd(&env).args(["--json", "runs"]).output().unwrap();
            json(&l).as_array().is_none_or(|a| a.is_empty())
        }
    );
}

/// A fake root with the lock_stat and latencytop knobs off.
fn fake_root(env: &Env) -> PathBuf {
    let root = env.dir.path().join("root");
    std::fs::create_dir_all(root.join("proc/sys/kernel")).unwrap();
    // A fake root says so, or the journal refuses to restore below it.
    std::fs::write(root.join(".tunelab-fake-root"), "test tree\n").unwrap();
    std::fs::write(root.join("proc/sys/kernel/lock_stat"), "0\n").unwrap();
    std::fs::write(root.join("proc/sys/kernel/latencytop"), "0\n").unwrap();
    std::fs::write(root.join("proc/lock_stat"), "lock_stat version 0.4\n").unwrap();
    std::fs::write(
        root.join("proc/latency_stats"),
        "Latency Top version : v0.1\n",
    )
    .unwrap();
    root
}

fn knob(root: &Path, name: &str) -> String {
    std::fs::read_to_string(root.join("proc/sys/kernel").join(name))
        .unwrap()
        .trim()
        .to_string()
}

fn wait_until(what: &str, f: impl Fn() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < Duration::from_secs(30), "timed out: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn lock_stat_is_switched_on_read_and_restored() {
    let env = Env::new();
    let root = fake_root(&env);
    let child = env
        .background()
        .env("TUNELAB_STATE_DIR", state(&env))
        .env("TUNELAB_DIAGNOSE_ROOT", &root)
        .args(["--json", "diagnose", "--for", "2s"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_until("lock_stat and latencytop on", || {
        knob(&root, "lock_stat") == "1" && knob(&root, "latencytop") == "1"
    });
    // The kernel gathers statistics while it runs: the fixture stands in.
    std::fs::copy(
        Path::new(FIXTURES).join("proc/lock_stat"),
        root.join("proc/lock_stat"),
    )
    .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(knob(&root, "lock_stat"), "0", "restored at the end");
    assert_eq!(knob(&root, "latencytop"), "0", "restored at the end");
    assert!(
        !state(&env).join("journal.json").exists(),
        "journal emptied"
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let locks = section(&v["run"], "locks");
    assert_eq!(locks["status"], "present", "{locks}");
    assert_eq!(
        locks["data"]["locks"][0]["class"],
        "&(&n->list_lock)->rlock"
    );
    assert!(locks["data"]["method"]
        .as_str()
        .unwrap()
        .contains("restored kernel.lock_stat to 0"));
    assert_eq!(
        section(&v["run"], "blocking")["data"]["source"],
        "latencytop"
    );
}

#[test]
fn lock_stat_left_on_by_a_killed_diagnose_is_restored() {
    let env = Env::new();
    let root = fake_root(&env);
    let mut child = env
        .background()
        .env("TUNELAB_STATE_DIR", state(&env))
        .env("TUNELAB_DIAGNOSE_ROOT", &root)
        .args(["diagnose", "--for", "60s"])
        .spawn()
        .unwrap();
    wait_until("both knobs on", || {
        knob(&root, "lock_stat") == "1" && knob(&root, "latencytop") == "1"
    });
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    child.wait().unwrap();
    assert_eq!(knob(&root, "lock_stat"), "1", "a SIGKILL cannot restore");
    let journal = std::fs::read_to_string(state(&env).join("journal.json")).unwrap();
    assert!(journal.contains("kernel.lock_stat"), "{journal}");
    let out = cmd(&env).args(["restore"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(knob(&root, "lock_stat"), "0");
    assert_eq!(knob(&root, "latencytop"), "0");
    assert!(
        stderr(&out).contains("kernel.lock_stat")
            || !String::from_utf8_lossy(&out.stdout).is_empty()
    );
}

/// Ids of the findings `advise` raises after importing `fixture`.
fn advise_on(fixture: &str) -> (Vec<String>, serde_json::Value) {
    let env = Env::new();
    let out = cmd(&env)
        .args(["import", &format!("{FIXTURES}/{fixture}")])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = cmd(&env)
        .args(["--json", "advise", "--target"])
        .arg(env.target())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v = json(&out);
    let ids = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["id"].as_str().map(String::from))
        .collect();
    (ids, v)
}

/// A stored diagnosis is evidence for `advise` like any other run: a
/// command's diagnosis (a sched_yield spin, stored and exported by
/// `tunelab diagnose -- wl_yield 2; tunelab export last`) gives its
/// kernel-bound finding from the command's own figures. The README's
/// sched.messaging diagnosis, stored before the workload's own figures
/// existed, has only machine-wide tables (CPU 70% system, slab churn):
/// they cannot be charged to the command, so no finding about it.
#[test]
fn advise_reads_a_stored_diagnosis() {
    let (ids, v) = advise_on("yield-run.json");
    assert!(ids.iter().any(|i| i == "diagnose.kernel-bound"), "{v}");
    let kb = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == "diagnose.kernel-bound")
        .unwrap();
    assert!(
        kb["title"].as_str().unwrap().contains("sched_yield"),
        "{kb}"
    );
    let (ids, v) = advise_on("messaging-run.json");
    assert!(
        !ids.iter()
            .any(|i| i == "diagnose.kernel-bound" || i == "diagnose.slab-slow-path"),
        "{v}"
    );
}

/// `diagnose --for` on the whole machine leaves its own sampling out of
/// the CPU it calls busy (on a slow idle board that was most of "busy"):
/// the busy share it reports plus its own stated share must not exceed
/// what /proc/stat shows around the same run, read by the test; and a
/// machine the rest of which is mostly idle is not called busy or
/// kernel-bound.
#[test]
fn whole_machine_busy_leaves_out_tunelabs_own_sampling() {
    fn stat() -> (f64, f64) {
        let t = std::fs::read_to_string("/proc/stat").unwrap();
        let v: Vec<f64> = t
            .lines()
            .next()
            .unwrap()
            .split_whitespace()
            .skip(1)
            .take(8)
            .filter_map(|x| x.parse().ok())
            .collect();
        let total: f64 = v.iter().sum();
        (total - v[3] - v[4], total)
    }
    let env = Env::new();
    let before = stat();
    let out = cmd(&env)
        .args(["--json", "diagnose", "--for", "2s", "--no-store"])
        .output()
        .unwrap();
    let after = stat();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v = json(&out);
    let machine = (after.0 - before.0) / (after.1 - before.1).max(1.0) * 100.0;
    let rows = section(&v["run"], "resources")["data"]["rows"]
        .as_array()
        .unwrap()
        .clone();
    let cpu = rows.iter().find(|r| r["kind"] == "cpu").expect("a CPU row");
    let field = |name: &str| {
        cpu["utilisation"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["name"] == name)
            .and_then(|f| f["value"].as_f64())
    };
    let busy = field("busy").expect("busy");
    let own = field("tunelab's own (left out)").expect("tunelab's own CPU share is stated");
    eprintln!("tunelab: busy {busy:.1}% + own {own:.1}%; /proc/stat around the run {machine:.1}%");
    // The test's window holds tunelab's; ticks round to 10 ms.
    assert!(
        busy + own <= machine + 10.0,
        "busy {busy} + own {own} > machine {machine}"
    );
    let ids: Vec<&str> = v["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| f["id"].as_str())
        .collect();
    if machine - own < 30.0 {
        assert!(busy < 50.0, "an idle machine called busy: {busy}%");
        assert!(!ids.contains(&"diagnose.kernel-bound"), "{ids:?}");
    } else {
        common::skip(&format!(
            "the machine was {:.0}% busy without tunelab: the idle half of the check needs a quiet machine",
            machine - own
        ));
    }
}
