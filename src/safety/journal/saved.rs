//! What a journal entry saves: the kinds of setting tunelab changes
//! ([`Saved`]: files, mount options, lab file systems, scratch directories,
//! cgroups, persistent files) with their original values, and the rules
//! that say which entries tunelab can have written (so a journal edited by
//! hand cannot make `restore` touch anything else).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::safety::sysmount::MountMode;

/// One file-backed setting (a sysctl or a sysfs attribute).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct FileState {
    pub(crate) path: PathBuf,
    pub(crate) original: String,
    /// What we last wrote (as read back); None until the first change.
    pub(crate) applied: Option<String>,
    /// What we are about to write: journalled before the write, so a crash
    /// between the write and the read-back still recognises our value.
    #[serde(default)]
    pub(crate) pending: Option<String>,
}

impl FileState {
    /// Whether `now` is a value tunelab put there (or the original).
    pub(crate) fn is_ours(&self, now: Option<&String>) -> bool {
        now == Some(&self.original) || now == self.applied.as_ref() || now == self.pending.as_ref()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub(crate) enum Saved {
    /// Files that together form one knob (e.g. vm.dirty_ratio and
    /// vm.dirty_bytes, which reset each other).
    Files { files: Vec<FileState> },
    /// Mount options changed by remount.
    Mount {
        mount_point: PathBuf,
        original: Vec<String>,
        applied: Option<Vec<String>>,
    },
    /// A lab file system: a loop device on `image`, mounted on
    /// `mount_point`, inside the scratch directory `scratch`. Journalled
    /// before the loop device is set up; restoring unmounts, detaches and
    /// removes it.
    Lab {
        mount_point: PathBuf,
        image: PathBuf,
        device: Option<PathBuf>,
        scratch: Option<PathBuf>,
    },
    /// A private scratch directory (safety::scratch), journalled before
    /// mkdir; restoring removes it (only when its marker names the owner).
    Scratch { path: PathBuf },
    /// A block I/O throttling cgroup (lab::throttle), journalled before
    /// mkdir; restoring moves what is left in it to its parent and removes it.
    Cgroup { path: PathBuf },
    /// Files tunelab writes to keep a setting across boots (`tunelab apply`
    /// / `unapply`: a sysctl.d drop-in, a udev rule). Journalled before the
    /// first file changes; restoring puts each file back as it was
    /// (`before`: its content, or None when it did not exist) — but only a
    /// file still holding what tunelab wrote (`after`, None: removed).
    Persist { files: Vec<PersistFile> },
}

/// One persistent file in a [`Saved::Persist`] entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct PersistFile {
    pub(crate) path: PathBuf,
    pub(crate) before: Option<String>,
    pub(crate) after: Option<String>,
}

impl Saved {
    /// What this entry changes, to detect two tunelabs on one setting.
    pub(super) fn targets(&self) -> Vec<PathBuf> {
        match self {
            Saved::Files { files } => files.iter().map(|f| f.path.clone()).collect(),
            Saved::Mount { mount_point, .. } | Saved::Lab { mount_point, .. } => {
                vec![mount_point.clone()]
            }
            Saved::Persist { files } => files.iter().map(|f| f.path.clone()).collect(),
            Saved::Scratch { path } | Saved::Cgroup { path } => vec![path.clone()],
        }
    }

