//! Putting one journal entry back: each kind of [`Saved`] setting restored
//! only when it still holds what tunelab wrote (or its original), and the
//! liveness test that tells a dead writer's entries from a live one's.

use std::fs;
use std::path::Path;

use super::{Entry, FileState, PersistFile, Saved};
use crate::safety::nofollow;
use crate::safety::sysmount::{self, MountMode};
use crate::{Error, Result};

fn read_value(path: &std::path::Path) -> Option<String> {
    let raw = fs::read_to_string(path).ok()?;
    let raw = raw.trim();
    // sysfs choice files ("none [mq-deadline] kyber") hold the bracketed one.
    Some(crate::system::device::active_choice(raw).unwrap_or_else(|| raw.to_string()))
}

/// Current state of the files, as they would be compared with `applied`.
fn current(files: &[FileState]) -> Vec<Option<String>> {
    files.iter().map(|f| read_value(&f.path)).collect()
}

/// Write a knob file's original back: a kernel setting on procfs/sysfs,
/// or a plain file of a marked test tree (test builds) reached without links.
pub(crate) fn write_setting(p: &Path, value: &str) -> Result<()> {
    set_setting(p, value).map_err(|err| Error::io("cannot restore", p, err))
}

/// Write a kernel setting (see [`nofollow::write_setting`]). In a test
/// tree the plain file is replaced whole (temporary file, rename), as a
/// sysctl write is all-or-nothing: a kill never leaves it truncated.
pub(crate) fn set_setting(p: &Path, value: &str) -> std::io::Result<()> {
    if super::saved::test_tree(p).is_some() {
        nofollow::replace(p, value)
    } else {
        nofollow::write_setting(p, value)
    }
}

/// A knob file as sysctl names it (vm.dirty_ratio), else its file name.
fn setting_name(p: &Path) -> String {
    crate::system::proc::sysctl_key(p).unwrap_or_else(|| {
        p.file_name().map_or_else(
            || p.to_string_lossy().into_owned(),
            |n| n.to_string_lossy().into_owned(),
        )
    })
}

