//! Rules on io.random results measured on the target's device: the queue
//! depth that saturates it (deeper queues only add latency), and the I/O
//! scheduler when the measurement shows it matters (a fast device capped by
//! a scheduler's per-request cost, or reads stuck behind writes on slow
//! flash without a scheduler).

use std::collections::BTreeMap;

use super::{fact, on_loop_device, target, Evidence, Finding, Outcome, Severity, Workload};
use crate::experiments::io::random;
use crate::model::run::PointResult;
use crate::units::human;

/// A depth saturates the device when it reaches this share of the best IOPS.
const SATURATED: f64 = 0.9;
/// Deeper queues are worth a finding when their p99 is this many times worse.
const LATENCY_COST: f64 = 2.0;
/// Above this many IOPS a scheduler's per-request cost shows (mq-deadline
/// and bfq serialise dispatch on a lock).
const FAST_IOPS: f64 = 50_000.0;
/// Reads in a mix whose p99 is this many times the pure-read p99 wait behind writes.
const READ_STARVED: f64 = 4.0;

fn text(r: &PointResult, key: &str) -> String {
    r.params.get(key).map(|v| v.to_string()).unwrap_or_default()
}

fn num(r: &PointResult, key: &str) -> f64 {
    r.params.get(key).and_then(|v| v.as_f64()).unwrap_or(0.0)
}

fn median(r: &PointResult, metric: &str) -> Option<f64> {
    r.metric(metric).map(|m| m.summary.median)
}

/// (rw, bs, engine, mode): everything of an io.random point but its depth.
type Workload4 = (String, u64, String, String);
/// (depth, IOPS, p99 latency) per measured depth.
type Curve = Vec<(u64, f64, f64)>;

/// The io.random results grouped by everything but depth, each curve
/// sorted by depth.
fn curves(ev: &Evidence) -> BTreeMap<Workload4, Curve> {
    let mut out: BTreeMap<_, Vec<_>> = BTreeMap::new();
    for r in &ev.random_io {
        let (Some(iops), Some(p99)) = (
            median(r, random::METRIC_IOPS),
            median(r, random::METRIC_LAT_P99),
        ) else {
            continue;
        };
        let key = (
            text(r, "rw"),
            num(r, "bs") as u64,
            text(r, "engine"),
            text(r, "mode"),
        );
        out.entry(key)
            .or_default()
            .push((num(r, "depth") as u64, iops, p99));
    }
    for v in out.values_mut() {
        v.sort_by_key(|p| p.0);
    }
    out
}

/// The shallowest queue that reaches SATURATED of a curve's best IOPS, when
/// going deeper makes p99 at least LATENCY_COST times worse.
pub(super) fn saturating_depth(ev: &Evidence, _: Workload) -> Outcome {
    let disk = ev.facts.get("block.disk").unwrap_or("the device");
    let mut best: Option<(String, Finding, f64)> = None;
    for ((rw, bs, engine, mode), pts) in curves(ev) {
        if pts.len() < 2 {
            continue;
        }
        let top = pts.iter().map(|p| p.1).fold(0.0, f64::max);
        let Some(&(d_sat, iops_sat, p99_sat)) = pts.iter().find(|p| p.1 >= SATURATED * top) else {
            continue;
        };
        let &(d_max, iops_max, p99_max) = pts.last().expect("two points");
        if d_max <= d_sat || p99_max < LATENCY_COST * p99_sat {
            continue;
        }
        let cost = p99_max / p99_sat.max(1e-12);
        let f = Finding::new("io.queue-depth", Severity::Info, format!(
                "{disk} saturates at queue depth {d_sat} for {} {rw}: deeper queues only add latency",
                crate::units::format_size(bs)
            ))
            .evidence(vec![format!(
                "io.random rw={rw} engine={engine} mode={mode}: QD {d_sat} {} at p99 {}; QD {d_max} {} at p99 {} ({cost:.1}×)",
                human(iops_sat, "ops/s"),
                human(p99_sat, "s"),
                human(iops_max, "ops/s"),
                human(p99_max, "s"),
            )])
            .why(format!(
                "Beyond {d_sat} requests in flight the device completes no more operations per second \
                 ({:.0}% of the best at QD {d_sat}); the extra requests only wait in queues, so every \
                 request's latency grows with the depth (Little's law).",
                iops_sat / top.max(1e-12) * 100.0
            ))
            .fix(
                format!(
                "in the application: keep at most {d_sat} I/Os in flight to this device (thread pool \
                 size, io_uring/AIO depth, e.g. fio --iodepth={d_sat}, PostgreSQL \
                 effective_io_concurrency={d_sat})"
            ),
                "Other applications' I/O on the same device adds to the depth; a device with a \
                   write cache can saturate later under sustained writes (measure with steady=yes).",
            )
            .verify(format!(
                "tunelab run io.random -p rw={rw} -p bs={bs} -p engine={engine} -p depth=1,{d_sat},{d_max} --target {}",
                target(ev)
            ));
        if best.as_ref().is_none_or(|b| cost > b.2) {
            best = Some((rw, f, cost));
        }
    }
    match best {
        Some((_, f, _)) => f.into(),
        None => Outcome::Fine,
    }
}

