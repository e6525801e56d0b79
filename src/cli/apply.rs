//! `tunelab apply RUN`, `applied`, `verify`, `unapply`: keep a tune run's
//! winning value across boots, check it is still live, take it back
//! (docs/apply.md).

use std::path::PathBuf;

use super::Out;
use crate::model::applied::AppliedChange;
use crate::report::applyview;
use crate::store::Store;
use crate::tune::apply;
use crate::tune::persist::Root;
use crate::{Error, Result};

/// The file-system root (hidden: tests run everything on a fake tree).
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct RootArg {
    /// Act on a fake tree: DIR/etc, DIR/proc/sys, DIR/sys, DIR/run instead of
    /// the system's (for tests; no root needed there).
    #[arg(long, value_name = "DIR", hide = true)]
    pub(crate) root: Option<PathBuf>,
}

impl RootArg {
    fn get(&self) -> Result<Root> {
        if let Some(d) = &self.root {
            if !d.is_dir() {
                return Err(Error::usage(format!(
                    "--root {}: not a directory",
                    d.display()
                )));
            }
            let abs = std::fs::canonicalize(d).map_err(|e| Error::io("cannot resolve", d, e))?;
            // The journal acts on settings below a fake root only when the
            // tree marks itself as one (safety::journal::FAKE_ROOT_MARKER).
            return Ok(Root::new(Some(&abs)));
        }
        Ok(Root::new(None))
    }
}

/// What apply and unapply do is a few small writes and one store commit:
/// no measurement. The bound is what a stalled disk may add to their fsyncs.
const APPLY_TAKES: &str = "well under a second (a few small files written and fsynced, one store \
                           commit; no measurement); at most about 10 s on a stalled disk";
const APPLY_LONGEST_S: f64 = 10.0;

#[derive(clap::Args, Debug)]
pub(crate) struct ApplyArgs {
    /// The tune run whose winning value to keep (id, prefix, last, last~N).
    #[arg(value_name = "RUN")]
    pub(crate) run: String,
    /// Apply the best median even when the run shows no significant improvement.
    #[arg(long)]
    pub(crate) force: bool,
    /// Also act on a verdict that rests on trials the validity guard
    /// flagged (other load during the sweep; refused by default).
    #[arg(long)]
    pub(crate) trust_suspect: bool,
    /// Print what would be written and set; change nothing.
    #[arg(long)]
    pub(crate) dry_run: bool,
    #[command(flatten)]
    pub(crate) root: RootArg,
}

#[derive(clap::Args, Debug)]
pub(crate) struct AppliedArgs {
    /// Also list changes that were unapplied.
    #[arg(long)]
    pub(crate) all: bool,
    #[command(flatten)]
    pub(crate) root: RootArg,
}

#[derive(clap::Args, Debug)]
pub(crate) struct VerifyArgs {
    /// Accepted for symmetry: verify only reads.
    #[arg(long)]
    pub(crate) dry_run: bool,
    #[command(flatten)]
    pub(crate) root: RootArg,
}

#[derive(clap::Args, Debug)]
pub(crate) struct UnapplyArgs {
    /// The knob (or KNOB@DISK) to take back, or 'all'.
    #[arg(value_name = "KNOB|all")]
    pub(crate) what: String,
    /// Restore the pre-apply value even where someone changed the live value since.
    #[arg(long)]
    pub(crate) force: bool,
    /// Print what would be removed and restored; change nothing.
    #[arg(long)]
    pub(crate) dry_run: bool,
    #[command(flatten)]
    pub(crate) root: RootArg,
}

