//! Resolve the block device behind a path and read its queue settings.
//!
//! Everything here is read-only: we look at `stat(2)`, `/sys/dev/block` and
//! `/sys/block/<disk>/queue`, never at the device node itself.

use serde::{Deserialize, Serialize};
use std::fs;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

/// A block device and the whole disk it belongs to.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BlockDevice {
    /// Kernel name of the device holding the filesystem, e.g. "vda1", "vda", "loop3".
    pub(crate) name: String,
    /// Whole disk, e.g. "vda" (equal to `name` when the filesystem is on the whole disk).
    /// Queue settings (`/sys/block/<disk>/queue`) live here, not on the partition.
    pub(crate) disk: String,
    pub(crate) major: u32,
    pub(crate) minor: u32,
}

/// The block device holding the filesystem that contains `path`, or `None`
/// for filesystems without one (tmpfs, proc, overlay, NFS, ...).
pub(crate) fn device_for_path(path: &Path) -> Option<BlockDevice> {
    let st = rustix::fs::stat(path).ok()?;
    let (major, minor) = (rustix::fs::major(st.st_dev), rustix::fs::minor(st.st_dev));
    if let Some(dev) = resolve_majmin(major, minor) {
        return Some(dev);
    }
    // btrfs (and some others) report an anonymous st_dev (major 0) that is not
    // a block device; the mount source still names the real device.
    let mount = crate::system::mounts::mount_for_path(path)?;
    if !mount.source.starts_with("/dev/") {
        return None;
    }
    if !is_block_device(Path::new(&mount.source)) {
        return None;
    }
    let src = rustix::fs::stat(mount.source.as_str()).ok()?;
    resolve_majmin(
        rustix::fs::major(src.st_rdev),
        rustix::fs::minor(src.st_rdev),
    )
}

/// Map a device number to its sysfs names via `/sys/dev/block/MAJ:MIN`.
fn resolve_majmin(major: u32, minor: u32) -> Option<BlockDevice> {
    let link = PathBuf::from(format!("/sys/dev/block/{major}:{minor}"));
    let target = fs::read_link(&link).ok()?;
    let name = target.file_name()?.to_string_lossy().into_owned();
    // A partition's sysfs directory sits inside its disk's directory and has
    // a `partition` attribute; a whole disk has none.
    let disk = if link.join("partition").exists() {
        target.parent()?.file_name()?.to_string_lossy().into_owned()
    } else {
        name.clone()
    };
    Some(BlockDevice {
        name,
        disk,
        major,
        minor,
    })
}

/// Read `/sys/block/<disk>/queue/<file>`, trimmed. For multiple-choice files
/// such as `scheduler` the active (bracketed) choice is returned.
pub(crate) fn queue_setting(disk: &str, file: &str) -> Option<String> {
    if disk.is_empty() || disk.contains('/') || file.contains('/') {
        return None;
    }
    let raw = fs::read_to_string(format!("/sys/block/{disk}/queue/{file}")).ok()?;
    if raw.contains('[') {
        active_choice(&raw)
    } else {
        let v = raw.trim();
        (!v.is_empty()).then(|| v.to_string())
    }
}

/// The bracketed entry of a sysfs choice list: "none [mq-deadline] kyber" -> "mq-deadline".
/// A list with a single unbracketed word (some kernels print just "none") yields that word.
pub(crate) fn active_choice(s: &str) -> Option<String> {
    if let Some(open) = s.find('[') {
        let rest = &s[open + 1..];
        let close = rest.find(']')?;
        let v = rest[..close].trim();
        return (!v.is_empty()).then(|| v.to_string());
    }
    let mut words = s.split_whitespace();
    match (words.next(), words.next()) {
        (Some(w), None) => Some(w.to_string()),
        _ => None,
    }
}

/// True if `path` (after following symlinks) is a block device node.
pub(crate) fn is_block_device(path: &Path) -> bool {
    fs::metadata(path)
        .map(|m| m.file_type().is_block_device())
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bracket_parsing() {
        assert_eq!(
            active_choice("none [mq-deadline] kyber bfq \n").as_deref(),
            Some("mq-deadline")
        );
        assert_eq!(active_choice("[none] mq-deadline").as_deref(), Some("none"));
        assert_eq!(active_choice("none\n").as_deref(), Some("none"));
        assert_eq!(active_choice("always madvise never"), None);
        assert_eq!(active_choice("[]"), None);
        assert_eq!(active_choice(""), None);
    }

    #[test]
    fn root_has_a_block_device() {
        // The test VM has ext4 on a virtio disk; on machines where / is
        // overlay or tmpfs there is legitimately no device.
        let fs_type = crate::system::mounts::mount_for_path(Path::new("/")).map(|m| m.fs_type);
        let dev = device_for_path(Path::new("/"));
        if matches!(fs_type.as_deref(), Some("ext4" | "xfs" | "ext3" | "ext2")) {
            let dev = dev.expect("block-backed root must resolve");
            assert!(!dev.name.is_empty());
            assert!(Path::new(&format!("/sys/block/{}", dev.disk)).exists());
            assert!(dev.name.starts_with(&dev.disk) || dev.name.starts_with("dm-"));
            assert!(queue_setting(&dev.disk, "logical_block_size").is_some());
        }
    }

    #[test]
    fn proc_has_no_device() {
        assert_eq!(device_for_path(Path::new("/proc")), None);
        assert_eq!(device_for_path(Path::new("/nonexistent/path/xyz")), None);
    }

    #[test]
    fn block_device_check() {
        assert!(!is_block_device(Path::new("/proc/self/stat")));
        assert!(!is_block_device(Path::new("/nonexistent")));
        if let Some(dev) = device_for_path(Path::new("/")) {
            let node = PathBuf::from(format!("/dev/{}", dev.name));
            if node.exists() {
                assert!(is_block_device(&node));
            }
        }
    }

    #[test]
    fn queue_setting_rejects_path_tricks() {
        assert_eq!(queue_setting("../..", "scheduler"), None);
        assert_eq!(queue_setting("vda", "../size"), None);
        assert_eq!(queue_setting("no-such-disk", "scheduler"), None);
    }
}