/// Scheduler choice from measured random I/O.
pub(super) fn scheduler(ev: &Evidence, w: Workload) -> Outcome {
    let (Some(sched), Some(rot)) = (
        ev.facts.get("block.scheduler"),
        ev.facts.get_u64("block.rotational"),
    ) else {
        return Outcome::Fine;
    };
    if rot != 0 || on_loop_device(ev) {
        return Outcome::Fine;
    }
    let disk = ev.facts.get("block.disk").unwrap_or("DISK");
    let curves = curves(ev);
    let verify = |a: &str, b: &str, rw: &str| {
        format!(
            "tunelab tune scheduler --values {a},{b} --experiment io.random -p rw={rw} -p depth=1,32 --target {}",
            target(ev)
        )
    };
    // A fast device held back by a scheduler's per-request cost.
    let fastest = curves
        .iter()
        .flat_map(|(k, pts)| pts.iter().map(move |p| (k, p)))
        .max_by(|a, b| a.1 .1.total_cmp(&b.1 .1));
    if let Some(((rw, bs, engine, _), &(depth, iops, _))) = fastest {
        if iops >= FAST_IOPS && matches!(sched, "mq-deadline" | "bfq" | "kyber") {
            return Finding::new("io.scheduler-iops", Severity::Info, format!(
                    "{disk} does {} random I/O with the {sched} scheduler: `none` saves its per-request cost",
                    human(iops, "ops/s")
                ))
                .evidence(vec![
                    fact(ev, "block.scheduler"),
                    fact(ev, "block.rotational"),
                    format!("io.random rw={rw} bs={bs} engine={engine} depth={depth}: {}", human(iops, "ops/s")),
                ])
                .why(format!(
                    "At {} a scheduler's per-request work (sorting, deadlines, bfq's accounting) \
                     costs CPU per I/O and can cap IOPS; a non-rotating device gains nothing from reordering.",
                    human(iops, "ops/s")
                ))
                .fix(
                    format!("echo none > /sys/block/{disk}/queue/scheduler"),
                    "No read priority over writes: with heavy background writes reads can wait longer; \
                       keep mq-deadline where that matters.",
                )
                .verify(verify(sched, "none", rw))
                .into();
        }
    }
    // Reads stuck behind writes on a device without a scheduler.
    if sched != "none" {
        return Outcome::Fine;
    }
    for ((rw, bs, engine, mode), pts) in &curves {
        if rw != "randread" {
            continue;
        }
        let mixed = ev.random_io.iter().find(|r| {
            text(r, "rw") == "randrw"
                && num(r, "bs") as u64 == *bs
                && text(r, "engine") == *engine
                && text(r, "mode") == *mode
        });
        let Some(m) = mixed else { continue };
        let depth = num(m, "depth") as u64;
        let (Some(&(_, _, read_p99)), Some(mixed_p99)) = (
            pts.iter().find(|p| p.0 == depth),
            median(m, random::METRIC_READ_P99),
        ) else {
            continue;
        };
        if mixed_p99 < READ_STARVED * read_p99 {
            continue;
        }
        return Finding::new("io.scheduler-reads", if w == Workload::Latency { Severity::Warning } else { Severity::Info }, format!(
                "reads on {disk} wait behind writes: read p99 {} in a read/write mix vs {} alone (scheduler none)",
                human(mixed_p99, "s"),
                human(read_p99, "s")
            ))
            .evidence(vec![
                fact(ev, "block.scheduler"),
                format!(
                    "io.random bs={bs} engine={engine} depth={depth}: randread p99 {}, randrw read_p99 {}",
                    human(read_p99, "s"),
                    human(mixed_p99, "s")
                ),
            ])
            .why("Without a scheduler, requests reach the device in arrival order, so a read queued behind \
                  slow flash writes waits for all of them; mq-deadline dispatches reads first and gives \
                  writes a deadline.")
            .fix(
                format!("echo mq-deadline > /sys/block/{disk}/queue/scheduler   (persist with a udev rule)"),
                "Slightly more CPU per request; writes can be delayed up to their deadline (5 s).",
            )
            .verify(verify("none", "mq-deadline", "randread,randrw"))
            .into();
    }
    Outcome::Fine
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::params::ParamValue;
    use crate::engine::Better;
    use crate::model::run::MetricResult;
    use crate::system::inspect::Facts;

    fn result(rw: &str, depth: u64, iops: f64, p99: f64, read_p99: Option<f64>) -> PointResult {
        let m = |name: &str, v: f64| MetricResult {
            name: name.into(),
            unit: "x".into(),
            better: Better::Higher,
            samples: vec![v],
            warmup: vec![],
            summary: crate::stats::summarize(&[v]),
        };
        let mut metrics = vec![m("iops", iops), m("lat_p99", p99)];
        if let Some(r) = read_p99 {
            metrics.push(m("read_p99", r));
        }
        PointResult {
            experiment: "io.random".into(),
            params: [
                ("rw", ParamValue::Text(rw.into())),
                ("bs", ParamValue::Int(4096)),
                ("engine", ParamValue::Text("io_uring".into())),
                ("mode", ParamValue::Text("direct".into())),
                ("depth", ParamValue::Int(depth)),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
            metrics,
            series: vec![],
            histograms: vec![],
            notes: vec![],
            elapsed_s: 1.0,
            ..Default::default()
        }
    }

    fn ev(sched: &str, results: Vec<PointResult>) -> Evidence {
        Evidence {
            facts: Facts::from_pairs(&[
                ("fs.path", "/data"),
                ("block.disk", "mmcblk0"),
                ("block.rotational", "0"),
                ("block.scheduler", sched),
            ]),
            random_io: results,
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
    fn saturation_depth_is_the_shallowest_near_the_top() {
        let e = ev(
            "mq-deadline",
            vec![
                result("randread", 1, 2000.0, 0.001, None),
                result("randread", 8, 9500.0, 0.002, None),
                result("randread", 32, 10000.0, 0.008, None),
            ],
        );
        let Outcome::Finding(f) = saturating_depth(&e, Workload::General) else {
            panic!("expected a finding");
        };
        assert!(f.title.contains("queue depth 8"), "{}", f.title);
        assert!(f.command.contains("--iodepth=8"), "{}", f.command);
        // Latency that does not grow with depth is no finding.
        let flat = ev(
            "mq-deadline",
            vec![
                result("randread", 1, 2000.0, 0.001, None),
                result("randread", 32, 10000.0, 0.0015, None),
            ],
        );
        assert!(id(saturating_depth(&flat, Workload::General)).is_none());
        assert!(id(saturating_depth(&ev("none", vec![]), Workload::General)).is_none());
    }

    #[test]
    fn scheduler_advice_follows_the_measurement() {
        let fast = ev(
            "mq-deadline",
            vec![result("randread", 32, 80_000.0, 0.001, None)],
        );
        assert_eq!(
            id(scheduler(&fast, Workload::General)),
            Some("io.scheduler-iops")
        );
        let slow = ev(
            "mq-deadline",
            vec![result("randread", 32, 3_000.0, 0.01, None)],
        );
        assert_eq!(id(scheduler(&slow, Workload::General)), None);
        let starved = ev(
            "none",
            vec![
                result("randread", 1, 2000.0, 0.002, None),
                result("randrw", 1, 500.0, 0.05, Some(0.04)),
            ],
        );
        assert_eq!(
            id(scheduler(&starved, Workload::General)),
            Some("io.scheduler-reads")
        );
        let fine = ev(
            "none",
            vec![
                result("randread", 1, 2000.0, 0.002, None),
                result("randrw", 1, 1500.0, 0.003, Some(0.003)),
            ],
        );
        assert_eq!(id(scheduler(&fine, Workload::General)), None);
    }
}
