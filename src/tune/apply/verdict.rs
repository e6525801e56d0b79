//! The tune run's verdict as apply reads it: the knob, metric, noise,
//! device and live value a tune run records in its environment, the
//! winning value against the live value it was measured with, and the
//! command that measures it again. A run that measured no live value, or
//! whose live value is no longer the one in place, decides nothing about
//! the value apply would replace: it is refused.

use crate::model::run::Run;
use crate::tune::decide::{decide, ENV_LIVE};
use crate::tune::relevance::ENV_RELEVANCE;
use crate::tune::sweep::default_metric;
use crate::{Error, Result};

/// Environment keys a tune run records for apply (see cli/tune.rs).
pub(crate) const ENV_KNOB: &str = "tune.knob";
pub(crate) const ENV_METRIC: &str = "tune.metric";
pub(crate) const ENV_NOISE: &str = "tune.noise";
pub(crate) const ENV_DEVICE: &str = "tune.device";
pub(crate) const ENV_ORIGINAL: &str = "tune.original";
pub(crate) const ENV_LAB: &str = "tune.lab";

/// What a tune run concluded, re-derived from its stored samples.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct TuneVerdict {
    pub(crate) run_id: String,
    pub(crate) knob: String,
    pub(crate) metric: String,
    pub(crate) noise: f64,
    /// The disk block knobs acted on.
    pub(crate) device: Option<String>,
    /// The live value before the sweep, when the run recorded it.
    pub(crate) original: Option<String>,
    /// The value better than the live one with 95% confidence, if any.
    pub(crate) best: Option<String>,
    /// The best median (the candidate when nothing won).
    pub(crate) candidate: String,
    /// What the candidate is compared with: the live value, measured as one
    /// arm of the sweep.
    pub(crate) baseline: String,
    /// Median per-round ratio candidate / live, and its CI.
    pub(crate) ratio: f64,
    pub(crate) ci95_low: f64,
    pub(crate) ci95_high: f64,
    /// Rounds the candidate did better, of those both arms finished.
    pub(crate) wins: usize,
    pub(crate) rounds: usize,
    pub(crate) explanation: String,
    /// Why the workload may not exercise the knob (recorded by tune).
    pub(crate) relevance: Option<String>,
    /// The sweep was cut short by a signal (its finished rounds are kept).
    pub(crate) interrupted: bool,
    /// The verdict's two arms (candidate, live) hold trials the validity
    /// guard flagged: what they were.
    pub(crate) suspect: Option<String>,
    /// The sweep ran on a loop device of the file-system lab.
    pub(crate) lab: bool,
    /// The directory the sweep measured in (for the fstab line).
    pub(crate) target: Option<String>,
    /// The command that measures the same workload at the applied value.
    pub(crate) remeasure: String,
    /// The command that tunes the same knob on the same workload again.
    pub(crate) retune: String,
}

impl TuneVerdict {
    /// One line for file headers and the store.
    pub(crate) fn summary(&self) -> String {
        format!(
            "{}={} vs the live value ({}): {} ×{:.3} per round (95% CI {:.3}–{:.3}), better in {} \
             of {} paired rounds, {}",
            self.knob,
            self.candidate,
            self.baseline,
            self.metric,
            self.ratio,
            self.ci95_low,
            self.ci95_high,
            self.wins,
            self.rounds,
            if self.best.is_some() {
                format!(
                    "significantly better beyond ±{:.0}% noise",
                    self.noise * 100.0
                )
            } else {
                "NOT significantly better (applied with --force)".to_string()
            }
        ) + &self
            .suspect
            .as_ref()
            .map(|s| format!(" (suspect: {s})"))
            .unwrap_or_default()
    }

