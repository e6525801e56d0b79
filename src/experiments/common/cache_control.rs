//! Controlling the page cache for storage experiments: drop a file's cached
//! pages before a cold read, and open files with the flags of a mode
//! (buffered, O_DIRECT, O_SYNC).
//!
//! Root drops the whole page cache (`sync` then `1` written to
//! `/proc/sys/vm/drop_caches`: page cache only, dentries and inodes kept).
//! Without root, or when that write fails, the file is `fdatasync`ed and its
//! pages dropped with `posix_fadvise(POSIX_FADV_DONTNEED)`, which only
//! affects clean pages of that one file. Every caller gets a note saying
//! which method was used, for the result's notes.

use rustix::fs::OFlags;
use rustix::io::Errno;
use std::fs::File;
use std::path::Path;

use crate::{Error, Result};

/// How the cache of a file was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DropMethod {
    /// `sync` + `echo 1 > /proc/sys/vm/drop_caches` (root).
    DropCaches,
    /// `fdatasync` + `posix_fadvise(DONTNEED)` on the file.
    Fadvise,
}

impl DropMethod {
    pub(crate) fn note(self) -> &'static str {
        match self {
            DropMethod::DropCaches => {
                "page cache dropped before each cold read: sync + echo 1 > /proc/sys/vm/drop_caches (root)"
            }
            DropMethod::Fadvise => {
                "page cache dropped before each cold read with fdatasync + posix_fadvise(DONTNEED) on \
                 the file (not root, or drop_caches unavailable): only that file's clean pages are evicted"
            }
        }
    }
}

/// Drop the cached pages of `file` (at `path`) so the next read comes from
/// the device: the whole page cache when `all` (root), counting a failure
/// in `failed` for the validity guard. Not timed by callers.
pub(crate) fn drop_file_cache(
    file: &File,
    path: &Path,
    all: bool,
    failed: &std::sync::atomic::AtomicU64,
) -> Result<DropMethod> {
    file.sync_data()
        .map_err(|e| Error::io("cannot fdatasync", path, e))?;
    if all {
        if drop_all_caches().is_ok() {
            // drop_caches skips pages still mapped or locked; fadvise as well
            // costs nothing and covers a file that is still open by us.
            fadvise_dontneed(file, path)?;
            return Ok(DropMethod::DropCaches);
        }
        // Root asked for the whole cache to go and it did not: the validity
        // guard flags the trial (only this file's pages are evicted below).
        failed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    fadvise_dontneed(file, path)?;
    Ok(DropMethod::Fadvise)
}

/// `sync` then write `1` (page cache only) to `/proc/sys/vm/drop_caches`.
pub(crate) fn drop_all_caches() -> std::io::Result<()> {
    rustix::fs::sync();
    crate::system::proc::write_sysctl("vm.drop_caches", "1")
}

/// `posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED)`.
pub(crate) fn fadvise_dontneed(file: &File, path: &Path) -> Result<()> {
    rustix::fs::fadvise(file, 0, None, rustix::fs::Advice::DontNeed)
        .map_err(|e| Error::io("cannot posix_fadvise(DONTNEED)", path, e.into()))
}

/// How an experiment opens its data file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IoMode {
    /// Through the page cache.
    Buffered,
    /// O_DIRECT: bypasses the page cache (aligned buffers, block-multiple sizes).
    Direct,
    /// O_SYNC: every write() returns once data and metadata are on stable storage.
    Sync,
}

impl IoMode {
    pub(crate) const CHOICES: &'static [&'static str] = &["buffered", "direct", "sync"];

    pub(crate) fn parse(s: &str) -> Result<IoMode> {
        match s {
            "buffered" => Ok(IoMode::Buffered),
            "direct" => Ok(IoMode::Direct),
            "sync" => Ok(IoMode::Sync),
            other => Err(Error::usage(format!(
                "unknown mode '{other}' (expected buffered, direct or sync)"
            ))),
        }
    }

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            IoMode::Buffered => "buffered",
            IoMode::Direct => "direct",
            IoMode::Sync => "sync",
        }
    }

    /// Extra open flags for writing.
    pub(crate) fn write_flags(self) -> i32 {
        match self {
            IoMode::Buffered => 0,
            IoMode::Direct => OFlags::DIRECT.bits() as i32,
            IoMode::Sync => OFlags::SYNC.bits() as i32,
        }
    }

    /// Extra open flags for reading (O_SYNC has no effect on reads).
    pub(crate) fn read_flags(self) -> i32 {
        match self {
            IoMode::Direct => OFlags::DIRECT.bits() as i32,
            _ => 0,
        }
    }
}

/// Logical block size of the device behind `path` (O_DIRECT granularity),
/// from sysfs; 512 when unknown.
pub(crate) fn logical_block_size(path: &Path) -> u64 {
    crate::system::device_for_path(path)
        .and_then(|d| crate::system::device::queue_setting(&d.disk, "logical_block_size"))
        .and_then(|s| s.parse().ok())
        .unwrap_or(512)
}

/// Open an existing scratch file with extra flags (never creates).
pub(crate) fn open_with(path: &Path, write: bool, flags: i32) -> Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(!write)
        .write(write)
        .custom_flags(flags)
        .open(path)
        .map_err(|e| {
            if Errno::from_io_error(&e) == Some(Errno::INVAL)
                && flags & OFlags::DIRECT.bits() as i32 != 0
            {
                Error::environment(format!(
                    "cannot open {} with O_DIRECT: the file system does not support direct I/O \
                     (tmpfs?); choose another --target or mode=buffered",
                    path.display()
                ))
            } else {
                Error::io("cannot open", path, e)
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_round_trip() {
        for m in IoMode::CHOICES {
            assert_eq!(IoMode::parse(m).unwrap().as_str(), *m);
        }
        assert!(IoMode::parse("x").is_err());
        assert_eq!(IoMode::Sync.read_flags(), 0);
    }

    #[test]
    fn fadvise_works_without_root() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, vec![1u8; 8192]).unwrap();
        let f = File::open(&p).unwrap();
        let m = drop_file_cache(&f, &p, false, &Default::default()).unwrap();
        assert_eq!(m, DropMethod::Fadvise);
    }
}
