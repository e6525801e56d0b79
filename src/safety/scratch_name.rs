//! How tunelab names and marks its scratch directories, and removing one
//! of a dead process (shared by the scratch directory itself and the
//! journal, which removes those a SIGKILLed run left).

use std::fs;
use std::path::Path;

pub(crate) const PREFIX: &str = ".tunelab-scratch-";
/// A file inside, holding the owner's pid.
pub(crate) const MARKER: &str = ".tunelab-owner";

/// Whether `name` is the name of a scratch directory of process `pid`
/// (`.tunelab-scratch-PID-XXXXXXXX`, eight hex digits).
pub(crate) fn is_scratch_name(name: &str, pid: u32) -> bool {
    name.strip_prefix(&format!("{PREFIX}{pid}-"))
        .is_some_and(|h| h.len() == 8 && h.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// Remove a scratch directory of process `pid` (known to be gone): only
/// when it is named for that process and its marker names it too, or it is
/// empty (killed between mkdir and writing the marker). Never follows a
/// symbolic link.
pub(crate) fn remove_owned(dir: &Path, pid: u32) -> bool {
    let named = dir
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| is_scratch_name(n, pid));
    if !named || !fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir()) {
        return false;
    }
    let owner = fs::read_to_string(dir.join(MARKER))
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok());
    if owner == Some(pid) {
        return fs::remove_dir_all(dir).is_ok();
    }
    fs::remove_dir(dir).is_ok()
}
