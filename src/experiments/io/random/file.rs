//! io.random's scratch file: one per run, shared by its points (laid out
//! once, the largest size asked), opened direct when the file system allows.

use super::*;
use rustix::fs::OFlags;
use rustix::io::Errno;

/// The file the points of a run share (laying out a board-sized file per
/// point would dominate the run): its path and size, held by the run's
/// experiment value (`registry::find` makes one per run). Removed with the
/// scratch directory.
#[derive(Default)]
pub(super) struct SharedFile(Mutex<Option<(PathBuf, u64)>>);

impl SharedFile {
    /// Bytes of the run's shared file when it is in `dir`.
    pub(super) fn bytes_in(&self, dir: &Path) -> u64 {
        let shared = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match shared.as_ref() {
            Some((path, _)) if path.parent() == Some(dir) => {
                std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
            }
            _ => 0,
        }
    }

    /// The run's shared file of `size` bytes, laid out on first use.
    pub(super) fn get(&self, ctx: &Ctx, size: u64) -> Result<PathBuf> {
        let scratch = ctx.scratch()?;
        let mut shared = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((path, s)) = shared.as_ref() {
            let here = path.parent() == Some(scratch.path());
            let ok = std::fs::metadata(path).is_ok_and(|m| m.len() == size);
            if here && ok && *s == size {
                return Ok(path.clone());
            }
            if here {
                let _ = std::fs::remove_file(path);
            }
        }
        *shared = None;
        scratch.ensure_space(size)?;
        let name = format!("random-{size}-{:08x}", rand::random::<u32>());
        let path = scratch.file_path(&name);
        let mut f = scratch.create_file(&name, 0)?;
        let laid = fill_file(&mut f, &path, size, 0x7a).and_then(|()| {
            f.sync_all()
                .map_err(|e| Error::io("cannot fsync", &path, e))
        });
        if let Err(e) = laid {
            drop(f);
            let _ = std::fs::remove_file(&path);
            return Err(e);
        }
        // The layout must not leave the file in the page cache.
        let _ = fadvise_dontneed(&f, &path);
        *shared = Some((path.clone(), size));
        Ok(path)
    }
}

/// Open for reading and writing, O_DIRECT when asked and supported. The
/// note says when direct I/O fell back to buffered (ramfs, vfat on old
/// kernels, UBIFS, tmpfs before 6.6) or when the file is in memory anyway.
pub(super) fn open(path: &Path, direct: bool) -> Result<(File, bool, Vec<String>)> {
    let o = |flags| {
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(flags)
            .open(path)
    };
    let fs = crate::system::mount_for_path(path).map(|m| m.fs_type);
    let mut notes = Vec::new();
    if matches!(fs.as_deref(), Some("tmpfs") | Some("ramfs")) {
        notes.push(format!(
            "the target is {}: the file lives in memory, so no storage device is measured",
            fs.as_deref().unwrap_or("?")
        ));
    }
    if direct {
        match o(OFlags::DIRECT.bits() as i32) {
            Ok(f) => return Ok((f, true, notes)),
            Err(e) if Errno::from_io_error(&e) == Some(Errno::INVAL) => {
                let f = o(0).map_err(|e| Error::io("cannot open", path, e))?;
                notes.push(format!(
                    "mode=direct fell back to BUFFERED: {} does not support O_DIRECT; these \
                     figures include the page cache",
                    fs.as_deref().unwrap_or("this file system")
                ));
                return Ok((f, false, notes));
            }
            Err(e) => return Err(Error::io("cannot open", path, e)),
        }
    }
    Ok((
        o(0).map_err(|e| Error::io("cannot open", path, e))?,
        false,
        notes,
    ))
}
