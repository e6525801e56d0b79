//! The storage experiments through the real binary with tiny parameters:
//! JSON shape, positive metrics, series, and an empty target afterwards;
//! plus the failure paths — out of space and read-only targets (exit 4)
//! and root-only parts without root (exit 3) — leaving nothing behind.

use std::path::Path;
use std::process::Output;

use assert_cmd::Command;
use serde_json::Value;
use tunelab::lab::{LoopFs, LoopFsOptions};
use tunelab::safety::Scratch;

const COMMON: &[&str] = &[
    "--trials",
    "2",
    "--warmup",
    "0",
    "--quiet-check",
    "0",
    "--no-store",
    "--json",
];

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

fn run(exp: &str, params: &[&str], target: &Path) -> Output {
    let mut c = Command::cargo_bin("tunelab").unwrap();
    c.arg("run").arg(exp);
    for p in params {
        c.arg("-p").arg(p);
    }
    c.args(COMMON).arg("--target").arg(target);
    c.env("TUNELAB_DB", target.join("never-used.db"));
    c.output().unwrap()
}

fn entries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n != "lost+found")
        .collect()
}

/// Run, check the JSON, and that the target is empty afterwards.
fn check(exp: &str, params: &[&str], metrics: &[&str], want_series: bool) -> Value {
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let out = run(exp, params, dir.path());
    assert!(
        out.status.success(),
        "{exp} failed ({:?}): {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    assert_eq!(v["schema"], "tunelab.run/1");
    let results = v["results"].as_array().unwrap();
    assert!(!results.is_empty(), "{exp}: no results");
    for r in results {
        assert_eq!(r["experiment"], exp);
        for name in metrics {
            let m = r["metrics"]
                .as_array()
                .unwrap()
                .iter()
                .find(|m| m["name"] == *name)
                .unwrap_or_else(|| panic!("{exp}: metric {name} missing"));
            let med = m["summary"]["median"].as_f64().unwrap();
            assert!(med > 0.0, "{exp}: {name} median {med} is not positive");
            assert_eq!(m["samples"].as_array().unwrap().len(), 2);
        }
        if want_series {
            assert!(
                !r["series"].as_array().map(|s| s.is_empty()).unwrap_or(true),
                "{exp}: series missing"
            );
        }
    }
    let left = entries(dir.path());
    assert!(left.is_empty(), "{exp} left files behind: {left:?}");
    v
}

#[test]
fn record_size_runs() {
    check(
        "io.record-size",
        &["size=8M", "record=64k,1m", "mode=direct,buffered"],
        &[
            "write_throughput",
            "write_throughput_nofsync",
            "read_throughput",
        ],
        true,
    );
}

#[test]
fn api_runs_and_counts_syscalls() {
    let v = check(
        "io.api",
        &["size=256k", "record=512,16k", "api=fd,stdio"],
        &[
            "write_throughput",
            "read_throughput",
            "write_syscalls_per_mib",
            "read_syscalls_per_mib",
        ],
        true,
    );
    // fd at 512 B makes one call per record: ~2048 per MiB; stdio buffers.
    let calls = |api: &str, rec: u64| {
        v["results"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["params"]["api"] == api && r["params"]["record"] == rec)
            .unwrap()["metrics"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["name"] == "write_syscalls_per_mib")
            .unwrap()["summary"]["median"]
            .as_f64()
            .unwrap()
    };
    let fd = calls("fd", 512);
    assert!((fd - 2048.0).abs() < 50.0, "fd 512 B: {fd} calls/MiB");
    assert!(
        calls("stdio", 512) < fd / 4.0,
        "stdio should batch small writes"
    );
}

#[test]
fn pregrow_runs() {
    check(
        "io.pregrow",
        &["size=4M"],
        &["write_time", "total_time"],
        false,
    );
}

#[test]
fn metadata_runs() {
    check(
        "io.metadata",
        &["files=50"],
        &["created_per_s", "deleted_per_s"],
        false,
    );
}

#[test]
fn cache_runs() {
    check(
        "io.cache",
        &[
            "direct_size=16M",
            "direct_record=4M",
            "short=16M",
            "long=64M",
            "record=1M",
        ],
        &[
            "direct_throughput",
            "short_throughput",
            "long_throughput",
            "inflation",
        ],
        true,
    );
}

#[test]
fn device_read_runs_on_a_file() {
    check(
        "io.device-read",
        &["source=file", "size=16M", "duration=0.2"],
        &["buffered_read", "cached_read"],
        false,
    );
}

#[test]
fn atime_runs() {
    let params: &[&str] = if is_root() {
        &["files=50", "atime=current,noatime"]
    } else {
        &["files=50", "atime=current"]
    };
    check(
        "io.atime",
        params,
        &["read_files_per_s", "read_sync_files_per_s"],
        false,
    );
}

fn loopfs(opts: LoopFsOptions) -> Option<(Scratch, LoopFs)> {
    if !is_root() || !Path::new("/dev/loop-control").exists() {
        eprintln!("SKIPPED: needs root and loop devices");
        return None;
    }
    let s = Scratch::create(Some(Path::new("/var/tmp"))).unwrap();
    match LoopFs::create(s.path(), "tiny", &opts) {
        Ok(l) => Some((s, l)),
        Err(e) => {
            eprintln!("SKIPPED: cannot create a loop filesystem: {e}");
            None
        }
    }
}

#[test]
fn out_of_space_is_exit_4_and_leaves_nothing() {
    let Some((_s, lfs)) = loopfs(LoopFsOptions {
        size: 64 << 20,
        // Few inodes, so the metadata run hits ENOSPC in the middle.
        mkfs_args: vec!["-N".into(), "64".into()],
        ..Default::default()
    }) else {
        return;
    };
    let mp = lfs.mount_point();
    // A file larger than the free space is shrunk to half of it, and said.
    let out = run("io.record-size", &["size=128M", "record=1m"], mp);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("fitted to the storage space available"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(entries(mp).is_empty(), "left: {:?}", entries(mp));
    // Below the least it can measure (one 64 MiB record): caught before
    // anything is written.
    let out = run("io.record-size", &["size=128M", "record=64m"], mp);
    assert_eq!(
        out.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("space"));
    assert!(entries(mp).is_empty(), "left: {:?}", entries(mp));
    // A real ENOSPC (no inodes left) half-way through a trial.
    let out = run("io.metadata", &["files=500", "level=none"], mp);
    assert_eq!(
        out.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("full"));
    assert!(entries(mp).is_empty(), "left: {:?}", entries(mp));
}

#[test]
fn read_only_target_is_exit_4() {
    let Some((_s, lfs)) = loopfs(LoopFsOptions {
        size: 16 << 20,
        read_only: true,
        ..Default::default()
    }) else {
        return;
    };
    let out = run("io.pregrow", &["size=1M"], lfs.mount_point());
    assert_eq!(
        out.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("read-only"));
}

#[test]
fn root_only_parts_without_root_are_exit_3() {
    let bin = assert_cmd::cargo::cargo_bin("tunelab");
    let (prefix, args): (&str, Vec<&str>) = if is_root() {
        if Path::new("/usr/bin/setpriv").exists() {
            (
                "setpriv",
                vec!["--reuid=65534", "--regid=65534", "--clear-groups"],
            )
        } else {
            eprintln!("SKIPPED: setpriv is missing");
            return;
        }
    } else {
        ("env", vec![])
    };
    let dir = tempfile::tempdir_in("/tmp").unwrap();
    for (exp, p) in [
        ("io.atime", "atime=noatime"),
        ("io.device-read", "source=device"),
    ] {
        let out = std::process::Command::new(prefix)
            .args(&args)
            .arg(&bin)
            .args(["run", exp, "-p", p])
            .args(COMMON)
            .arg("--target")
            .arg(dir.path())
            .output()
            .unwrap();
        if out.status.code() == Some(126) || out.status.code() == Some(127) {
            eprintln!("SKIPPED: nobody cannot execute {}", bin.display());
            return;
        }
        assert_eq!(
            out.status.code(),
            Some(3),
            "{exp} {p}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(String::from_utf8_lossy(&out.stderr).contains("root"));
    }
    assert!(entries(dir.path()).is_empty());
}
