//! Issue 13 (reliability) through the real binary: hung and failing timed
//! programs, signals and SIGKILL, the knob journal (corrupt, concurrent),
//! concurrent first use of a database, stores that cannot be written, and
//! bad input. Tests that need root (sysctls, mounts) print why they skip.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{json, stderr, Env};

const FAST: &[&str] = &["--quiet-check", "0", "--warmup", "0"];

/// Poll `done` every 20 ms for up to `secs` seconds.
fn wait_until(secs: u64, done: impl Fn() -> bool) -> bool {
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(secs) {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    done()
}

/// Pids of processes whose command line is exactly `argv`.
fn pids_running(argv: &[&str]) -> Vec<u32> {
    let want: Vec<u8> = argv
        .iter()
        .flat_map(|a| [a.as_bytes(), b"\0"].concat())
        .collect();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == want)
                // A zombie is dead already.
                && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
                    .is_ok_and(|s| s.rsplit(')').next().is_some_and(|r| r.trim_start().starts_with('Z')))
        })
        .collect()
}

/// A `sleep` with a duration no other test uses, so it can be found.
fn unique_sleep(tag: u32) -> String {
    format!("{}.{tag:03}", 900 + std::process::id() % 97)
}

fn wait_exit(child: &mut std::process::Child, secs: u64) -> Option<std::process::ExitStatus> {
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(secs) {
        if let Some(s) = child.try_wait().unwrap() {
            return Some(s);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    None
}

// ---- time: budget, signals, SIGKILL, failures (defects 4 and 8) ----

#[test]
fn time_kills_a_program_that_outlives_the_budget() {
    let env = Env::new();
    let secs = unique_sleep(1);
    let t0 = Instant::now();
    let out = env.run(&[
        "time", "--budget", "2s", "--warmup", "0", "--", "sleep", &secs,
    ]);
    let took = t0.elapsed();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(took < Duration::from_secs(10), "took {took:?}");
    assert!(
        stderr(&out).contains("killed it and its process group"),
        "{}",
        stderr(&out)
    );
    assert!(
        pids_running(&["sleep", &secs]).is_empty(),
        "the sleep survived"
    );
}

/// Start `tunelab time -- sleep S` and wait until the sleep runs.
fn timing_a_sleep(env: &Env, tag: u32) -> (std::process::Child, String) {
    let secs = unique_sleep(tag);
    let child = env
        .background()
        .env("TUNELAB_STATE_DIR", env.dir.path().join("state"))
        .args(["time", "--warmup", "0", "--no-store", "--", "sleep", &secs])
        .spawn()
        .unwrap();
    assert!(
        wait_until(20, || !pids_running(&["sleep", &secs]).is_empty()),
        "the timed sleep never started"
    );
    (child, secs)
}

#[test]
fn time_stops_the_program_on_a_signal_and_exits_130() {
    let env = Env::new();
    for (tag, sig) in [(2, libc::SIGINT), (3, libc::SIGTERM), (4, libc::SIGHUP)] {
        let (mut child, secs) = timing_a_sleep(&env, tag);
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, sig) };
        let st = wait_exit(&mut child, 10).expect("tunelab ignored the signal");
        assert_eq!(st.code(), Some(130), "signal {sig}");
        assert!(
            wait_until(5, || pids_running(&["sleep", &secs]).is_empty()),
            "the sleep outlived tunelab (signal {sig})"
        );
    }
}

#[test]
fn a_second_signal_leaves_no_state_directory_and_no_child() {
    let env = Env::new();
    let (mut child, secs) = timing_a_sleep(&env, 5);
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, sig) };
    }
    let st = wait_exit(&mut child, 10).expect("tunelab did not exit");
    assert_eq!(st.code(), Some(130));
    assert!(wait_until(5, || pids_running(&["sleep", &secs]).is_empty()));
    assert!(
        !env.dir.path().join("state").exists(),
        "a journal directory was created with nothing to journal"
    );
}

#[test]
fn sigkill_of_tunelab_takes_the_timed_program_with_it() {
    let env = Env::new();
    for tag in 6..9 {
        let (mut child, secs) = timing_a_sleep(&env, tag);
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        assert!(
            wait_until(5, || pids_running(&["sleep", &secs]).is_empty()),
            "the sleep was orphaned by SIGKILL of tunelab"
        );
    }
}

