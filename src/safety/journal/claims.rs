//! System-wide claims on settings, beside the journal: the journal sees
//! only tunelabs sharing a state directory, a claim file under
//! /run/tunelab/claims (flocked while held) sees every tunelab.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use super::{dir, Entry, Saved};
use crate::{Error, Result};

/// System-wide claims on settings (sysctls, sysfs files, mount options):
/// one file per setting under /run/tunelab/claims, flocked while a tunelab
/// holds it, naming its pid and state directory. The journal's own check
/// sees only tunelabs sharing a state directory; this one sees all.
pub(super) const CLAIMS: &str = "/run/tunelab/claims";

/// Claim files this process holds (their flock lives with the descriptor).
static HELD: std::sync::Mutex<Vec<(PathBuf, PathBuf, fs::File)>> =
    std::sync::Mutex::new(Vec::new());

pub(super) fn claim_file(target: &Path) -> PathBuf {
    use std::os::unix::ffi::OsStrExt;
    let h = target
        .as_os_str()
        .as_bytes()
        .iter()
        .fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ *b as u64).wrapping_mul(0x0100_0000_01b3)
        });
    Path::new(CLAIMS).join(format!("{h:016x}"))
}

pub(super) fn flock_now(f: &fs::File) -> bool {
    rustix::fs::flock(f, rustix::fs::FlockOperation::NonBlockingLockExclusive).is_ok()
}

/// Whether the journal of state directory `dir` holds an entry on `target`
/// (unreadable: assume it does).
pub(super) fn other_journal_holds(dir: &Path, target: &Path) -> bool {
    match fs::read(dir.join("journal.json")) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
        Err(_) => true,
        Ok(b) => serde_json::from_slice::<Vec<Entry>>(&b)
            .map(|es| {
                es.iter()
                    .any(|e| e.saved.targets().iter().any(|t| t == target))
            })
            .unwrap_or(true),
    }
}

/// Take the system-wide claim on every setting of `entry` (a no-op for
/// tunelab's own scratch, lab and cgroup paths, and where /run/tunelab
/// cannot be made: without root no setting can be changed anyway).
pub(super) fn claim_system(entry: &Entry) -> Result<()> {
    if !matches!(entry.saved, Saved::Files { .. } | Saved::Mount { .. })
        || fs::create_dir_all(CLAIMS).is_err()
    {
        return Ok(());
    }
    let mut held = HELD.lock().unwrap_or_else(|e| e.into_inner());
    let mut taken = Vec::new();
    let result = (|| {
        for t in entry.saved.targets() {
            if held.iter().any(|(_, h, _)| *h == t) {
                continue;
            }
            let p = claim_file(&t);
            let Ok(mut f) = fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&p)
            else {
                continue;
            };
            let holder = fs::read_to_string(&p).unwrap_or_default();
            let mut words = holder.split_whitespace();
            let (pid, state) = (words.next().unwrap_or("?"), words.next().unwrap_or("?"));
            // A holder that was just releasing unlinks the file while
            // locked: a lock on the unlinked inode is no claim.
            let same_file = || {
                use std::os::unix::fs::MetadataExt;
                matches!((f.metadata(), fs::metadata(&p)), (Ok(a), Ok(b)) if a.ino() == b.ino())
            };
            if !flock_now(&f) || !same_file() {
                // The holder writes its pid just after it locks: a file
                // read in between is empty, so wait briefly to name it.
                let mut holder = holder.clone();
                for _ in 0..40 {
                    if !holder.trim().is_empty() {
                        break;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(5));
                    holder = fs::read_to_string(&p).unwrap_or_default();
                }
                let mut words = holder.split_whitespace();
                let (pid, state) = (words.next().unwrap_or("?"), words.next().unwrap_or("?"));
                return Err(Error::environment(format!(
                    "{} ({}) is already being changed by tunelab pid {pid} (state directory \
                     {state}): wait for it to finish or stop it; two runs on one setting would \
                     lose its original value",
                    entry.knob,
                    t.display()
                )));
            }
            if !holder.is_empty()
                && Path::new(state) != dir()
                && other_journal_holds(Path::new(state), &t)
            {
                return Err(Error::environment(format!(
                    "{} ({}) was left changed by tunelab pid {pid}, which is gone: restore it \
                     first with TUNELAB_STATE_DIR={state} tunelab restore",
                    entry.knob,
                    t.display()
                )));
            }
            let _ = f.set_len(0);
            let _ = writeln!(f, "{} {}", entry.pid, dir().display());
            taken.push((p, t, f));
        }
        Ok(())
    })();
    match result {
        Ok(()) => held.extend(taken),
        Err(_) => {
            for (p, _, _) in taken {
                let _ = fs::remove_file(p);
            }
        }
    }
    result
}

/// Give up the system-wide claims on `targets` held by this process.
pub(super) fn release_system(targets: &[PathBuf]) {
    let mut held = HELD.lock().unwrap_or_else(|e| e.into_inner());
    held.retain(|(p, t, _)| {
        let mine = targets.contains(t);
        if mine {
            // Removed while still locked: no one can take a file about to go.
            let _ = fs::remove_file(p);
        }
        !mine
    });
}

/// After restoring a dead tunelab's setting: its claim file, no longer
/// locked by anyone, goes.
pub(super) fn clear_dead_claims(targets: &[PathBuf]) {
    for t in targets {
        let p = claim_file(t);
        if let Ok(f) = fs::OpenOptions::new().read(true).write(true).open(&p) {
            if flock_now(&f) {
                let _ = fs::remove_file(&p);
            }
        }
    }
}
