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

#[test]
fn a_corrupt_journal_is_explained_and_blocks_tuning() {
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
fn a_study_with_an_unwritable_database_prints_its_verdicts() {
    let env = Env::new();
    let Some(fs) = SmallFs::new(&env, "4m") else {
        return common::skip("needs root to mount a small tmpfs");
    };
    let db = fs.dir.join("results.db");
    assert!(env
        .cmd()
        .env("TUNELAB_DB", &db)
        .arg("runs")
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
        .args(["runs", "--json"])
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
        .args(["runs"])
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
