//! The private scratch directory: the only place tunelab ever writes files.
//!
//! It is created fresh (mkdir fails rather than reusing anything), mode 0700,
//! files inside are opened with O_CREAT|O_EXCL so no existing file is ever
//! opened for writing, and it is removed on drop, on error and on signals.
//! Each directory is in the journal before it exists: after a SIGKILL,
//! `tunelab restore` and the next tunelab command remove it wherever it is;
//! directories left by a SIGKILLed run are also recognised by a marker file
//! and the dead owner pid the next time tunelab uses the same target.

use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use super::journal::{self, Entry, Saved};
use super::scratch_name::{MARKER, PREFIX};
use super::signals;
use crate::{Error, Result};

#[derive(Debug)]
pub struct Scratch {
    path: PathBuf,
    /// Whether the journal holds an entry for it (removed on drop).
    journalled: bool,
}

/// The journal key of a scratch directory.
fn key(path: &Path) -> String {
    format!("scratch {}", path.display())
}

/// Where a command measures: the `--target` given, else the system temp
/// directory (`$TMPDIR`, else /tmp). The one place this default is decided.
pub(crate) fn target_or_temp(target: Option<&Path>) -> PathBuf {
    target.map_or_else(std::env::temp_dir, Path::to_path_buf)
}

impl Scratch {
    /// Create a private scratch directory under `target` (default: the
    /// system temp directory), after checking the target is a writable
    /// directory and not a block device.
    pub fn create(target: Option<&Path>) -> Result<Scratch> {
        let target = target_or_temp(target);
        check_target(&target, Use::Write)?;
        // Absolute, so the journal's record holds wherever restore runs.
        let target = std::path::absolute(&target).unwrap_or(target);
        remove_stale(&target);
        let pid = std::process::id();
        for attempt in 0..100u32 {
            let name = format!(
                "{PREFIX}{pid}-{:08x}",
                rand::random::<u32>().wrapping_add(attempt)
            );
            let path = target.join(name);
            // Journalled before it exists, so `restore` (and every start)
            // removes it after a SIGKILL wherever the target was. Best
            // effort: an unwritable journal must not stop measuring.
            let journalled = journal::dir().is_absolute()
                && journal::put(Entry::new(
                    &key(&path),
                    Saved::Scratch { path: path.clone() },
                ))
                .is_ok();
            match fs::DirBuilder::new().mode(0o700).create(&path) {
                Ok(()) => {
                    signals::register_dir(&path);
                    let scratch = Scratch { path, journalled };
                    fs::write(scratch.path.join(MARKER), format!("{pid}\n")).map_err(|e| {
                        Error::io("cannot write in scratch directory", &scratch.path, e)
                    })?;
                    return Ok(scratch);
                }
                Err(e) => {
                    if journalled {
                        let _ = journal::remove(&key(&path), pid);
                    }
                    if e.kind() == std::io::ErrorKind::AlreadyExists {
                        continue;
                    }
                    return Err(Error::io(
                        "cannot create a scratch directory in",
                        &target,
                        e,
                    ));
                }
            }
        }
        Err(Error::environment(format!(
            "cannot find a free scratch directory name in {}",
            target.display()
        )))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A path inside the scratch directory (names only, no separators).
    pub(crate) fn file_path(&self, name: &str) -> PathBuf {
        debug_assert!(!name.contains('/'));
        self.path.join(name)
    }

    /// Create a new file for writing; fails if it already exists.
    pub(crate) fn create_file(&self, name: &str, extra_flags: i32) -> Result<File> {
        let path = self.file_path(name);
        OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .custom_flags(extra_flags)
            .mode(0o600)
            .open(&path)
            .map_err(|e| Error::io("cannot create scratch file", &path, e))
    }

    /// Bytes available to us on the scratch file system.
    pub(crate) fn free_bytes(&self) -> Result<u64> {
        free_bytes(&self.path)
    }

    /// Fail with a clear message when the file system cannot take `bytes`
    /// and still keep some room free (see `space_needed`).
    pub(crate) fn ensure_space(&self, bytes: u64) -> Result<()> {
        self.ensure_space_in(bytes, self.free_bytes()?, "")
    }

    /// As `ensure_space`, against `free` bytes the caller worked out (on a
    /// RAM-backed target: no more than the memory budget, since every byte
    /// written there is memory), with `why` appended to the refusal.
    pub(crate) fn ensure_space_in(&self, bytes: u64, free: u64, why: &str) -> Result<()> {
        let want = space_needed(bytes, free);
        if free < want {
            return Err(Error::environment(format!(
                "not enough free space in {}: this run writes {} and keeps {} free, \
                 but only {} is free{why} (free some space, choose another --target, or use a \
                 smaller size)",
                self.path.parent().unwrap_or(&self.path).display(),
                crate::units::format_size(bytes),
                crate::units::format_size(want - bytes),
                crate::units::format_size(free)
            )));
        }
        Ok(())
    }
}

/// Free space a run writing `bytes` needs on a file system with `free`:
/// the bytes, 5% for metadata, and room left for everyone else — 16 MiB,
/// or a quarter of what is free on a small board partition, where a fixed
/// 16 MiB would refuse the sizes `fit_disk` chose (half of the free space).
fn space_needed(bytes: u64, free: u64) -> u64 {
    bytes + bytes / 20 + (16 << 20).min(free / 4)
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let gone = fs::remove_dir_all(&self.path).is_ok() || !self.path.exists();
        signals::unregister_dir(&self.path);
        if self.journalled && gone {
            let _ = journal::remove(&key(&self.path), std::process::id());
        }
    }
}

