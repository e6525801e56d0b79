//! Runs picked from the store for `compare` and `report`: the runs named,
//! then the newest run of each machine that a selection (machines, a
//! label, a start time) admits; and the other stored runs of the same
//! experiments, from which compare learns the between-run noise.

use super::Store;
use crate::model::run::Run;
use crate::Result;

/// Runs picked by machine, label or start time (newest per machine).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Selection<'a> {
    /// Machines by inventory or host name, in the order the user named them.
    pub(crate) machine: &'a [String],
    pub(crate) label: Option<&'a str>,
    /// RFC 3339, or a YYYY-MM-DD date (its midnight, UTC).
    pub(crate) since: Option<&'a str>,
}

impl Selection<'_> {
    /// Whether the selection adds runs at all.
    pub(crate) fn selecting(&self) -> bool {
        !self.machine.is_empty() || self.label.is_some() || self.since.is_some()
    }
}

/// The named runs (ids, unique prefixes, `last`, `last~N`), then those the
/// selection adds.
pub(crate) fn gather(store: &Store, named: &[String], sel: &Selection) -> Result<Vec<Run>> {
    let mut runs: Vec<Run> = named.iter().map(|r| store.load(r)).collect::<Result<_>>()?;
    if sel.selecting() {
        runs.extend(newest_per_machine(store, sel)?);
    }
    Ok(runs)
}

/// The runs a selection admits: the newest matching run of each machine,
/// the machines in the order named.
fn newest_per_machine(store: &Store, a: &Selection) -> Result<Vec<Run>> {
    let since = a.since.map(|s| {
        if s.len() == 10 {
            format!("{s}T00:00:00Z")
        } else {
            s.to_string()
        }
    });
    let mut picked: Vec<Run> = Vec::new();
    // Newest start first, so the first run seen of a machine is its newest
    // (the store lists by the order runs were stored, which an import of
    // an older run does not follow).
    let mut listed = store.list()?;
    listed.sort_by(|x, y| y.started.cmp(&x.started));
    for info in listed {
        if a.label.is_some_and(|l| info.label != l)
            || since
                .as_ref()
                .is_some_and(|s| info.started.as_str() < s.as_str())
        {
            continue;
        }
        // By exact id: resolving a reference lists every run again.
        let run = store.load_id(&info.id)?;
        let machine = run.machine().cloned().unwrap_or_default();
        if !a.machine.is_empty() && !a.machine.contains(&machine) {
            continue;
        }
        if picked.iter().all(|p| p.machine() != Some(&machine)) {
            picked.push(run);
        }
        // Every named machine has its newest run: older runs cannot change it.
        if !a.machine.is_empty()
            && a.machine
                .iter()
                .all(|m| picked.iter().any(|p| p.machine() == Some(m)))
        {
            break;
        }
    }
    // Keep the machines in the order the user named them.
    picked.sort_by_key(|r| {
        let m = r.machine().cloned().unwrap_or_default();
        a.machine.iter().position(|x| x == &m).unwrap_or(usize::MAX)
    });
    Ok(picked)
}

/// Every change tunelab applied, as far as the store can say: a store
/// that cannot read them (an older schema, a read error) has none to name,
/// and a comparison or report goes on without them.
pub(crate) fn applied_changes(store: &Store) -> Vec<crate::model::applied::AppliedChange> {
    store.changes().unwrap_or_default()
}

/// Other stored runs of the experiments both `a` and `b` measured: what
/// the between-run noise floor is learned from.
pub(crate) fn history_of(store: &Store, a: &Run, b: &Run) -> Result<Vec<Run>> {
    let mut runs = Vec::new();
    for e in a.experiments() {
        if b.results.iter().any(|r| r.experiment == e) {
            runs.extend(store.runs_about(&e)?);
        }
    }
    Ok(runs)
}
