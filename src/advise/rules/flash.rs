//! Rules on what the flash experiments found on the target's device: a
//! partition or FAT data area off the allocation unit, a media recorder's
//! streams beyond the units the card keeps open, and a dirty limit that
//! holds more than the card's write cache takes at its burst rate, and a
//! recorder whose bit rate is above the card's steady rate (the cache runs
//! out after a time the rule computes).

use super::{dirty_limit, target, Evidence, Finding, Outcome, Severity, Workload};
use crate::experiments::flash::{au_size, open_units, steady_state};
use crate::model::run::PointResult;
use crate::units::{format_size, human};

/// Streams a recorder writes at once: the video, its index and a log.
pub(crate) const RECORDER_STREAMS: usize = 3;

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
    Finding::new(
        "flash.misaligned",
        Severity::Warning,
        format!(
            "{n:.0} partition(s) or FAT data area(s) are not aligned to the {} allocation unit",
            format_size(unit as u64)
        ),
    )
    .evidence(verdicts.clone())
    .why(
        "A write that straddles two allocation units makes the card rewrite both: every cluster \
              write costs up to twice the work and wear.",
    )
    .fix(
        verdicts
            .first()
            .cloned()
            .unwrap_or_else(|| "recreate the partition at a multiple of the unit".into()),
        "Repartitioning or reformatting destroys the data on it: back it up first.",
    )
    .verify(format!("tunelab run {} -p device=DEVICE", au_size::NAME))
    .into()
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
    Finding::new("flash.open-units", Severity::Warning, format!(
            "the card keeps {open:.0} unit(s) open; a recorder writing {RECORDER_STREAMS} files at once exceeds it"
        ))
        .evidence(r.notes.iter().filter(|n| n.contains("stream")).cloned().collect())
        .why("Each write to a unit that is not open makes the card close another (a garbage \
              collection): the rate collapses, by 10x on cheap cards.")
        .fix(
            format!(
            "write no more than {open:.0} file(s) at a time to this card: keep the index and log \
             in RAM (tmpfs) and append them after the recording, or use a card with more open units"
        ),
            "Data held in RAM is lost on a power cut until it is written.",
        )
        .verify(format!("tunelab run {} --target {}", open_units::NAME, target(ev)))
        .into()
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
    Finding::new("flash.dirty-above-cache", if seconds > 5.0 { Severity::Warning } else { Severity::Info }, format!(
            "the dirty limit ({}) is larger than the card's write cache ({}): a full flush ends at the steady rate",
            format_size(limit),
            format_size(cache as u64)
        ))
        .evidence(vec![
            limit_src,
            format!("{}: cache {}, steady rate {}", steady_state::NAME, format_size(cache as u64), human(steady, "B/s")),
        ])
        .why(format!(
            "The card takes {} at its burst rate, then the remaining {} drain at {}: {:.1} s during \
             which a sync or fsync waits.",
            format_size(cache as u64),
            format_size(limit - cache as u64),
            human(steady, "B/s"),
            seconds
        ))
        .fix(
            format!("sysctl -w vm.dirty_bytes={want} vm.dirty_background_bytes={}", want / 2),
            "Writers are throttled sooner; the limit is global to all devices.",
        )
        .verify(format!("tunelab run {} --target {}", steady_state::NAME, target(ev)))
        .into()
}

/// When a stream of `rate` B/s fills a cache of `cache` bytes that drains
/// at `steady` B/s while the card takes writes at up to `burst` B/s: the
/// cache grows by rate − steady each second, so it is full after
/// cache / (rate − steady) s; above the burst rate the card falls behind at
/// once. None: the card keeps up for ever (rate ≤ steady).
pub(crate) fn cache_runs_out_after(rate: f64, cache: f64, burst: f64, steady: f64) -> Option<f64> {
    if rate <= steady {
        return None;
    }
    if rate >= burst || cache <= 0.0 {
        return Some(0.0);
    }
    Some(cache / (rate - steady))
}

/// The recorder's bit rate (io.stream `bitrate`, bits/s) in bytes/s.
fn recorder_rate(ev: &Evidence) -> Option<(f64, String)> {
    let r = ev.recorder.last()?;
    let raw = match r.params.get("bitrate")? {
        crate::model::ParamValue::Text(t) => t.clone(),
        other => other.to_string(),
    };
    let bps = crate::experiments::io::stream::parse_bitrate(&raw)?;
    Some((bps / 8.0, raw))
}