pub(crate) fn exec_apply(args: &ApplyArgs, out: &Out, store: &mut Store) -> Result<i32> {
    let planned = apply::plan(
        &apply::Request {
            run: &args.run,
            force: args.force,
            trust_suspect: args.trust_suspect,
            dry_run: args.dry_run,
            root: args.root.get()?,
        },
        store,
    )?;
    for w in &planned.warnings {
        out.warn(w);
    }
    let (plan, v) = (&planned.plan, &planned.verdict);
    let text = |new: &str| {
        applyview::apply_plan(
            &plan.change,
            &plan.live,
            &plan.partners,
            new,
            args.dry_run,
            APPLY_TAKES,
        )
    };
    if args.dry_run {
        if out.json {
            out.json_data(&serde_json::json!({
                "dry_run": true,
                "verdict": v,
                "plan": plan,
                "longest_s": APPLY_LONGEST_S,
                "how_long": APPLY_TAKES,
            }))?;
        } else {
            out.data(&text(&plan.change.new))?;
            if let Some(f) = plan.change.files.first() {
                out.data(&format!("\n{}:\n{}", f.path, f.content))?;
            }
        }
        return Ok(0);
    }
    let done = planned.measure(store)?;
    if out.json {
        out.json_data(&done)?;
        return Ok(0);
    }
    // The value the kernel kept, as read back (it may round or clamp).
    out.data(&text(&done.new))?;
    for n in &done.notes {
        out.warn(n);
    }
    out.data(&format!(
        "applied {} = {} from run {}\nre-measure the same workload now: {}\n\
         compare it with a run of that command from before apply (tunelab compare BEFORE last): \
         compare names this change and its verdict\n",
        done.id, done.new, done.run_id, done.remeasure
    ))?;
    Ok(0)
}

pub(crate) fn exec_applied(args: &AppliedArgs, out: &Out, store: &Store) -> Result<i32> {
    let (list, notes) = apply::applied(store, &args.root.get()?, args.all)?;
    notes.iter().for_each(|n| out.warn(n));
    if out.json {
        out.json_data(&list)?;
        return Ok(0);
    }
    if list.is_empty() {
        out.info("nothing applied by tunelab (tunelab apply RUN)");
        return Ok(0);
    }
    out.data(&applyview::applied_table(&list, out.term))?;
    Ok(0)
}

/// Exit 5 when anything drifted (the system is no longer what was applied).
pub(crate) fn exec_verify(args: &VerifyArgs, out: &Out, store: &Store) -> Result<i32> {
    let (checks, notes) = apply::verify_all(store, &args.root.get()?)?;
    notes.iter().for_each(|n| out.warn(n));
    let bad = checks.iter().filter(|c| !c.ok()).count();
    if out.json {
        out.json_data(&checks)?;
    } else if checks.is_empty() {
        out.info("nothing applied by tunelab to verify");
    } else {
        let rows = checks
            .iter()
            .map(|c| {
                vec![
                    c.id.clone(),
                    c.applied.clone(),
                    c.live.clone().unwrap_or_else(|| "-".into()),
                    c.status.clone(),
                    c.cause.clone().unwrap_or_default(),
                ]
            })
            .collect();
        out.data(&out.table(&["knob", "applied", "live", "status", "why"], rows))?;
    }
    if bad > 0 {
        return Err(Error::Regression(format!(
            "{bad} applied setting(s) are not in place (see above)"
        )));
    }
    Ok(0)
}

pub(crate) fn exec_unapply(args: &UnapplyArgs, out: &Out, store: &mut Store) -> Result<i32> {
    let root = args.root.get()?;
    let (active, notes) = apply::applied(store, &root, false)?;
    notes.iter().for_each(|n| out.warn(n));
    let plans = apply::plan_unapply_all(&active, &root, &args.what, args.force, args.dry_run)?;
    if plans.is_empty() {
        // A dry run answers the question: nothing would be taken back.
        if out.json {
            out.json_data(&Vec::<AppliedChange>::new())?;
        } else {
            out.data("unapply all — dry run: nothing applied by tunelab, nothing to take back\n")?;
        }
        return Ok(0);
    }
    let mut done = Vec::new();
    for plan in plans {
        for w in &plan.warnings {
            out.warn(w);
        }
        let s = applyview::unapply_plan(&plan.restore, &plan.remove);
        if args.dry_run {
            out.data(&format!(
                "unapply {} — dry run: nothing is changed\n{s}",
                plan.change.id
            ))?;
            continue;
        }
        let c = apply::unapply(plan, store)?;
        out.data(&format!("unapplied {} (back to {})\n{s}", c.id, c.old))?;
        done.push(c);
    }
    if out.json && !args.dry_run {
        out.json_data(&done)?;
    }
    Ok(0)
}
