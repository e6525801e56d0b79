//! `tunelab unapply`: the plan that undoes one applied change (the
//! pre-apply value back where the live value is still ours, tunelab's
//! files removed) and its transaction through the journal.

use std::fs;
use std::path::PathBuf;

use super::{forget, kill_point, live_entry, read_live, roll_back};
use crate::model::applied::AppliedChange;
use crate::model::run::now_rfc3339;
use crate::safety::journal::{self, Entry, PersistFile, Saved};
use crate::store::Store;
use crate::tune::persist;
use crate::{Error, Result};

/// What unapply will do for one change (for --dry-run and the real thing).
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct UnapplyPlan {
    pub(crate) change: AppliedChange,
    /// Live value restored: path, now, to.
    pub(crate) restore: Vec<(PathBuf, String, String)>,
    /// Files removed.
    pub(crate) remove: Vec<PathBuf>,
    pub(crate) warnings: Vec<String>,
}

/// Plan undoing `c`: the pre-apply value back where the live value is still
/// the applied one (a drifted value is someone else's: left, unless
/// `force`), and tunelab's files removed (a file without tunelab's header
/// is never touched).
pub(crate) fn plan_unapply(c: &AppliedChange, force: bool) -> Result<UnapplyPlan> {
    if let Some(why) = super::record::distrust(c, &super::this_machine()) {
        return Err(Error::environment(format!(
            "refused to unapply {}: {why}; tunelab acts only on its own records of this \
             machine's files (inspect it with 'tunelab applied --all --json')",
            c.id
        )));
    }
    let mut warnings = Vec::new();
    let mut restore = Vec::new();
    if let Some(p) = c.live.first().map(PathBuf::from) {
        let now = read_live(&p)?;
        if now == c.new || force {
            restore.push((p, now, c.old.clone()));
        } else {
            warnings.push(format!(
                "{} is {now}, not the applied {}: someone changed it, so it is left alone \
                 (--force restores {} anyway)",
                c.knob, c.new, c.old
            ));
        }
    }
    let mut remove = Vec::new();
    for f in &c.files {
        let p = PathBuf::from(&f.path);
        match fs::read_to_string(&p) {
            Err(_) => warnings.push(format!("{} is already gone", p.display())),
            Ok(t) if !persist::is_ours(&t) => warnings.push(format!(
                "{} no longer has tunelab's header: it is not removed",
                p.display()
            )),
            Ok(t) => {
                if t != f.content {
                    warnings.push(format!(
                        "{} was edited after apply; removing it anyway (it is tunelab's)",
                        p.display()
                    ));
                }
                remove.push(p);
            }
        }
    }
    Ok(UnapplyPlan {
        change: c.clone(),
        restore,
        remove,
        warnings,
    })
}

/// Carry out an unapply plan as one journalled transaction.
pub(crate) fn unapply(plan: UnapplyPlan, store: &mut Store) -> Result<AppliedChange> {
    let mut c = plan.change;
    let tag = format!("unapply {}", c.id);
    let me = std::process::id();
    c.state = "unapplied".into();
    c.unapplied_at = Some(now_rfc3339());
    let commit = super::record::commit_of(store, &c);
    let own: Vec<(PathBuf, String)> = plan
        .restore
        .iter()
        .map(|(p, now, _)| (p.clone(), now.clone()))
        .collect();
    let has_live = !own.is_empty();
    if has_live {
        // "pending" is the old value: a kill after the write is still ours.
        let partners: Vec<(PathBuf, String)> = c
            .partners
            .iter()
            .map(|p| {
                let p = PathBuf::from(&p.path);
                let now = read_live(&p).unwrap_or_default();
                (p, now)
            })
            .collect();
        let mut e = live_entry(&tag, &own, &partners, &c.old);
        if let Saved::Files { files } = &mut e.saved {
            for (f, p) in files.iter_mut().skip(own.len()).zip(&c.partners) {
                f.pending = Some(p.old.clone());
            }
        }
        e.commit = Some(commit.clone());
        journal::claim(e)?;
    }
    let files: Vec<PersistFile> = plan
        .remove
        .iter()
        .map(|p| PersistFile {
            path: p.clone(),
            before: crate::safety::nofollow::read(p).ok().flatten(),
            after: None,
        })
        .collect();
    let mut steps = || -> Result<()> {
        if !files.is_empty() {
            let mut e = Entry::new(
                &format!("{tag} files"),
                Saved::Persist {
                    files: files.clone(),
                },
            );
            e.commit = Some(commit.clone());
            journal::claim(e)?;
        }
        kill_point("unapply-journalled");
        if !plan.restore.is_empty() {
            restore_values(&c)?;
        }
        kill_point("unapply-live");
        for f in &files {
            persist::remove_ours(&f.path)?;
        }
        kill_point("unapply-files");
        store.save_change(&c)?;
        kill_point("unapply-stored");
        Ok(())
    };
    let result = steps();
    match result {
        Ok(()) => {
            forget(&tag, me)?;
            Ok(c)
        }
        Err(e) => {
            // A failed restore keeps its entry for `tunelab restore`.
            roll_back(&tag, me)?;
            Err(e)
        }
    }
}

/// Write the pre-apply values back. The dirty pairs reset each other, so
/// (like the journal) only the non-zero originals are written, or the own
/// one when all were zero; each is read back.
fn restore_values(c: &AppliedChange) -> Result<()> {
    let mut all: Vec<(PathBuf, &str)> = c
        .live
        .iter()
        .take(1)
        .map(|p| (PathBuf::from(p), c.old.as_str()))
        .collect();
    all.extend(
        c.partners
            .iter()
            .map(|p| (PathBuf::from(&p.path), p.old.as_str())),
    );
    let all_zero = all.iter().all(|(_, v)| *v == "0");
    for (p, to) in all.iter().filter(|(_, v)| all_zero || *v != "0") {
        journal::write_setting(p, to)?;
        let back = read_live(p)?;
        if back != *to {
            return Err(Error::environment(format!(
                "wrote {to} back to {} but the kernel holds {back}",
                p.display()
            )));
        }
    }
    Ok(())
}
