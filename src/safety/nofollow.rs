//! Paths named by tunelab's state (the journal, applied records) are opened
//! without following symbolic links: each component is opened relative to
//! the one before with O_NOFOLLOW (openat2's RESOLVE_NO_SYMLINKS is not on
//! every board's kernel, this walk is), so a link planted in a writable
//! directory cannot send a root write elsewhere. Kernel settings are the
//! exception: sysfs is full of the kernel's own links, so a setting is
//! written only when the opened file is on procfs or sysfs.

use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Component, Path};

use rustix::fs::{self as rfs, Mode, OFlags};

/// The parent directory of `p` opened through a walk that refuses every
/// symbolic link, with `p`'s last component. `p` must be absolute and plain.
pub(crate) fn parent(p: &Path) -> std::io::Result<(OwnedFd, String)> {
    let bad = || {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a plain absolute path",
        )
    };
    if !p.is_absolute() {
        return Err(bad());
    }
    let mut names = Vec::new();
    for c in p.components() {
        match c {
            Component::RootDir => {}
            Component::Normal(n) => names.push(n.to_str().ok_or_else(bad)?.to_string()),
            _ => return Err(bad()),
        }
    }
    let last = names.pop().ok_or_else(bad)?;
    let dir_flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut cur = rfs::open("/", dir_flags, Mode::empty())?;
    for n in &names {
        cur = rfs::openat(&cur, n.as_str(), dir_flags, Mode::empty()).map_err(|e| {
            if e == rustix::io::Errno::LOOP || e == rustix::io::Errno::NOTDIR {
                std::io::Error::other(format!("{n} is a symbolic link or not a directory"))
            } else {
                e.into()
            }
        })?;
    }
    Ok((cur, last))
}

/// Whether any existing component of `p` is a symbolic link (a missing
/// tail is fine: nothing there to follow yet).
pub(crate) fn has_link(p: &Path) -> bool {
    match parent(p) {
        Ok((dir, last)) => rfs::statat(&dir, last.as_str(), rfs::AtFlags::SYMLINK_NOFOLLOW)
            .is_ok_and(|st| rfs::FileType::from_raw_mode(st.st_mode) == rfs::FileType::Symlink),
        Err(e) => e.kind() != std::io::ErrorKind::NotFound,
    }
}

/// The content of the regular file `p`, None when it does not exist.
pub(crate) fn read(p: &Path) -> std::io::Result<Option<String>> {
    let (dir, last) = match parent(p) {
        Ok(x) => x,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    match rfs::openat(
        &dir,
        last.as_str(),
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => {
            let mut s = String::new();
            std::fs::File::from(fd).read_to_string(&mut s)?;
            Ok(Some(s))
        }
        Err(rustix::io::Errno::NOENT) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Replace (or create) `p` with `text`: a new temporary file in the same
/// directory (O_EXCL), fsynced, renamed over `p`, the directory fsynced.
pub(crate) fn replace(p: &Path, text: &str) -> std::io::Result<()> {
    let (dir, last) = parent(p)?;
    let tmp = format!(".{last}.tunelab-restore-{}", std::process::id());
    let _ = rfs::unlinkat(&dir, tmp.as_str(), rfs::AtFlags::empty());
    let fd = rfs::openat(
        &dir,
        tmp.as_str(),
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o644),
    )?;
    let mut f = std::fs::File::from(fd);
    let done = f
        .write_all(text.as_bytes())
        .and_then(|_| f.sync_all())
        .and_then(|_| rfs::renameat(&dir, tmp.as_str(), &dir, last.as_str()).map_err(Into::into));
    if done.is_err() {
        let _ = rfs::unlinkat(&dir, tmp.as_str(), rfs::AtFlags::empty());
    }
    done?;
    sync_dir(&dir);
    Ok(())
}

/// Remove the file `p` (never a link's target); a missing file is done.
pub(crate) fn remove(p: &Path) -> std::io::Result<()> {
    let (dir, last) = parent(p)?;
    match rfs::unlinkat(&dir, last.as_str(), rfs::AtFlags::empty()) {
        Ok(()) | Err(rustix::io::Errno::NOENT) => {
            sync_dir(&dir);
            Ok(())
        }
        Err(e) => Err(e.into()),
    }
}

fn sync_dir(dir: &OwnedFd) {
    if let Ok(d) = rfs::openat(dir, ".", OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty()) {
        let _ = rfs::fsync(d.as_fd());
    }
}

const PROC_MAGIC: i64 = 0x9fa0;
const SYSFS_MAGIC: i64 = 0x6265_6572;

/// Write a kernel setting: the file opened (last component not followed)
/// must be on procfs or sysfs, so whatever the path says, no ordinary file
/// is written.
pub(crate) fn write_setting(p: &Path, value: &str) -> std::io::Result<()> {
    let fd = rfs::open(
        p,
        OFlags::WRONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    // f_type is i32 on 32-bit boards, i64 elsewhere.
    #[allow(clippy::unnecessary_cast)]
    let magic = rfs::fstatfs(&fd)?.f_type as i64;
    if magic != PROC_MAGIC && magic != SYSFS_MAGIC {
        return Err(std::io::Error::other(format!(
            "{} is not a kernel setting (not on procfs or sysfs): not written",
            p.display()
        )));
    }
    std::fs::File::from(fd).write_all(value.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_are_never_followed() {
        let d = tempfile::tempdir().unwrap();
        let real = d.path().join("real");
        std::fs::create_dir(&real).unwrap();
        let link = d.path().join("tunelab-link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        assert!(has_link(&link.join("90-tunelab-x.conf")));
        assert!(replace(&link.join("f"), "x").is_err());
        assert!(!real.join("f").exists());
        assert!(!has_link(&real.join("f")));
        replace(&real.join("f"), "x").unwrap();
        assert_eq!(read(&real.join("f")).unwrap().as_deref(), Some("x"));
        std::os::unix::fs::symlink("/etc/hostname", real.join("g")).unwrap();
        assert!(read(&real.join("g")).is_err());
        assert!(write_setting(&real.join("f"), "1").is_err());
        remove(&real.join("f")).unwrap();
        assert!(!real.join("f").exists());
    }
}
