//! A kernel facility switched on for the interval (`kernel.lock_stat`,
//! `kernel.latencytop`) through the same journal as `tune`'s knobs: the
//! original value is journalled (fsynced) before the write, so it is put
//! back on drop, by the next tunelab after a SIGKILL, or by
//! `tunelab restore`.

use rustix::io::Errno;
use std::path::Path;

use crate::safety::journal::{self, Entry, FileState, Saved};

pub(crate) struct Switched {
    entry: Entry,
    restored: bool,
}

fn read_value(p: &Path) -> Result<String, String> {
    std::fs::read_to_string(p)
        .map(|s| s.trim().to_string())
        .map_err(|e| format!("cannot read {}: {e}", p.display()))
}

impl Switched {
    /// Set `path` to `value` for the interval. Err is the reason in words.
    pub(crate) fn on(knob: &str, path: &Path, value: &str) -> Result<Switched, String> {
        let original = read_value(path)?;
        let mut entry = Entry::new(
            knob,
            Saved::Files {
                files: vec![FileState {
                    path: path.to_path_buf(),
                    original: original.clone(),
                    applied: None,
                    pending: Some(value.to_string()),
                }],
            },
        );
        journal::claim(entry.clone()).map_err(|e| e.to_string())?;
        let mut s = Switched {
            entry: entry.clone(),
            restored: false,
        };
        if original == value {
            // Already on: nothing to change, nothing to restore.
            let _ = journal::remove(knob, entry.pid);
            s.restored = true;
            return Ok(s);
        }
        if let Err(e) = std::fs::write(path, value) {
            // Nothing changed: drop the claim.
            let _ = journal::remove(knob, entry.pid);
            s.restored = true;
            return Err(match Errno::from_io_error(&e) {
                Some(Errno::ACCESS) | Some(Errno::PERM) => {
                    format!("switching on {knob} needs root ({}: {e})", path.display())
                }
                _ => format!("cannot write {}: {e}", path.display()),
            });
        }
        if let Saved::Files { files } = &mut entry.saved {
            files[0].applied = read_value(path).ok();
            files[0].pending = None;
        }
        s.entry = entry.clone();
        journal::put(entry).map_err(|e| e.to_string())?;
        Ok(s)
    }

    /// Put the original back; a line saying what happened.
    pub(crate) fn restore(&mut self) -> String {
        if self.restored {
            return format!("{} was already on; left as it was", self.entry.knob);
        }
        self.restored = true;
        match journal::restore_entry(&self.entry) {
            Ok(m) => {
                let _ = journal::remove(&self.entry.knob, self.entry.pid);
                m
            }
            Err(e) => format!(
                "could not restore {}: {e} (it stays in the journal; run 'tunelab restore')",
                self.entry.knob
            ),
        }
    }
}

impl Drop for Switched {
    fn drop(&mut self) {
        if !self.restored {
            self.restore();
        }
    }
}