#[test]
fn a_failing_program_fails_the_run_unless_ignore_failure() {
    let env = Env::new();
    let out = env.run(&[
        "time", "--runs", "3", "--warmup", "0", "--json", "--", "false",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("--ignore-failure"),
        "{}",
        stderr(&out)
    );
    let doc = json(&out);
    assert_eq!(doc["status"], "failed");
    let out = env.run(&[
        "time",
        "--runs",
        "3",
        "--warmup",
        "0",
        "--ignore-failure",
        "--",
        "false",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // The stored runs say so too.
    let runs = json(&env.run(&["runs", "--json"]));
    let statuses: Vec<&str> = runs
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["complete", "failed"]);
}

#[test]
fn the_builtin_no_op_times_without_true() {
    let env = Env::new();
    let out = env.run(&[
        "time",
        "--runs",
        "3",
        "--warmup",
        "0",
        "--no-store",
        "--",
        "/proc/self/exe",
        "__noop",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    // The experiment's default command is the same no-op.
    let out = env.run(&[
        "run",
        "app.time",
        "--trials",
        "3",
        "--no-store",
        "--quiet-check",
        "0",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
}

// ---- the knob journal (defects 2 and 3) ----

const JOURNAL: &str = r#"[
  {
    "knob": "vm.dirty_ratio",
    "pid": 999999999,
    "started": "2026-01-01T00:00:00Z",
    "saved": { "kind": "files", "files": [
      { "path": "KNOB", "original": "20", "applied": "5" } ] }
  }
]"#;

/// Held by the tests here that read or sweep the live
/// vm.dirty_expire_centisecs: a value read while another test sweeps it is
/// that sweep's, not the original.
static DIRTY_EXPIRE: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn hold_dirty_expire() -> std::sync::MutexGuard<'static, ()> {
    DIRTY_EXPIRE.lock().unwrap_or_else(|e| e.into_inner())
}

#[test]
fn a_corrupt_journal_is_explained_and_blocks_tuning() {
    let _knob = hold_dirty_expire();
    let env = Env::new();
    let state = env.dir.path().join("state");
    std::fs::create_dir(&state).unwrap();
    // A stand-in for the sysctl: restore must not write it from a journal
    // it cannot trust.
    let knob = env.dir.path().join("fake-knob");
    std::fs::write(&knob, "5\n").unwrap();
    let journal = JOURNAL.replace("KNOB", knob.to_str().unwrap());
    std::fs::write(
        state.join("journal.json"),
        format!("{journal}\n\u{1b}garbage{{"),
    )
    .unwrap();
    let out = env
        .cmd()
        .env("TUNELAB_STATE_DIR", &state)
        .arg("restore")
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(4), "{err}");
    assert!(err.contains("cannot be read"), "{err}");
    assert!(err.contains("It holds"), "{err}");
    assert!(
        !err.contains('\u{1b}'),
        "terminal escapes printed raw: {err}"
    );
    assert!(
        err.contains(&format!("echo 20 > {}", knob.display())),
        "no by-hand restore command: {err}"
    );
    assert!(err.contains("Then remove"), "{err}");
    assert_eq!(std::fs::read_to_string(&knob).unwrap(), "5\n");
    // Other commands still work, with a warning.
    let out = env
        .cmd()
        .env("TUNELAB_STATE_DIR", &state)
        .args(["runs"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("unreadable"), "{}", stderr(&out));
    if !common::is_root() {
        return common::skip("tune refusing needs root to get that far");
    }
    let before = std::fs::read_to_string("/proc/sys/vm/dirty_expire_centisecs").unwrap();
    let t = env.target();
    let out = env
        .cmd()
        .env("TUNELAB_STATE_DIR", &state)
        .args(["tune", "vm.dirty_expire_centisecs", "--values", "1500,2500"])
        .args([
            "-e",
            "io.file-read",
            "-p",
            "size=1M",
            "--trials",
            "2",
            "--no-store",
        ])
        .args(FAST)
        .arg("--target")
        .arg(&t)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("will not change any setting"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        std::fs::read_to_string("/proc/sys/vm/dirty_expire_centisecs").unwrap(),
        before
    );
}

fn read_knob(p: &str) -> String {
    std::fs::read_to_string(p).unwrap().trim().to_string()
}

/// Two tunes of one knob started together, many times: exactly the
/// original value must remain and the journal must be empty, whoever wins.
#[test]
fn two_tunes_of_one_knob_never_lose_the_original() {
    if !common::is_root() {
        return common::skip("needs root to change sysctls");
    }
    let _knob = hold_dirty_expire();
    let env = Env::new();
    let state = env.dir.path().join("state");
    let knob = "/proc/sys/vm/dirty_expire_centisecs";
    let original = read_knob(knob);
    let o: u64 = original.parse().unwrap();
    let t = env.target();
    let mut refusals = 0;
    for round in 0..6 {
        let values = [
            format!("{},{}", o + 7, o + 11),
            format!("{},{}", o + 13, o + 17),
        ];
        let children: Vec<_> = values
            .iter()
            .map(|v| {
                env.background()
                    .env("TUNELAB_STATE_DIR", &state)
                    .stderr(Stdio::piped())
                    .args(["tune", "vm.dirty_expire_centisecs", "--values", v])
                    .args(["-e", "io.file-read", "-p", "size=1M", "--trials", "3"])
                    .args(["--no-store", "--quiet-check", "0", "--warmup", "0"])
                    .arg("--target")
                    .arg(&t)
                    .spawn()
                    .unwrap()
            })
            .collect();
        let pids: Vec<u32> = children.iter().map(|c| c.id()).collect();
        for c in children {
            let out = c.wait_with_output().unwrap();
            let err = stderr(&out);
            if !out.status.success() {
                assert_eq!(out.status.code(), Some(4), "round {round}: {err}");
                assert!(
                    pids.iter()
                        .any(|p| err.contains(&format!("already being changed by tunelab pid {p}"))),
                    "round {round}: the refusal does not name the other pid: {err}"
                );
                refusals += 1;
            }
        }
        assert_eq!(
            read_knob(knob),
            original,
            "round {round}: the original was lost"
        );
        assert!(
            !state.join("journal.json").exists(),
            "round {round}: journal left"
        );
    }
    eprintln!("two_tunes_of_one_knob: {refusals} refusal(s) in 6 rounds");
}

// ---- lab mounts and loop devices after SIGKILL (defect 5) ----

fn mounts_under(dir: &Path) -> Vec<String> {
    let d = dir.to_string_lossy().to_string();
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .filter(|mp| mp.starts_with(&d))
        .map(str::to_string)
        .collect()
}

/// Loop devices whose backing file is under `dir` (from sysfs).
fn loops_under(dir: &Path) -> Vec<String> {
    std::fs::read_dir("/sys/block")
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("loop"))
        .filter(|e| {
            std::fs::read_to_string(e.path().join("loop/backing_file"))
                .is_ok_and(|b| b.starts_with(dir.to_str().unwrap()))
        })
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn sigkill_during_a_lab_run_is_cleaned_by_restore_and_by_the_next_run() {
    if !common::is_root() || !Path::new("/dev/loop-control").exists() || !has("mkfs.ext4") {
        return common::skip("needs root, loop devices and mkfs.ext4");
    }
    let env = Env::new();
    let state = env.dir.path().join("state");
    let t = env.target();
    // Killed while measuring, and killed early (right after the lab was
    // journalled: attaching, formatting or mounting).
    for (i, (early, cleaner)) in [
        (false, "restore"),
        (false, "runs"),
        (true, "restore"),
        (true, "runs"),
    ]
    .into_iter()
    .enumerate()
    {
        let mut child = env
            .background()
            .env("TUNELAB_STATE_DIR", &state)
            .args([
                "run",
                "io.file-read",
                "-p",
                "size=4M",
                "--fs",
                "ext4",
                "--fs-size",
                "128M",
            ])
            .args([
                "--min-trials",
                "1000",
                "--max-trials",
                "1000",
                "--budget",
                "60s",
                "--no-store",
            ])
            .args(FAST)
            .arg("--target")
            .arg(&t)
            .spawn()
            .unwrap();
        if early {
            assert!(
                wait_until(30, || state.join("journal.json").exists()),
                "round {i}: never journalled"
            );
        } else {
            assert!(
                wait_until(30, || !mounts_under(&t).is_empty()),
                "round {i}: never mounted"
            );
        }
        child.kill().unwrap();
        child.wait().unwrap();
        let out = env
            .cmd()
            .env("TUNELAB_STATE_DIR", &state)
            .arg(cleaner)
            .output()
            .unwrap();
        assert!(out.status.success(), "round {i}: {}", stderr(&out));
        assert!(
            mounts_under(&t).is_empty(),
            "round {i}: {:?}",
            mounts_under(&t)
        );
        assert!(
            wait_until(10, || loops_under(&t).is_empty()),
            "round {i}: loop devices left: {:?}",
            loops_under(&t)
        );
        assert!(
            env.leftovers().is_empty(),
            "round {i}: {:?}",
            env.leftovers()
        );
        assert!(
            !state.join("journal.json").exists(),
            "round {i}: journal left"
        );
    }
}

fn has(prog: &str) -> bool {
    std::env::var_os("PATH")
        .map(|p| {
            std::env::split_paths(&p)
                .chain([PathBuf::from("/sbin"), PathBuf::from("/usr/sbin")])
                .any(|d| d.join(prog).exists())
        })
        .unwrap_or(false)
}

// ---- the database (defects 6 and 7) ----

#[test]
fn several_processes_opening_a_new_database_together_all_succeed() {
    let env = Env::new();
    for round in 0..12 {
        let db = env.dir.path().join(format!("new-{round}.db"));
        let children: Vec<_> = (0..5)
            .map(|_| {
                env.background()
                    .env("TUNELAB_DB", &db)
                    .stderr(Stdio::piped())
                    .args(["runs", "--json"])
                    .spawn()
                    .unwrap()
            })
            .collect();
        for c in children {
            let out = c.wait_with_output().unwrap();
            assert!(out.status.success(), "round {round}: {}", stderr(&out));
        }
    }
}

/// A small tmpfs for a database that can be made read-only or full.
struct SmallFs {
    dir: PathBuf,
}

impl SmallFs {
    fn new(env: &Env, size: &str) -> Option<SmallFs> {
        if !common::is_root() {
            return None;
        }
        let dir = env.dir.path().join("smallfs");
        std::fs::create_dir(&dir).unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tunelab-test"])
            .arg(&dir)
            .status()
            .is_ok_and(|s| s.success());
        ok.then_some(SmallFs { dir })
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.dir).status();
    }
}

fn quick_run(env: &Env, db: &Path, json_out: bool) -> std::process::Output {
    let t = env.target();
    let mut c = env.cmd();
    c.env("TUNELAB_DB", db)
        .args(["run", "io.file-read", "-p", "size=1M", "--trials", "3"])
        .args(FAST)
        .arg("--target")
        .arg(&t);
    if json_out {
        c.arg("--json");
    }
    c.output().unwrap()
}

#[test]
fn a_read_only_or_full_database_still_prints_the_results() {
    let env = Env::new();
    let Some(fs) = SmallFs::new(&env, "4m") else {
        return common::skip("needs root to mount a small tmpfs");
    };
    let db = fs.dir.join("results.db");
    assert!(quick_run(&env, &db, false).status.success());
    // Read-only: remount the file system.
    let ro = Command::new("mount")
        .args(["-o", "remount,ro"])
        .arg(&fs.dir)
        .status()
        .unwrap();
    assert!(ro.success());
    let out = quick_run(&env, &db, true);
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    let doc = json(&out);
    assert_eq!(doc["results"][0]["experiment"], "io.file-read");
    let err = stderr(&out);
    assert!(err.contains(db.to_str().unwrap()), "no path: {err}");
    assert!(
        err.contains("read-only") || err.contains("Read-only"),
        "no reason: {err}"
    );
    let out = quick_run(&env, &db, false);
    assert_eq!(out.status.code(), Some(4));
    assert!(String::from_utf8_lossy(&out.stdout).contains("io.file-read"));
    // Full: fill the file system, then store a run.
    Command::new("mount")
        .args(["-o", "remount,rw"])
        .arg(&fs.dir)
        .status()
        .unwrap();
    let filler = fs.dir.join("filler");
    let _ = std::fs::write(&filler, vec![7u8; 8 << 20]); // fails with ENOSPC when full: fine
    let out = quick_run(&env, &db, true);
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert_eq!(json(&out)["results"][0]["experiment"], "io.file-read");
    let err = stderr(&out);
    assert!(
        err.contains("No space left") || err.contains("no space"),
        "{err}"
    );
}

#[test]
fn time_boot_and_diagnose_print_before_a_read_only_database_fails() {
    let env = Env::new();
    let Some(fs) = SmallFs::new(&env, "4m") else {
        return common::skip("needs root to mount a small tmpfs");
    };
    let db = fs.dir.join("results.db");
    assert!(quick_run(&env, &db, false).status.success());
    Command::new("mount")
        .args(["-o", "remount,ro"])
        .arg(&fs.dir)
        .status()
        .unwrap();
    let verbs: [(&[&str], &str); 3] = [
        (
            &[
                "--json", "time", "--runs", "2", "--warmup", "0", "--", "true",
            ],
            "results",
        ),
        (
            &[
                "--json", "boot", "--runs", "1", "--ready", "up", "--", "sh", "-c", "echo up",
            ],
            "results",
        ),
        (
            &["--json", "diagnose", "--startup-runs", "0", "--", "true"],
            "run",
        ),
    ];
    for (args, key) in verbs {
        let out = env
            .cmd()
            .env("TUNELAB_DB", &db)
            .args(args)
            .output()
            .unwrap();
        let err = stderr(&out);
        // The measurement is printed, then the store's failure is the exit.
        assert_eq!(out.status.code(), Some(4), "{args:?}: {err}");
        let doc = json(&out);
        assert!(!doc[key].is_null(), "{args:?}: nothing printed: {doc}");
        assert!(
            err.contains("read-only") || err.contains("Read-only"),
            "{args:?}: {err}"
        );
    }
}

#[test]
fn a_study_with_an_unwritable_database_prints_its_verdicts() {
    let env = Env::new();
    let Some(fs) = SmallFs::new(&env, "4m") else {
        return common::skip("needs root to mount a small tmpfs");
    };
    let db = fs.dir.join("results.db");
    // A command that stores creates the database (`runs` only reads).
    assert!(env
        .cmd()
        .env("TUNELAB_DB", &db)
        .args(["run", "mem.bandwidth", "-p", "size=64K", "--trials", "1"])
        .args(FAST)
        .output()
        .unwrap()
        .status
        .success());
    Command::new("mount")
        .args(["-o", "remount,ro"])
        .arg(&fs.dir)
        .status()
        .unwrap();
    let profile = env.dir.path().join("p.toml");
    std::fs::write(&profile, STUDY).unwrap();
    let out = env
        .cmd()
        .env("TUNELAB_DB", &db)
        .args(["study", profile.to_str().unwrap(), "--json"])
        .args(FAST)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    let doc = json(&out);
    assert_eq!(doc["study"]["issues"].as_array().unwrap().len(), 2);
}

const STUDY: &str = r#"
name = "tiny"
title = "two quick start-up issues"
[[issue]]
name = "first"
experiment = "app.time"
trials = 3
[[issue]]
name = "second"
experiment = "app.time"
trials = 3
"#;

#[test]
fn a_killed_study_keeps_the_key_issues_it_finished() {
    let env = Env::new();
    let profile = env.dir.path().join("p.toml");
    let secs = unique_sleep(20);
    std::fs::write(
        &profile,
        format!(
            "{STUDY}\n[[issue]]\nname = \"hangs\"\nexperiment = \"app.time\"\n\
             params = {{ command = \"sleep {secs}\" }}\ntrials = 3\n"
        ),
    )
    .unwrap();
    let mut child = env
        .background()
        .args(["study", profile.to_str().unwrap(), "--quiet-check", "0"])
        .spawn()
        .unwrap();
    assert!(
        wait_until(60, || !pids_running(&["sleep", &secs]).is_empty()),
        "the third key issue never started"
    );
    child.kill().unwrap();
    child.wait().unwrap();
    let out = env.run(&["show", "last", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let doc = json(&out);
    assert_eq!(doc["status"], "interrupted");
    let issues: Vec<&str> = doc["study"]["issues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["name"].as_str().unwrap())
        .collect();
    assert_eq!(issues, ["first", "second"]);
    assert_eq!(doc["results"].as_array().unwrap().len(), 2);
    // A study that finishes is stored once, under one id, complete.
    let tiny = env.dir.path().join("tiny.toml");
    std::fs::write(&tiny, STUDY).unwrap();
    let out = env.run(&["study", tiny.to_str().unwrap(), "--quiet-check", "0"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let runs = json(&env.run(&["runs", "--json"]));
    let statuses: Vec<&str> = runs
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["complete", "interrupted"]);
}

// ---- smaller ones (defect 9) ----

#[test]
fn bad_profiles_are_bad_input() {
    let env = Env::new();
    let dir = env.dir.path().join("prof.toml");
    std::fs::create_dir(&dir).unwrap();
    let out = env.run(&["study", dir.to_str().unwrap(), "--dry-run"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("is a directory"), "{}", stderr(&out));
    let bin = env.dir.path().join("bin.toml");
    std::fs::write(&bin, b"name = \"\xff\xfe\"\n").unwrap();
    let out = env.run(&["study", bin.to_str().unwrap(), "--dry-run"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("not UTF-8"), "{}", stderr(&out));
}

#[test]
fn an_empty_tunelab_db_means_the_default_database() {
    let env = Env::new();
    let data = env.dir.path().join("data");
    let out = env
        .cmd()
        .env("TUNELAB_DB", "")
        .env("XDG_DATA_HOME", &data)
        .args(["run", "mem.bandwidth", "-p", "size=64K", "--trials", "1"])
        .args(FAST)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(data.join("tunelab/results.db").exists());
}

#[test]
fn dry_run_thresholds_have_no_float_noise() {
    let env = Env::new();
    for p in ["quick", "storage", "micro", "set-top", "pvr", "full"] {
        let out = env.run(&["study", p, "--dry-run"]);
        assert!(out.status.success(), "{p}: {}", stderr(&out));
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(!text.contains("00000"), "{p}: {text}");
        assert!(!text.contains("99999"), "{p}: {text}");
    }
}

#[test]
fn compare_a_run_with_itself_shows_no_nan() {
    let env = Env::new();
    let out = env.run(&[
        "time",
        "--runs",
        "3",
        "--warmup",
        "0",
        "--",
        "/proc/self/exe",
        "__noop",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = env.run(&["compare", "last", "last"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("NaN"), "{text}");
    assert!(!text.to_lowercase().contains("inf×"), "{text}");
}

#[test]
fn a_parameter_given_twice_is_refused() {
    let env = Env::new();
    let out = env.run(&[
        "run",
        "io.file-read",
        "-p",
        "size=1M",
        "-p",
        "size=2M",
        "--no-store",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("given twice"), "{}", stderr(&out));
}

#[test]
fn an_unwritable_database_directory_gets_a_permission_hint() {
    if !common::is_root() {
        return common::skip("needs root to switch to an unprivileged user");
    }
    let env = Env::new();
    // The temp dir is 0700 root: let nobody in, but not write in `ro`.
    let open = |p: &Path, mode| {
        std::fs::set_permissions(p, std::os::unix::fs::PermissionsExt::from_mode(mode)).unwrap()
    };
    open(env.dir.path(), 0o755);
    let ro = env.dir.path().join("ro");
    std::fs::create_dir(&ro).unwrap();
    open(&ro, 0o755);
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(assert_cmd::cargo::cargo_bin("tunelab"))
        .args(["import", "/nonexistent-export.json"])
        .env("TUNELAB_DB", ro.join("results.db"))
        .env("TUNELAB_STATE_DIR", env.dir.path().join("state"))
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(4), "{err}");
    assert!(err.contains("permission denied"), "{err}");
    assert!(err.contains(ro.to_str().unwrap()), "{err}");
}

/// Issue 12 item 7: the one external program of the lab is named when missing.
#[test]
fn a_missing_mkfs_is_named() {
    let env = Env::new();
    let out = env.run(&[
        "run",
        "io.file-read",
        "--fs",
        "zzfs",
        "--no-store",
        "--quiet-check",
        "0",
    ]);
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("mkfs.zzfs is not installed"), "{err}");
    assert!(!err.contains("skipped"), "{err}");
}

// ---- issue 28: children, the journal as registry, untrusted input ----

/// SIGKILL `child` (a tunelab) once `sleep secs` runs, and check the sleep
/// goes with it.
fn killed_with_its_command(mut child: std::process::Child, secs: &str, what: &str) {
    assert!(
        wait_until(30, || !pids_running(&["sleep", secs]).is_empty()),
        "{what}: the command never started"
    );
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let gone = wait_until(5, || pids_running(&["sleep", secs]).is_empty());
    for p in pids_running(&["sleep", secs]) {
        // SAFETY: cleaning up a stray of this test.
        unsafe { libc::kill(p as i32, libc::SIGKILL) };
    }
    assert!(gone, "{what}: the command outlived the SIGKILLed tunelab");
}

#[test]
fn sigkill_of_diagnose_and_boot_takes_their_command_with_them() {
    let env = Env::new();
    let state = env.dir.path().join("state");
    let secs = unique_sleep(30);
    let child = env
        .background()
        .env("TUNELAB_STATE_DIR", &state)
        .args(["diagnose", "--no-store", "--startup-runs", "0", "--"])
        .args(["sleep", &secs])
        .spawn()
        .unwrap();
    killed_with_its_command(child, &secs, "diagnose -- sleep");
    let secs = unique_sleep(31);
    let child = env
        .background()
        .env("TUNELAB_STATE_DIR", &state)
        .args(["boot", "--runs", "1", "--no-store", "--"])
        .args(["sleep", &secs])
        .spawn()
        .unwrap();
    killed_with_its_command(child, &secs, "boot -- sleep");
}

#[test]
fn one_signal_ends_diagnose_of_a_command_promptly() {
    let env = Env::new();
    for (tag, sig) in [(32, libc::SIGINT), (33, libc::SIGTERM)] {
        let secs = unique_sleep(tag);
        let mut child = env
            .background()
            .env("TUNELAB_STATE_DIR", env.dir.path().join("state"))
            .args(["diagnose", "--no-store", "--startup-runs", "0", "--"])
            .args(["sleep", &secs])
            .spawn()
            .unwrap();
        assert!(wait_until(30, || !pids_running(&["sleep", &secs]).is_empty()));
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, sig) };
        let st = wait_exit(&mut child, 30).expect("diagnose ignored one signal");
        assert_eq!(st.code(), Some(130), "signal {sig}");
        assert!(
            wait_until(5, || pids_running(&["sleep", &secs]).is_empty()),
            "the command outlived diagnose (signal {sig})"
        );
    }
}

/// A pid that cannot exist (above pid_max's ceiling).
const DEAD_PID: u32 = 2147483632;

fn journal_entry(pid: u32, saved: serde_json::Value) -> serde_json::Value {
    serde_json::json!({
        "knob": "hand-written", "pid": pid, "pid_start": 1,
        "started": "2026-01-01T00:00:00Z", "saved": saved,
    })
}

#[test]
fn restore_refuses_journal_entries_tunelab_cannot_have_written() {
    let env = Env::new();
    let state = env.dir.path().join("state");
    std::fs::create_dir_all(&state).unwrap();
    let victim = env.dir.path().join("victim");
    std::fs::write(&victim, "keep me").unwrap();
    let image = env.dir.path().join("victim.img");
    std::fs::write(&image, "keep me too").unwrap();
    let entries = serde_json::json!([
        journal_entry(
            DEAD_PID,
            serde_json::json!({"kind": "files", "files": [
            {"path": victim, "original": "owned", "applied": null}]})
        ),
        journal_entry(
            DEAD_PID,
            serde_json::json!({"kind": "files", "files": [
            {"path": "/proc/sys/../../etc/hostname", "original": "owned", "applied": null}]})
        ),
        journal_entry(
            DEAD_PID,
            serde_json::json!({"kind": "lab",
            "mount_point": env.dir.path().join("victim"), "image": image,
            "device": "/dev/loop7", "scratch": env.dir.path()})
        ),
    ]);
    std::fs::write(state.join("journal.json"), entries.to_string()).unwrap();
    let out = env
        .cmd()
        .env("TUNELAB_STATE_DIR", &state)
        .arg("restore")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &stderr(&out);
    assert_eq!(
        std::fs::read_to_string(&victim).unwrap(),
        "keep me",
        "{text}"
    );
    assert_eq!(
        std::fs::read_to_string(&image).unwrap(),
        "keep me too",
        "{text}"
    );
    assert_eq!(text.matches("refused a journal entry").count(), 3, "{text}");
    assert!(!text.contains("released"), "{text}");
    assert!(!state.join("journal.json").exists(), "{text}");
}

#[test]
fn restore_says_what_it_did_for_a_lab_that_left_nothing() {
    let env = Env::new();
    let state = env.dir.path().join("state");
    std::fs::create_dir_all(&state).unwrap();
    let scratch = env
        .target()
        .join(format!(".tunelab-scratch-{DEAD_PID}-0badf00d"));
    let entries = serde_json::json!([journal_entry(
        DEAD_PID,
        serde_json::json!({"kind": "lab",
        "mount_point": scratch.join("lab"), "image": scratch.join("lab.img"),
        "device": "/dev/loop250", "scratch": scratch})
    )]);
    std::fs::write(state.join("journal.json"), entries.to_string()).unwrap();
    let out = env
        .cmd()
        .env("TUNELAB_STATE_DIR", &state)
        .arg("restore")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("nothing was left"), "{text}");
    assert!(!text.contains("released"), "{text}");
}

/// Scratch directories (`.tunelab-scratch-*`) in `dir`.
fn scratch_dirs(dir: &Path) -> Vec<String> {
    common::list(dir)
        .into_iter()
        .filter(|n| n.starts_with(".tunelab-scratch-"))
        .collect()
}

#[test]
fn restore_removes_the_scratch_of_a_sigkilled_run() {
    let env = Env::new();
    let state = env.dir.path().join("state");
    let t = env.target();
    for round in 0..3 {
        let mut child = env
            .background()
            .env("TUNELAB_STATE_DIR", &state)
            .args(["run", "io.file-read", "-p", "size=1M", "--no-store"])
            .args(["--trials", "100000", "--budget", "60s"])
            .args(FAST)
            .arg("--target")
            .arg(&t)
            .spawn()
            .unwrap();
        assert!(
            wait_until(30, || !scratch_dirs(&t).is_empty()),
            "round {round}: no scratch directory appeared"
        );
        std::thread::sleep(Duration::from_millis(100 * round));
        child.kill().unwrap();
        child.wait().unwrap();
        let out = env
            .cmd()
            .env("TUNELAB_STATE_DIR", &state)
            .arg("restore")
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(
            scratch_dirs(&t).is_empty(),
            "round {round}: restore left {:?}: {}",
            scratch_dirs(&t),
            String::from_utf8_lossy(&out.stdout)
        );
        assert!(!state.join("journal.json").exists());
    }
}

fn throttle_cgroups() -> Vec<PathBuf> {
    ["/sys/fs/cgroup/blkio", "/sys/fs/cgroup"]
        .iter()
        .flat_map(|r| std::fs::read_dir(r).into_iter().flatten().flatten())
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("tunelab-"))
        })
        .collect()
}

#[test]
fn restore_removes_the_cgroup_of_a_sigkilled_throttled_run() {
    if !common::is_root()
        || !Path::new("/sys/fs/cgroup/blkio/blkio.throttle.read_bps_device").exists()
    {
        return common::skip("needs root and cgroup v1 blkio");
    }
    let env = Env::new();
    let state = env.dir.path().join("state");
    let t = env.target();
    let mut child = env
        .background()
        .env("TUNELAB_STATE_DIR", &state)
        .args(["run", "io.file-read", "-p", "size=1M", "--no-store"])
        .args([
            "--throttle",
            "read=20MB/s",
            "--trials",
            "100000",
            "--budget",
            "60s",
        ])
        .args(FAST)
        .arg("--target")
        .arg(&t)
        .spawn()
        .unwrap();
    let mine = format!("tunelab-{}-", child.id());
    let ours = |c: &PathBuf| c.file_name().unwrap().to_string_lossy().starts_with(&mine);
    assert!(
        wait_until(30, || throttle_cgroups().iter().any(ours)),
        "no throttle cgroup appeared"
    );
    child.kill().unwrap();
    child.wait().unwrap();
    let out = env
        .cmd()
        .env("TUNELAB_STATE_DIR", &state)
        .arg("restore")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        !throttle_cgroups().iter().any(ours),
        "restore left {:?}: {}",
        throttle_cgroups(),
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(scratch_dirs(&t).is_empty(), "{:?}", scratch_dirs(&t));
}

#[test]
fn a_yaml_alias_bomb_is_refused_quickly() {
    let env = Env::new();
    let mut yaml = String::from("all:\n  vars:\n    a0: &a0 [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n");
    for i in 1..10 {
        let prev = format!("*a{}", i - 1);
        yaml += &format!("    a{i}: &a{i} [{}]\n", vec![prev; 9].join(","));
    }
    yaml += "  hosts:\n    h1:\n";
    let bomb = env.dir.path().join("bomb.yml");
    std::fs::write(&bomb, yaml).unwrap();
    let t0 = Instant::now();
    let out = env
        .cmd()
        .args(["remote", "--inventory"])
        .arg(&bomb)
        .args(["--", "runs"])
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("aliases"), "{}", stderr(&out));
    assert!(t0.elapsed() < Duration::from_secs(20), "{:?}", t0.elapsed());
    let deep = env.dir.path().join("deep.yml");
    std::fs::write(
        &deep,
        format!(
            "all:\n  vars:\n    x: {}{}\n",
            "[".repeat(5000),
            "]".repeat(5000)
        ),
    )
    .unwrap();
    let out = env
        .cmd()
        .args(["remote", "--inventory"])
        .arg(&deep)
        .args(["--", "runs"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let bin = env.dir.path().join("hosts.ini");
    std::fs::write(&bin, [0u8, 159, 146, 150, 0xff, 0xfe, 10]).unwrap();
    let out = env
        .cmd()
        .args(["remote", "--inventory"])
        .arg(&bin)
        .args(["--", "runs"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("not UTF-8 text"), "{}", stderr(&out));
}

#[test]
fn importing_another_run_under_a_stored_id_is_refused_naming_both() {
    let env = Env::new();
    let out = env
        .cmd()
        .args([
            "run",
            "mem.bandwidth",
            "--trials",
            "1",
            "-p",
            "size=64K",
            "--label",
            "first",
        ])
        .args(FAST)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let out = env.run(&["export", "last", "--format", "json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let mut run: serde_json::Value = json(&out);
    let id = run["id"].as_str().unwrap().to_string();
    let file = env.dir.path().join("same.json");
    std::fs::write(&file, run.to_string()).unwrap();
    let out = env.cmd().arg("import").arg(&file).output().unwrap();
    assert!(
        out.status.success(),
        "an identical run is already stored: {}",
        stderr(&out)
    );
    run["label"] = "second".into();
    let file = env.dir.path().join("other.json");
    std::fs::write(&file, run.to_string()).unwrap();
    let out = env.cmd().arg("import").arg(&file).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let e = stderr(&out);
    assert!(
        e.contains(&id) && e.contains("'first'") && e.contains("'second'"),
        "{e}"
    );
}

#[test]
fn an_imported_parameter_the_experiment_cannot_take_is_refused() {
    let env = Env::new();
    let out = env
        .cmd()
        .args([
            "run",
            "mem.bandwidth",
            "--trials",
            "1",
            "-p",
            "size=64K",
            "--no-store",
            "--json",
        ])
        .args(FAST)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let mut run = json(&out);
    run["results"][0]["params"]["size"] = serde_json::json!(1e32);
    let file = env.dir.path().join("huge.json");
    std::fs::write(&file, run.to_string()).unwrap();
    let out = env.cmd().arg("import").arg(&file).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("size="), "{}", stderr(&out));
}

#[test]
fn a_file_size_limit_is_an_environment_error_with_the_scratch_removed() {
    let env = Env::new();
    let t = env.target();
    let bin = assert_cmd::cargo::cargo_bin("tunelab");
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -f 1024; exec {} run io.file-read -p size=8M --trials 1 --no-store \
             --quiet-check 0 --warmup 0 --target {}",
            bin.display(),
            t.display()
        ))
        .env("TUNELAB_DB", env.db())
        .env("TUNELAB_STATE_DIR", env.dir.path().join("state"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert!(stderr(&out).contains("ulimit -f"), "{}", stderr(&out));
    assert!(env.leftovers().is_empty(), "{:?}", env.leftovers());
}

#[test]
fn a_budget_stops_a_fixed_count_of_trials() {
    let env = Env::new();
    let t0 = Instant::now();
    let out = env
        .cmd()
        .args([
            "run",
            "ipc.pipe",
            "--trials",
            "1000000",
            "--budget",
            "2s",
            "--no-store",
        ])
        .args(FAST)
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(t0.elapsed() < Duration::from_secs(60), "{:?}", t0.elapsed());
}

#[test]
fn unusable_targets_and_databases_are_named_up_front() {
    let env = Env::new();
    // A study on a target that does not exist stops before its first issue.
    let out = env.run(&["study", "quick", "--target", "/nonexistent/dir"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("does not exist"), "{}", stderr(&out));
    assert!(!env.db().exists(), "a run was stored");
    for t in ["/sys", "/proc"] {
        let out = env.run(&[
            "run",
            "io.file-read",
            "-p",
            "size=1M",
            "--trials",
            "1",
            "--target",
            t,
        ]);
        assert_eq!(out.status.code(), Some(2), "{t}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("kernel file system"),
            "{t}: {}",
            stderr(&out)
        );
    }
    // --db naming a directory, and a database that does not exist yet.
    let out = env
        .cmd()
        .arg("--db")
        .arg(env.dir.path())
        .arg("runs")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("is a directory"), "{}", stderr(&out));
    let missing = env.dir.path().join("no/such/dir/results.db");
    let out = env
        .cmd()
        .arg("--db")
        .arg(&missing)
        .arg("runs")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        !env.dir.path().join("no").exists(),
        "runs created the database"
    );
    // A damaged database is named.
    let bad = env.dir.path().join("bad.db");
    let mut bytes = b"SQLite format 3\0".to_vec();
    bytes.extend(std::iter::repeat_n(0x5a, 8192));
    std::fs::write(&bad, bytes).unwrap();
    let out = env
        .cmd()
        .arg("--db")
        .arg(&bad)
        .arg("runs")
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0));
    assert!(
        stderr(&out).contains(bad.to_str().unwrap()),
        "{}",
        stderr(&out)
    );
    // Bad flags.
    let out = env.run(&["remote", "--timeout", "0s", "h1", "--", "runs"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let out = env.run(&["run", "io.file-read", "--fs", "vfat9", "--trials", "1"]);
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("not a file system"),
        "{}",
        stderr(&out)
    );
    let profile = env.dir.path().join("dup.toml");
    std::fs::write(
        &profile,
        "name = \"dup\"\ntitle = \"t\"\n[[issue]]\nname = \"a\"\nquestion = \"q\"\n\
         experiment = \"mem.bandwidth\"\n[[issue]]\nname = \"a\"\nquestion = \"q\"\n\
         experiment = \"mem.bandwidth\"\n",
    )
    .unwrap();
    let out = env
        .cmd()
        .args(["study", "--dry-run"])
        .arg(&profile)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("two key issues"), "{}", stderr(&out));
}

/// As above, with each tune in its own state directory: the claim on the
/// knob is system-wide, not per journal.
#[test]
fn two_tunes_with_different_state_directories_never_lose_the_original() {
    if !common::is_root() {
        return common::skip("needs root to change sysctls");
    }
    let env = Env::new();
    let knob = "/proc/sys/vm/dirty_background_ratio";
    let original = read_knob(knob);
    let o: u64 = original.parse().unwrap();
    let t = env.target();
    let mut refusals = 0;
    for round in 0..6 {
        let values = [
            format!("{},{}", o + 7, o + 11),
            format!("{},{}", o + 13, o + 17),
        ];
        let children: Vec<_> = values
            .iter()
            .enumerate()
            .map(|(i, v)| {
                env.background()
                    .env(
                        "TUNELAB_STATE_DIR",
                        env.dir.path().join(format!("state-{i}")),
                    )
                    .stderr(Stdio::piped())
                    .args(["tune", "vm.dirty_background_ratio", "--values", v])
                    .args(["-e", "io.file-read", "-p", "size=1M", "--trials", "3"])
                    .args(["--no-store", "--quiet-check", "0", "--warmup", "0"])
                    .arg("--target")
                    .arg(&t)
                    .spawn()
                    .unwrap()
            })
            .collect();
        let pids: Vec<u32> = children.iter().map(|c| c.id()).collect();
        for c in children {
            let out = c.wait_with_output().unwrap();
            let err = stderr(&out);
            if !out.status.success() {
                assert_eq!(out.status.code(), Some(4), "round {round}: {err}");
                assert!(
                    pids.iter()
                        .any(|p| err.contains(&format!("already being changed by tunelab pid {p}"))),
                    "round {round}: the refusal does not name the other pid: {err}"
                );
                refusals += 1;
            }
        }
        assert_eq!(
            read_knob(knob),
            original,
            "round {round}: the original was lost"
        );
    }
    eprintln!("two_tunes_with_different_state_directories: {refusals} refusal(s) in 6 rounds");
}

#[test]
fn tiny_descriptor_and_process_limits_are_environment_errors() {
    let env = Env::new();
    let bin = assert_cmd::cargo::cargo_bin("tunelab");
    let run = |prefix: &str, limit: &str| {
        Command::new("sh")
            .arg("-c")
            .arg(format!(
                "{prefix} bash -c 'ulimit {limit}; exec {} run mem.bandwidth --trials 1 --no-store'",
                bin.display()
            ))
            .env("TUNELAB_DB", env.db())
            .env("TUNELAB_STATE_DIR", env.dir.path().join("state"))
            .output()
            .unwrap()
    };
    let out = run("", "-n 16");
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert!(stderr(&out).contains("ulimit -n"), "{}", stderr(&out));
    if !common::is_root() || !has("setpriv") {
        return common::skip("the process limit needs root (to become nobody) and setpriv");
    }
    let out = run("setpriv --reuid=65534 --regid=65534 --clear-groups", "-u 3");
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert!(stderr(&out).contains("ulimit -u"), "{}", stderr(&out));
}

/// Send `sig` to `child` and wait for it (30 s at most): its exit code and
/// the time it took to end.
fn end_with(child: &mut std::process::Child, sig: i32, what: &str) -> (Option<i32>, Duration) {
    let t0 = Instant::now();
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, sig) };
    let st = wait_exit(child, 30).unwrap_or_else(|| panic!("{what} ignored signal {sig}"));
    (st.code(), t0.elapsed())
}

/// Wait until `child` has `file` open (the verb has started on it).
fn wait_open(child: &std::process::Child, file: &Path) {
    let fds = PathBuf::from(format!("/proc/{}/fd", child.id()));
    let opened = || {
        std::fs::read_dir(&fds)
            .map(|d| {
                d.flatten()
                    .any(|e| std::fs::read_link(e.path()).is_ok_and(|l| l == file))
            })
            .unwrap_or(false)
    };
    assert!(
        wait_until(60, opened),
        "{} was never opened",
        file.display()
    );
}

fn stored_runs(env: &Env) -> usize {
    json(&env.run(&["--json", "runs"]))
        .as_array()
        .unwrap()
        .len()
}

/// SIGINT during `import` of a large file: exit 130 and nothing from the
/// file is stored (the one transaction is rolled back).
#[test]
fn sigint_during_a_large_import_exits_130_and_imports_nothing() {
    let env = Env::new();
    let out = env
        .cmd()
        .args(["run", "ipc.pipe", "--trials", "2", "--trial-time", "1ms"])
        .args(FAST)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let run = json(&env.run(&["export", "last", "--format", "json"]));
    let many: Vec<serde_json::Value> = (0..5_000)
        .map(|i| {
            let mut r = run.clone();
            r["id"] = format!("20250101-000000-{i:05x}").into();
            r
        })
        .collect();
    let file = env.dir.path().join("many.json");
    std::fs::write(&file, serde_json::to_vec(&many).unwrap()).unwrap();
    let before = stored_runs(&env);
    let mut child = env.background().arg("import").arg(&file).spawn().unwrap();
    wait_open(&child, &file);
    let (code, _) = end_with(&mut child, libc::SIGINT, "import");
    assert_eq!(
        code,
        Some(130),
        "the import was not interrupted (finished first? make the file larger)"
    );
    assert_eq!(
        stored_runs(&env),
        before,
        "runs from the interrupted file were kept"
    );
}

/// The first SIGTERM ends `remote` over many hosts: every ssh running is
/// killed (here a stand-in that sleeps), the outcomes are reported, exit 130.
#[test]
fn one_signal_ends_a_remote_fan_out_and_its_connections() {
    let env = Env::new();
    let secs = unique_sleep(41);
    let ssh = env.dir.path().join("slow-ssh");
    std::fs::write(&ssh, format!("#!/bin/sh\nsleep {secs}\n")).unwrap();
    std::fs::set_permissions(&ssh, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let hosts: Vec<String> = (0..200).map(|i| format!("h{i}")).collect();
    let mut child = env
        .background()
        .env("TUNELAB_SSH", &ssh)
        .args(["remote", "--allow-dynamic", "--no-store", "--parallel", "8"])
        .args(&hosts)
        .args(["--", "inspect"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    assert!(wait_until(30, || pids_running(&["sleep", &secs]).len() >= 8));
    let (code, took) = end_with(&mut child, libc::SIGTERM, "remote");
    // Generous: correctness, not speed (bench/bounds_scale.sh times it).
    assert!(took < Duration::from_secs(5), "{took:?}");
    assert_eq!(code, Some(130));
    let mut table = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut table).unwrap();
    assert!(table.contains("interrupted"), "{table}");
    assert!(
        wait_until(5, || pids_running(&["sleep", &secs]).is_empty()),
        "ssh stand-ins outlived remote"
    );
}

/// SIGINT during `diagnose --for 20s`: exit 130 and the interval covered is
/// stored, marked interrupted.
#[test]
fn sigint_ends_a_timed_diagnosis_and_keeps_it() {
    let env = Env::new();
    let mut child = env
        .background()
        .env("TUNELAB_STATE_DIR", env.dir.path().join("state"))
        .args(["diagnose", "--for", "20s"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    // Started: it says what it diagnoses once the samplers run.
    while std::io::BufRead::read_line(&mut err, &mut line).unwrap() > 0
        && !line.contains("diagnosing")
    {
        line.clear();
    }
    assert!(line.contains("diagnosing"), "{line}");
    let (code, took) = end_with(&mut child, libc::SIGINT, "diagnose");
    assert!(took < Duration::from_secs(5), "{took:?}");
    assert_eq!(code, Some(130));
    let runs = json(&env.run(&["--json", "runs"]));
    assert_eq!(runs[0]["status"], "interrupted", "{runs}");
}

/// A kernel thread's pid (kthreadd, pid 2) is named as one, not as "no
/// process": it has no user memory and no user stack.
#[test]
fn a_kernel_threads_pid_is_named_as_one() {
    let stat = std::fs::read_to_string("/proc/2/stat").unwrap_or_default();
    if !stat.contains("(kthreadd)") {
        return common::skip("pid 2 is not kthreadd here (a pid namespace)");
    }
    let env = Env::new();
    for args in [
        &["memory", "--pid", "2"][..],
        &["diagnose", "--pid", "2", "--for", "1s", "--no-store"][..],
    ] {
        let out = env.run(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains("pid 2 (kthreadd) is a kernel thread") && !err.contains("no process"),
            "{args:?}: {err}"
        );
    }
}

/// Restoring an exclusive pair (vm.dirty_bytes/vm.dirty_ratio) says which
/// file was written and that the kernel zeroes the other, not "to 20/0".
/// The originals are today's values, so nothing changes.
#[test]
fn restoring_a_pair_of_knobs_says_what_was_written() {
    if !common::is_root() {
        return common::skip("needs root to write vm.dirty_*");
    }
    let read = |k: &str| {
        std::fs::read_to_string(format!("/proc/sys/vm/{k}"))
            .unwrap()
            .trim()
            .to_string()
    };
    let (bytes, ratio) = (read("dirty_bytes"), read("dirty_ratio"));
    let (set, zero) = if bytes == "0" {
        ("dirty_ratio", "dirty_bytes")
    } else {
        ("dirty_bytes", "dirty_ratio")
    };
    let env = Env::new();
    let state = env.dir.path().join("state");
    std::fs::create_dir_all(&state).unwrap();
    let mut entry = journal_entry(
        DEAD_PID,
        serde_json::json!({"kind": "files", "files": [
            {"path": "/proc/sys/vm/dirty_bytes", "original": bytes, "applied": null},
            {"path": "/proc/sys/vm/dirty_ratio", "original": ratio, "applied": null}]}),
    );
    entry["knob"] = "vm.dirty_bytes".into();
    std::fs::write(
        state.join("journal.json"),
        serde_json::json!([entry]).to_string(),
    )
    .unwrap();
    let out = env
        .cmd()
        .env("TUNELAB_STATE_DIR", &state)
        .arg("restore")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &stderr(&out);
    assert!(out.status.success(), "{text}");
    let value = read(set);
    assert!(
        text.contains(&format!("wrote vm.{set}={value}"))
            && text.contains(&format!("the kernel sets vm.{zero} to 0")),
        "{text}"
    );
    assert!(!text.contains(&format!("to {bytes}/{ratio}")), "{text}");
    assert_eq!((read("dirty_bytes"), read("dirty_ratio")), (bytes, ratio));
}
