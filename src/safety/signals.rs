//! SIGINT, SIGTERM and SIGHUP cancel the run: the first one sets a flag that
//! the runner and experiments poll (so they unwind and clean up normally); a
//! second one removes registered scratch directories at once and exits 130.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Mutex, Once};

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

use crate::{Error, Result};

static CAUGHT: AtomicI32 = AtomicI32::new(0);
static INSTALL: Once = Once::new();
static CLEANUP_DIRS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Start the signal thread (idempotent).
pub fn install() {
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

/// The name of the signal that cancelled the run, if any.
pub fn caught() -> Option<&'static str> {
    match CAUGHT.load(Ordering::SeqCst) {
        0 => None,
        SIGINT => Some("SIGINT"),
        SIGTERM => Some("SIGTERM"),
        SIGHUP => Some("SIGHUP"),
        _ => Some("a signal"),
    }
}

/// `Err(Interrupted)` once a cancelling signal arrived.
pub fn check() -> Result<()> {
    match caught() {
        Some(sig) => Err(Error::Interrupted(sig.to_string())),
        None => Ok(()),
    }
}

/// Remember a directory to delete if the process must exit abruptly.
pub fn register_dir(path: &Path) {
    if let Ok(mut dirs) = CLEANUP_DIRS.lock() {
        dirs.push(path.to_path_buf());
    }
}

pub fn unregister_dir(path: &Path) {
    if let Ok(mut dirs) = CLEANUP_DIRS.lock() {
        dirs.retain(|d| d != path);
    }
}

fn emergency_cleanup() {
    super::journal::restore_mine();
    if let Ok(dirs) = CLEANUP_DIRS.lock() {
        for d in dirs.iter() {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}
