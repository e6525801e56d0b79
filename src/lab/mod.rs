//! The filesystem lab and slow-device emulation behind `--fs` and
//! `--throttle`: each `--fs` entry becomes a loop-backed image in a scratch
//! directory, formatted and mounted with the given options; `--throttle`
//! limits tunelab's own I/O on that device through a blkio cgroup. Everything
//! is torn down by guards on every exit path.
//!
//! Layer: below experiments (io.atime builds its loop filesystems here) and
//! the engine's session pipeline (`--fs`, `--throttle`); it imports only
//! safety, system and units.

pub mod loopfs;
pub mod throttle;

use std::path::{Path, PathBuf};

use crate::safety::Scratch;
use crate::system::device_for_path;
use crate::units::parse_size;
use crate::{Error, Result};
pub use loopfs::{LoopFs, LoopFsOptions};
pub use throttle::{IoThrottle, ThrottleLimits};

/// One `--fs` entry: `ext4`, `ext4:noatime`, `ext4:data=writeback:commit=60`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FsSpec {
    pub(crate) label: String,
    pub(crate) fs_type: String,
    pub(crate) options: Vec<String>,
}

pub(crate) fn parse_fs_list(list: &str) -> Result<Vec<FsSpec>> {
    let mut out = Vec::new();
    for item in list.split(',').map(str::trim) {
        let mut parts = item.split(':');
        let fs_type = parts.next().unwrap_or_default().to_string();
        if fs_type.is_empty() || !fs_type.chars().all(|c| c.is_ascii_alphanumeric()) {
            return Err(Error::usage(format!(
                "--fs: '{item}' is not FSTYPE[:OPTION…] (e.g. ext4, ext4:noatime, xfs, btrfs)"
            )));
        }
        let options: Vec<String> = parts.filter(|p| !p.is_empty()).map(String::from).collect();
        out.push(FsSpec {
            label: item.to_string(),
            fs_type,
            options,
        });
    }
    Ok(out)
}

/// Whether `mkfs.<fs_type>` is installed.
pub(crate) fn mkfs_available(fs_type: &str) -> bool {
    let name = format!("mkfs.{fs_type}");
    std::env::var_os("PATH")
        .map(|p| {
            std::env::split_paths(&p)
                .chain([PathBuf::from("/sbin"), PathBuf::from("/usr/sbin")])
                .any(|d| d.join(&name).exists())
        })
        .unwrap_or(false)
}

/// Whether the running kernel lists `fs_type` in /proc/filesystems.
fn kernel_knows(fs_type: &str) -> bool {
    crate::system::proc::read("filesystems").is_ok_and(|t| {
        t.lines()
            .any(|l| l.split_whitespace().last() == Some(fs_type))
    })
}

fn unknown_fs(fs_type: &str) -> String {
    format!(
        "mkfs.{fs_type} is not installed, and '{fs_type}' is not a file system this kernel or \
         tunelab knows (not in /proc/filesystems): check the name (e.g. ext4, xfs, btrfs, \
         f2fs, vfat)"
    )
}

/// Why a lab file system of `fs_type` cannot be made here, and the fix.
pub(crate) fn mkfs_missing(fs_type: &str) -> String {
    let package = match fs_type {
        "ext2" | "ext3" | "ext4" => "e2fsprogs",
        "xfs" => "xfsprogs",
        "btrfs" => "btrfs-progs",
        "f2fs" => "f2fs-tools",
        "vfat" | "fat" | "msdos" => "dosfstools",
        "exfat" => "exfatprogs",
        "jfs" => "jfsutils",
        "nilfs2" => "nilfs-tools",
        "reiserfs" => "reiserfsprogs",
        "minix" | "cramfs" => "util-linux",
        "udf" => "udftools",
        _ if kernel_knows(fs_type) => "the package that provides it",
        _ => return unknown_fs(fs_type),
    };
    format!(
        "mkfs.{fs_type} is not installed, so no {fs_type} lab file system can be made \
         (install {package}; busybox has no mkfs.{fs_type})"
    )
}

