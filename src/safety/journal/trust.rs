//! Whether the state directory and its journal may steer this process: a
//! root tunelab obeys only files root owns, a user's only the user's own,
//! and never one that group or others may write (or swap for a symbolic
//! link). Anything else is refused with how to inspect and remove it.

use std::fs;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::Path;

use crate::{Error, Result};

/// Who must own tunelab's state: the effective uid (root when root).
fn owner() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// Why `p` (lstat'ed, not followed) cannot be trusted, if it cannot;
/// None when it does not exist.
fn distrust(p: &Path, dir: bool) -> Option<String> {
    let m = match fs::symlink_metadata(p) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => return Some(format!("cannot be examined ({e})")),
    };
    let kind_ok = if dir {
        m.file_type().is_dir()
    } else {
        m.file_type().is_file()
    };
    if m.file_type().is_symlink() {
        Some("is a symbolic link".into())
    } else if !kind_ok {
        Some(format!(
            "is not a {}",
            if dir { "directory" } else { "regular file" }
        ))
    } else if m.uid() != owner() {
        Some(format!(
            "is owned by uid {}, not by uid {} who runs tunelab",
            m.uid(),
            owner()
        ))
    } else if m.mode() & 0o022 != 0 {
        Some(format!(
            "is writable by {} (mode {:o})",
            if m.mode() & 0o020 != 0 {
                "its group"
            } else {
                "others"
            },
            m.mode() & 0o7777
        ))
    } else {
        None
    }
}

/// Check the state directory `dir` and the journal files in it before any
/// of them is read or written. An untrusted one is an environment error
/// (exit 4) that names it and says how to look at it and remove it.
pub(super) fn check(dir: &Path) -> Result<()> {
    let mut bad = Vec::new();
    if let Some(why) = distrust(dir, true) {
        bad.push((dir.to_path_buf(), why));
    } else {
        for name in ["journal.json", "journal.lock"] {
            let p = dir.join(name);
            if let Some(why) = distrust(&p, false) {
                bad.push((p, why));
            }
        }
    }
    if bad.is_empty() {
        return Ok(());
    }
    let what: Vec<String> = bad
        .iter()
        .map(|(p, why)| format!("{} {why}", p.display()))
        .collect();
    Err(Error::environment(format!(
        "refused tunelab's state directory: {}. A journal there could make tunelab change \
         settings as this user, so tunelab does not read it and changes nothing. Inspect it \
         (ls -la {d}; cat {d}/journal.json), put back by hand any setting it lists that you \
         know tunelab left changed, then remove it (rm -r {d}) or fix its owner and mode \
         (chown {u} …; chmod go-w …)",
        what.join("; "),
        d = dir.display(),
        u = owner()
    )))
}

/// Create the state directory (mode 0700) when missing, then check it.
pub(super) fn ensure(dir: &Path) -> Result<()> {
    if !dir.exists() {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| Error::io("cannot create the journal directory", dir, e))?;
    }
    check(dir)
}

/// Open a file of the state directory for writing without following a
/// symbolic link in its last component (O_NOFOLLOW), mode 0600 if created.
pub(super) fn open_private(p: &Path, create_new: bool) -> std::io::Result<fs::File> {
    let mut o = fs::OpenOptions::new();
    o.write(true)
        .mode(0o600)
        .custom_flags((rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::CLOEXEC).bits() as i32);
    if create_new {
        o.create_new(true);
    } else {
        o.create(true).truncate(false);
    }
    o.open(p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn group_writable_or_symlinked_state_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let s = d.path().join("state");
        ensure(&s).unwrap();
        fs::write(s.join("journal.json"), "[]").unwrap();
        check(&s).unwrap();
        fs::set_permissions(s.join("journal.json"), fs::Permissions::from_mode(0o666)).unwrap();
        let e = check(&s).unwrap_err().to_string();
        assert!(
            e.contains("writable by its group") && e.contains("rm -r"),
            "{e}"
        );
        fs::remove_file(s.join("journal.json")).unwrap();
        std::os::unix::fs::symlink("/etc/hostname", s.join("journal.json")).unwrap();
        let e = check(&s).unwrap_err().to_string();
        assert!(e.contains("symbolic link"), "{e}");
        let link = d.path().join("link");
        std::os::unix::fs::symlink(&s, &link).unwrap();
        assert!(check(&link).unwrap_err().to_string().contains("symbolic"));
    }
}
