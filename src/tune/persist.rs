//! Where Linux keeps a setting across boots, and the files `tunelab apply`
//! writes there: sysctl.d drop-ins, udev rules for block-queue attributes.
//! Every path goes through a [`Root`], so the whole of apply/verify/unapply
//! runs on a fake tree (`--root DIR`) in tests.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::{Error, Result};

/// The first line of every file tunelab writes: how ownership is told.
pub const HEADER: &str = "# Written by tunelab apply";

/// A prefix for /etc, /proc/sys, /sys and /run ("/" on a real system).
#[derive(Debug, Clone, PartialEq)]
pub struct Root(PathBuf);

impl Root {
    pub fn new(dir: Option<&Path>) -> Root {
        Root(dir.map_or_else(|| PathBuf::from("/"), Path::to_path_buf))
    }

    /// True for the real system root (privileges and live mounts matter).
    pub(crate) fn is_real(&self) -> bool {
        self.0 == Path::new("/")
    }

    /// `abs` (an absolute path like /etc/sysctl.d) under this root.
    pub(crate) fn at(&self, abs: &str) -> PathBuf {
        self.0.join(abs.trim_start_matches('/'))
    }

    pub(crate) fn display(&self) -> String {
        self.0.display().to_string()
    }
}

/// `/proc/sys/vm/dirty_ratio` for `vm.dirty_ratio`.
pub(crate) fn sysctl_path(root: &Root, key: &str) -> PathBuf {
    root.at(&crate::system::proc::sysctl_name(key))
}

/// The drop-in that keeps `key`: sorted before the usual 99-*.conf, so a
/// user's own file still wins (and `verify` says so).
pub(crate) fn sysctl_dropin(root: &Root, key: &str) -> PathBuf {
    root.at(&format!("/etc/sysctl.d/90-tunelab-{key}.conf"))
}

pub(crate) fn udev_rule(root: &Root, disk: &str, attr: &str) -> PathBuf {
    root.at(&format!("/etc/udev/rules.d/90-tunelab-{disk}-{attr}.rules"))
}

/// The header lines of a file tunelab writes (each line a `#` comment).
pub(crate) fn header(lines: &[String]) -> String {
    let mut s = format!("{HEADER} — 'tunelab unapply' removes it; do not edit.\n");
    for l in lines {
        for part in l.lines() {
            s.push_str(&format!("# {part}\n"));
        }
    }
    s
}

/// Whether `text` is a file tunelab wrote (its first line is the header).
pub(crate) fn is_ours(text: &str) -> bool {
    text.starts_with(HEADER)
}

/// Create `path` with `content`, never replacing an existing file: written
/// to a temporary name, fsynced, then hard-linked into place (link(2) fails
/// on an existing name, atomically), then the directory is fsynced.
pub(crate) fn create_new(path: &Path, content: &str) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("/"));
    fs::create_dir_all(dir).map_err(|e| Error::io("cannot create", dir, e))?;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    let tmp = dir.join(format!(
        ".{}.tunelab-{}",
        name.unwrap_or_default(),
        std::process::id()
    ));
    let write = || -> std::io::Result<()> {
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        f.write_all(content.as_bytes())?;
        f.sync_all()?;
        fs::hard_link(&tmp, path)
    };
    let r = write();
    let _ = fs::remove_file(&tmp);
    match r {
        Ok(()) => {
            let _ = fs::File::open(dir).and_then(|d| d.sync_all());
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            Err(Error::environment(format!(
                "{} already exists and tunelab will not overwrite it",
                path.display()
            )))
        }
        Err(e) => Err(Error::io("cannot write", path, e)),
    }
}

/// Remove a file tunelab wrote; anything else is refused.
/// Never through a symbolic link (crate::safety::nofollow).
pub(crate) fn remove_ours(path: &Path) -> Result<()> {
    use crate::safety::nofollow;
    match nofollow::read(path) {
        Ok(None) => Ok(()),
        Err(e) => Err(Error::io("cannot read", path, e)),
        Ok(Some(t)) if !is_ours(&t) => Err(Error::environment(format!(
            "{} was not written by tunelab (no '{HEADER}' header): left alone",
            path.display()
        ))),
        Ok(Some(_)) => nofollow::remove(path).map_err(|e| Error::io("cannot remove", path, e)),
    }
}

/// The sysctl configuration files in the order `sysctl --system` (procps)
/// and systemd-sysctl read them: *.conf of the drop-in directories sorted by
/// file name (a name in an earlier directory hides the same name in a later
/// one), then /etc/sysctl.conf. Later assignments win.
pub(crate) fn sysctl_files(root: &Root) -> Vec<PathBuf> {
    const DIRS: &[&str] = &[
        "/etc/sysctl.d",
        "/run/sysctl.d",
        "/usr/local/lib/sysctl.d",
        "/usr/lib/sysctl.d",
        "/lib/sysctl.d",
    ];
    let mut by_name: std::collections::BTreeMap<String, PathBuf> = Default::default();
    for d in DIRS {
        let Ok(rd) = fs::read_dir(root.at(d)) else {
            continue;
        };
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.ends_with(".conf") && !name.starts_with('.') {
                by_name.entry(name).or_insert_with(|| e.path());
            }
        }
    }
    let mut files: Vec<PathBuf> = by_name.into_values().collect();
    let conf = root.at("/etc/sysctl.conf");
    if conf.is_file() {
        files.push(conf);
    }
    files
}

