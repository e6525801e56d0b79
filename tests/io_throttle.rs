//! On a loop device throttled with a cgroup (blkio v1, or io.max on v2) to
//! a known rate, `io.record-size mode=direct` must report that rate within
//! 5%. Root only; skipped with a printed reason where loop devices or
//! cgroup I/O throttling are missing.
//!
//! The test moves itself into the throttling cgroup before spawning the
//! tunelab binary (children inherit their parent's cgroup), and back
//! afterwards. Only direct I/O is throttled reliably by cgroup v1, which is
//! why the experiment runs with mode=direct.

use std::process::Command;

use tunelab::lab::{throttle, IoThrottle, LoopFs, LoopFsOptions, ThrottleLimits};
use tunelab::safety::Scratch;

const RATE: u64 = 16_000_000; // 16 MB/s

fn skip(why: &str) {
    eprintln!("SKIPPED io_throttle: {why}");
}

#[test]
fn direct_io_reports_the_throttled_rate() {
    if !rustix::process::geteuid().is_root() {
        return skip("needs root (loop device + cgroup)");
    }
    if throttle::detect().is_none() {
        return skip("no cgroup blkio/io throttling hierarchy mounted");
    }
    if !std::path::Path::new("/dev/loop-control").exists() {
        return skip("no loop device support (/dev/loop-control missing)");
    }
    let scratch = Scratch::create(None).expect("scratch");
    let lfs = match LoopFs::create(
        scratch.path(),
        "throttled",
        &LoopFsOptions {
            size: 160 << 20,
            ..Default::default()
        },
    ) {
        Ok(l) => l,
        Err(e) => return skip(&format!("cannot create a loop filesystem: {e}")),
    };
    let (maj, min) = lfs.major_minor();
    let mut cg = IoThrottle::create(
        maj,
        min,
        ThrottleLimits {
            read_bps: Some(RATE),
            write_bps: Some(RATE),
            ..Default::default()
        },
    )
    .expect("cgroup");
    cg.enter().expect("enter cgroup");
    let out = Command::new(env!("CARGO_BIN_EXE_tunelab"))
        .args([
            "run",
            "io.record-size",
            "-p",
            "mode=direct",
            "-p",
            "record=1m",
            "-p",
            "size=32M",
            "--trials",
            "2",
            "--warmup",
            "0",
            "--quiet-check",
            "0",
            "--no-store",
            "--json",
            "--target",
        ])
        .arg(lfs.mount_point())
        .output();
    cg.leave().expect("leave cgroup");
    let out = out.expect("run tunelab");
    assert!(
        out.status.success(),
        "tunelab failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let metric = |name: &str| {
        run["results"][0]["metrics"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["name"] == name)
            .unwrap()["summary"]["median"]
            .as_f64()
            .unwrap()
    };
    let w = metric("write_throughput_nofsync");
    let r = metric("read_throughput");
    eprintln!(
        "throttled to {RATE} B/s: write {w:.0} B/s ({:+.2}%), read {r:.0} B/s ({:+.2}%)",
        (w / RATE as f64 - 1.0) * 100.0,
        (r / RATE as f64 - 1.0) * 100.0
    );
    for (name, v) in [("write", w), ("read", r)] {
        let ratio = v / RATE as f64;
        assert!(
            (0.95..=1.05).contains(&ratio),
            "{name} throughput {v:.0} B/s is not within 5% of the throttle {RATE} B/s"
        );
    }
    let left: Vec<_> = std::fs::read_dir(lfs.mount_point())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| n != "lost+found")
        .collect();
    assert!(left.is_empty(), "scratch files left behind: {left:?}");
    drop(cg);
    drop(lfs);
    drop(scratch);
}