pub(crate) fn free_bytes(path: &Path) -> Result<u64> {
    let st = rustix::fs::statvfs(path).map_err(|e| Error::io("cannot statvfs", path, e.into()))?;
    // ramfs keeps no block accounting (0 blocks, 0 free): it grows until
    // memory runs out, which the memory budget (system::limits) bounds.
    if st.f_blocks == 0 {
        return Ok(u64::MAX);
    }
    Ok(st.f_bavail.saturating_mul(st.f_frsize))
}

/// What a verb does with its `--target`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Use {
    /// Measures there: a scratch directory, files written.
    Write,
    /// Only reads about it (`inspect`): a read-only file system is fine.
    Read,
}

/// The one check of a `--target`, made in each verb's plan: it must exist,
/// be a directory (never a block device) on a file system that holds files
/// and, for `Use::Write`, be mounted read-write.
pub(crate) fn check_target(target: &Path, what: Use) -> Result<()> {
    let meta = match fs::metadata(target) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Error::usage(format!(
                "target {} does not exist (create the directory or choose another --target)",
                target.display()
            )))
        }
        Err(e) => return Err(Error::io("cannot examine target", target, e)),
    };
    if meta.file_type().is_block_device() {
        return Err(Error::usage(format!(
            "target {} is a block device: tunelab never writes to block devices \
             (give a directory on a mounted file system)",
            target.display()
        )));
    }
    if !meta.is_dir() {
        return Err(Error::usage(format!(
            "target {} is not a directory (give a directory)",
            target.display()
        )));
    }
    if what == Use::Read {
        return Ok(());
    }
    if let Some(kind) = pseudo_fs(target) {
        return Err(Error::usage(format!(
            "target {} is on {kind}, a kernel file system that holds no files of yours \
             (give a directory on a disk or tmpfs, e.g. /tmp or /var/tmp)",
            target.display()
        )));
    }
    let st =
        rustix::fs::statvfs(target).map_err(|e| Error::io("cannot statvfs", target, e.into()))?;
    if st.f_flag.contains(rustix::fs::StatVfsMountFlags::RDONLY) {
        return Err(Error::environment(format!(
            "target {} is on a read-only file system (choose a writable --target)",
            target.display()
        )));
    }
    Ok(())
}

