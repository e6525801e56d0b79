//! `tunelab restore`: put back the settings tunelab processes that are gone
//! left changed (with `all`, those of live ones too). An apply or unapply
//! cut short is settled against its store: kept when the store recorded
//! it, undone otherwise.

use std::path::{Path, PathBuf};

use crate::safety::journal;
use crate::store::Store;
use crate::Result;

/// What `restore` did.
pub(crate) struct Restored {
    /// One message per setting (those that failed start with "could not").
    pub(crate) messages: Vec<String>,
    /// Settings the journal still holds for tunelab processes running now.
    pub(crate) live: usize,
    /// Where the journal is.
    pub(crate) journal: PathBuf,
}

/// Which settings to put back, and the store applies are settled
/// against; nothing put back yet.
pub(crate) struct Planned {
    all: bool,
    /// The verb's `--db`, or the default store.
    db: PathBuf,
}

/// Plan `restore`: what dead tunelab processes left changed (`all`: live
/// ones too), settling applies against `db` (the verb's `--db`, else the
/// default store; or the store the entry names when it is a file).
pub(crate) fn plan(all: bool, db: Option<&Path>) -> Planned {
    Planned {
        all,
        db: db.map_or_else(crate::store::default_path, Path::to_path_buf),
    }
}

impl Planned {
    /// Put back what the plan says; one message per setting.
    pub(crate) fn put_back(&self) -> Result<Vec<String>> {
        let decide = |c: &journal::Commit| -> Option<bool> {
            let open = |p: &Path| Store::open_read(p).ok();
            let store = open(&self.db)
                .filter(|s| s.location() == c.db)
                .or_else(|| {
                    (!c.db.contains("://"))
                        .then(|| open(Path::new(&c.db)))
                        .flatten()
                })?;
            committed(c, &store)
        };
        journal::restore_stale(self.all, &decide)
    }

    /// The `restore` verb: [`Planned::put_back`], and what is left in the
    /// journal.
    pub(crate) fn measure(&self) -> Result<Restored> {
        let messages = self.put_back()?;
        Ok(Restored {
            messages,
            live: journal::load()?.len(),
            journal: journal::path(),
        })
    }
}

/// Whether `store` holds the record `commit` names (None: unreadable).
fn committed(commit: &journal::Commit, store: &Store) -> Option<bool> {
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