    /// Whether the process `pid` (the entry's writer) can have made this
    /// entry: a journal edited by hand, or by someone else, must not make
    /// `restore` write or delete anything tunelab does not own. `Err` says
    /// why not. New kinds add their own rule here.
    pub(crate) fn validate(&self, pid: u32) -> std::result::Result<(), String> {
        match self {
            Saved::Files { files } => {
                if files.is_empty() {
                    return Err("a setting with no files".into());
                }
                files.iter().try_for_each(|f| knob_path_ok(&f.path))
            }
            Saved::Mount { mount_point, .. } => {
                // Restoring only sets atime/sync flags on what is mounted
                // there; the root file system is never remounted from a file.
                plain_absolute(mount_point)?;
                if mount_point == Path::new("/") {
                    return Err("the root file system is not remounted from the journal".into());
                }
                no_link(mount_point)
            }
            Saved::Lab {
                mount_point,
                image,
                device,
                scratch,
            } => {
                plain_absolute(mount_point)?;
                plain_absolute(image)?;
                no_link(image)?;
                no_link(mount_point)?;
                let dir = image.parent().unwrap_or(Path::new("/"));
                if !named_scratch(dir, pid) {
                    return Err(format!(
                        "{} is not in a scratch directory of tunelab pid {pid}",
                        image.display()
                    ));
                }
                let name = mount_point.file_name().and_then(|n| n.to_str());
                let paired = mount_point.parent() == Some(dir)
                    && name.is_some_and(|n| image.file_name() == Some(format!("{n}.img").as_ref()));
                if !paired {
                    return Err(format!(
                        "{} is not the mount point of the lab image {}",
                        mount_point.display(),
                        image.display()
                    ));
                }
                if scratch.as_deref().is_some_and(|s| s != dir) {
                    return Err(format!(
                        "{} is not the scratch of {}",
                        dir.display(),
                        image.display()
                    ));
                }
                if let Some(d) = device {
                    let n = d.to_str().and_then(|d| d.strip_prefix("/dev/loop"));
                    if !n.is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())) {
                        return Err(format!("{} is not a loop device", d.display()));
                    }
                }
                Ok(())
            }
            Saved::Scratch { path } => {
                plain_absolute(path)?;
                no_link(path)?;
                if !named_scratch(path, pid) {
                    return Err(format!(
                        "{} is not named as a scratch directory of tunelab pid {pid}",
                        path.display()
                    ));
                }
                Ok(())
            }
            Saved::Cgroup { path } => {
                let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
                let parent_ok = path.parent().is_some_and(|p| {
                    p == Path::new("/sys/fs/cgroup/blkio") || p == Path::new("/sys/fs/cgroup")
                });
                let seq = name.strip_prefix(&format!("tunelab-{pid}-"));
                if !parent_ok
                    || !seq.is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
                {
                    return Err(format!(
                        "{} is not a throttling cgroup of tunelab pid {pid}",
                        path.display()
                    ));
                }
                Ok(())
            }
            // `tunelab apply` owns only files it names itself: a
            // 90-tunelab-* sysctl.d drop-in or udev rule in /etc (below a
            // marked test tree in test builds), reached without a link.
            Saved::Persist { files } => files.iter().try_for_each(|f| persist_path_ok(&f.path)),
        }
    }

    /// The commands that put this entry back by hand.
    pub(super) fn by_hand(&self) -> Vec<String> {
        match self {
            Saved::Files { files } => {
                let all_zero = files.iter().all(|f| f.original == "0");
                files
                    .iter()
                    .filter(|f| all_zero || f.original != "0")
                    .map(|f| format!("echo {} > {}", f.original, f.path.display()))
                    .collect()
            }
            Saved::Mount {
                mount_point,
                original,
                ..
            } => vec![format!(
                "mount -o remount,{} {}",
                MountMode::of(original).options(),
                mount_point.display()
            )],
            Saved::Lab {
                mount_point,
                image,
                device,
                ..
            } => {
                let mut v = vec![format!("umount -l {}", mount_point.display())];
                if let Some(d) = device {
                    v.push(format!("losetup -d {}", d.display()));
                }
                v.push(format!("rm {}", image.display()));
                v
            }
            Saved::Scratch { path } => vec![format!("rm -r {}", path.display())],
            Saved::Cgroup { path } => vec![format!("rmdir {}", path.display())],
            Saved::Persist { files } => files
                .iter()
                .map(|f| match &f.before {
                    None => format!("rm -f {}", f.path.display()),
                    Some(_) => format!(
                        "# put back the previous content of {} (in the journal)",
                        f.path.display()
                    ),
                })
                .collect(),
        }
    }
}

/// `p`'s last component is a scratch directory name of tunelab pid `pid`.
fn named_scratch(p: &Path, pid: u32) -> bool {
    p.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| crate::safety::scratch_name::is_scratch_name(n, pid))
}

/// An absolute path without `.` or `..` components.
pub(super) fn plain_absolute(p: &Path) -> std::result::Result<(), String> {
    use std::path::Component;
    if !p.is_absolute()
        || p.components()
            .any(|c| matches!(c, Component::ParentDir | Component::CurDir))
    {
        return Err(format!("{} is not a plain absolute path", p.display()));
    }
    Ok(())
}