/// The name of the kernel pseudo file system `dir` is on (procfs, sysfs…),
/// where no file can be created: refused up front with a clear message.
fn pseudo_fs(dir: &Path) -> Option<&'static str> {
    // The kernel's own trees, whatever is mounted there: a container mounts
    // a tmpfs on /dev and on /sys/fs/cgroup (only /dev/shm is for files).
    if let Ok(real) = fs::canonicalize(dir) {
        let under = |top: &str| real.starts_with(top);
        if (under("/proc") || under("/sys") || under("/dev")) && !under("/dev/shm") {
            return Some("the kernel's /proc, /sys or /dev tree");
        }
    }
    let st = rustix::fs::statfs(dir).ok()?;
    Some(match st.f_type as u64 {
        0x9fa0 => "procfs",
        0x1373 => "devtmpfs",
        0x6265_6572 => "sysfs",
        0x1cd1 => "devpts",
        0x0027_e0eb | 0x6367_7270 => "cgroupfs",
        0x6462_6720 => "debugfs",
        0x7472_6163 => "tracefs",
        0x7363_6673 => "securityfs",
        0xcafe_4a11 => "bpffs",
        0x4249_4e4d => "binfmt_misc",
        _ => return None,
    })
}

/// Remove scratch directories whose owner process is gone (after SIGKILL).
fn remove_stale(target: &Path) {
    let Ok(entries) = fs::read_dir(target) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(PREFIX)) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<i32>().ok()) else {
            continue;
        };
        let dir = entry.path();
        let owner = fs::read_to_string(dir.join(MARKER))
            .ok()
            .and_then(|s| s.trim().parse::<i32>().ok());
        let alive = crate::system::proc::pid_dir(pid).exists();
        if owner == Some(pid) && !alive {
            let _ = fs::remove_dir_all(&dir);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scratch_is_private_and_removed_on_drop() {
        let t = tempfile::tempdir().unwrap();
        let s = Scratch::create(Some(t.path())).unwrap();
        let p = s.path().to_path_buf();
        s.create_file("a", 0).unwrap();
        assert!(
            s.create_file("a", 0).is_err(),
            "existing files are never reopened for writing"
        );
        drop(s);
        assert!(!p.exists());
        assert_eq!(fs::read_dir(t.path()).unwrap().count(), 0);
    }

    #[test]
    fn bad_targets_are_refused() {
        let e = Scratch::create(Some(Path::new("/nonexistent/dir"))).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        let e = Scratch::create(Some(Path::new("/dev/null"))).unwrap_err();
        assert_eq!(e.exit_code(), 2);
    }

    #[test]
    fn stale_dirs_of_dead_processes_are_removed() {
        let t = tempfile::tempdir().unwrap();
        // pid 0x7ffffff0 cannot exist.
        let stale = t.path().join(format!("{PREFIX}2147483632-deadbeef"));
        fs::create_dir(&stale).unwrap();
        fs::write(stale.join(MARKER), "2147483632\n").unwrap();
        let keep = t.path().join(format!("{PREFIX}2147483632-notours"));
        fs::create_dir(&keep).unwrap();
        let s = Scratch::create(Some(t.path())).unwrap();
        assert!(!stale.exists());
        assert!(
            keep.exists(),
            "without our marker a directory is never touched"
        );
        drop(s);
    }

    #[test]
    fn fitted_sizes_fit_small_partitions() {
        // 20 MiB free: fit_disk gives at most 10 MiB, which must be accepted.
        let free = 20 << 20;
        assert!(space_needed(10 << 20, free) <= free);
        assert!(space_needed(19 << 20, free) > free);
        // A large file system keeps the full 16 MiB.
        assert_eq!(space_needed(0, 1 << 40), 16 << 20);
    }

    #[test]
    fn ensure_space_refuses_absurd_sizes() {
        let s = Scratch::create(None).unwrap();
        let e = s.ensure_space(u64::MAX / 4).unwrap_err();
        assert_eq!(e.exit_code(), 4);
        assert!(e.to_string().contains("not enough free space"));
    }
}