/// `key = value` assignments of one sysctl file (keys with '/' normalised
/// to '.', a leading '-' ignore-errors marker dropped).
pub(crate) fn sysctl_assignments(text: &str) -> Vec<(String, String)> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with(';'))
        .filter_map(|l| {
            let (k, v) = l.split_once('=')?;
            let k = k.trim().trim_start_matches('-').replace('/', ".");
            Some((k, v.trim().to_string()))
        })
        .collect()
}

/// Every file that sets `key`, in load order, with its value.
pub(crate) fn sysctl_setters(root: &Root, key: &str) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    for f in sysctl_files(root) {
        let Ok(text) = fs::read_to_string(&f) else {
            continue;
        };
        for (k, v) in sysctl_assignments(&text) {
            if k == key {
                out.push((f.clone(), v));
            }
        }
    }
    out
}

/// Load every sysctl file as `sysctl --system` does at boot, writing the
/// values below `root`'s /proc/sys. Returns the (key, value) pairs written.
/// Used to check a drop-in really brings a value back (tests simulate a
/// reboot on a fake tree with it); keys missing under /proc/sys are skipped
/// as the real loader does with '-' keys.
pub fn load_sysctl_files(root: &Root) -> Result<Vec<(String, String)>> {
    let mut done = Vec::new();
    for f in sysctl_files(root) {
        let text = fs::read_to_string(&f).map_err(|e| Error::io("cannot read", &f, e))?;
        for (k, v) in sysctl_assignments(&text) {
            let p = sysctl_path(root, &k);
            if !p.exists() {
                continue;
            }
            fs::write(&p, &v).map_err(|e| Error::io("cannot write", &p, e))?;
            done.push((k, v));
        }
    }
    Ok(done)
}

/// A udev match on something stable about `disk`, with what it is: the
/// serial or WWN udev recorded for it, the backing file of a loop device,
/// else the kernel name (which may change between boots: said so).
pub(crate) fn udev_match(root: &Root, disk: &str) -> (String, String) {
    let sys = root.at(&format!("/sys/block/{disk}"));
    let devnum = fs::read_to_string(sys.join("dev")).unwrap_or_default();
    let data = fs::read_to_string(root.at(&format!("/run/udev/data/b{}", devnum.trim())))
        .unwrap_or_default();
    for key in ["ID_WWN", "ID_SERIAL"] {
        let v = data
            .lines()
            .find_map(|l| l.strip_prefix(&format!("E:{key}=")));
        if let Some(v) = v.filter(|v| !v.is_empty()) {
            return (
                format!("ENV{{{key}}}==\"{v}\""),
                format!("{key} {v} (udev's record of the disk)"),
            );
        }
    }
    if let Ok(b) = fs::read_to_string(sys.join("loop/backing_file")) {
        let b = b.trim();
        return (
            format!("ATTR{{loop/backing_file}}==\"{b}\""),
            format!("the loop device's backing file {b}"),
        );
    }
    (
        format!("KERNEL==\"{disk}\""),
        format!(
            "the kernel name {disk} (no serial or WWN found: the name may change between boots)"
        ),
    )
}

/// What a boot would set `key` to, and from which file (the last
/// assignment in load order), if any file sets it.
#[cfg(test)]
pub(crate) fn boot_value(root: &Root, key: &str) -> Option<(String, PathBuf)> {
    let mut found = None;
    for f in sysctl_files(root) {
        let Ok(text) = fs::read_to_string(&f) else {
            continue;
        };
        for (k, v) in sysctl_assignments(&text) {
            if k == key {
                found = Some((v, f.clone()));
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boot_order_lets_a_later_file_win_and_etc_hide_usr_lib() {
        let d = tempfile::tempdir().unwrap();
        let root = Root::new(Some(d.path()));
        let put = |p: &str, t: &str| {
            let p = root.at(p);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, t).unwrap();
        };
        put("/usr/lib/sysctl.d/50-default.conf", "vm.dirty_ratio = 20\n");
        put("/usr/lib/sysctl.d/99-x.conf", "vm/dirty_ratio=33\n");
        put("/etc/sysctl.d/99-x.conf", "# mine\n-vm.dirty_ratio = 7\n");
        put(
            "/etc/sysctl.d/90-tunelab-vm.dirty_ratio.conf",
            "vm.dirty_ratio = 5\n",
        );
        let (v, f) = boot_value(&root, "vm.dirty_ratio").unwrap();
        assert_eq!(v, "7");
        assert!(f.ends_with("etc/sysctl.d/99-x.conf"), "{f:?}");
        let setters = sysctl_setters(&root, "vm.dirty_ratio");
        let vals: Vec<&str> = setters.iter().map(|s| s.1.as_str()).collect();
        assert_eq!(vals, ["20", "5", "7"]);
    }

    #[test]
    fn create_new_never_replaces_and_remove_ours_spares_other_files() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("a/90-tunelab-x.conf");
        create_new(&p, &format!("{HEADER}\nx = 1\n")).unwrap();
        let e = create_new(&p, "other").unwrap_err();
        assert_eq!(e.exit_code(), 4, "{e}");
        assert!(fs::read_to_string(&p).unwrap().contains("x = 1"));
        let user = d.path().join("a/user.conf");
        fs::write(&user, "x = 2\n").unwrap();
        assert!(remove_ours(&user).is_err());
        assert!(user.exists());
        remove_ours(&p).unwrap();
        assert!(!p.exists());
        // No temporary file is left behind.
        let left: Vec<_> = fs::read_dir(d.path().join("a")).unwrap().collect();
        assert_eq!(left.len(), 1);
    }
}