    /// Why apply must not act on this verdict before looking at the system
    /// (None: it may). `--force` overrides a missing win and a workload
    /// that may not exercise the knob, never a verdict against another
    /// baseline (that is [`TuneVerdict::live_changed`]); `trust_suspect`
    /// (--trust-suspect) alone lets flagged trials decide.
    pub(crate) fn refusal(&self, force: bool, trust_suspect: bool) -> Option<String> {
        if let Some(s) = self.suspect.as_ref().filter(|_| !trust_suspect) {
            return Some(format!(
                "run {}'s verdict for {}={} rests on trials the validity guard flagged (other \
                 load during the sweep: {s}); the difference may be that load's, not the \
                 knob's. Nothing applied; tune again on a quiet machine: {} (--trust-suspect \
                 applies it anyway)",
                self.run_id, self.knob, self.candidate, self.retune
            ));
        }
        if force {
            return None;
        }
        if let Some(why) = &self.relevance {
            return Some(format!(
                "run {} warned before measuring that its workload may not exercise {}: {why}. \
                 A 'better' value there rests on noise or on another effect; tune with a \
                 workload that exercises the knob. Nothing applied (--force applies {} anyway)",
                self.run_id, self.knob, self.candidate
            ));
        }
        if self.best.is_none() {
            return Some(format!(
                "run {} shows no value significantly better than the live value: {}. Nothing \
                 applied (--force applies {} anyway)",
                self.run_id, self.explanation, self.candidate
            ));
        }
        None
    }

    /// Refuse when the value in place now is not the live value the sweep
    /// measured: the verdict compares the candidate with a value that is no
    /// longer the one apply would replace.
    pub(crate) fn live_changed(&self, now: &str) -> Option<String> {
        (now != self.baseline).then(|| {
            format!(
                "{} is {now} now, but run {} measured its values against {} (the live value \
                 then): it says nothing about replacing {now}. Nothing applied; tune again \
                 against the value in place: {}",
                self.knob, self.run_id, self.baseline, self.retune
            )
        })
    }
}

/// The value of `--flag X` in a stored argv.
pub(super) fn flag<'a>(argv: &'a [String], name: &str) -> Option<&'a str> {
    let eq = format!("{name}=");
    argv.iter().enumerate().find_map(|(i, a)| {
        if a == name {
            argv.get(i + 1).map(String::as_str)
        } else {
            a.strip_prefix(&eq)
        }
    })
}

/// The knob of a tune run: recorded in its environment, or (runs stored
/// before it was) the word after `tune` in its command line.
pub(super) fn knob_of(run: &Run) -> Option<String> {
    if let Some(k) = run.environment.get(ENV_KNOB) {
        return Some(k.clone());
    }
    let i = run.argv.iter().position(|a| a == "tune")?;
    run.argv.get(i + 1).cloned()
}

