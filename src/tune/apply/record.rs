//! Applied records as tunelab trusts them: only this machine's, and only
//! when every path names a file tunelab itself changes and every value is
//! a plain setting value. A store is shared by a fleet (PostgreSQL) or
//! writable by whoever owns the file: an edited record must never make
//! `unapply` write a pipe into core_pattern or delete another file.

use std::path::Path;

use crate::model::applied::AppliedChange;
use crate::safety::journal::{self, Commit};
use crate::store::Store;
use crate::Result;

/// This machine's id (/etc/machine-id and the like, else the one tunelab
/// generated once in its state directory), "" when none can be had.
pub(crate) fn this_machine() -> String {
    crate::system::env::machine_id(Path::new("/"))
        .or_else(|| crate::system::env::generated_machine_id(&crate::system::state_dir()))
        .map(|m| m.0)
        .unwrap_or_default()
}

/// A value `unapply` may write back: short, one token of a setting's
/// alphabet (numbers, scheduler and governor words, CPU lists).
fn value_ok(v: &str) -> bool {
    !v.is_empty()
        && v.len() <= 64
        && v.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.,:+ ".contains(&b))
}

/// Why tunelab must not act on `c`, if it must not.
pub(crate) fn distrust(c: &AppliedChange, here: &str) -> Option<String> {
    if c.machine_id.is_empty() || c.machine_id != here {
        return Some(format!(
            "recorded on {} (this machine is {here})",
            if c.machine_id.is_empty() {
                "an unknown machine"
            } else {
                c.machine_id.as_str()
            }
        ));
    }
    let live = c
        .live
        .iter()
        .chain(c.partners.iter().map(|p| &p.path))
        .map(|p| journal::knob_path_ok(Path::new(p)));
    let files = c
        .files
        .iter()
        .map(|f| journal::persist_path_ok(Path::new(&f.path)));
    if let Some(Err(why)) = live.chain(files).find(|r| r.is_err()) {
        return Some(why);
    }
    let mut values = [&c.old, &c.new]
        .into_iter()
        .chain(c.partners.iter().map(|p| &p.old));
    // A mount change records no live file and keeps no value.
    if !c.live.is_empty() {
        if let Some(v) = values.find(|v| !value_ok(v)) {
            return Some(format!("{v:?} is not a setting value tunelab writes"));
        }
    }
    None
}

/// The store's applied records that tunelab may act on here, and a note
/// for each one it ignores.
pub(crate) fn changes_here(store: &Store) -> Result<(Vec<AppliedChange>, Vec<String>)> {
    let here = this_machine();
    let mut ok = Vec::new();
    let mut notes = Vec::new();
    if let Some(why) = file_distrust(store.location()) {
        notes.push(format!(
            "ignored the applied records of {}: it {why}, so anyone could have written them \
             (chown/chmod go-w it, or use another --db)",
            store.location()
        ));
        return Ok((ok, notes));
    }
    let local = !store.location().contains("://");
    for mut c in store.changes()? {
        // Records written before they carried a machine id: a private local
        // file (checked above) holds only this machine's own records, so
        // they are adopted; a fleet database's never are.
        if c.machine_id.is_empty() && local && !here.is_empty() {
            c.machine_id = here.clone();
        }
        match distrust(&c, &here) {
            None => ok.push(c),
            Some(why) => notes.push(format!(
                "ignored the applied record {} in {}: {why}",
                c.id,
                store.location()
            )),
        }
    }
    Ok((ok, notes))
}

/// Why a SQLite store file cannot be trusted for applied records: owned by
/// another user than the one running tunelab, or writable by group/others.
/// A URL (a fleet database) is judged by its records alone.
fn file_distrust(location: &str) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    if location.contains("://") {
        return None;
    }
    let m = std::fs::metadata(location).ok()?;
    let me = rustix::process::geteuid().as_raw();
    if m.uid() != me {
        Some(format!("is owned by uid {}, not {me}", m.uid()))
    } else if m.mode() & 0o022 != 0 {
        Some(format!(
            "is writable by others (mode {:o})",
            m.mode() & 0o7777
        ))
    } else {
        None
    }
}

/// The journal's note of the record that will make `c` final.
pub(super) fn commit_of(store: &Store, c: &AppliedChange) -> Commit {
    Commit {
        db: store.location().to_string(),
        id: c.id.clone(),
        state: c.state.clone(),
        at: if c.state == "unapplied" {
            c.unapplied_at.clone().unwrap_or_default()
        } else {
            c.applied_at.clone()
        },
    }
}