/// Parse `read=20MB/s,write=20MB/s` (also `riops=`, `wiops=`).
pub(crate) fn parse_throttle(spec: &str) -> Result<ThrottleLimits> {
    let mut l = ThrottleLimits::default();
    for part in spec.split(',').map(str::trim) {
        let bad = || {
            Error::usage(format!(
                "--throttle: '{part}' is not KEY=VALUE (read=20MB/s, write=20MB/s, riops=100, wiops=100)"
            ))
        };
        let (k, v) = part.split_once('=').ok_or_else(bad)?;
        let bad_value = |what: &str| {
            Error::usage(format!(
                "--throttle: '{part}': the value must be {what} greater than zero"
            ))
        };
        let rate = || {
            parse_size(v.trim().trim_end_matches("/s"))
                .filter(|r| *r > 0)
                .ok_or_else(|| bad_value("a rate like 20MB/s"))
        };
        let count = || {
            v.trim()
                .parse::<u64>()
                .ok()
                .filter(|r| *r > 0)
                .ok_or_else(|| bad_value("a whole number of operations per second"))
        };
        match k.trim() {
            "read" => l.read_bps = Some(rate()?),
            "write" => l.write_bps = Some(rate()?),
            "riops" => l.read_iops = Some(count()?),
            "wiops" => l.write_iops = Some(count()?),
            _ => return Err(bad()),
        }
    }
    Ok(l)
}

/// A mounted lab filesystem. Field order matters: the filesystem is
/// unmounted before its scratch directory is removed.
pub(crate) struct LabFs {
    fs: LoopFs,
    _scratch: Scratch,
}

impl LabFs {
    pub(crate) fn create(spec: &FsSpec, outer: Option<&Path>, size: u64) -> Result<LabFs> {
        crate::safety::require_root(|| {
            "the filesystem lab (--fs) needs root to create and mount loop devices".into()
        })?;
        if !mkfs_available(&spec.fs_type) {
            return Err(Error::environment(mkfs_missing(&spec.fs_type)));
        }
        let scratch = Scratch::create(outer)?;
        scratch.ensure_space(size.min(256 << 20))?;
        let opts = LoopFsOptions {
            size,
            fs_type: spec.fs_type.clone(),
            mount_options: spec.options.join(","),
            ..Default::default()
        };
        let fs = LoopFs::create(scratch.path(), "lab", &opts)?;
        Ok(LabFs {
            fs,
            _scratch: scratch,
        })
    }

    pub(crate) fn mount_point(&self) -> &Path {
        self.fs.mount_point()
    }
}

/// Throttle tunelab's own I/O on the device holding `dir` (a lab
/// filesystem or the target). The guard leaves and removes the cgroup.
pub(crate) fn throttle_for(dir: &Path, limits: ThrottleLimits) -> Result<IoThrottle> {
    let dev = device_for_path(dir).ok_or_else(|| {
        Error::environment(format!(
            "{} is not on a block device: nothing to throttle",
            dir.display()
        ))
    })?;
    // Limits apply to whole disks: use the disk's numbers for partitions.
    let (major, minor) = disk_numbers(&dev.disk).unwrap_or((dev.major, dev.minor));
    let mut t = IoThrottle::create(major, minor, limits)?;
    t.enter()?;
    Ok(t)
}

fn disk_numbers(disk: &str) -> Option<(u32, u32)> {
    let s = std::fs::read_to_string(format!("/sys/block/{disk}/dev")).ok()?;
    let (a, b) = s.trim().split_once(':')?;
    Some((a.parse().ok()?, b.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fs_specs_parse() {
        let s = parse_fs_list("ext4,ext4:noatime,ext4:data=writeback:commit=60").unwrap();
        assert_eq!(s[1].options, ["noatime"]);
        assert_eq!(s[2].options, ["data=writeback", "commit=60"]);
        assert!(parse_fs_list("ext4,,xfs").is_err());
        assert!(parse_fs_list("../x").is_err());
    }

    #[test]
    fn throttle_specs_parse() {
        let l = parse_throttle("read=20MB/s,write=1M").unwrap();
        assert_eq!(l.read_bps, Some(20_000_000));
        assert_eq!(l.write_bps, Some(1 << 20));
        assert!(parse_throttle("write=fast").is_err());
        assert!(parse_throttle("speed=1M").is_err());
        let e = parse_throttle("write=0").unwrap_err().to_string();
        assert!(e.contains("greater than zero"), "{e}");
        let e = parse_throttle("wiops").unwrap_err().to_string();
        assert!(e.contains("KEY=VALUE"), "{e}");
    }
}