/// Read a tune run's verdict back from its samples (the rule `tune`
/// printed: a value wins only when it beats the live value, round by round,
/// with 95% confidence and beyond the noise).
pub(crate) fn verdict_of(run: &Run) -> Result<TuneVerdict> {
    let knob = knob_of(run).ok_or_else(|| {
        Error::usage(format!(
            "run {} is not a tune run (no knob recorded): apply takes the run of a \
             'tunelab tune KNOB …'",
            run.id
        ))
    })?;
    if run.results.is_empty() {
        return Err(Error::usage(format!("tune run {} has no results", run.id)));
    }
    let labs: std::collections::BTreeSet<String> = run
        .results
        .iter()
        .filter_map(|r| r.params.get("fs").map(|v| v.to_string()))
        .collect();
    if labs.len() > 1 {
        return Err(Error::usage(format!(
            "run {} swept {knob} on several lab file systems ({}): each has its own verdict; \
             tune on the one you use and apply that run",
            run.id,
            labs.into_iter().collect::<Vec<_>>().join(", ")
        )));
    }
    let metrics: Vec<(String, String)> = run.results[0]
        .metrics
        .iter()
        .map(|m| (m.name.clone(), m.unit.clone()))
        .collect();
    let metric = run
        .environment
        .get(ENV_METRIC)
        .cloned()
        .or_else(|| flag(&run.argv, "--metric").map(String::from))
        .unwrap_or_else(|| default_metric(&knob, &metrics));
    let noise = run
        .environment
        .get(ENV_NOISE)
        .and_then(|n| n.parse().ok())
        .or_else(|| {
            flag(&run.argv, "--noise").and_then(|n| {
                n.trim_end_matches('%')
                    .parse::<f64>()
                    .ok()
                    .map(|p| p / 100.0)
            })
        })
        .unwrap_or(0.02);
    let live = live_arm(run, &knob)?;
    let d = decide(&knob, &run.results, &metric, noise, &live)?;
    let c = d
        .of(&d.candidate)
        .cloned()
        .ok_or_else(|| Error::measurement(format!("run {}: no comparison", run.id)))?;
    let device =
        run.environment.get(ENV_DEVICE).cloned().or_else(|| {
            flag(&run.argv, "--device").map(|d| d.trim_start_matches("/dev/").to_string())
        });
    let lab = run.environment.contains_key(ENV_LAB) || !labs.is_empty();
    Ok(TuneVerdict {
        run_id: run.id.clone(),
        remeasure: remeasure(run, &knob),
        retune: retune(run),
        knob,
        metric,
        noise,
        device,
        original: run.environment.get(ENV_ORIGINAL).cloned(),
        best: d.best.clone(),
        candidate: d.candidate.clone(),
        baseline: live,
        ratio: c.ratio,
        ci95_low: c.ci95_low,
        ci95_high: c.ci95_high,
        wins: c.wins,
        rounds: c.rounds,
        explanation: d.explanation,
        suspect: d.suspect,
        relevance: run.environment.get(ENV_RELEVANCE).cloned(),
        interrupted: run.status == crate::model::run::RunStatus::Interrupted,
        lab,
        target: run
            .environment
            .get("target.path")
            .cloned()
            .or_else(|| flag(&run.argv, "--target").map(String::from)),
    })
}

/// The live arm of a tune run: recorded since tune measures it; in older
/// runs, the recorded original value when the sweep happened to include
/// it. Otherwise the run never measured the value apply would replace.
fn live_arm(run: &Run, knob: &str) -> Result<String> {
    if let Some(l) = run.environment.get(ENV_LIVE) {
        return Ok(l.clone());
    }
    let swept: Vec<String> = run
        .results
        .iter()
        .filter_map(|r| r.params.get(knob).map(|v| v.to_string()))
        .collect();
    let original = run.environment.get(ENV_ORIGINAL);
    if let Some(o) = original.filter(|o| swept.contains(o)) {
        return Ok(o.clone());
    }
    Err(Error::usage(format!(
        "run {} did not measure the value that was live ({}): its sweep compared only {}, so \
         no verdict says whether any of them beats the value apply would replace. Nothing \
         applied; tune again (tune now always measures the live value): {}",
        run.id,
        original.map(String::as_str).unwrap_or("not recorded"),
        swept.join(", "),
        retune(run)
    )))
}

/// `tunelab tune …` as the run was started (its own binary path left out).
fn retune(run: &Run) -> String {
    let mut cmd = String::from("tunelab");
    for a in run.argv.iter().skip(1) {
        cmd.push(' ');
        cmd.push_str(a);
    }
    cmd
}

/// `tunelab run EXP -p … --target …`: the tune run's workload, measured
/// at whatever value is live (after apply: the applied one).
fn remeasure(run: &Run, knob: &str) -> String {
    let r = &run.results[0];
    let mut cmd = format!("tunelab run {}", r.experiment);
    for (k, v) in &r.params {
        if k != knob && k != "fs" {
            cmd.push_str(&format!(" -p {k}={v}"));
        }
    }
    for f in ["--target", "--fs", "--fs-size", "--throttle"] {
        if let Some(v) = flag(&run.argv, f) {
            cmd.push_str(&format!(" {f} {v}"));
        }
    }
    cmd.push_str(&format!(" --label after-apply-{}", run.id));
    cmd
}
