//! The four verbs in run's shape: each request is planned here — the root
//! check (once, in [`require_root`]), the run or the applied records it
//! acts on, every refusal — before anything changes; the CLI parses,
//! calls and prints.

use super::{changes_here, plan_apply, plan_unapply, verdict_of, verify, Check, Plan};
use super::{TuneVerdict, UnapplyPlan};
use crate::model::applied::AppliedChange;
use crate::store::Store;
use crate::tune::persist::Root;
use crate::{Error, Result};

/// The one root check of apply, verify and unapply: the real system's
/// settings and root's state need root; a fake tree (tests) does not.
pub(crate) fn require_root(root: &Root, verb: &str) -> Result<()> {
    if !root.is_real() {
        return Ok(());
    }
    crate::safety::require_root(|| {
        // verify writes nothing: say what it reads that is root's.
        if verb == "verify" {
            "verify changes nothing, but it needs root to read what apply recorded: root's \
             store and state directory (trusted only when root owns them); run it as root \
             (sudo tunelab verify)"
                .to_string()
        } else {
            format!(
                "{verb} changes system configuration (/etc, /proc/sys, /sys) and needs root \
                 (run with sudo)"
            )
        }
    })
}

/// What `apply RUN` was asked for.
pub(crate) struct Request<'a> {
    pub(crate) run: &'a str,
    pub(crate) force: bool,
    pub(crate) trust_suspect: bool,
    pub(crate) dry_run: bool,
    pub(crate) root: Root,
}

/// An apply checked and planned: nothing changed yet.
pub(crate) struct Planned {
    pub(crate) verdict: TuneVerdict,
    pub(crate) plan: Plan,
    /// Said before anything changes (an interrupted sweep, the plan's own).
    pub(crate) warnings: Vec<String>,
}

/// Plan `apply`: root (unless a dry run), the tune run's verdict and its
/// refusals, the files and live values, and the live value checked against
/// the one the sweep measured.
pub(crate) fn plan(req: &Request, store: &Store) -> Result<Planned> {
    if !req.dry_run {
        require_root(&req.root, "apply")?;
    }
    let run = store.load(req.run)?;
    let verdict = verdict_of(&run)?;
    if let Some(why) = verdict.refusal(req.force, req.trust_suspect) {
        return Err(Error::usage(why));
    }
    let plan = plan_apply(&req.root, &verdict, store)?;
    // The value apply replaces must be the one the sweep measured against.
    if let Some((_, now)) = plan.live.first() {
        if let Some(why) = verdict.live_changed(now) {
            return Err(Error::usage(why));
        }
    }
    let mut warnings = Vec::new();
    if verdict.interrupted {
        warnings.push(format!(
            "run {} was interrupted: its verdict rests on the {} round(s) it finished",
            verdict.run_id, verdict.rounds
        ));
    }
    warnings.extend(plan.warnings.iter().cloned());
    Ok(Planned {
        verdict,
        plan,
        warnings,
    })
}

impl Planned {
    /// Apply the planned change: its files written, the live value set,
    /// the record stored (`super::apply`); the change as the kernel kept it.
    pub(crate) fn measure(&self, store: &mut Store) -> Result<AppliedChange> {
        super::apply(self.plan.clone(), store)
    }
}

/// This machine's applied records on `root` (records of other machines are
/// left out, each with a note), all or only those in force.
pub(crate) fn applied(
    store: &Store,
    root: &Root,
    all: bool,
) -> Result<(Vec<AppliedChange>, Vec<String>)> {
    let (ok, notes) = changes_here(store)?;
    let list = ok
        .into_iter()
        .filter(|c| c.root == root.display() && (all || c.state == "applied"))
        .collect();
    Ok((list, notes))
}

/// `verify`: root, then each change in force checked against the live
/// system; with the notes about records left out.
pub(crate) fn verify_all(store: &Store, root: &Root) -> Result<(Vec<Check>, Vec<String>)> {
    require_root(root, "verify")?;
    let (active, notes) = applied(store, root, false)?;
    Ok((active.iter().map(|c| verify(root, c)).collect(), notes))
}

/// Plan `unapply WHAT` over `active` (this machine's changes in force on
/// the root, from [`applied`]): root (unless a dry run), the changes it
/// names (a knob, KNOB@DISK, or `all`), and for each what is removed and
/// restored. Nothing in force and `all` in a dry run is an empty plan (the
/// answer), not an error.
pub(crate) fn plan_unapply_all(
    active: &[AppliedChange],
    root: &Root,
    what: &str,
    force: bool,
    dry_run: bool,
) -> Result<Vec<UnapplyPlan>> {
    if !dry_run {
        require_root(root, "unapply")?;
    }
    if active.is_empty() && what == "all" && dry_run {
        return Ok(Vec::new());
    }
    let chosen: Vec<&AppliedChange> = active
        .iter()
        .filter(|c| what == "all" || c.id == what || c.knob == what)
        .collect();
    if chosen.is_empty() {
        return Err(Error::usage(format!(
            "nothing applied matches '{what}' (applied: {})",
            if active.is_empty() {
                "none".to_string()
            } else {
                active
                    .iter()
                    .map(|c| c.id.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        )));
    }
    chosen.into_iter().map(|c| plan_unapply(c, force)).collect()
}
