//! `tune --dry-run`: a planned sweep described, read only — what would be
//! changed, from what to what, for how long, and how it is restored.

use super::plan::Planned;
use super::relevance;
use crate::Result;

/// The description as text and as one JSON object.
pub(crate) fn describe(p: &Planned) -> Result<(String, serde_json::Value)> {
    let target = p.workdir();
    let (exp, plan) = (p.exp.as_ref(), &p.plan);
    let mut j = serde_json::Map::new();
    let mut s = format!("tune {} — dry run: nothing is changed\n", p.knob);
    let mut arms = p.values.clone();
    if let Some(fs) = p.fs {
        s.push_str(&format!(
            "  where:    on a new loop-device file system per --fs entry ({fs}, {} each); a block knob acts on that loop device, whose value is read when it exists\n",
            crate::units::format_size(p.fs_size)
        ));
        j.insert("lab".into(), fs.into());
    }
    if let Some(knob) = &p.resolved {
        let now = knob.current()?;
        s.push_str(&format!("  knob:     {} (now {now})\n", knob.location()));
        j.insert("location".into(), knob.location().into());
        j.insert("live".into(), now.clone().into());
        if knob.is_file() && !arms.contains(&now) {
            arms.push(now);
        }
    }
    s.push_str(&format!(
        "  values:   {} → each written, read back (a value the kernel clamps is measured and stored as what it set), then measured; the live value is always one arm, interleaved with the others, and every verdict is against it\n",
        arms.join(", ")
    ));
    s.push_str(&format!(
        "  workload: {} {} in {}; judged on {}{}\n",
        exp.name(),
        p.point.label(exp.params()),
        target.display(),
        p.metric,
        if p.default_metric {
            " (the default for this knob)"
        } else {
            ""
        }
    ));
    let irrelevant = if p.fs.is_none() {
        relevance::check_at(p.knob, exp, &p.point, &target, p.device)
    } else {
        Vec::new()
    };
    for w in &irrelevant {
        s.push_str(&format!(
            "  warning:  this sweep may measure nothing: {w}\n"
        ));
    }
    let n = arms.len();
    let longest = longest_s(plan);
    s.push_str(&format!(
        "  how long: {n} arms × {}…{} shuffled rounds (+{} warm-up); measuring stops at the {:.0} s budget, warm-up at the budget too: at most about {:.0} s plus one round past each and the preparation ({n}×{}…{}={}…{} trials)\n",
        plan.min_trials,
        plan.max_trials,
        plan.warmup,
        plan.budget,
        longest,
        plan.min_trials,
        plan.max_trials,
        n * plan.min_trials,
        n * plan.max_trials,
    ));
    let journal = crate::safety::journal::path();
    s.push_str(&format!(
        "  restore:  the original value is journalled in {} before the first write and written back at the end, on Ctrl-C, and after a kill by the next tunelab ('tunelab restore')\n",
        journal.display()
    ));
    let root = p.require_root().is_ok();
    if !root {
        s.push_str("  note:     changing it needs root: the real run would stop with exit 3\n");
    }
    j.insert("dry_run".into(), true.into());
    j.insert("knob".into(), p.knob.into());
    j.insert("values".into(), arms.into());
    j.insert("experiment".into(), exp.name().into());
    j.insert("point".into(), p.point.label(exp.params()).into());
    j.insert("target".into(), target.display().to_string().into());
    j.insert("metric".into(), p.metric.clone().into());
    j.insert("warnings".into(), irrelevant.into());
    j.insert(
        "rounds".into(),
        serde_json::json!({"warmup": plan.warmup, "min": plan.min_trials, "max": plan.max_trials}),
    );
    j.insert("budget_s".into(), plan.budget.into());
    j.insert("longest_s".into(), longest.into());
    j.insert("journal".into(), journal.display().to_string().into());
    j.insert("needs_root".into(), (!root).into());
    Ok((s, serde_json::Value::Object(j)))
}

/// The longest a sweep measures: the warm-up rounds stop at the budget,
/// then the measured rounds get the whole budget again (each may run one
/// round past it; preparation comes on top).
fn longest_s(plan: &crate::engine::runner::Plan) -> f64 {
    if plan.warmup > 0 {
        2.0 * plan.budget
    } else {
        plan.budget
    }
}
