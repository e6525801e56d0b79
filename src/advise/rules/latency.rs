//! Rules on stored `sched.latency` results: the culprit of wake-up latency
//! spikes (a thread, an IRQ, a softirq, an idle CPU's C-state exit), with
//! the knob that addresses it.

use super::{Evidence, Finding, Outcome, Severity, Workload};
use crate::experiments::sched::latency::{self, parse_cause_note, CauseNote};
use crate::units::seconds;

/// The spike culprit of the newest `sched.latency` run: the cause with the
/// most spikes over all its points.
pub(crate) fn spike_culprit(ev: &Evidence, workload: Workload) -> Outcome {
    let Some((run, results)) = ev.latency.as_ref() else {
        return if workload == Workload::Latency {
            Outcome::Gap(
                "wake-up latency not measured: run `tunelab run sched.latency` (as root, \
                 idle and with -p load=all) to find what delays periodic tasks"
                    .into(),
            )
        } else {
            Outcome::Fine
        };
    };
    let mut best: Option<(CauseNote, String, f64)> = None;
    for r in results {
        let max = r.metric(latency::METRIC_MAX).map_or(0.0, |m| m.summary.max);
        let point = r
            .params
            .iter()
            .filter(|(k, _)| ["cpus", "load", "policy"].contains(&k.as_str()))
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ");
        for c in r.notes.iter().filter_map(|n| parse_cause_note(n)) {
            if best.as_ref().is_none_or(|b| c.spikes > b.0.spikes) {
                best = Some((c, point.clone(), max));
            }
        }
    }
    let Some((c, point, max)) = best else {
        return Outcome::Fine;
    };
    let severity = if c.culprit.starts_with("thread") || c.culprit.starts_with("IRQ") {
        Severity::Warning
    } else {
        Severity::Info
    };
    Finding::new(
        "latency.spike_culprit",
        severity,
        format!(
            "wake-up latency spikes on CPU {} are caused by {}",
            c.cpu, c.culprit
        ),
    )
    .evidence(vec![format!(
        "run {run}: {} {point}: {} spike(s) on CPU {}, the longest {} (method {}); \
             longest wake-up of the point {}",
        latency::NAME,
        c.spikes,
        c.cpu,
        c.max,
        c.method,
        seconds(max)
    )])
    .why(
        "A periodic task (a recorder's frame, a control loop) runs late by as much as \
              the CPU is held by something else when its timer fires.",
    )
    .fix(
        c.knob.clone(),
        "Moving IRQs or threads shifts their load to other CPUs; holding \
               /dev/cpu_dma_latency at 0 and the performance governor cost power.",
    )
    .verify(format!(
        "tunelab run {} -p cpus={} {}  (the cause should be gone and lat_max lower)",
        latency::NAME,
        c.cpu,
        point
            .split_whitespace()
            .filter(|w| !w.starts_with("cpus="))
            .map(|w| format!("-p {w}"))
            .collect::<Vec<_>>()
            .join(" ")
    ))
    .into()
}
