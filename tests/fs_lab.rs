//! The `--fs` filesystem lab with the file systems boards have (issue 12
//! items 1 and 4): vfat, exfat, f2fs and ext2 next to ext4.
//!
//! Two checks per file system. (1) Each mkfs accepts the arguments the lab
//! gives it: formatting a plain image file needs neither root nor kernel
//! support, so this runs everywhere the mkfs is installed (before, the lab
//! passed `-q` to every mkfs, which mkfs.vfat and mkfs.exfat reject).
//! (2) `tunelab run io.stream --fs FS` end to end, when root, loop devices
//! and the kernel's support for FS are there; otherwise the test says
//! which of them is missing. The emulated board lab (lab/board-lab.sh) runs
//! the same file systems on Debian's arm64 kernel, which has them all.

mod common;

use std::path::Path;
use std::process::Command;

use common::{json, stderr, Env};

fn has_mkfs(fs: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v mkfs.{fs}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// mkfs.`fs` formats a 128 MiB image file with exactly the lab's arguments.
fn mkfs_accepts_the_lab_arguments(fs: &str) {
    if !has_mkfs(fs) {
        return common::skip(&format!("mkfs.{fs} is not installed"));
    }
    let dir = tempfile::tempdir().unwrap();
    let image = dir.path().join(format!("{fs}.img"));
    std::fs::File::create(&image)
        .unwrap()
        .set_len(128 << 20)
        .unwrap();
    let args = tunelab::lab::loopfs::mkfs_args(fs, &[], image.to_str().unwrap());
    let out = Command::new(format!("mkfs.{fs}"))
        .args(&args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "mkfs.{fs} {args:?} failed: {}",
        stderr(&out)
    );
}

/// Whether this kernel can mount `fs`: listed in /proc/filesystems, or
/// modules can be loaded at all (the mount then loads it, or says it cannot).
fn kernel_may_mount(fs: &str) -> bool {
    let listed = std::fs::read_to_string("/proc/filesystems")
        .unwrap_or_default()
        .lines()
        .any(|l| l.split_whitespace().last() == Some(fs));
    listed || Path::new("/proc/modules").exists()
}

/// `tunelab run io.stream --fs FS`: formats, mounts, measures, tags the
/// result `fs=FS`, and leaves no mount, loop device or scratch behind.
fn io_stream_on_a_lab_filesystem(fs: &str) {
    if !common::is_root() || !Path::new("/dev/loop-control").exists() {
        return common::skip("needs root and loop devices");
    }
    if !has_mkfs(fs) {
        return common::skip(&format!("mkfs.{fs} is not installed"));
    }
    if !kernel_may_mount(fs) {
        return common::skip(&format!(
            "this kernel has no {fs} (not in /proc/filesystems, no module support)"
        ));
    }
    let env = Env::new();
    let t = env.target();
    let out = env.run(&[
        "run",
        "io.stream",
        "--fs",
        fs,
        "--fs-size",
        "128M",
        "-p",
        "duration=1s",
        "--trials",
        "1",
        "--warmup",
        "0",
        "--quiet-check",
        "0",
        "--json",
        "--target",
        t.to_str().unwrap(),
    ]);
    let err = stderr(&out);
    if err.contains(&format!("the kernel has no {fs} support")) {
        return common::skip(&format!("this kernel cannot load {fs}: {err}"));
    }
    assert!(out.status.success(), "--fs {fs}: {err}");
    let run = json(&out);
    let results = run["results"].as_array().unwrap();
    assert!(!results.is_empty(), "{run}");
    for r in results {
        assert_eq!(r["params"]["fs"], fs, "{r}");
        assert!(!r["metrics"].as_array().unwrap().is_empty(), "{r}");
    }
    assert!(env.leftovers().is_empty(), "{:?}", env.leftovers());
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(
        !mounts.contains(t.to_str().unwrap()),
        "a lab mount was left: {mounts}"
    );
}

#[test]
fn mkfs_vfat_accepts_the_lab_arguments() {
    mkfs_accepts_the_lab_arguments("vfat");
}

#[test]
fn mkfs_exfat_accepts_the_lab_arguments() {
    mkfs_accepts_the_lab_arguments("exfat");
}

#[test]
fn mkfs_f2fs_accepts_the_lab_arguments() {
    mkfs_accepts_the_lab_arguments("f2fs");
}

#[test]
fn mkfs_ext2_accepts_the_lab_arguments() {
    mkfs_accepts_the_lab_arguments("ext2");
}

#[test]
fn io_stream_on_vfat() {
    io_stream_on_a_lab_filesystem("vfat");
}

#[test]
fn io_stream_on_exfat() {
    io_stream_on_a_lab_filesystem("exfat");
}

#[test]
fn io_stream_on_f2fs() {
    io_stream_on_a_lab_filesystem("f2fs");
}

#[test]
fn io_stream_on_ext2() {
    io_stream_on_a_lab_filesystem("ext2");
}
