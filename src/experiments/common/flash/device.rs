//! `FlashIo` over a file descriptor: a file in the scratch directory, or a
//! block device the user named. O_DIRECT keeps the page cache out of the
//! timing (the card's cache is what is measured); a file system without it
//! falls back to O_DSYNC writes and says so.

use rustix::fs::OFlags;
use rustix::io::Errno;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::FlashIo;
use crate::{Error, Result};

pub(crate) struct FdIo {
    file: File,
    path: PathBuf,
    len: u64,
    origin: Instant,
    /// False when O_DIRECT was refused and writes are O_DSYNC instead.
    pub(crate) direct: bool,
}

/// How a block device may be used: read it, or overwrite it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Access {
    Read,
    Overwrite,
}

impl FdIo {
    /// Open a scratch file the caller created (`len` bytes, already sized).
    pub(crate) fn scratch_file(path: &Path, len: u64) -> Result<FdIo> {
        Self::open(path, len, true, OFlags::DIRECT.bits() as i32)
            .or_else(|_| Self::open(path, len, false, OFlags::DSYNC.bits() as i32))
    }

    /// Open a block device the user named. Overwriting opens it O_EXCL,
    /// which the kernel refuses (EBUSY) while it or a partition of it is
    /// mounted or otherwise held: a mounted device is never written.
    pub(crate) fn block_device(path: &Path, access: Access) -> Result<FdIo> {
        let meta = std::fs::metadata(path).map_err(|e| Error::io("looking at", path, e))?;
        if !meta.file_type().is_block_device() {
            return Err(Error::usage(format!(
                "device={} is not a block device; name one such as /dev/mmcblk0, or leave \
                 device unset to measure through a scratch file",
                path.display()
            )));
        }
        let flags = match access {
            Access::Read => OFlags::DIRECT.bits() as i32,
            Access::Overwrite => OFlags::DIRECT.bits() as i32 | OFlags::EXCL.bits() as i32,
        };
        let mut opts = OpenOptions::new();
        opts.read(true)
            .write(access == Access::Overwrite)
            .custom_flags(flags);
        let file = opts
            .open(path)
            .map_err(|e| match Errno::from_io_error(&e) {
                Some(Errno::BUSY) => Error::usage(format!(
                    "{} is mounted or in use (the kernel refused an exclusive open); unmount it \
                 first: tunelab never writes a device that is in use",
                    path.display()
                )),
                _ => Error::io("opening", path, e),
            })?;
        let len = device_len(&file, path)?;
        Ok(FdIo {
            file,
            path: path.to_path_buf(),
            len,
            origin: Instant::now(),
            direct: true,
        })
    }

    fn open(path: &Path, len: u64, direct: bool, flags: i32) -> Result<FdIo> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(flags)
            .open(path)
            .map_err(|e| Error::io("opening", path, e))?;
        Ok(FdIo {
            file,
            path: path.to_path_buf(),
            len,
            origin: Instant::now(),
            direct,
        })
    }
}

/// A block device's size: seeking to its end works without an ioctl.
fn device_len(file: &File, path: &Path) -> Result<u64> {
    use std::io::{Seek, SeekFrom};
    let mut f = file;
    f.seek(SeekFrom::End(0))
        .map_err(|e| Error::io("finding the size of", path, e))
}

impl FlashIo for FdIo {
    fn len(&self) -> u64 {
        self.len
    }
    fn read_at(&mut self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.file
            .read_exact_at(buf, offset)
            .map_err(|e| Error::io("reading", &self.path, e))
    }
    fn write_at(&mut self, buf: &[u8], offset: u64) -> Result<()> {
        self.file
            .write_all_at(buf, offset)
            .map_err(|e| Error::io("writing", &self.path, e))
    }
    fn flush(&mut self) -> Result<()> {
        self.file
            .sync_data()
            .map_err(|e| Error::io("syncing", &self.path, e))
    }
    fn now(&self) -> f64 {
        self.origin.elapsed().as_secs_f64()
    }
}

/// The parameters every writing flash experiment shares.
pub(crate) const DEVICE: crate::engine::ParamSpec = crate::engine::ParamSpec::new(
    "device",
    crate::engine::ParamKind::Text,
    "none",
    "none = a file in the scratch directory (the default, file-level); a block device \
     such as /dev/mmcblk0 = write it raw, only with overwrite=yes and never when mounted",
);
pub(crate) const OVERWRITE: crate::engine::ParamSpec = crate::engine::ParamSpec::new(
    "overwrite",
    crate::engine::ParamKind::Bool,
    "no",
    "yes = you hand `device` over: its contents are destroyed",
);

/// Where a writing experiment writes: a scratch file of `len` bytes, or the
/// device the user named and handed over. The note says which.
pub(crate) fn for_writes(
    ctx: &crate::engine::Ctx,
    device: &str,
    overwrite: bool,
    len: u64,
) -> Result<(FdIo, String)> {
    if device != "none" {
        if !overwrite {
            return Err(Error::usage(format!(
                "device={device} would be overwritten: add -p overwrite=yes if it holds \
                 nothing you need, or leave device unset to write a scratch file"
            )));
        }
        let io = FdIo::block_device(Path::new(device), Access::Overwrite)?;
        if io.len < len {
            return Err(Error::usage(format!(
                "{device} holds {} bytes, the run needs {len}; lower the sizes",
                io.len
            )));
        }
        let note = format!("raw writes to {device} (handed over with overwrite=yes), O_DIRECT");
        return Ok((io, note));
    }
    let scratch = ctx.scratch()?;
    scratch.ensure_space(len)?;
    let file = scratch.create_file("flash.dat", 0)?;
    let path = scratch.file_path("flash.dat");
    rustix::fs::fallocate(&file, rustix::fs::FallocateFlags::empty(), 0, len)
        .map_err(|e| Error::io("allocating", &path, e.into()))?;
    drop(file);
    let io = FdIo::scratch_file(&path, len)?;
    let how = if io.direct {
        "O_DIRECT"
    } else {
        "O_DSYNC (the file system refused O_DIRECT)"
    };
    let note = format!(
        "file-level: writes to a {len}-byte file in the scratch directory, {how}; the file \
         system's allocation sits between the writes and the card"
    );
    Ok((io, note))
}
