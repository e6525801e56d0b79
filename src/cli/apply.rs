//! `tunelab apply RUN`, `applied`, `verify`, `unapply`: keep a tune run's
//! winning value across boots, check it is still live, take it back
//! (docs/apply.md).

use std::path::PathBuf;

use super::Out;
use crate::model::applied::AppliedChange;
use crate::report::table;
use crate::store::Store;
use crate::tune::apply::{self, Check};
use crate::tune::persist::Root;
use crate::{Error, Result};

/// The file-system root (hidden: tests run everything on a fake tree).
#[derive(clap::Args, Debug, Clone)]
pub struct RootArg {
    /// Act on a fake tree: DIR/etc, DIR/proc/sys, DIR/sys, DIR/run instead of
    /// the system's (for tests; no root needed there).
    #[arg(long, value_name = "DIR", hide = true)]
    pub root: Option<PathBuf>,
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

fn need_root(root: &Root, verb: &str) -> Result<()> {
    if root.is_real() && !crate::engine::host::is_root() {
        // verify writes nothing: say what it reads that is root's.
        return Err(Error::privilege(if verb == "verify" {
            "verify changes nothing, but it needs root to read what apply recorded: root's \
             store and state directory (trusted only when root owns them); run it as root \
             (sudo tunelab verify)"
                .to_string()
        } else {
            format!(
                "{verb} changes system configuration (/etc, /proc/sys, /sys) and needs root \
                 (run with sudo)"
            )
        }));
    }
    Ok(())
}

#[derive(clap::Args, Debug)]
pub struct ApplyArgs {
    /// The tune run whose winning value to keep (id, prefix, last, last~N).
    #[arg(value_name = "RUN")]
    pub run: String,
    /// Apply the best median even when the run shows no significant improvement.
    #[arg(long)]
    pub force: bool,
    /// Also act on a verdict that rests on trials the validity guard
    /// flagged (other load during the sweep; refused by default).
    #[arg(long)]
    pub trust_suspect: bool,
    /// Print what would be written and set; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub root: RootArg,
}

#[derive(clap::Args, Debug)]
pub struct AppliedArgs {
    /// Also list changes that were unapplied.
    #[arg(long)]
    pub all: bool,
    #[command(flatten)]
    pub root: RootArg,
}

#[derive(clap::Args, Debug)]
pub struct VerifyArgs {
    /// Accepted for symmetry: verify only reads.
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub root: RootArg,
}

#[derive(clap::Args, Debug)]
pub struct UnapplyArgs {
    /// The knob (or KNOB@DISK) to take back, or 'all'.
    #[arg(value_name = "KNOB|all")]
    pub what: String,
    /// Restore the pre-apply value even where someone changed the live value since.
    #[arg(long)]
    pub force: bool,
    /// Print what would be removed and restored; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub root: RootArg,
}

/// This machine's applied records (others are ignored with a note).
fn here(store: &Store, out: &Out) -> Result<Vec<AppliedChange>> {
    let (ok, notes) = apply::changes_here(store)?;
    notes.iter().for_each(|n| out.warn(n));
    Ok(ok)
}

fn active(store: &Store, root: &Root, out: &Out) -> Result<Vec<AppliedChange>> {
    Ok(here(store, out)?
        .into_iter()
        .filter(|c| c.state == "applied" && c.root == root.display())
        .collect())
}

pub fn exec_apply(args: &ApplyArgs, out: &Out, store: &mut Store) -> Result<i32> {
    let root = args.root.get()?;
    if !args.dry_run {
        need_root(&root, "apply")?;
    }
    let run = store.load(&args.run)?;
    let v = apply::verdict_of(&run)?;
    if let Some(why) = v.refusal(args.force, args.trust_suspect) {
        return Err(Error::usage(why));
    }
    let plan = apply::plan_apply(&root, &v, store)?;
    // The value apply replaces must be the one the sweep measured against.
    if let Some((_, now)) = plan.live.first() {
        if let Some(why) = v.live_changed(now) {
            return Err(Error::usage(why));
        }
    }
    if v.interrupted {
        out.warn(&format!(
            "run {} was interrupted: its verdict rests on the {} round(s) it finished",
            v.run_id, v.rounds
        ));
    }
    for w in &plan.warnings {
        out.warn(w);
    }
    let c = plan.change.clone();
    let mut s = String::new();
    if args.dry_run {
        s.push_str("apply — dry run: nothing is changed\n");
    }
    s.push_str(&format!("verdict:  {}\n", c.verdict));
    for (p, old) in &plan.live {
        s.push_str(&format!(
            "live:     {} {old} → {} (written now, read back)\n",
            p.display(),
            c.new
        ));
    }
    for p in &plan.partners {
        s.push_str(&format!(
            "          {} is {} (the kernel zeroes it; unapply restores it)\n",
            p.0.display(),
            p.1
        ));
    }
    for f in &c.files {
        s.push_str(&format!("file:     {} (new, tunelab's)\n", f.path));
    }
    if let Some(l) = &c.fstab_line {
        s.push_str(&format!("fstab:    {l}\n"));
    }
    s.push_str(&format!(
        "restore:  'tunelab unapply {}' removes the file(s) and writes {} back\n",
        c.knob, c.old
    ));
    s.push_str(&format!("how long: {APPLY_TAKES}\n"));
    if args.dry_run {
        if out.json {
            out.json_data(&serde_json::json!({
                "dry_run": true,
                "verdict": &v,
                "plan": &plan,
                "longest_s": APPLY_LONGEST_S,
                "how_long": APPLY_TAKES,
            }))?;
        } else {
            out.data(&s)?;
            if let Some(f) = c.files.first() {
                out.data(&format!("\n{}:\n{}", f.path, f.content))?;
            }
        }
        return Ok(0);
    }
    let done = apply::apply(plan, store)?;
    if out.json {
        out.json_data(&done)?;
        return Ok(0);
    }
    let s = s.replace(
        &format!("→ {} (written", c.new),
        &format!("→ {} (written", done.new),
    );
    out.data(&s)?;
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

pub fn exec_applied(args: &AppliedArgs, out: &Out, store: &Store) -> Result<i32> {
    let root = args.root.get()?;
    let list: Vec<AppliedChange> = here(store, out)?
        .into_iter()
        .filter(|c| c.root == root.display() && (args.all || c.state == "applied"))
        .collect();
    if out.json {
        out.json_data(&list)?;
        return Ok(0);
    }
    if list.is_empty() {
        out.info("nothing applied by tunelab (tunelab apply RUN)");
        return Ok(0);
    }
    let rows = list
        .iter()
        .map(|c| {
            vec![
                c.id.clone(),
                c.state.clone(),
                format!("{} → {}", c.old, c.new),
                c.run_id.clone(),
                c.applied_at.clone(),
                c.files
                    .iter()
                    .map(|f| f.path.clone())
                    .chain(c.fstab_line.iter().map(|_| "fstab line".to_string()))
                    .collect::<Vec<_>>()
                    .join(", "),
            ]
        })
        .collect();
    out.data(&table::render(
        &["knob", "state", "value", "run", "applied", "files"],
        rows,
    ))?;
    Ok(0)
}

/// Exit 5 when anything drifted (the system is no longer what was applied).
pub fn exec_verify(args: &VerifyArgs, out: &Out, store: &Store) -> Result<i32> {
    let root = args.root.get()?;
    need_root(&root, "verify")?;
    let checks: Vec<Check> = active(store, &root, out)?
        .iter()
        .map(|c| apply::verify(&root, c))
        .collect();
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
        out.data(&table::render(
            &["knob", "applied", "live", "status", "why"],
            rows,
        ))?;
    }
    if bad > 0 {
        return Err(Error::Regression(format!(
            "{bad} applied setting(s) are not in place (see above)"
        )));
    }
    Ok(0)
}

pub fn exec_unapply(args: &UnapplyArgs, out: &Out, store: &mut Store) -> Result<i32> {
    let root = args.root.get()?;
    if !args.dry_run {
        need_root(&root, "unapply")?;
    }
    let all = active(store, &root, out)?;
    let chosen: Vec<&AppliedChange> = all
        .iter()
        .filter(|c| args.what == "all" || c.id == args.what || c.knob == args.what)
        .collect();
    if all.is_empty() && args.what == "all" && args.dry_run {
        // A dry run answers the question: nothing would be taken back.
        if out.json {
            out.json_data(&Vec::<AppliedChange>::new())?;
        } else {
            out.data("unapply all — dry run: nothing applied by tunelab, nothing to take back\n")?;
        }
        return Ok(0);
    }
    if chosen.is_empty() {
        return Err(Error::usage(format!(
            "nothing applied matches '{}' (applied: {})",
            args.what,
            if all.is_empty() {
                "none".to_string()
            } else {
                all.iter()
                    .map(|c| c.id.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        )));
    }
    let mut done = Vec::new();
    for c in chosen {
        let plan = apply::plan_unapply(c, args.force)?;
        for w in &plan.warnings {
            out.warn(w);
        }
        let mut s = String::new();
        for (p, now, to) in &plan.restore {
            s.push_str(&format!("live:     {} {now} → {to}\n", p.display()));
        }
        for p in &plan.remove {
            s.push_str(&format!("remove:   {}\n", p.display()));
        }
        if args.dry_run {
            out.data(&format!(
                "unapply {} — dry run: nothing is changed\n{s}",
                c.id
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
