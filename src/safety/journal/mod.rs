//! The knob journal: before tunelab changes a system setting it writes the
//! original value to a journal on disk (fsynced), and removes the entry only
//! after restoring it. After SIGKILL or a crash, the next tunelab command (or
//! `tunelab restore`) finds entries of dead processes and puts them back —
//! unless someone else changed the setting meanwhile, in which case their
//! value is left alone and reported.
//!
//! Location: `$TUNELAB_STATE_DIR/journal.json`, else `/var/lib/tunelab` for
//! root, else `$XDG_STATE_HOME/tunelab` (`~/.local/state/tunelab`).
//!
//! Here: the entry, the journal file (lock, load, store) and the verbs on
//! it (claim, put, remove, restore). `saved` holds what an entry saves and
//! which entries tunelab can have written, `claims` the system-wide claim
//! files, `restore` how one entry is put back.

mod claims;
mod restore;
mod saved;
mod trust;

use rustix::fs::FlockOperation;
use rustix::io::Errno;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::sysmount::MountMode;
use crate::{Error, Result};
use claims::{claim_system, clear_dead_claims, release_system};
use restore::{is_alive, start_ticks};
pub(crate) use restore::{restore_entry, set_setting, write_setting};
pub(crate) use saved::{knob_path_ok, persist_path_ok, FileState, PersistFile, Saved};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Entry {
    pub(crate) knob: String,
    pub(crate) pid: u32,
    /// The process's start time (clock ticks after boot, /proc/PID/stat),
    /// so a recycled pid is not taken for the tunelab that wrote the entry.
    #[serde(default)]
    pub(crate) pid_start: Option<u64>,
    pub(crate) started: String,
    pub(crate) saved: Saved,
    /// For a change that ends with a store write (apply, unapply): the
    /// record that makes it final. After a kill, `restore` keeps the change
    /// when the store holds that record and undoes it otherwise, so the
    /// system and the store always agree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) commit: Option<Commit>,
}

/// The store record that completes a journalled change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Commit {
    /// The store's location as it names itself (a file, a URL without its
    /// password).
    pub(crate) db: String,
    /// The record's id, the state it is written with and that state's time.
    pub(crate) id: String,
    pub(crate) state: String,
    pub(crate) at: String,
}

/// Whether a [`Commit`] is in its store: Some(true) written, Some(false)
/// not, None when the store cannot be asked (the entry is kept).
pub(crate) type Decide<'a> = &'a dyn Fn(&Commit) -> Option<bool>;

impl Entry {
    /// An entry of this process for `knob`.
    pub(crate) fn new(knob: &str, saved: Saved) -> Entry {
        let me = std::process::id();
        Entry {
            knob: knob.to_string(),
            pid: me,
            pid_start: start_ticks(me),
            started: crate::units::now_rfc3339_nanos(),
            saved,
            commit: None,
        }
    }
}

pub(crate) fn dir() -> PathBuf {
    crate::system::state_dir()
}

pub(crate) fn path() -> PathBuf {
    dir().join("journal.json")
}

