//! Rules on what the flash experiments found on the target's device: a
//! partition or FAT data area off the allocation unit, a media recorder's
//! streams beyond the units the card keeps open, and a dirty limit that
//! holds more than the card's write cache takes at its burst rate.

use super::{dirty_limit, finding, target, Evidence, Finding, Outcome, Severity, Workload};
use crate::experiments::flash::{au_size, open_units, steady_state};
use crate::model::run::PointResult;
use crate::units::{format_size, human};

/// Streams a recorder writes at once: the video, its index and a log.
pub const RECORDER_STREAMS: usize = 3;

fn median(r: &PointResult, metric: &str) -> Option<f64> {
    r.metric(metric).map(|m| m.summary.median)
}

fn newest<'a>(ev: &'a Evidence, exp: &str) -> Option<&'a PointResult> {
    ev.flash.iter().rev().find(|r| r.experiment == exp)
}

/// flash.au-size counted misaligned partitions: its notes say which and how to fix them.
pub(super) fn misaligned(ev: &Evidence, _: Workload) -> Outcome {
    let Some(r) = newest(ev, au_size::NAME) else {
        return Outcome::Fine;
    };
    let (Some(n), Some(unit)) = (
        median(r, au_size::METRIC_MISALIGNED),
        median(r, au_size::METRIC_UNIT),
    ) else {
        return Outcome::Fine;
    };
    if n < 1.0 {
        return Outcome::Fine;
    }
    let verdicts: Vec<String> = r
        .notes
        .iter()
        .filter(|n| n.contains("misaligned") || n.contains("straddles"))
        .cloned()
        .collect();
    finding(Finding {
        id: "flash.misaligned",
        severity: Severity::Warning,
        title: format!("{n:.0} partition(s) or FAT data area(s) are not aligned to the {} allocation unit", format_size(unit as u64)),
        evidence: verdicts.clone(),
        why: "A write that straddles two allocation units makes the card rewrite both: every cluster \
              write costs up to twice the work and wear."
            .into(),
        command: verdicts.first().cloned().unwrap_or_else(|| "recreate the partition at a multiple of the unit".into()),
        risk: "Repartitioning or reformatting destroys the data on it: back it up first.".into(),
        verify: format!("tunelab run {} -p device=DEVICE", au_size::NAME),
    })
}

/// A media recorder writes RECORDER_STREAMS streams; a card that keeps fewer
/// units open closes one on nearly every write.
pub(super) fn streams_vs_open_units(ev: &Evidence, w: Workload) -> Outcome {
    if w != Workload::Media {
        return Outcome::Fine;
    }
    let Some(r) = newest(ev, open_units::NAME) else {
        return Outcome::Gap(format!(
            "how many units the card keeps open is unknown: run `tunelab run {} --target {}`",
            open_units::NAME,
            target(ev)
        ));
    };
    let Some(open) = median(r, open_units::METRIC_OPEN) else {
        return Outcome::Fine;
    };
    if open as usize >= RECORDER_STREAMS {
        return Outcome::Fine;
    }
    finding(Finding {
        id: "flash.open-units",
        severity: Severity::Warning,
        title: format!(
            "the card keeps {open:.0} unit(s) open; a recorder writing {RECORDER_STREAMS} files at once exceeds it"
        ),
        evidence: r.notes.iter().filter(|n| n.contains("stream")).cloned().collect(),
        why: "Each write to a unit that is not open makes the card close another (a garbage \
              collection): the rate collapses, by 10x on cheap cards."
            .into(),
        command: format!(
            "write no more than {open:.0} file(s) at a time to this card: keep the index and log \
             in RAM (tmpfs) and append them after the recording, or use a card with more open units"
        ),
        risk: "Data held in RAM is lost on a power cut until it is written.".into(),
        verify: format!("tunelab run {} --target {}", open_units::NAME, target(ev)),
    })
}

