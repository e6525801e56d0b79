//! Read-only facts about the machine: environment snapshot, devices, quietness.

pub(crate) mod board;
pub(crate) mod cpu;
pub(crate) mod device;
pub(crate) mod env;
pub(crate) mod facts;
pub(crate) mod flash;
pub(crate) mod mounts;
pub(crate) mod proc;
pub(crate) mod quiet;
mod sysfs;
#[cfg(test)]
mod test_support;

pub(crate) use device::{device_for_path, BlockDevice};
pub(crate) use env::snapshot;
pub(crate) use mounts::{mount_for_path, MountFact};
pub(crate) use quiet::{check as quietness_check, Quietness};
pub(crate) mod inspect;
pub(crate) mod limits;

/// tunelab's state directory (the knob journal, the generated machine id):
/// `TUNELAB_STATE_DIR`, else `/var/lib/tunelab` for root, else
/// `$XDG_STATE_HOME/tunelab` (`~/.local/state/tunelab`).
pub(crate) fn state_dir() -> std::path::PathBuf {
    use std::path::PathBuf;
    if let Some(d) = std::env::var_os("TUNELAB_STATE_DIR").filter(|v| !v.is_empty()) {
        return PathBuf::from(d);
    }
    if rustix::process::geteuid().is_root() {
        return PathBuf::from("/var/lib/tunelab");
    }
    std::env::var_os("XDG_STATE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state")))
        .unwrap_or_else(|| PathBuf::from("."))
        .join("tunelab")
}
