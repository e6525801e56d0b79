//! SIGINT, SIGTERM and SIGHUP cancel the run: the first one sets a flag that
//! the runner and experiments poll (so they unwind and clean up normally); a
//! second one detaches registered mounts (tunelab's loop filesystems),
//! restores journalled knobs, removes registered scratch directories, kills
//! the programs tunelab started (and their process groups), and exits 130.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Mutex, Once};

use rustix::process::{getpgid, getpgrp, getpid, kill_process, kill_process_group, Pid, Signal};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

use crate::{Error, Result};

static CAUGHT: AtomicI32 = AtomicI32::new(0);
static INSTALL: Once = Once::new();
static CLEANUP_DIRS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
/// Programs tunelab started (and waits for), killed with their process
/// group when they lead one on the emergency path.
static CLEANUP_CHILDREN: Mutex<Vec<i32>> = Mutex::new(Vec::new());
/// Mount points of tunelab's own loop filesystems, with the loop device to
/// detach after the unmount when autoclear could not be set.
static CLEANUP_MOUNTS: Mutex<Vec<(PathBuf, Option<PathBuf>)>> = Mutex::new(Vec::new());
/// Put back journalled settings on the emergency path: set by
/// `safety::install_signal_handlers` (the journal is not imported here, so
/// scratch → signals → journal → scratch is no cycle).
static RESTORE: std::sync::OnceLock<fn()> = std::sync::OnceLock::new();

/// What the second signal runs to put settings back before leaving.
pub(crate) fn on_emergency_restore(f: fn()) {
    let _ = RESTORE.set(f);
}

/// Start the signal thread (idempotent).
pub(crate) fn install() {
    INSTALL.call_once(|| {
        let Ok(mut signals) = Signals::new([SIGINT, SIGTERM, SIGHUP]) else {
            return;
        };
        let _ = std::thread::Builder::new()
            .name("tunelab-signals".into())
            .spawn(move || {
                for sig in signals.forever() {
                    if CAUGHT.swap(sig, Ordering::SeqCst) != 0 {
                        // Second signal: the user insists. Clean up and leave now.
                        emergency_cleanup();
                        std::process::exit(130);
                    }
                }
            });
    });
}

/// The environment variable that turns on [`hang_up_on_stdin_eof`] (set by
/// `tunelab remote` on the command it runs on a host).
pub(crate) const STDIN_GUARD: &str = "TUNELAB_STDIN_GUARD";

/// Stop as on a hangup when stdin reaches end of file: for a tunelab run
/// over ssh without a tty (`tunelab remote`), where a connection that goes
/// sends no SIGHUP and the run would go on unattended. A thread reads stdin
/// (nothing is expected on it) and, at end of file or error, raises SIGHUP;
/// if the run is still going `grace` later, a second SIGHUP takes the
/// emergency path (restore, unmount, remove scratch, exit 130).
pub(crate) fn hang_up_on_stdin_eof(grace: std::time::Duration) {
    let _ = std::thread::Builder::new()
        .name("tunelab-stdin-guard".into())
        .spawn(move || {
            let mut buf = [0u8; 512];
            let mut stdin = std::io::stdin().lock();
            loop {
                match std::io::Read::read(&mut stdin, &mut buf) {
                    Ok(0) => break,
                    Ok(_) => continue,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(_) => break,
                }
            }
            let hup = || kill_process(getpid(), Signal::HUP);
            let _ = hup();
            std::thread::sleep(grace);
            let _ = hup();
        });
}

/// The name of the signal that cancelled the run, if any.
pub(crate) fn caught() -> Option<&'static str> {
    match CAUGHT.load(Ordering::SeqCst) {
        0 => None,
        SIGINT => Some("SIGINT"),
        SIGTERM => Some("SIGTERM"),
        SIGHUP => Some("SIGHUP"),
        _ => Some("a signal"),
    }
}

/// `Err(Interrupted)` once a cancelling signal arrived.
pub(crate) fn check() -> Result<()> {
    match caught() {
        Some(sig) => Err(Error::Interrupted(sig.to_string())),
        None => Ok(()),
    }
}

/// Remember a directory to delete if the process must exit abruptly.
pub(crate) fn register_dir(path: &Path) {
    if let Ok(mut dirs) = CLEANUP_DIRS.lock() {
        dirs.push(path.to_path_buf());
    }
}

pub(crate) fn unregister_dir(path: &Path) {
    if let Ok(mut dirs) = CLEANUP_DIRS.lock() {
        dirs.retain(|d| d != path);
    }
}

/// Remember a child tunelab started (not yet reaped) to kill if the process
/// must exit abruptly.
pub(crate) fn register_child(pid: i32) {
    if let Ok(mut g) = CLEANUP_CHILDREN.lock() {
        g.push(pid);
    }
}

pub(crate) fn unregister_child(pid: i32) {
    if let Ok(mut g) = CLEANUP_CHILDREN.lock() {
        g.retain(|p| *p != pid);
    }
}

/// Remember a mount tunelab made, to detach if the process must exit
/// abruptly (`device`: a loop device that does not clear itself).
pub(crate) fn register_mount(mount_point: &Path, device: Option<&Path>) {
    if let Ok(mut m) = CLEANUP_MOUNTS.lock() {
        m.retain(|(p, _)| p != mount_point);
        m.push((mount_point.to_path_buf(), device.map(Path::to_path_buf)));
    }
}

pub(crate) fn unregister_mount(mount_point: &Path) {
    if let Ok(mut m) = CLEANUP_MOUNTS.lock() {
        m.retain(|(p, _)| p != mount_point);
    }
}

/// Lazily unmount (MNT_DETACH: works while files are open; the loop device
/// with autoclear goes away when the last user does), newest first.
fn detach_mounts() {
    let Ok(mounts) = CLEANUP_MOUNTS.lock() else {
        return;
    };
    for (mp, dev) in mounts.iter().rev() {
        let _ = super::sysmount::umount(mp, true);
        if let Some(d) = dev {
            if let Some(img) = super::sysmount::loop_backing_file(d) {
                let _ = super::sysmount::loop_detach_if_ours(d, &img);
            }
        }
    }
}

fn emergency_cleanup() {
    if let Ok(children) = CLEANUP_CHILDREN.lock() {
        for &pid in children.iter() {
            // Children not yet reaped; the group only when the child leads
            // one that is not ours.
            let Some(p) = Pid::from_raw(pid) else {
                continue;
            };
            if getpgid(Some(p)) == Ok(p) && p != getpgrp() {
                let _ = kill_process_group(p, Signal::KILL);
            }
            let _ = kill_process(p, Signal::KILL);
        }
    }
    detach_mounts();
    if let Some(restore) = RESTORE.get() {
        restore();
    }
    if let Ok(dirs) = CLEANUP_DIRS.lock() {
        for d in dirs.iter() {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}
