//! CPU rules: cores that never reach their advertised clock under load,
//! from the newest `cpu.clock` run of this machine.

use super::{Evidence, Finding, Outcome, Severity, Workload};
use crate::experiments::cpu::clock;

/// A core below this share of its cpuinfo_max_freq under load is a finding.
pub(crate) const BELOW_MAX: f64 = 0.95;

/// Cores that stay below their advertised maximum while loaded: a governor
/// that keeps them low, a scaling_max_freq cap, or a firmware/thermal limit.
pub(crate) fn clock_below_max(ev: &Evidence, _: Workload) -> Outcome {
    let has_cpufreq = ev.facts.get("cpu.driver").is_some();
    let Some((run, r)) = &ev.cpu_clock else {
        return if has_cpufreq {
            Outcome::Gap(
                "CPU clock under load not measured on this machine: run 'tunelab run cpu.clock' \
                 to see whether every core reaches its advertised maximum"
                    .into(),
            )
        } else {
            Outcome::Fine
        };
    };
    let Some(ratio) = r.metric(clock::METRIC_VS_MAX).map(|m| m.summary.median) else {
        return Outcome::Fine; // no cpufreq when it was measured: nothing advertised
    };
    if ratio >= BELOW_MAX {
        return Outcome::Fine;
    }
    let slowest = r
        .metric(clock::METRIC_CLOCK_MIN)
        .map(|m| crate::units::human(m.summary.median, "Hz"))
        .unwrap_or_else(|| "?".into());
    let mut evidence = vec![format!(
        "run {run}: {} {}: slowest core {slowest}, {:.0}% of its cpuinfo_max_freq (median of {} trials)",
        clock::NAME,
        r.params_label(),
        ratio * 100.0,
        r.metric(clock::METRIC_VS_MAX).map_or(0, |m| m.summary.n)
    )];
    evidence.extend(
        r.notes
            .iter()
            .filter(|n| n.starts_with("finding:"))
            .cloned(),
    );
    let governor = ev.facts.get("cpu.governor").unwrap_or("?");
    evidence.push(format!(
        "cpu.governor = {governor} (/sys/devices/system/cpu/cpu*/cpufreq/scaling_governor)"
    ));
    let low_governor = governor
        .split(',')
        .any(|g| matches!(g, "powersave" | "conservative" | "userspace"));
    Finding::new("cpu.clock_below_max", Severity::Warning, format!(
            "a core runs at {:.0}% of its advertised maximum clock under load",
            ratio * 100.0
        ))
        .evidence(evidence)
        .why(if low_governor {
            format!(
                "the {governor} governor keeps the clock below the maximum even when the core is \
                 busy: every CPU-bound task takes proportionally longer"
            )
        } else {
            "a busy core should reach cpuinfo_max_freq; when it does not, scaling_max_freq, a \
             thermal cap or the firmware is holding it down, and every CPU-bound task takes \
             proportionally longer (the notes of the cpu.clock run name the cause per core)"
                .into()
        })
        .fix(
            if low_governor {
            "for g in /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor; do echo schedutil > $g; done"
        } else {
            "for c in /sys/devices/system/cpu/cpufreq/policy*; do cat $c/cpuinfo_max_freq > $c/scaling_max_freq; done"
        },
            "Higher power draw and temperature; on a board without a heat sink, watch it with \
               'tunelab run cpu.sustained'.",
        )
        .verify("tunelab tune governor --values schedutil,performance --experiment cpu.clock")
        .into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::run::{MetricResult, PointResult};
    use crate::model::Better;
    use crate::system::inspect::Facts;

    fn clock_result(ratio: f64) -> PointResult {
        let m = |name: &str, unit: &str, v: f64| MetricResult {
            name: name.into(),
            unit: unit.into(),
            better: Better::Higher,
            samples: vec![v; 5],
            warmup: vec![],
            summary: crate::stats::summarize(&[v; 5]),
        };
        PointResult {
            experiment: clock::NAME.into(),
            metrics: vec![
                m(clock::METRIC_VS_MAX, "ratio", ratio),
                m(clock::METRIC_CLOCK_MIN, "Hz", 1.2e9 * ratio),
            ],
            notes: vec!["finding: cpu1 never reached its advertised 1200 MHz under load".into()],
            ..Default::default()
        }
    }

    fn ev(governor: &str, r: Option<PointResult>) -> Evidence {
        Evidence {
            facts: Facts::from_pairs(&[("cpu.governor", governor), ("cpu.driver", "cpufreq-dt")]),
            cpu_clock: r.map(|r| ("run-1".to_string(), r)),
            ..Default::default()
        }
    }

    #[test]
    fn a_core_held_low_is_a_finding_and_a_missing_run_a_gap() {
        let Outcome::Finding(f) =
            clock_below_max(&ev("powersave", Some(clock_result(0.5))), Workload::General)
        else {
            panic!("expected a finding");
        };
        assert_eq!(f.id, "cpu.clock_below_max");
        assert!(f.title.contains("50%"), "{}", f.title);
        assert!(
            f.evidence[0].starts_with("run run-1: cpu.clock"),
            "{:?}",
            f.evidence
        );
        assert!(
            f.evidence[1].contains("cpu1 never reached"),
            "{:?}",
            f.evidence
        );
        assert!(f.command.contains("schedutil"), "{}", f.command);
        let Outcome::Finding(f) =
            clock_below_max(&ev("schedutil", Some(clock_result(0.8))), Workload::General)
        else {
            panic!("expected a finding");
        };
        assert!(f.command.contains("scaling_max_freq"), "{}", f.command);
        assert!(matches!(
            clock_below_max(
                &ev("schedutil", Some(clock_result(0.99))),
                Workload::General
            ),
            Outcome::Fine
        ));
        assert!(matches!(
            clock_below_max(&ev("schedutil", None), Workload::General),
            Outcome::Gap(g) if g.contains("tunelab run cpu.clock")
        ));
    }
}
