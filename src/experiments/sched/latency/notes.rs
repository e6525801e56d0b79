//! The cause notes of `sched.latency`: one line per (CPU, culprit) that
//! the run stores, and [`parse_cause_note`] with which `advise` reads them
//! back.

use super::CAUSE_PREFIX;
use crate::experiments::common::latency_cause::{Cause, Culprit};
use crate::units::seconds;

/// One note per (CPU, culprit), most spikes first, in a form `advise` reads
/// back ([`parse_cause_note`]); spikes the tracer was not armed for get one
/// plain note (no culprit for `advise` to act on).
pub(super) fn cause_notes(causes: &[Cause], method: &str) -> Vec<String> {
    let mut groups: Vec<(usize, Culprit, u64, u64, f64, String)> = Vec::new();
    let untraced: Vec<&Cause> = causes
        .iter()
        .filter(|c| c.culprit == Culprit::Untraced)
        .collect();
    for c in causes.iter().filter(|c| c.culprit != Culprit::Untraced) {
        match groups.iter_mut().find(|g| g.0 == c.cpu && g.1 == c.culprit) {
            Some(g) => {
                g.2 += 1;
                if c.latency_ns > g.3 {
                    g.3 = c.latency_ns;
                    g.4 = c.share;
                    g.5 = c.irq_context.clone();
                }
            }
            None => groups.push((
                c.cpu,
                c.culprit.clone(),
                1,
                c.latency_ns,
                c.share,
                c.irq_context.clone(),
            )),
        }
    }
    groups.sort_by(|a, b| b.2.cmp(&a.2).then(b.3.cmp(&a.3)));
    let mut notes: Vec<String> = groups
        .into_iter()
        .take(12)
        .map(|(cpu, culprit, n, max, share, irqs)| {
            format!(
                "{CAUSE_PREFIX}cpu {cpu}: {n} spike(s), max {}, by {}{}{} [method {method}]; \
                 knob: {}",
                seconds(max as f64 / 1e9),
                culprit.describe(),
                if share > 0.0 {
                    format!(
                        ", holding the CPU {:.0}% of the delay",
                        share.min(1.0) * 100.0
                    )
                } else {
                    String::new()
                },
                if irqs.is_empty() {
                    String::new()
                } else {
                    format!("; IRQs around it: {irqs}")
                },
                culprit.knob()
            )
        })
        .collect();
    if let Some(max) = untraced.iter().map(|c| c.latency_ns).max() {
        let mut cpus: Vec<usize> = untraced.iter().map(|c| c.cpu).collect();
        cpus.sort_unstable();
        cpus.dedup();
        notes.push(format!(
            "{} spike(s) (max {}, CPU {}) came while the switch tracer was disarmed: a late \
             wake-up arms it for the next 100 ms of wake-ups, then it pauses nine times as \
             long, so a culprit that recurs within 100 ms is named from its next spike on \
             [method {method}]",
            untraced.len(),
            seconds(max as f64 / 1e9),
            cpus.iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join(" ")
        ));
    }
    notes
}

/// A cause note read back: (cpu, spikes, max latency text, culprit text,
/// method, knob).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CauseNote {
    pub(crate) cpu: usize,
    pub(crate) spikes: u64,
    pub(crate) max: String,
    pub(crate) culprit: String,
    pub(crate) method: String,
    pub(crate) knob: String,
}

pub(crate) fn parse_cause_note(note: &str) -> Option<CauseNote> {
    let rest = note.strip_prefix(CAUSE_PREFIX)?.strip_prefix("cpu ")?;
    let (cpu, rest) = rest.split_once(": ")?;
    let (spikes, rest) = rest.split_once(" spike(s), max ")?;
    let (max, rest) = rest.split_once(", by ")?;
    let (culprit, rest) = rest.split_once(" [method ")?;
    let (method, knob) = rest.split_once("]; knob: ")?;
    let culprit = culprit
        .split(", holding the CPU")
        .next()?
        .split("; IRQs around it")
        .next()?;
    Some(CauseNote {
        cpu: cpu.parse().ok()?,
        spikes: spikes.parse().ok()?,
        max: max.to_string(),
        culprit: culprit.to_string(),
        method: method.to_string(),
        knob: knob.to_string(),
    })
}
