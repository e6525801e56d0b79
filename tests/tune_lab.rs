//! Inspect, advise, tune, the filesystem lab and throttling, through the real
//! binary. Most of this needs root (loop devices, mounts, sysctls, cgroups);
//! without it the tests print why they skip.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{json, stderr, Env};

fn sh(cmd: &str, args: &[&str]) -> String {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{cmd}: {e}"));
    assert!(
        out.status.success(),
        "{cmd} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Poll `done` every 20 ms for up to `secs` seconds.
fn wait_until(secs: u64, done: impl Fn() -> bool) {
    let t0 = Instant::now();
    while !done() && t0.elapsed() < Duration::from_secs(secs) {
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runner options for a run that goes on until the test stops it.
const UNTIL_KILLED: &[&str] = &[
    "--min-trials",
    "1000",
    "--max-trials",
    "1000",
    "--budget",
    "60s",
    "--quiet-check",
    "0",
];

/// A fresh Env when loop devices can be used (root); otherwise print why
/// the test skips.
fn loop_env() -> Option<Env> {
    if !common::is_root() || !Path::new("/dev/loop-control").exists() {
        common::skip("needs root and loop devices");
        return None;
    }
    Some(Env::new())
}

/// A small ext4 image mounted with `opts`; unmounted and detached on drop.
struct LoopMount {
    dir: PathBuf,
}

impl LoopMount {
    fn new(env: &Env, name: &str, opts: &str) -> Option<LoopMount> {
        if !common::is_root() || !Path::new("/dev/loop-control").exists() {
            return None;
        }
        let img = env.dir.path().join(format!("{name}.img"));
        let dir = env.dir.path().join(name);
        std::fs::create_dir_all(&dir).unwrap();
        sh("truncate", &["-s", "64M", img.to_str().unwrap()]);
        sh("mkfs.ext4", &["-q", "-F", img.to_str().unwrap()]);
        sh(
            "mount",
            &[
                "-o",
                &format!("loop,{opts}"),
                img.to_str().unwrap(),
                dir.to_str().unwrap(),
            ],
        );
        Some(LoopMount { dir })
    }
}

impl Drop for LoopMount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.dir).status();
    }
}

fn finding_ids(env: &Env, target: &Path) -> Vec<String> {
    let out = env.run(&["advise", "--json", "--target", target.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    json(&out)["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["id"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn advise_finds_sync_and_strictatime_mounts_and_nothing_on_a_healthy_one() {
    let env = Env::new();
    let Some(sync) = LoopMount::new(&env, "sync", "sync") else {
        return common::skip("needs root and loop devices");
    };
    let strict = LoopMount::new(&env, "strict", "strictatime").unwrap();
    let healthy = LoopMount::new(&env, "healthy", "relatime").unwrap();
    assert!(finding_ids(&env, &sync.dir).contains(&"mount.sync".to_string()));
    assert!(finding_ids(&env, &strict.dir).contains(&"mount.strictatime".to_string()));
    let ids = finding_ids(&env, &healthy.dir);
    assert!(ids.is_empty(), "false alarms on a healthy mount: {ids:?}");
    // inspect names the source of each fact.
    let facts = json(&env.run(&[
        "inspect",
        "--json",
        "--target",
        strict.dir.to_str().unwrap(),
    ]));
    let atime = facts
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["key"] == "fs.atime")
        .unwrap();
    assert_eq!(atime["value"], "strictatime");
    assert_eq!(atime["source"], "/proc/self/mountinfo");
}

fn read(path: &str) -> String {
    let v = std::fs::read_to_string(path).unwrap();
    let v = v.trim();
    match (v.find('['), v.find(']')) {
        (Some(a), Some(b)) => v[a + 1..b].to_string(),
        _ => v.to_string(),
    }
}

#[test]
fn kill_9_during_a_sweep_is_repaired_by_the_next_command() {
    if !common::is_root() {
        return common::skip("needs root to change sysctls");
    }
    let env = Env::new();
    let state = env.dir.path().join("state");
    let knob = "/proc/sys/vm/dirty_expire_centisecs";
    let original = read(knob);
    let values = format!(
        "{},{}",
        original.parse::<u64>().unwrap() + 7,
        original.parse::<u64>().unwrap() + 11
    );
    let t = env.target();
    let mut child = env
        .background()
        .env("TUNELAB_STATE_DIR", &state)
        .args([
            "tune",
            "vm.dirty_expire_centisecs",
            "--values",
            &values,
            "--experiment",
            "io.file-read",
        ])
        .args(["-p", "size=4M"])
        .args(UNTIL_KILLED)
        .arg("--target")
        .arg(&t)
        .spawn()
        .expect("spawn tunelab");
    wait_until(30, || read(knob) != original);
    assert_ne!(read(knob), original, "the sweep never changed the knob");
    child.kill().unwrap(); // SIGKILL: no chance to restore
    child.wait().unwrap();
    assert!(
        state.join("journal.json").exists(),
        "no journal left behind"
    );
    assert_ne!(read(knob), original);
    let out = env
        .cmd()
        .env("TUNELAB_STATE_DIR", &state)
        .args(["runs"])
        .output()
        .unwrap();
    assert!(
        stderr(&out).contains("restored vm.dirty_expire_centisecs"),
        "{}",
        stderr(&out)
    );
    assert_eq!(read(knob), original);
    assert!(!state.join("journal.json").exists());
}

#[test]
fn kill_9_restores_a_sysfs_knob_and_respects_outside_changes() {
    let Some(env) = loop_env() else { return };
    let img = env.dir.path().join("dev.img");
    sh("truncate", &["-s", "32M", img.to_str().unwrap()]);
    let dev = sh("losetup", &["--find", "--show", img.to_str().unwrap()]);
    let name = dev.trim_start_matches("/dev/").to_string();
    let knob = format!("/sys/block/{name}/queue/read_ahead_kb");
    let original = read(&knob);
    // Loop devices keep queue settings across reuse: put it back and detach on every path.
    struct Detach(String, String, String);
    impl Drop for Detach {
        fn drop(&mut self) {
            let _ = std::fs::write(&self.1, &self.2);
            let _ = Command::new("losetup").args(["-d", &self.0]).status();
        }
    }
    let _detach = Detach(dev.clone(), knob.clone(), original.clone());
    let state = env.dir.path().join("state");
    let spawn = || {
        Command::new(assert_cmd::cargo::cargo_bin("tunelab"))
            .env("TUNELAB_DB", env.db())
            .env("TUNELAB_STATE_DIR", &state)
            .args([
                "tune",
                "read_ahead_kb",
                "--values",
                "16,2048",
                "--device",
                &name,
                "--experiment",
                "io.file-read",
            ])
            .args([
                "-p",
                "size=4M",
                "--quiet-check",
                "0",
                "--min-trials",
                "1000",
                "--max-trials",
                "1000",
            ])
            .arg("--target")
            .arg(env.target())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    };
    let wait_change = |orig: &str| {
        let t0 = Instant::now();
        while read(&knob) == orig && t0.elapsed() < Duration::from_secs(30) {
            std::thread::sleep(Duration::from_millis(10));
        }
    };
    let mut child = spawn();
    wait_change(&original);
    child.kill().unwrap();
    child.wait().unwrap();
    let out = env
        .cmd()
        .env("TUNELAB_STATE_DIR", &state)
        .args(["restore"])
        .output()
        .unwrap();
    let msg = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        msg.contains("restored read_ahead_kb"),
        "{msg} {}",
        stderr(&out)
    );
    assert_eq!(read(&knob), original);

    // Someone else changes the knob after tunelab did: their value is kept.
    let mut child = spawn();
    wait_change(&original);
    child.kill().unwrap();
    child.wait().unwrap();
    let theirs = (original.parse::<u64>().unwrap() + 4).to_string();
    std::fs::write(&knob, &theirs).unwrap();
    let out = env
        .cmd()
        .env("TUNELAB_STATE_DIR", &state)
        .args(["restore"])
        .output()
        .unwrap();
    let msg = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(msg.contains("left read_ahead_kb alone"), "{msg}");
    assert_eq!(read(&knob), theirs);
}

#[test]
fn a_read_ahead_sweep_on_a_loop_device_restores_and_reports() {
    let Some(env) = loop_env() else { return };
    let t = env.target();
    let out = env.run(&[
        "tune",
        "read_ahead_kb",
        "--values",
        "16,128,1024",
        "--experiment",
        "io.device-read",
        "-p",
        "duration=200ms",
        "-p",
        "size=32M",
        "--fs",
        "ext4",
        "--fs-size",
        "256M",
        "--min-trials",
        "2",
        "--max-trials",
        "3",
        "--quiet-check",
        "0",
        "--target",
        t.to_str().unwrap(),
    ]);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("restored read_ahead_kb to"), "{err}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("read_ahead_kb → ") && text.contains("95% CI"),
        "{text}"
    );
    let run = json(&env.run(&["show", "last", "--json"]));
    let vals: Vec<String> = run["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["params"]["read_ahead_kb"].as_str().unwrap().to_string())
        .collect();
    // The values asked for, then the loop device's live value when it is
    // none of them (tune measures it as the baseline arm).
    assert_eq!(vals[..3], ["16", "128", "1024"]);
    assert!(vals.len() <= 4, "{vals:?}");
    let live = run["environment"]["tune.live"].as_str().unwrap();
    assert!(vals.iter().any(|v| v == live), "{vals:?} {live}");
    assert!(env.leftovers().is_empty(), "{:?}", env.leftovers());
}

#[test]
fn the_lab_compares_atime_modes() {
    let Some(env) = loop_env() else { return };
    let t = env.target();
    let out = env.run(&[
        "run",
        "io.atime",
        "--json",
        "--no-store",
        "--fs",
        "ext4:noatime,ext4:strictatime",
        "--fs-size",
        "512M",
        "-p",
        "files=200",
        "-p",
        "atime=current",
        "--trials",
        "3",
        "--warmup",
        "0",
        "--quiet-check",
        "0",
        "--target",
        t.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let doc = json(&out);
    // Every trial, not just the median: a read in the same clock tick as
    // the previous one must not hide an update.
    let updates = |fs: &str| -> Vec<f64> {
        let r = doc["results"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["params"]["fs"] == fs)
            .unwrap();
        let m = r["metrics"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["name"] == "atime_updates")
            .unwrap();
        m["samples"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect()
    };
    assert_eq!(updates("ext4:noatime"), [0.0; 3]);
    assert_eq!(updates("ext4:strictatime"), [200.0; 3]);
    assert!(env.leftovers().is_empty());
}

#[test]
fn throttled_direct_writes_run_at_the_throttle() {
    if !common::is_root() || !Path::new("/sys/fs/cgroup/blkio").exists() {
        return common::skip("needs root and cgroup v1 blkio");
    }
    let env = Env::new();
    let t = env.target();
    let out = env.run(&[
        "run",
        "io.record-size",
        "--json",
        "--no-store",
        "--fs",
        "ext4",
        "--fs-size",
        "256M",
        "--throttle",
        "write=20MB/s",
        "-p",
        "mode=direct",
        "-p",
        "record=1m",
        "-p",
        "size=24M",
        "--trials",
        "2",
        "--warmup",
        "0",
        "--quiet-check",
        "0",
        "--target",
        t.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let doc = json(&out);
    let m = doc["results"][0]["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "write_throughput_nofsync")
        .unwrap()
        .clone();
    let rate = m["summary"]["median"].as_f64().unwrap();
    assert!(
        (rate / 20e6 - 1.0).abs() < 0.10,
        "throttled at 20 MB/s but measured {:.1} MB/s",
        rate / 1e6
    );
    assert!(env.leftovers().is_empty());
}

#[test]
fn without_root_inspect_works_and_tune_and_the_lab_refuse() {
    if !common::is_root() {
        return common::skip("needs root to switch to an unprivileged user");
    }
    let env = Env::new();
    std::fs::set_permissions(
        env.dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    std::fs::set_permissions(
        env.target(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let bin = assert_cmd::cargo::cargo_bin("tunelab");
    let nobody = |args: &[&str]| {
        Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(&bin)
            .args(args)
            .env("TUNELAB_DB", env.dir.path().join("nobody.db"))
            .env("TUNELAB_STATE_DIR", env.dir.path().join("nobody-state"))
            .env("HOME", env.dir.path())
            .output()
            .unwrap()
    };
    let t = env.target();
    let t = t.to_str().unwrap();
    assert!(nobody(&["inspect", "--target", t]).status.success());
    assert!(nobody(&["advise", "--target", t]).status.success());
    let out = nobody(&[
        "tune",
        "vm.dirty_ratio",
        "--values",
        "10,20",
        "--experiment",
        "io.file-read",
        "--target",
        t,
    ]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stderr(&out).contains("needs root"));
    let out = nobody(&["run", "io.file-read", "--fs", "ext4", "--target", t]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
}

/// Mount points under `dir` in /proc/self/mountinfo.
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

#[test]
fn a_second_ctrl_c_unmounts_the_lab_filesystem() {
    let Some(env) = loop_env() else { return };
    let t = env.target();
    let mut child = env
        .background()
        .args([
            "run",
            "io.record-size",
            "--fs",
            "ext4",
            "--fs-size",
            "256M",
            "-p",
            "size=32M",
            "-p",
            "record=64k",
            "-p",
            "mode=buffered",
            "--no-store",
        ])
        .args(UNTIL_KILLED)
        .arg("--target")
        .arg(&t)
        .spawn()
        .unwrap();
    wait_until(30, || !mounts_under(&t).is_empty());
    assert!(!mounts_under(&t).is_empty(), "the lab fs was never mounted");
    std::thread::sleep(Duration::from_millis(300));
    // Two different signals back to back (two SIGINTs may merge into one
    // pending signal), before the first one's orderly clean-up can finish.
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, sig) };
    }
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    assert!(mounts_under(&t).is_empty(), "{:?}", mounts_under(&t));
    assert!(env.leftovers().is_empty(), "{:?}", env.leftovers());
    // The loop device clears itself once the lazy unmount completes.
    let bound = || {
        sh("losetup", &["-a"])
            .lines()
            .filter(|l| l.contains(t.to_str().unwrap()))
            .count()
    };
    wait_until(10, || bound() == 0);
    assert_eq!(bound(), 0, "{}", sh("losetup", &["-a"]));
}

/// The access-time mode of the mount at `dir` as mountinfo shows it.
fn atime_of(dir: &Path) -> String {
    let d = dir.to_string_lossy().to_string();
    let line = std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .rfind(|l| l.split(' ').nth(4) == Some(d.as_str()))
        .unwrap_or_else(|| panic!("{d} is not mounted"))
        .to_string();
    let opts = line.split(' ').nth(5).unwrap().to_string();
    ["noatime", "relatime"]
        .into_iter()
        .find(|a| opts.split(',').any(|o| o == *a))
        .unwrap_or("strictatime")
        .to_string()
}

/// Issue 13 defect 1: util-linux's `mount -o remount,relatime` left
/// `noatime` in force; tunelab now sets the whole flag set with mount(2)
/// and verifies mountinfo, after a normal sweep and after kill -9.
#[test]
fn a_mount_sweep_ends_with_the_original_atime_mode() {
    let env = Env::new();
    let Some(m) = LoopMount::new(&env, "relatime", "relatime") else {
        return common::skip("needs root and loop devices");
    };
    let state = env.dir.path().join("state");
    assert_eq!(atime_of(&m.dir), "relatime");
    let sweep = |extra: &[&str]| {
        let mut c = env.background();
        c.env("TUNELAB_STATE_DIR", &state)
            .args(["tune", "mount", "--values", "noatime,strictatime"])
            .args(["-e", "io.metadata", "-p", "files=200", "-p", "level=none"])
            .args(["--no-store", "--warmup", "0"])
            .args(extra)
            .arg("--target")
            .arg(&m.dir);
        c
    };
    for round in 0..4 {
        let st = sweep(&["--trials", "3", "--quiet-check", "0"])
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        assert!(st.status.success(), "round {round}: {}", stderr(&st));
        assert!(
            stderr(&st).contains("verified in /proc/self/mountinfo"),
            "{}",
            stderr(&st)
        );
        assert_eq!(atime_of(&m.dir), "relatime", "round {round}");
    }
    for round in 0..3 {
        let mut child = sweep(UNTIL_KILLED).spawn().unwrap();
        wait_until(30, || atime_of(&m.dir) != "relatime");
        assert_ne!(atime_of(&m.dir), "relatime", "the sweep never remounted");
        // Let it switch between noatime and strictatime a few times.
        std::thread::sleep(Duration::from_millis(200 * round));
        child.kill().unwrap();
        child.wait().unwrap();
        let out = env
            .cmd()
            .env("TUNELAB_STATE_DIR", &state)
            .arg("restore")
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        assert_eq!(atime_of(&m.dir), "relatime", "after kill -9, round {round}");
    }
}

/// The first IRQ whose CPU affinity this machine lets us set, with its list.
fn a_movable_irq() -> Option<(u32, String)> {
    let mut irqs: Vec<u32> = std::fs::read_dir("/proc/irq")
        .ok()?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    irqs.sort_unstable();
    irqs.into_iter().find_map(|n| {
        let f = format!("/proc/irq/{n}/smp_affinity_list");
        let v = std::fs::read_to_string(&f).ok()?.trim().to_string();
        // Writing the value it holds changes nothing and proves it movable.
        std::fs::write(&f, &v).ok().map(|_| (n, v))
    })
}

#[test]
fn latency_knobs_sweep_and_are_restored() {
    if !common::is_root() {
        return common::skip("needs root to change sysctls and IRQ affinity");
    }
    let env = Env::new();
    let t = env.target();
    let rt = "/proc/sys/kernel/sched_rt_runtime_us";
    let mut cases: Vec<(String, String, String)> = Vec::new();
    if Path::new(rt).exists() {
        cases.push((
            "kernel.sched_rt_runtime_us".into(),
            "950000,-1".into(),
            rt.into(),
        ));
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if let Some((irq, _)) = a_movable_irq().filter(|_| cpus > 1) {
        cases.push((
            format!("irq.{irq}.affinity"),
            "0,0-1".into(),
            format!("/proc/irq/{irq}/smp_affinity_list"),
        ));
    }
    if cases.is_empty() {
        return common::skip("no sched_rt_runtime_us and no movable IRQ here");
    }
    for (knob, values, file) in cases {
        let original = read(&file);
        let out = env.run(&[
            "tune",
            &knob,
            "--values",
            &values,
            "--experiment",
            "sched.latency",
            "-p",
            "duration=100ms",
            "-p",
            "cpus=0",
            "--min-trials",
            "2",
            "--max-trials",
            "2",
            "--quiet-check",
            "0",
            "--target",
            t.to_str().unwrap(),
        ]);
        let err = stderr(&out);
        assert!(out.status.success(), "{knob}: {err}");
        assert!(err.contains(&format!("restored {knob} to")), "{err}");
        assert_eq!(read(&file), original, "{knob} not restored");
        let run = json(&env.run(&["show", "last", "--json"]));
        let n = run["results"].as_array().unwrap().len();
        assert_eq!(n, 2, "{knob}: one point per value");
    }
    assert!(env.leftovers().is_empty(), "{:?}", env.leftovers());
}

#[test]
fn bad_latency_knob_values_are_usage_errors() {
    let env = Env::new();
    let t = env.target();
    for (knob, values, says) in [
        ("irq.99999.affinity", "0,1", "IRQ 99999 does not exist"),
        ("irq.x.affinity", "0,1", "unknown knob"),
        ("kernel.sched_rt_runtime_us", "-5,10", "for no limit"),
    ] {
        let out = env.run(&[
            "tune",
            knob,
            "--values",
            values,
            "--experiment",
            "sched.latency",
            "--dry-run",
            "--target",
            t.to_str().unwrap(),
        ]);
        let err = stderr(&out);
        let code = out.status.code();
        // A missing IRQ is this machine's fact (exit 4); bad words are usage (2).
        assert!(matches!(code, Some(2) | Some(4)), "{knob}: {code:?} {err}");
        assert!(err.contains(says), "{knob}: {err}");
    }
}