/// A dirty limit above the card's cache: when it is flushed the card falls to
/// its steady rate partway through, and the flush takes that long.
pub(super) fn dirty_vs_card_cache(ev: &Evidence, _: Workload) -> Outcome {
    let Some(r) = newest(ev, steady_state::NAME) else {
        return Outcome::Fine;
    };
    let (Some(cache), Some(steady), Some((limit, limit_src))) = (
        median(r, steady_state::METRIC_CACHE),
        median(r, steady_state::METRIC_STEADY),
        dirty_limit(ev),
    ) else {
        return Outcome::Fine;
    };
    if cache <= 0.0 || (limit as f64) <= cache || steady <= 0.0 {
        return Outcome::Fine;
    }
    let seconds = (limit as f64 - cache) / steady;
    let want = ((cache as u64) >> 20).max(4) << 20;
    finding(Finding {
        id: "flash.dirty-above-cache",
        severity: if seconds > 5.0 { Severity::Warning } else { Severity::Info },
        title: format!(
            "the dirty limit ({}) is larger than the card's write cache ({}): a full flush ends at the steady rate",
            format_size(limit),
            format_size(cache as u64)
        ),
        evidence: vec![
            limit_src,
            format!("{}: cache {}, steady rate {}", steady_state::NAME, format_size(cache as u64), human(steady, "B/s")),
        ],
        why: format!(
            "The card takes {} at its burst rate, then the remaining {} drain at {}: {:.1} s during \
             which a sync or fsync waits.",
            format_size(cache as u64),
            format_size(limit - cache as u64),
            human(steady, "B/s"),
            seconds
        ),
        command: format!("sysctl -w vm.dirty_bytes={want} vm.dirty_background_bytes={}", want / 2),
        risk: "Writers are throttled sooner; the limit is global to all devices.".into(),
        verify: format!("tunelab run {} --target {}", steady_state::NAME, target(ev)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Better;
    use crate::model::run::MetricResult;
    use crate::system::inspect::Facts;

    fn result(exp: &str, metrics: &[(&str, f64)], notes: &[&str]) -> PointResult {
        PointResult {
            experiment: exp.into(),
            metrics: metrics
                .iter()
                .map(|&(name, v)| MetricResult {
                    name: name.into(),
                    unit: "x".into(),
                    better: Better::Higher,
                    samples: vec![v],
                    warmup: vec![],
                    summary: crate::stats::summarize(&[v]),
                })
                .collect(),
            notes: notes.iter().map(|n| n.to_string()).collect(),
            elapsed_s: 1.0,
            ..Default::default()
        }
    }

    fn ev(flash: Vec<PointResult>) -> Evidence {
        Evidence {
            facts: Facts::from_pairs(&[("fs.path", "/data"), ("vm.dirty_bytes", "268435456")]),
            flash,
            ..Default::default()
        }
    }

    fn id(o: Outcome) -> Option<&'static str> {
        match o {
            Outcome::Finding(f) => Some(f.id),
            _ => None,
        }
    }

    #[test]
    fn a_misaligned_partition_is_reported_with_its_fix() {
        let r = result(
            au_size::NAME,
            &[(au_size::METRIC_MISALIGNED, 1.0), (au_size::METRIC_UNIT, 4194304.0)],
            &["mmcblk0p1 starts at byte 32256 (31 KiB into a 4096 KiB unit): misaligned; recreate it"],
        );
        let Outcome::Finding(f) = misaligned(&ev(vec![r]), Workload::General) else {
            panic!("no finding")
        };
        assert!(f.command.contains("misaligned"), "{}", f.command);
        let r = result(
            au_size::NAME,
            &[
                (au_size::METRIC_MISALIGNED, 0.0),
                (au_size::METRIC_UNIT, 4194304.0),
            ],
            &[],
        );
        assert_eq!(id(misaligned(&ev(vec![r]), Workload::General)), None);
    }

    #[test]
    fn a_recorder_beyond_the_open_units_is_found_for_media_only() {
        let two = || {
            ev(vec![result(
                open_units::NAME,
                &[(open_units::METRIC_OPEN, 2.0)],
                &[],
            )])
        };
        assert_eq!(
            id(streams_vs_open_units(&two(), Workload::Media)),
            Some("flash.open-units")
        );
        assert_eq!(id(streams_vs_open_units(&two(), Workload::General)), None);
        let four = ev(vec![result(
            open_units::NAME,
            &[(open_units::METRIC_OPEN, 4.0)],
            &[],
        )]);
        assert_eq!(id(streams_vs_open_units(&four, Workload::Media)), None);
        assert!(matches!(
            streams_vs_open_units(&ev(vec![]), Workload::Media),
            Outcome::Gap(_)
        ));
    }

    #[test]
    fn a_dirty_limit_above_the_card_cache_says_how_long_the_flush_runs_slow() {
        // 256 MiB dirty, a 64 MiB cache, 8 MiB/s steady: 24 s at the steady rate.
        let r = result(
            steady_state::NAME,
            &[
                (steady_state::METRIC_CACHE, 67108864.0),
                (steady_state::METRIC_STEADY, 8388608.0),
            ],
            &[],
        );
        let Outcome::Finding(f) = dirty_vs_card_cache(&ev(vec![r]), Workload::General) else {
            panic!("no finding")
        };
        assert!(f.why.contains("24.0 s"), "{}", f.why);
        let big = result(
            steady_state::NAME,
            &[
                (steady_state::METRIC_CACHE, 512.0 * 1048576.0),
                (steady_state::METRIC_STEADY, 8388608.0),
            ],
            &[],
        );
        assert_eq!(
            id(dirty_vs_card_cache(&ev(vec![big]), Workload::General)),
            None
        );
    }
}
