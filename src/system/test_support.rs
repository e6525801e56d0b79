//! Fixture trees for the tests of `system`: files below a temporary root,
//! laid out as /proc and /sys.

use std::fs;
use std::path::Path;

/// Write `text` at `root/rel`, creating its directories.
pub(crate) fn put(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, text).unwrap();
}

/// The process's cgroups (`/proc/self/cgroup`) and the mount table
/// (`/proc/self/mountinfo`) they are found through.
pub(crate) fn cgroup(root: &Path, self_cgroup: &str, mountinfo: &str) {
    put(root, "proc/self/cgroup", self_cgroup);
    put(root, "proc/self/mountinfo", mountinfo);
}
