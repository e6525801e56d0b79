//! The host around a tunelab process, as the verbs ask about it: start-up
//! (signal handlers, the stdin guard), privileges, the settings journal
//! (settings a killed tunelab left changed), resource limits and whether a
//! target directory can be used. The CLI asks here; `safety` does it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::safety::{journal, rlimits, scratch, signals};
use crate::Result;

/// Once, before anything else: SIGINT/SIGTERM/SIGHUP end the run cleanly,
/// and, under a parent that asked for it (`TUNELAB_STDIN_GUARD`, set by
/// `tunelab remote`), an end of stdin is a hang-up.
pub fn start_process() {
    crate::safety::install_signal_handlers();
    if std::env::var_os(signals::STDIN_GUARD).is_some() {
        signals::hang_up_on_stdin_eof(Duration::from_secs(20));
    }
}

/// The signal that asked tunelab to stop, if one came.
pub fn interrupted() -> Option<&'static str> {
    signals::caught()
}

/// Whether tunelab runs as root.
pub fn is_root() -> bool {
    crate::safety::is_root()
}

/// Put back the settings that tunelab processes which are gone left
/// changed (with `all`, those of live ones too); one message per setting.
/// An apply or unapply cut short is settled against its store (`db`, the
/// verb's `--db`, or the one the entry names when it is a file): kept when
/// the store recorded it, undone otherwise.
pub fn restore_left_settings(all: bool, db: Option<&Path>) -> Result<Vec<String>> {
    let mine = db.map_or_else(crate::store::default_path, Path::to_path_buf);
    let decide = |c: &journal::Commit| -> Option<bool> {
        let open = |p: &Path| crate::store::Store::open_read(p).ok();
        let store = open(&mine).filter(|s| s.location() == c.db).or_else(|| {
            (!c.db.contains("://"))
                .then(|| open(Path::new(&c.db)))
                .flatten()
        })?;
        committed(c, &store)
    };
    journal::restore_stale(all, &decide)
}

/// Whether `store` holds the record `commit` names (None: unreadable).
fn committed(commit: &journal::Commit, store: &crate::store::Store) -> Option<bool> {
    let all = store.changes().ok()?;
    Some(all.iter().any(|c| {
        c.id == commit.id
            && c.state == commit.state
            && if c.state == "unapplied" {
                c.unapplied_at.as_deref() == Some(commit.at.as_str())
            } else {
                c.applied_at == commit.at
            }
    }))
}

/// Settings the journal holds for tunelab processes still running.
pub fn live_settings() -> Result<usize> {
    Ok(journal::load()?.len())
}

/// Where the settings journal is.
pub fn journal_path() -> PathBuf {
    journal::path()
}

/// Enough descriptors and processes for a verb that measures or runs
/// programs (raised to what it needs when the hard limit allows).
pub fn check_limits() -> Result<()> {
    rlimits::check()
}

/// A `--target` that cannot be used is one clear error before any plan.
pub fn check_target(target: &Path) -> Result<()> {
    scratch::check_target(target)
}

/// The machine's configuration facts with their sources, with those of
/// `target`'s file system and block device (`tunelab inspect`).
pub fn facts(target: &Path) -> crate::system::inspect::Facts {
    crate::system::inspect::inspect(Some(target))
}