/// The file that marks a directory as a fake system root (`tunelab apply
/// --root DIR`, for tests): settings below its proc/sys and sys are knobs.
/// Only test builds (debug assertions) honour it: a release binary treats
/// such a tree as any other directory.
pub(crate) const FAKE_ROOT_MARKER: &str = ".tunelab-fake-root";

/// The marked test tree `p` is in (test builds only), reached without a
/// symbolic link, with `p` relative to it.
pub(crate) fn test_tree(p: &Path) -> Option<(&Path, &Path)> {
    if !cfg!(debug_assertions) || crate::safety::nofollow::has_link(p) {
        return None;
    }
    let mut dir = p.parent();
    while let Some(d) = dir {
        if d.join(FAKE_ROOT_MARKER).is_file() {
            return Some((d, p.strip_prefix(d).ok()?));
        }
        dir = d.parent();
    }
    None
}

/// The settings the knob table (tune's knobs, diagnose's switches, apply's
/// sysctls) can name, as a path relative to the root: nothing else is ever
/// written back from the journal or an applied record.
pub(crate) fn is_knob_file(rel: &Path) -> bool {
    let parts: Vec<&str> = rel.iter().filter_map(|c| c.to_str()).collect();
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let disk = |s: &str| {
        !s.is_empty()
            && !s.starts_with('.')
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'!')
    };
    match parts.as_slice() {
        ["proc", "sys", "vm", k] => [
            "dirty_ratio",
            "dirty_bytes",
            "dirty_background_ratio",
            "dirty_background_bytes",
            "dirty_expire_centisecs",
        ]
        .contains(k),
        ["proc", "sys", "kernel", k] => {
            ["sched_rt_runtime_us", "lock_stat", "latencytop"].contains(k)
        }
        ["proc", "irq", n, "smp_affinity_list"] => digits(n),
        ["sys", "block", d, "queue", a] => {
            disk(d) && ["read_ahead_kb", "nr_requests", "scheduler"].contains(a)
        }
        ["sys", "devices", "system", "cpu", c, "cpufreq", "scaling_governor"] => {
            c.strip_prefix("cpu").is_some_and(digits)
        }
        _ => false,
    }
}

/// A knob file is one the knob table names (below `/`, or below a marked
/// test tree in test builds).
pub(crate) fn knob_path_ok(p: &Path) -> std::result::Result<(), String> {
    plain_absolute(p)?;
    let rel = p.strip_prefix("/").unwrap_or(p);
    if is_knob_file(rel) || test_tree(p).is_some_and(|(_, r)| is_knob_file(r)) {
        return Ok(());
    }
    Err(format!(
        "{} is not a setting tunelab changes (its knob table names vm dirty limits, \
         block queue attributes, governors, IRQ affinity, lock_stat/latencytop and \
         sched_rt_runtime_us)",
        p.display()
    ))
}

/// A persistent file `tunelab apply` writes: /etc/sysctl.d/90-tunelab-*.conf
/// or /etc/udev/rules.d/90-tunelab-*.rules (below a marked test tree in test
/// builds), no component a symbolic link.
pub(crate) fn persist_path_ok(p: &Path) -> std::result::Result<(), String> {
    plain_absolute(p)?;
    let ours = |rel: &Path| {
        let parts: Vec<&str> = rel.iter().filter_map(|c| c.to_str()).collect();
        let named = |f: &str, ext: &str| {
            f.strip_prefix("90-tunelab-")
                .and_then(|r| r.strip_suffix(ext))
                .is_some_and(|r| !r.is_empty() && !r.contains('/'))
        };
        match parts.as_slice() {
            ["etc", "sysctl.d", f] => named(f, ".conf"),
            ["etc", "udev", "rules.d", f] => named(f, ".rules"),
            _ => false,
        }
    };
    no_link(p)?;
    let rel = p.strip_prefix("/").unwrap_or(p);
    if !(ours(rel) || test_tree(p).is_some_and(|(_, r)| ours(r))) {
        return Err(format!(
            "{} is not a file `tunelab apply` writes",
            p.display()
        ));
    }
    Ok(())
}

/// No component of `p` is a symbolic link.
pub(crate) fn no_link(p: &Path) -> std::result::Result<(), String> {
    if crate::safety::nofollow::has_link(p) {
        return Err(format!(
            "{} has a symbolic link in it: tunelab never follows one from its state",
            p.display()
        ));
    }
    Ok(())
}