/// An exclusive flock(2) on `journal.lock` next to the journal: every
/// read-modify-write of the journal holds it, so two tunelabs never lose
/// each other's entries and a claim on a setting is atomic.
struct Lock(#[allow(dead_code)] fs::File);

fn lock(wait: bool) -> Result<Option<Lock>> {
    let d = dir();
    trust::ensure(&d)?;
    let p = d.join("journal.lock");
    let f = trust::open_private(&p, false)
        .map_err(|e| Error::io("cannot open the journal lock", &p, e))?;
    let op = if wait {
        FlockOperation::LockExclusive
    } else {
        FlockOperation::NonBlockingLockExclusive
    };
    loop {
        match rustix::fs::flock(&f, op) {
            Ok(()) => return Ok(Some(Lock(f))),
            Err(Errno::INTR) => continue,
            Err(Errno::WOULDBLOCK) if !wait => return Ok(None),
            Err(e) => return Err(Error::io("cannot lock", &p, e.into())),
        }
    }
}

/// Remove the temporary journals (`journal.json.PID`) that processes
/// killed while writing the journal left: only those whose pid is gone.
fn clear_dead_temps(d: &Path) {
    let Ok(rd) = fs::read_dir(d) else { return };
    for e in rd.flatten() {
        let name = e.file_name();
        let pid = name
            .to_str()
            .and_then(|n| n.strip_prefix("journal.json."))
            .and_then(|n| n.parse::<u32>().ok());
        if let Some(pid) = pid {
            if pid != std::process::id() && start_ticks(pid).is_none() {
                let _ = fs::remove_file(e.path());
            }
        }
    }
}

/// What an unreadable journal holds and how to restore by hand.
fn unreadable(p: &Path, bytes: &[u8], why: &str) -> Error {
    let text = String::from_utf8_lossy(bytes);
    let shown: String = text
        .chars()
        .take(4000)
        .map(|c| if c.is_control() && c != '\n' { '?' } else { c })
        .collect();
    let mut msg = format!(
        "the knob journal {} cannot be read ({why}); tunelab will not change any setting \
         until it is fixed, because the originals it holds would be lost.\n\
         It holds ({} bytes):\n{shown}{}\n",
        p.display(),
        bytes.len(),
        if text.chars().count() > 4000 {
            "\n…"
        } else {
            ""
        }
    );
    // A valid journal followed by garbage still names its entries.
    let salvaged = serde_json::Deserializer::from_slice(bytes)
        .into_iter::<Vec<Entry>>()
        .next()
        .and_then(|r| r.ok());
    match salvaged {
        Some(entries) if !entries.is_empty() => {
            msg.push_str("To restore by hand, as root:\n");
            for e in &entries {
                msg.push_str(&format!(
                    "  # {} (tunelab pid {}, started {})\n",
                    e.knob, e.pid, e.started
                ));
                for c in e.saved.by_hand() {
                    msg.push_str(&format!("  {c}\n"));
                }
            }
        }
        _ => msg.push_str(
            "To restore by hand: for each \"path\" with an \"original\" value, write it back \
             (echo ORIGINAL > PATH); for each \"mount_point\" with \"original\" options, \
             mount -o remount,OPTIONS MOUNT_POINT; unmount any lab mount_point (umount -l).\n",
        ),
    }
    msg.push_str(&format!("Then remove {}.", p.display()));
    Error::environment(msg)
}

/// The journal's entries; an unreadable journal is an error that says what
/// it holds (never "empty": its originals would be lost).
pub(crate) fn load() -> Result<Vec<Entry>> {
    let p = path();
    if !dir().exists() {
        return Ok(Vec::new());
    }
    trust::check(&dir())?;
    let bytes = match fs::read(&p) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(unreadable(&p, &[], &e.to_string())),
    };
    serde_json::from_slice(&bytes).map_err(|e| unreadable(&p, &bytes, &e.to_string()))
}

/// Write the journal atomically and durably (temp file, fsync, rename,
/// fsync of the directory). An empty journal is removed, never created.
fn store(entries: &[Entry]) -> Result<()> {
    let d = dir();
    let p = path();
    if entries.is_empty() {
        return match fs::remove_file(&p) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(Error::io("cannot remove the knob journal", &p, e))
            }
            _ => Ok(()),
        };
    }
    trust::ensure(&d)?;
    let tmp = d.join(format!("journal.json.{}", std::process::id()));
    let data = serde_json::to_vec_pretty(entries)?;
    let write = || -> std::io::Result<()> {
        // Our own leftover (an earlier failed write) goes; a link planted
        // in its place is never followed.
        let _ = fs::remove_file(&tmp);
        let mut f = trust::open_private(&tmp, true)?;
        f.write_all(&data)?;
        f.sync_all()?;
        fs::rename(&tmp, &p)?;
        fs::File::open(&d)?.sync_all()
    };
    write().map_err(|e| {
        let _ = fs::remove_file(&tmp);
        Error::io("cannot write the knob journal", &p, e)
    })
}

/// Record a new entry, refusing when another tunelab (alive, or killed and
/// not yet restored) holds an entry on the same setting: its recorded
/// original is the true one, ours would be its applied value. Settings are
/// claimed system-wide too, whatever state directory the other one uses.
pub(crate) fn claim(entry: Entry) -> Result<()> {
    // Never journal what `restore` would refuse: it could not be put back.
    entry.saved.validate(entry.pid).map_err(|why| {
        Error::environment(format!("tunelab does not change {}: {why}", entry.knob))
    })?;
    let _l = lock(true)?;
    let mut all = load()?;
    let mine = entry.saved.targets();
    if let Some(other) = all
        .iter()
        .find(|e| e.pid != entry.pid && e.saved.targets().iter().any(|t| mine.contains(t)))
    {
        return Err(if is_alive(other) {
            Error::environment(format!(
                "{} is already being changed by tunelab pid {} (started {}): wait for it to \
                 finish or stop it; two runs on one setting would lose its original value",
                entry.knob, other.pid, other.started
            ))
        } else {
            Error::environment(format!(
                "{} was left changed by tunelab pid {} (started {}), which is gone, and could \
                 not be restored automatically: run 'tunelab restore' first",
                entry.knob, other.pid, other.started
            ))
        });
    }
    claim_system(&entry)?;
    let targets = entry.saved.targets();
    all.retain(|e| !(e.knob == entry.knob && e.pid == entry.pid));
    all.push(entry);
    store(&all).inspect_err(|_| release_system(&targets))
}

