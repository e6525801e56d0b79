//! The knob journal: before tunelab changes a system setting it writes the
//! original value to a journal on disk (fsynced), and removes the entry only
//! after restoring it. After SIGKILL or a crash, the next tunelab command (or
//! `tunelab restore`) finds entries of dead processes and puts them back —
//! unless someone else changed the setting meanwhile, in which case their
//! value is left alone and reported.
//!
//! Location: `$TUNELAB_STATE_DIR/journal.json`, else `/var/lib/tunelab` for
//! root, else `$XDG_STATE_HOME/tunelab` (`~/.local/state/tunelab`).

use std::fs;
use std::io::Write;
use std::path::PathBuf;
use std::process::Command;

use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// One file-backed setting (a sysctl or a sysfs attribute).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileState {
    pub path: PathBuf,
    pub original: String,
    /// What we last wrote (as read back); None until the first change.
    pub applied: Option<String>,
    /// What we are about to write: journalled before the write, so a crash
    /// between the write and the read-back still recognises our value.
    #[serde(default)]
    pub pending: Option<String>,
}

impl FileState {
    /// Whether `now` is a value tunelab put there (or the original).
    pub fn is_ours(&self, now: Option<&String>) -> bool {
        now == Some(&self.original) || now == self.applied.as_ref() || now == self.pending.as_ref()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Saved {
    /// Files that together form one knob (e.g. vm.dirty_ratio and
    /// vm.dirty_bytes, which reset each other).
    Files { files: Vec<FileState> },
    /// Mount options changed by remount.
    Mount {
        mount_point: PathBuf,
        original: Vec<String>,
        applied: Option<Vec<String>>,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub knob: String,
    pub pid: u32,
    pub started: String,
    pub saved: Saved,
}

pub fn dir() -> PathBuf {
    if let Some(d) = std::env::var_os("TUNELAB_STATE_DIR").filter(|v| !v.is_empty()) {
        return PathBuf::from(d);
    }
    if super::is_root() {
        return PathBuf::from("/var/lib/tunelab");
    }
    std::env::var_os("XDG_STATE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state")))
        .unwrap_or_else(|| PathBuf::from("."))
        .join("tunelab")
}

fn path() -> PathBuf {
    dir().join("journal.json")
}

pub fn load() -> Vec<Entry> {
    fs::read(path())
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

/// Write the journal atomically and durably (temp file, fsync, rename).
fn store(entries: &[Entry]) -> Result<()> {
    let d = dir();
    fs::create_dir_all(&d).map_err(|e| Error::io("cannot create the journal directory", &d, e))?;
    let p = path();
    if entries.is_empty() {
        let _ = fs::remove_file(&p);
        return Ok(());
    }
    let tmp = d.join(format!("journal.json.{}", std::process::id()));
    let data = serde_json::to_vec_pretty(entries)?;
    let write = || -> std::io::Result<()> {
        let mut f = fs::File::create(&tmp)?;
        f.write_all(&data)?;
        f.sync_all()?;
        fs::rename(&tmp, &p)?;
        fs::File::open(&d)?.sync_all()
    };
    write().map_err(|e| Error::io("cannot write the knob journal", &p, e))
}

/// Add or replace our entry for `knob`.
pub fn put(entry: Entry) -> Result<()> {
    let mut all = load();
    all.retain(|e| !(e.knob == entry.knob && e.pid == entry.pid));
    all.push(entry);
    store(&all)
}

pub fn remove(knob: &str, pid: u32) -> Result<()> {
    let mut all = load();
    all.retain(|e| !(e.knob == knob && e.pid == pid));
    store(&all)
}

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

/// Put one entry back. Returns a line for the user.
pub fn restore_entry(e: &Entry) -> Result<String> {
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
            for f in files.iter().filter(|f| all_zero || f.original != "0") {
                fs::write(&f.path, &f.original)
                    .map_err(|err| Error::io("cannot restore", &f.path, err))?;
            }
            Ok(format!(
                "restored {} to {}",
                e.knob,
                files
                    .iter()
                    .map(|f| f.original.as_str())
                    .collect::<Vec<_>>()
                    .join("/")
            ))
        }
        Saved::Mount {
            mount_point,
            original,
            ..
        } => {
            let opts = remount_options(original);
            let ok = Command::new("mount")
                .arg("-o")
                .arg(format!("remount,{opts}"))
                .arg(mount_point)
                .status()
                .map(|s| s.success())
                .unwrap_or(false);
            if !ok {
                return Err(Error::environment(format!(
                    "cannot remount {} with {opts}: restore it by hand (mount -o remount,{opts} {})",
                    mount_point.display(),
                    mount_point.display()
                )));
            }
            Ok(format!(
                "restored mount options of {} ({opts})",
                mount_point.display()
            ))
        }
    }
}

/// The remount options that bring back the access-time and sync behaviour of
/// `original` (the only options `tune mount` changes).
pub fn remount_options(original: &[String]) -> String {
    let has = |o: &str| original.iter().any(|x| x == o);
    // mountinfo lists noatime or relatime; strict atime shows as neither.
    let atime = if has("noatime") {
        "noatime"
    } else if has("relatime") {
        "relatime"
    } else {
        "strictatime"
    };
    let sync = if has("sync") { "sync" } else { "async" };
    let lazy = if has("lazytime") {
        "lazytime"
    } else {
        "nolazytime"
    };
    let dirsync = if has("dirsync") { ",dirsync" } else { "" };
    format!("{atime},{sync},{lazy}{dirsync}")
}

fn alive(pid: u32) -> bool {
    pid == std::process::id() || std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// Restore the entries of processes that are gone (SIGKILL, crash, power
/// cut). With `all`, also those of live processes other than us. Returns one
/// line per entry; entries that could not be restored stay in the journal.
pub fn restore_stale(all: bool) -> Vec<String> {
    let entries = load();
    if entries.is_empty() {
        return Vec::new();
    }
    let mut msgs = Vec::new();
    let mut keep = Vec::new();
    for e in entries {
        let stale = !alive(e.pid) || (all && e.pid != std::process::id());
        if !stale {
            keep.push(e);
            continue;
        }
        match restore_entry(&e) {
            Ok(m) => msgs.push(format!(
                "{m} (left changed by tunelab pid {}, started {})",
                e.pid, e.started
            )),
            Err(err) => {
                msgs.push(format!("could not restore {}: {err}", e.knob));
                keep.push(e);
            }
        }
    }
    if let Err(e) = store(&keep) {
        msgs.push(format!("could not update the journal: {e}"));
    }
    msgs
}

/// Restore every entry of this process (second-signal emergency path).
pub fn restore_mine() {
    let me = std::process::id();
    let entries = load();
    let mut keep = Vec::new();
    for e in entries {
        if e.pid == me && restore_entry(&e).is_ok() {
            continue;
        }
        keep.push(e);
    }
    let _ = store(&keep);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remount_options_bring_back_atime_and_sync() {
        let o = |s: &str| s.split(',').map(String::from).collect::<Vec<_>>();
        assert_eq!(
            remount_options(&o("rw,relatime")),
            "relatime,async,nolazytime"
        );
        assert_eq!(
            remount_options(&o("rw,noatime,sync")),
            "noatime,sync,nolazytime"
        );
        assert_eq!(
            remount_options(&o("rw,strictatime,lazytime")),
            "strictatime,async,lazytime"
        );
    }
}