/// A recorder writing faster than the card's steady rate: fine while the
/// write cache absorbs the difference, then frames back up. Says when.
pub(super) fn recorder_above_steady(ev: &Evidence, w: Workload) -> Outcome {
    let Some(r) = newest(ev, steady_state::NAME) else {
        return Outcome::Fine;
    };
    let (Some(cache), Some(burst), Some(steady)) = (
        median(r, steady_state::METRIC_CACHE),
        median(r, steady_state::METRIC_BURST),
        median(r, steady_state::METRIC_STEADY),
    ) else {
        return Outcome::Fine;
    };
    let Some((rate, raw)) = recorder_rate(ev) else {
        return if w == Workload::Media {
            Outcome::Gap(format!(
                "the recorder's bit rate is unknown: run `tunelab run io.stream -p bitrate=RATE \
                 --target {}` with the recorder's rate",
                target(ev)
            ))
        } else {
            Outcome::Fine
        };
    };
    let Some(after) = cache_runs_out_after(rate, cache.max(0.0), burst, steady) else {
        return Outcome::Fine;
    };
    let when = if after > 0.0 {
        format!("the card's write cache runs out after {after:.0} s of recording")
    } else {
        "the card cannot keep up from the first second".into()
    };
    Finding::new(
        "flash.recorder-above-steady",
        if after < 3600.0 {
            Severity::Warning
        } else {
            Severity::Info
        },
        format!(
            "the recorder writes {} ({raw} b/s), above the card's steady rate {}: {when}",
            human(rate, "B/s"),
            human(steady, "B/s")
        ),
    )
    .evidence(vec![
        format!("io.stream bitrate={raw}: {}", human(rate, "B/s")),
        format!(
            "{}: cache {}, burst rate {}, steady rate {}",
            steady_state::NAME,
            format_size(cache.max(0.0) as u64),
            human(burst, "B/s"),
            human(steady, "B/s")
        ),
    ])
    .why(format!(
        "The card takes the stream into its write cache, which fills by {} each second \
             (bit rate minus steady rate): {} last {:.0} s. After that every write waits for \
             garbage collection and frames are dropped or queued without end.",
        human(rate - steady, "B/s"),
        format_size(cache.max(0.0) as u64),
        after
    ))
    .fix(
        format!(
            "record at no more than {:.1} Mb/s (the steady rate with a 10% margin), or use a \
             card whose steady rate is above {} (tunelab run {} on it)",
            steady * 8.0 * 0.9 / 1e6,
            human(rate, "B/s"),
            steady_state::NAME
        ),
        "A lower bit rate lowers the picture quality.",
    )
    .verify(format!(
        "tunelab run io.stream -p bitrate={raw} -p duration={:.0}s --target {}",
        (after * 1.5).clamp(60.0, 3600.0),
        target(ev)
    ))
    .into()
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
    fn a_recorder_above_the_steady_rate_is_told_when_the_cache_runs_out() {
        // 64 MiB cache, 20 MB/s burst, 4 MB/s steady, a 40 Mb/s (5 MB/s)
        // recorder: the cache grows by 1 MB/s and is full after 67.1 s.
        assert_eq!(cache_runs_out_after(5e6, 64e6, 20e6, 4e6), Some(64.0));
        assert_eq!(cache_runs_out_after(3e6, 64e6, 20e6, 4e6), None);
        assert_eq!(cache_runs_out_after(25e6, 64e6, 20e6, 4e6), Some(0.0));
        let card = result(
            steady_state::NAME,
            &[
                (steady_state::METRIC_CACHE, 67108864.0),
                (steady_state::METRIC_BURST, 20e6),
                (steady_state::METRIC_STEADY, 4e6),
            ],
            &[],
        );
        let mut rec = result("io.stream", &[("record_fps", 30.0)], &[]);
        rec.params.insert(
            "bitrate".into(),
            crate::model::ParamValue::Text("40M".into()),
        );
        let mut e = ev(vec![card.clone()]);
        e.recorder = vec![rec];
        let Outcome::Finding(f) = recorder_above_steady(&e, Workload::Media) else {
            panic!("no finding")
        };
        assert!(f.title.contains("runs out after 67 s"), "{}", f.title);
        assert!(
            matches!(
                recorder_above_steady(&ev(vec![card]), Workload::Media),
                Outcome::Gap(_)
            ),
            "no recorder: a gap that says what to run"
        );
        let mut slow = result("io.stream", &[], &[]);
        slow.params.insert(
            "bitrate".into(),
            crate::model::ParamValue::Text("6M".into()),
        );
        e.recorder = vec![slow];
        assert_eq!(id(recorder_above_steady(&e, Workload::Media)), None);
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
