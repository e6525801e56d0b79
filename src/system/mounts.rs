//! Which mount a path is on, from /proc/self/mountinfo. A bottom file of
//! `system`: the environment snapshot and the block-device lookup both ask it,
//! and it asks neither.

use serde::{Deserialize, Serialize};
use std::fs;
use std::path::{Path, PathBuf};

/// The mount that contains a path.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub(crate) struct MountFact {
    pub(crate) mount_point: PathBuf,
    pub(crate) fs_type: String,
    /// Mount source, e.g. "/dev/vda1", "tmpfs", "overlay".
    pub(crate) source: String,
    /// Per-mount options (sorted) followed by superblock options (sorted) not
    /// already listed. procfs hands them to us as hash maps, so the kernel's
    /// order is lost; sorting keeps snapshots of two runs comparable.
    pub(crate) options: Vec<String>,
}

/// The mount containing `path`: the longest mount point that is a
/// (component-wise) prefix of the canonical path. When mounts are stacked on
/// the same point the last one in mountinfo is the visible one.
pub(crate) fn mount_for_path(path: &Path) -> Option<MountFact> {
    let canon = fs::canonicalize(path).ok()?;
    let infos = super::proc::process::Process::myself()
        .ok()?
        .mountinfo()
        .ok()?;
    let mut best: Option<(usize, MountFact)> = None;
    for mi in infos.0 {
        // procfs does not undo the kernel's octal escaping (\040 for space).
        let mp = PathBuf::from(unescape_mount(&mi.mount_point.to_string_lossy()));
        if !canon.starts_with(&mp) {
            continue;
        }
        let depth = mp.components().count();
        if best.as_ref().is_some_and(|(d, _)| depth < *d) {
            continue;
        }
        let options = merge_options(&mi.mount_options, &mi.super_options);
        let fact = MountFact {
            mount_point: mp,
            fs_type: mi.fs_type,
            source: mi
                .mount_source
                .map(|s| unescape_mount(&s))
                .unwrap_or_default(),
            options,
        };
        best = Some((depth, fact));
    }
    best.map(|(_, f)| f)
}

type OptMap = std::collections::HashMap<String, Option<String>>;

fn merge_options(mount: &OptMap, sup: &OptMap) -> Vec<String> {
    let fmt = |(k, v): (&String, &Option<String>)| match v {
        Some(v) => format!("{k}={v}"),
        None => k.clone(),
    };
    let mut first: Vec<String> = mount.iter().map(fmt).collect();
    first.sort();
    let mut second: Vec<String> = sup.iter().map(fmt).filter(|o| !first.contains(o)).collect();
    second.sort();
    first.extend(second);
    first
}

/// Undo the octal escapes the kernel uses in mountinfo (`\040` space, `\011` tab,
/// `\012` newline, `\134` backslash).
pub(crate) fn unescape_mount(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = (b[i + 1] - b'0') as u32 * 64
                + (b[i + 2] - b'0') as u32 * 8
                + (b[i + 3] - b'0') as u32;
            if v <= 255 {
                out.push(v as u8);
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unescaping() {
        assert_eq!(unescape_mount(r"/mnt/my\040disk"), "/mnt/my disk");
        assert_eq!(unescape_mount(r"/a\134b"), r"/a\b");
        assert_eq!(unescape_mount(r"/plain"), "/plain");
        assert_eq!(unescape_mount(r"/trail\04"), r"/trail\04");
    }

    #[test]
    fn option_merge_is_sorted_and_deduplicated() {
        let mut m = OptMap::new();
        m.insert("rw".into(), None);
        m.insert("relatime".into(), None);
        let mut s = OptMap::new();
        s.insert("rw".into(), None);
        s.insert("discard".into(), None);
        s.insert("resuid".into(), Some("65534".into()));
        assert_eq!(
            merge_options(&m, &s),
            vec!["relatime", "rw", "discard", "resuid=65534"]
        );
    }

    #[test]
    fn mounts() {
        let root = mount_for_path(Path::new("/")).expect("/ is mounted");
        assert_eq!(root.mount_point, PathBuf::from("/"));
        let proc_ = mount_for_path(Path::new("/proc/self")).expect("/proc is mounted");
        assert_eq!(proc_.mount_point, PathBuf::from("/proc"));
        assert_eq!(proc_.fs_type, "proc");
        assert!(mount_for_path(Path::new("/no/such/path")).is_none());
    }
}
