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
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::sysmount::{self, MountMode};
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
}

impl Saved {
    /// What this entry changes, to detect two tunelabs on one setting.
    fn targets(&self) -> Vec<PathBuf> {
        match self {
            Saved::Files { files } => files.iter().map(|f| f.path.clone()).collect(),
            Saved::Mount { mount_point, .. } | Saved::Lab { mount_point, .. } => {
                vec![mount_point.clone()]
            }
        }
    }

    /// The commands that put this entry back by hand.
    fn by_hand(&self) -> Vec<String> {
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
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub knob: String,
    pub pid: u32,
    /// The process's start time (clock ticks after boot, /proc/PID/stat),
    /// so a recycled pid is not taken for the tunelab that wrote the entry.
    #[serde(default)]
    pub pid_start: Option<u64>,
    pub started: String,
    pub saved: Saved,
}

impl Entry {
    /// An entry of this process for `knob`.
    pub fn new(knob: &str, saved: Saved) -> Entry {
        let me = std::process::id();
        Entry {
            knob: knob.to_string(),
            pid: me,
            pid_start: start_ticks(me),
            started: time::OffsetDateTime::now_utc()
                .format(&time::format_description::well_known::Rfc3339)
                .unwrap_or_default(),
            saved,
        }
    }
}

pub fn dir() -> PathBuf {
    crate::system::state_dir()
}

pub fn path() -> PathBuf {
    dir().join("journal.json")
}

/// An exclusive flock(2) on `journal.lock` next to the journal: every
/// read-modify-write of the journal holds it, so two tunelabs never lose
/// each other's entries and a claim on a setting is atomic.
struct Lock(#[allow(dead_code)] fs::File);

fn lock(wait: bool) -> Result<Option<Lock>> {
    let d = dir();
    fs::create_dir_all(&d).map_err(|e| Error::io("cannot create the journal directory", &d, e))?;
    let p = d.join("journal.lock");
    let f = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&p)
        .map_err(|e| Error::io("cannot open the journal lock", &p, e))?;
    let op = if wait {
        libc::LOCK_EX
    } else {
        libc::LOCK_EX | libc::LOCK_NB
    };
    loop {
        // SAFETY: flock on an open descriptor.
        if unsafe { libc::flock(f.as_raw_fd(), op) } == 0 {
            return Ok(Some(Lock(f)));
        }
        let e = std::io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EWOULDBLOCK) if !wait => return Ok(None),
            _ => return Err(Error::io("cannot lock", &p, e)),
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
pub fn load() -> Result<Vec<Entry>> {
    let p = path();
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
    fs::create_dir_all(&d).map_err(|e| Error::io("cannot create the journal directory", &d, e))?;
    let tmp = d.join(format!("journal.json.{}", std::process::id()));
    let data = serde_json::to_vec_pretty(entries)?;
    let write = || -> std::io::Result<()> {
        let mut f = fs::File::create(&tmp)?;
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
/// original is the true one, ours would be its applied value.
pub fn claim(entry: Entry) -> Result<()> {
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
    all.retain(|e| !(e.knob == entry.knob && e.pid == entry.pid));
    all.push(entry);
    store(&all)
}

/// Replace our entry for `knob` (after `claim`).
pub fn put(entry: Entry) -> Result<()> {
    let _l = lock(true)?;
    let mut all = load()?;
    all.retain(|e| !(e.knob == entry.knob && e.pid == entry.pid));
    all.push(entry);
    store(&all)
}

pub fn remove(knob: &str, pid: u32) -> Result<()> {
    if !path().exists() {
        return Ok(());
    }
    let _l = lock(true)?;
    let mut all = load()?;
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
            sysmount::unmount(mount_point)
                .map_err(|err| Error::io("cannot unmount the lab file system", mount_point, err))?;
            if let Some(d) = device {
                sysmount::loop_detach_if_ours(d, image)?;
            }
            if fs::symlink_metadata(image).is_ok_and(|m| m.is_file()) {
                let _ = fs::remove_file(image);
            }
            if fs::symlink_metadata(mount_point).is_ok_and(|m| m.is_dir()) {
                let _ = fs::remove_dir(mount_point);
            }
            if let Some(s) = scratch {
                super::scratch::remove_if_owned_by_dead(s, e.pid);
            }
            Ok(format!(
                "removed the lab file system {}{}",
                mount_point.display(),
                device
                    .as_ref()
                    .map(|d| format!(" and released {}", d.display()))
                    .unwrap_or_default()
            ))
        }
    }
}

/// Start time of `pid` in clock ticks after boot (field 22 of /proc/PID/stat).
fn start_ticks(pid: u32) -> Option<u64> {
    let s = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may contain spaces and ')': fields follow the last ')'.
    let rest = &s[s.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Whether the process that wrote `e` still runs (same pid, same start).
fn is_alive(e: &Entry) -> bool {
    if e.pid == std::process::id() {
        return true;
    }
    match (start_ticks(e.pid), e.pid_start) {
        (None, _) => false,
        (Some(now), Some(then)) => now == then,
        (Some(_), None) => true,
    }
}

/// Restore the entries of processes that are gone (SIGKILL, crash, power
/// cut). With `all`, also those of live processes other than us. Returns one
/// line per entry; entries that could not be restored stay in the journal.
/// An unreadable journal is an error (it explains itself).
pub fn restore_stale(all: bool) -> Result<Vec<String>> {
    if !path().exists() {
        return Ok(Vec::new());
    }
    let _l = lock(true)?;
    let entries = load()?;
    let mut msgs = Vec::new();
    let mut keep = Vec::new();
    for e in entries {
        let stale = !is_alive(&e) || (all && e.pid != std::process::id());
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
    Ok(msgs)
}

/// Restore every entry of this process (second-signal emergency path). The
/// main thread may hold the journal lock: try it for a moment, then go on.
pub fn restore_mine() {
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
    for e in entries {
        if e.pid == me && restore_entry(&e).is_ok() {
            continue;
        }
        keep.push(e);
    }
    let _ = store(&keep);
    drop(held);
}

/// The original mount options as `mount -o` would spell them (display).
pub fn remount_options(original: &[String]) -> String {
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