/// Replace our entry for `knob` (after `claim`).
pub(crate) fn put(entry: Entry) -> Result<()> {
    let _l = lock(true)?;
    let mut all = load()?;
    all.retain(|e| !(e.knob == entry.knob && e.pid == entry.pid));
    all.push(entry);
    store(&all)
}

pub(crate) fn remove(knob: &str, pid: u32) -> Result<()> {
    if !path().exists() {
        return Ok(());
    }
    let _l = lock(true)?;
    let mut all = load()?;
    let gone: Vec<PathBuf> = all
        .iter()
        .filter(|e| e.knob == knob && e.pid == pid)
        .flat_map(|e| e.saved.targets())
        .collect();
    all.retain(|e| !(e.knob == knob && e.pid == pid));
    store(&all)?;
    if pid == std::process::id() {
        release_system(&gone);
    }
    Ok(())
}

/// Restore the entries of processes that are gone (SIGKILL, crash, power
/// cut). With `all`, also those of live processes other than us. Returns one
/// line per entry; entries that could not be restored stay in the journal.
/// An unreadable journal is an error (it explains itself).
pub(crate) fn restore_stale(all: bool, decide: Decide) -> Result<Vec<String>> {
    let d = dir();
    if !d.exists() {
        return Ok(Vec::new());
    }
    trust::check(&d)?;
    clear_dead_temps(&d);
    if !path().exists() {
        return Ok(Vec::new());
    }
    let _l = lock(true)?;
    let entries = load()?;
    let mut msgs = Vec::new();
    let mut keep = Vec::new();
    // Newest first: a scratch directory goes after the lab mounted in it.
    for e in entries.into_iter().rev() {
        let stale = !is_alive(&e) || (all && e.pid != std::process::id());
        if !stale {
            keep.push(e);
            continue;
        }
        if let Err(why) = e.saved.validate(e.pid) {
            msgs.push(refused(&e, &why));
            continue;
        }
        if let Some(c) = &e.commit {
            match decide(c) {
                Some(true) => {
                    clear_dead_claims(&e.saved.targets());
                    msgs.push(format!(
                        "kept {}: {} recorded it as {} before tunelab pid {} stopped; \
                         dropped its journal entry",
                        e.knob, c.db, c.state, e.pid
                    ));
                    continue;
                }
                Some(false) => {}
                None => {
                    msgs.push(format!(
                        "could not settle {}: whether it is final is recorded in {}, which \
                         cannot be read now; run 'tunelab restore --db {}' (with its password \
                         for a URL)",
                        e.knob, c.db, c.db
                    ));
                    keep.push(e);
                    continue;
                }
            }
        }
        match restore_entry(&e) {
            Ok(m) => {
                if matches!(e.saved, Saved::Files { .. } | Saved::Mount { .. }) {
                    clear_dead_claims(&e.saved.targets());
                }
                msgs.push(format!(
                    "{m} (left by tunelab pid {}, started {})",
                    e.pid, e.started
                ))
            }
            Err(err) => {
                msgs.push(format!("could not restore {}: {err}", e.knob));
                keep.push(e);
            }
        }
    }
    keep.reverse();
    if let Err(e) = store(&keep) {
        msgs.push(format!("could not update the journal: {e}"));
    }
    Ok(msgs)
}

/// The line for an entry tunelab cannot have written: it is dropped from
/// the journal without acting on it, and shown so nothing is lost.
fn refused(e: &Entry, why: &str) -> String {
    format!(
        "refused a journal entry tunelab cannot have written ({why}): did nothing and removed \
         it from the journal; it was: {}",
        serde_json::to_string(e).unwrap_or_default()
    )
}

/// Restore every entry of this process (second-signal emergency path). The
/// main thread may hold the journal lock: try it for a moment, then go on.
pub(crate) fn restore_mine() {
    if !path().exists() {
        return;
    }
    let mut held = None;
    for _ in 0..20 {
        match lock(false) {
            Ok(Some(l)) => {
                held = Some(l);
                break;
            }
            Ok(None) => std::thread::sleep(std::time::Duration::from_millis(25)),
            Err(_) => break,
        }
    }
    let me = std::process::id();
    let Ok(entries) = load() else { return };
    let mut keep = Vec::new();
    for e in entries.into_iter().rev() {
        // A change that ends in the store is settled by `restore`, which
        // can ask the store whether it became final.
        if e.pid == me
            && e.commit.is_none()
            && e.saved.validate(me).is_ok()
            && restore_entry(&e).is_ok()
        {
            continue;
        }
        keep.push(e);
    }
    keep.reverse();
    let _ = store(&keep);
    drop(held);
}

/// The original mount options as `mount -o` would spell them (display).
pub(crate) fn remount_options(original: &[String]) -> String {
    MountMode::of(original).options()
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