/// Put one entry back. Returns a line for the user.
pub(crate) fn restore_entry(e: &Entry) -> Result<String> {
    match &e.saved {
        Saved::Files { files } => {
            let now = current(files);
            let changed: Vec<String> = files
                .iter()
                .zip(&now)
                .filter(|(f, n)| !f.is_ours(n.as_ref()))
                .map(|(f, n)| {
                    format!(
                        "{} is {} (we set {})",
                        f.path.display(),
                        n.as_deref().unwrap_or("?"),
                        f.applied.as_deref().unwrap_or("?")
                    )
                })
                .collect();
            if !changed.is_empty() {
                return Ok(format!(
                    "left {} alone: it was changed outside tunelab ({}); its original was {}",
                    e.knob,
                    changed.join("; "),
                    files
                        .iter()
                        .map(|f| f.original.as_str())
                        .collect::<Vec<_>>()
                        .join("/")
                ));
            }
            // Pairs like dirty_ratio/dirty_bytes zero each other: write only
            // the non-zero originals unless all are zero.
            let all_zero = files.iter().all(|f| f.original == "0");
            let (written, left): (Vec<&FileState>, Vec<&FileState>) =
                files.iter().partition(|f| all_zero || f.original != "0");
            for f in &written {
                write_setting(&f.path, &f.original)?;
            }
            if files.len() == 1 {
                return Ok(format!("restored {} to {}", e.knob, files[0].original));
            }
            // A pair: say which file was written; the other follows.
            let wrote: Vec<String> = written
                .iter()
                .map(|f| format!("{}={}", setting_name(&f.path), f.original))
                .collect();
            let follows: Vec<String> = left.iter().map(|f| setting_name(&f.path)).collect();
            // "restored vm.dirty_bytes to 20/0" named one knob and two
            // values: say what was written and what the kernel did with it.
            Ok(if follows.is_empty() {
                format!("restored {}: wrote {}", e.knob, wrote.join(", "))
            } else {
                format!(
                    "restored {}: wrote {} (the kernel sets {} to 0 with it, as it was)",
                    e.knob,
                    wrote.join(", "),
                    follows.join(", ")
                )
            })
        }
        Saved::Mount {
            mount_point,
            original,
            ..
        } => {
            let want = MountMode::of(original);
            if sysmount::mount_at(mount_point).is_none() {
                return Ok(format!(
                    "{} is no longer mounted: nothing to restore (its options were {})",
                    mount_point.display(),
                    want.options()
                ));
            }
            sysmount::set_mode(mount_point, want).map_err(|err| {
                Error::environment(format!(
                    "{err}: restore it by hand (mount -o remount,{} {})",
                    want.options(),
                    mount_point.display()
                ))
            })?;
            Ok(format!(
                "restored mount options of {} ({}, verified in /proc/self/mountinfo)",
                mount_point.display(),
                want.options()
            ))
        }
        Saved::Lab {
            mount_point,
            image,
            device,
            scratch,
        } => {
            // Say what was actually found and done, nothing more.
            let mut did = Vec::new();
            if sysmount::mount_at(mount_point).is_some() {
                sysmount::unmount(mount_point).map_err(|err| {
                    Error::io("cannot unmount the lab file system", mount_point, err)
                })?;
                did.push(format!("unmounted {}", mount_point.display()));
            }
            // Killed between attaching and journalling the device: find it
            // by its backing file.
            let devices = match device {
                Some(d) => vec![d.clone()],
                None => sysmount::loops_backed_by(image),
            };
            for d in &devices {
                if sysmount::loop_detach_if_ours(d, image)? {
                    did.push(format!("released {}", d.display()));
                }
            }
            if fs::symlink_metadata(image).is_ok_and(|m| m.is_file())
                && fs::remove_file(image).is_ok()
            {
                did.push(format!("removed {}", image.display()));
            }
            if fs::symlink_metadata(mount_point).is_ok_and(|m| m.is_dir())
                && fs::remove_dir(mount_point).is_ok()
            {
                did.push(format!("removed {}", mount_point.display()));
            }
            if let Some(s) = scratch {
                if crate::safety::scratch_name::remove_owned(s, e.pid) {
                    did.push(format!("removed {}", s.display()));
                }
            }
            Ok(if did.is_empty() {
                format!(
                    "nothing was left of the lab file system {}",
                    mount_point.display()
                )
            } else {
                format!("lab file system: {}", did.join(", "))
            })
        }
        Saved::Scratch { path } => {
            if !path.exists() {
                return Ok(format!("nothing was left of {}", path.display()));
            }
            if !sysmount::mounts_under(path).is_empty() {
                return Err(Error::environment(format!(
                    "a file system is still mounted inside {}; unmount it first",
                    path.display()
                )));
            }
            if crate::safety::scratch_name::remove_owned(path, e.pid) {
                Ok(format!("removed the scratch directory {}", path.display()))
            } else {
                Err(Error::environment(format!(
                    "{} does not carry tunelab pid {}'s marker or cannot be removed: left alone",
                    path.display(),
                    e.pid
                )))
            }
        }
        Saved::Cgroup { path } => {
            if !path.exists() {
                return Ok(format!("nothing was left of the cgroup {}", path.display()));
            }
            let parent = path.parent().unwrap_or(Path::new("/sys/fs/cgroup"));
            let mut moved = 0;
            for _ in 0..50 {
                if let Ok(procs) = fs::read_to_string(path.join("cgroup.procs")) {
                    for pid in procs.split_whitespace() {
                        if fs::write(parent.join("cgroup.procs"), pid).is_ok() {
                            moved += 1;
                        }
                    }
                }
                if fs::remove_dir(path).is_ok() {
                    return Ok(format!(
                        "removed the throttling cgroup {}{}",
                        path.display(),
                        if moved > 0 {
                            format!(" (moved {moved} process(es) out of it)")
                        } else {
                            String::new()
                        }
                    ));
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Err(Error::environment(format!(
                "cannot remove the cgroup {} (processes still in it?)",
                path.display()
            )))
        }
        Saved::Persist { files } => restore_persist(&e.knob, files),
    }
}

/// Put persistent files back as they were before `apply`/`unapply` began;
/// a file that no longer holds what tunelab wrote is left alone.
fn restore_persist(knob: &str, files: &[PersistFile]) -> Result<String> {
    let mut left = Vec::new();
    for f in files {
        let now = nofollow::read(&f.path).map_err(|e| Error::io("cannot read", &f.path, e))?;
        if now == f.before {
            continue;
        }
        if now != f.after {
            left.push(f.path.display().to_string());
            continue;
        }
        match &f.before {
            None => {
                nofollow::remove(&f.path).map_err(|e| Error::io("cannot remove", &f.path, e))?
            }
            Some(text) => nofollow::replace(&f.path, text)
                .map_err(|e| Error::io("cannot restore", &f.path, e))?,
        }
    }
    Ok(if left.is_empty() {
        format!("put back the files of {knob} as they were")
    } else {
        format!(
            "put back the files of {knob}, except {} (changed outside tunelab, left alone)",
            left.join(", ")
        )
    })
}

/// Start time of `pid` in clock ticks after boot (field 22 of /proc/PID/stat).
pub(super) fn start_ticks(pid: u32) -> Option<u64> {
    let s = crate::system::proc::read_pid(pid, "stat").ok()?;
    crate::system::proc::Stat::parse(&s)?.starttime()
}

/// Whether the process that wrote `e` still runs (same pid, same start).
pub(super) fn is_alive(e: &Entry) -> bool {
    if e.pid == std::process::id() {
        return true;
    }
    match (start_ticks(e.pid), e.pid_start) {
        (None, _) => false,
        (Some(now), Some(then)) => now == then,
        (Some(_), None) => true,
    }
}
