//! `cpu.sustained`: keep every core busy for minutes and watch, second by
//! second, what the work gets done and why it slows down — the clock each
//! core really runs at, every temperature, cooling state and throttle
//! counter, the CPU quota of tunelab's cgroup, steal time and other
//! processes — then say "throttled: from X to Y after Z s at T °C" and which
//! of those caused it, or "no throttling".
//!
//! The experiment, its trial and workers are here; `record` makes the
//! rows of the recording, `analysis` judges it.

mod analysis;
mod record;
#[cfg(test)]
mod tests;

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::clock::{add_chain, calibrate_chain, thread_cpu_s, CHAIN};
use crate::engine::{
    Ctx, Experiment, Metric, MetricSpec, ParamKind, ParamSpec, Point, PointExtras, PointRun,
    RunDefaults, Series, TrialValues,
};
use crate::engine::{Needs, Spec};
use crate::experiments::common::child::{usable_cpus, PinGuard};
use crate::experiments::common::kernels::{self, Lz, Path as KPath};
use crate::{Error, Result};

pub(crate) use analysis::analyse;
use record::median;
pub(crate) use record::{Recorder, Row};

pub(crate) const NAME: &str = "cpu.sustained";

/// A reading's values by name: its temperatures or its cooling states.
type Readings = fn(&Row) -> Vec<(&str, f64)>;

/// A drop is throughput below this share of the start for DROP_ROWS rows in a row.
const DROP_BELOW: f64 = 0.9;
const DROP_ROWS: usize = 3;

pub(crate) struct Sustained;

pub(crate) static SPEC: Spec = Spec {
    name: NAME,
    summary: "all cores busy for minutes: throughput, clocks, temperatures, cooling and throttling per second, with the cause of a drop",
    method: "Starts one thread per usable CPU, each pinned to its CPU, running `load` passes (see \
         cpu.compute: float = 64x64 matrix multiply, lz = compression of a 64 KiB corpus, \
         sha256 = SHA-256 of it) for `duration`. Every ~50 ms of work a thread runs a ~1 ms \
         clock probe: 200-add dependent chains (see cpu.clock) timed with the thread's own CPU \
         time, so the probe reads the clock even when the thread was preempted or throttled. \
         Every `interval` the recorder reads the passes done (throughput, passes/s of all \
         threads), the probe clock per core, scaling_cur_freq per CPU, every thermal zone and \
         hwmon temperature, cooling-device states, x86 thermal_throttle counters, /proc/stat \
         steal, the machine's busy time less tunelab's own (another process), and the CPU \
         quota and nr_throttled of tunelab's cgroup (v1 cpu.cfs_quota_us/cpu.stat or v2 \
         cpu.max). Start = median throughput of the first rows (after the first), end = \
         median of the last quarter. A drop is DROP_ROWS=3 rows in a row below 90% of the \
         start; it is attributed by comparing the 3 rows before it with the 3 from it: CPU \
         quota (quota lowered or nr_throttled rising), thermal (cooling state up, throttle \
         counter up, or clock down by 5%+ with the temperature said), steal (+5% of the \
         machine), another process (+5% of the machine busy outside tunelab), else \
         unexplained.",
    params: &[
            ParamSpec::new("duration", ParamKind::Duration, "120", "length of the run")
                .range(3.0, 86400.0),
            ParamSpec::new(
                "load",
                ParamKind::Choice(&["float", "lz", "sha256"]),
                "float",
                "work each thread does (float heats the most)",
            ),
            ParamSpec::new(
                "interval",
                ParamKind::Duration,
                "1",
                "seconds between readings",
            )
            .range(0.2, 60.0),
        ],
    metrics: &[
            MetricSpec::higher(
                "throughput_start",
                "ops/s",
                "kernel passes per second of all threads at the start",
            ),
            MetricSpec::higher(
                "throughput_end",
                "ops/s",
                "kernel passes per second, median of the last quarter",
            ),
            MetricSpec::higher("sustained_ratio", "ratio", "end / start throughput"),
            MetricSpec::higher(
                "throttled_after",
                "s",
                "seconds from the start to a throughput drop (absent: none)",
            ),
            MetricSpec::higher(
                "clock_end",
                "Hz",
                "median probe clock over cores, last quarter",
            ),
            MetricSpec::lower("peak_temp", "°C", "hottest reading of any sensor"),
        ],
    needs: Needs::NOTHING,
    defaults: RunDefaults::ONE_RECORDING,
    hidden: false,
};

// The metrics a trial emits, checked against the Spec while compiling.
const CLOCK_END: Metric = SPEC.emits("clock_end");
const PEAK_TEMP: Metric = SPEC.emits("peak_temp");
const SUSTAINED_RATIO: Metric = SPEC.emits("sustained_ratio");
const THROTTLED_AFTER: Metric = SPEC.emits("throttled_after");
const THROUGHPUT_END: Metric = SPEC.emits("throughput_end");
const THROUGHPUT_START: Metric = SPEC.emits("throughput_start");

/// A point's parameters, read by name once, here.
struct Params {
    duration: f64,
    interval: f64,
    load: String,
}

impl Params {
    fn parse(p: &Point) -> Result<Params> {
        Ok(Params {
            duration: p.f64("duration")?,
            interval: p.f64("interval")?,
            load: p.text("load")?.to_string(),
        })
    }
}

impl Experiment for Sustained {
    fn spec(&self) -> &'static Spec {
        &SPEC
    }
    /// The verdict compares readings before and after a drop: refuse a
    /// recording too short for it before the load runs, not after.
    fn validate(&self, p: &Point) -> Result<()> {
        let Params {
            duration, interval, ..
        } = Params::parse(p)?;
        if duration < 4.0 * interval {
            return Err(Error::usage(format!(
                "cpu.sustained: duration {duration} s gives {} reading(s) at interval {interval} s; \
                 the verdict needs 4 (make duration at least 4 × interval)",
                (duration / interval).floor()
            )));
        }
        Ok(())
    }
    fn trial_seconds(&self, p: &Point) -> Option<f64> {
        Params::parse(p).ok().map(|q| q.duration)
    }
    fn prepare(&self, _ctx: &Ctx, p: &Point) -> Result<Box<dyn PointRun>> {
        let Params {
            duration,
            interval,
            load,
        } = Params::parse(p)?;
        Ok(Box::new(SustainedRun {
            duration,
            interval,
            load,
            rows: Vec::new(),
            started_unix: 0.0,
        }))
    }
}

struct SustainedRun {
    duration: f64,
    interval: f64,
    load: String,
    rows: Vec<Row>,
    started_unix: f64,
}

/// Counters one worker publishes to the recorder.
#[derive(Default)]
struct Counters {
    passes: AtomicU64,
    probe_cycles: AtomicU64,
    probe_ns: AtomicU64,
}

fn worker(
    cpu: usize,
    load: &str,
    stop: &AtomicBool,
    c: &Counters,
    probe_iters: u64,
    start: &Barrier,
) -> Result<()> {
    let _pin = PinGuard::new(Some(cpu))?;
    let corpus = kernels::corpus(64 << 10, cpu as u64 + 1);
    let mut lz = Lz::default();
    let n = kernels::MATRIX * kernels::MATRIX;
    let a: Vec<f64> = (0..n).map(|i| (i % 13) as f64 * 0.25).collect();
    let b: Vec<f64> = (0..n).map(|i| (i % 7) as f64 * 0.5).collect();
    let mut m = vec![0.0; n];
    let path = if kernels::hardware_name("sha256").is_some() {
        KPath::Hardware
    } else {
        KPath::Software
    };
    start.wait();
    let mut next_probe = Instant::now();
    let mut sink = 0u64;
    while !stop.load(Ordering::Relaxed) {
        match load {
            "lz" => sink += lz.compress(&corpus) as u64,
            "sha256" => sink += kernels::sha256(&corpus, path)[0] as u64,
            _ => {
                kernels::matmul(&a, &b, &mut m);
                sink += m[5] as u64;
            }
        }
        c.passes.fetch_add(1, Ordering::Relaxed);
        if Instant::now() >= next_probe {
            let t0 = thread_cpu_s();
            add_chain(probe_iters);
            let dt = thread_cpu_s() - t0;
            c.probe_cycles
                .fetch_add(probe_iters * CHAIN, Ordering::Relaxed);
            c.probe_ns.fetch_add((dt * 1e9) as u64, Ordering::Relaxed);
            next_probe = Instant::now() + Duration::from_millis(50);
        }
    }
    std::hint::black_box(sink);
    Ok(())
}

impl PointRun for SustainedRun {
    fn trial(&mut self, ctx: &Ctx) -> Result<TrialValues> {
        let cpus = usable_cpus();
        let probe_iters = calibrate_chain(0.001);
        let stop = AtomicBool::new(false);
        let counters: Vec<Counters> = cpus.iter().map(|_| Counters::default()).collect();
        let start = Barrier::new(cpus.len() + 1);
        let load = self.load.clone();
        let mut rec = Recorder::new(Path::new("/"), &cpus);
        let mut rows = Vec::new();
        let result: Result<()> = std::thread::scope(|s| {
            let handles: Vec<_> = cpus
                .iter()
                .zip(&counters)
                .map(|(&cpu, c)| {
                    let (stop, start, load) = (&stop, &start, load.as_str());
                    s.spawn(move || {
                        let r = worker(cpu, load, stop, c, probe_iters, start);
                        if r.is_err() {
                            // A worker that could not pin still releases the others.
                            stop.store(true, Ordering::Relaxed);
                        }
                        r
                    })
                })
                .collect();
            start.wait();
            let t0 = Instant::now();
            self.started_unix = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64());
            rec = Recorder::new(Path::new("/"), &cpus);
            let snap = |c: &Counters| {
                (
                    c.passes.load(Ordering::Relaxed),
                    c.probe_cycles.load(Ordering::Relaxed),
                    c.probe_ns.load(Ordering::Relaxed),
                )
            };
            let mut prev: Vec<(u64, u64, u64)> = counters.iter().map(snap).collect();
            let mut last = t0;
            let mut outcome = Ok(());
            let mut k = 1u32;
            while t0.elapsed().as_secs_f64() < self.duration && !stop.load(Ordering::Relaxed) {
                let due = t0 + Duration::from_secs_f64(self.interval * k as f64);
                k += 1;
                while Instant::now() < due {
                    if let Err(e) = ctx.check_cancel() {
                        outcome = Err(e);
                        break;
                    }
                    std::thread::sleep((due - Instant::now()).min(Duration::from_millis(100)));
                }
                if outcome.is_err() {
                    break;
                }
                let now = Instant::now();
                let dt = (now - last).as_secs_f64();
                last = now;
                let cur: Vec<(u64, u64, u64)> = counters.iter().map(snap).collect();
                let passes: u64 = cur.iter().zip(&prev).map(|(a, b)| a.0 - b.0).sum();
                let clock = cpus
                    .iter()
                    .zip(cur.iter().zip(&prev))
                    .map(|(&c, (a, b))| {
                        let ns = a.2 - b.2;
                        (c, (ns > 0).then(|| (a.1 - b.1) as f64 / (ns as f64 * 1e-9)))
                    })
                    .collect();
                prev = cur;
                rows.push(rec.row((now - t0).as_secs_f64(), dt, passes as f64 / dt, clock));
            }
            stop.store(true, Ordering::Relaxed);
            for h in handles {
                match h.join() {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => outcome = outcome.and(Err(e)),
                    Err(_) => {
                        outcome = outcome.and(Err(Error::measurement("a load thread panicked")))
                    }
                }
            }
            outcome
        });
        result?;
        self.rows = rows;
        let v = analyse(&self.rows).ok_or_else(|| {
            Error::measurement(format!(
                "cpu.sustained recorded {} interval(s); it needs 4 (make duration at least 4 × interval)",
                self.rows.len()
            ))
        })?;
        let mut out = TrialValues::new();
        out.set(THROUGHPUT_START, v.start);
        out.set(THROUGHPUT_END, v.end);
        out.set(SUSTAINED_RATIO, v.end / v.start.max(1e-12));
        if let Some((t, _)) = &v.drop {
            out.set(THROTTLED_AFTER, *t);
        }
        let q = self.rows.len() - (self.rows.len() / 4).max(1);
        if let Some(c) = median(self.rows[q..].iter().filter_map(Row::mean_clock).collect()) {
            out.set(CLOCK_END, c);
        }
        if let Some(t) = v.peak_temp {
            out.set(PEAK_TEMP, t);
        }
        Ok(out)
    }

    fn finish(&mut self, _ctx: &Ctx) -> Result<PointExtras> {
        let rows = &self.rows;
        let line = |name: String, unit: &str, pts: Vec<(f64, f64)>| Series {
            name,
            x_label: "time".into(),
            x_unit: "s".into(),
            y_label: unit.into(),
            y_unit: unit.into(),
            points: pts,
        };
        let mut series = vec![line(
            "throughput".into(),
            "ops/s",
            rows.iter().map(|r| (r.t, r.throughput)).collect(),
        )];
        let cpus: Vec<usize> = rows
            .first()
            .map(|r| r.clock.iter().map(|c| c.0).collect())
            .unwrap_or_default();
        for (i, cpu) in cpus.iter().enumerate() {
            series.push(line(
                format!("clock cpu{cpu} (measured)"),
                "Hz",
                rows.iter()
                    .filter_map(|r| Some((r.t, r.clock.get(i)?.1?)))
                    .collect(),
            ));
            let cur: Vec<(f64, f64)> = rows
                .iter()
                .filter_map(|r| Some((r.t, r.cur_hz.get(i)?.1?)))
                .collect();
            if !cur.is_empty() {
                series.push(line(format!("clock cpu{cpu} (cpufreq)"), "Hz", cur));
            }
        }
        // One series per sensor and per cooling device the first row names.
        let named: [(&str, &str, Readings); 2] = [
            ("temperature", "°C", |r| {
                r.temps.iter().map(|t| (t.0.as_str(), t.1)).collect()
            }),
            ("cooling", "count", |r| {
                r.cooling
                    .iter()
                    .map(|c| (c.0.as_str(), c.1 as f64))
                    .collect()
            }),
        ];
        for (what, unit, readings) in named {
            let names: Vec<&str> = rows
                .first()
                .map(|r| readings(r).into_iter().map(|(n, _)| n).collect())
                .unwrap_or_default();
            for n in names {
                series.push(line(
                    format!("{what} {n}"),
                    unit,
                    rows.iter()
                        .filter_map(|r| Some((r.t, readings(r).iter().find(|x| x.0 == n)?.1)))
                        .collect(),
                ));
            }
        }
        series.push(line(
            "steal".into(),
            "fraction",
            rows.iter().map(|r| (r.t, r.steal)).collect(),
        ));
        series.push(line(
            "other processes".into(),
            "fraction",
            rows.iter().map(|r| (r.t, r.other)).collect(),
        ));
        let quota: Vec<(f64, f64)> = rows
            .iter()
            .filter_map(|r| Some((r.t, r.quota_cpus?)))
            .collect();
        if !quota.is_empty() {
            series.push(line("cgroup CPU quota (CPUs)".into(), "count", quota));
        }
        let mut notes = Vec::new();
        if let Some(v) = analyse(rows) {
            notes.push(v.text);
        }
        notes.push(format!(
            "load {} on {} thread(s), one per usable CPU; {} readings every {} s; load started at unix time {:.3}",
            self.load,
            cpus.len(),
            rows.len(),
            self.interval,
            self.started_unix
        ));
        let first = rows.first();
        notes.push(format!(
            "sensors: {} temperature(s), {} cooling device(s), throttle counters {}, cgroup quota {}",
            first.map_or(0, |r| r.temps.len()),
            first.map_or(0, |r| r.cooling.len()),
            if rows.iter().any(|r| r.throttle_events > 0) { "moved" } else { "none moved or none exposed" },
            match first.and_then(|r| r.quota_cpus) {
                Some(q) => format!("{q:.2} CPUs at the start"),
                None => "none at the start".into(),
            }
        ));
        Ok(PointExtras {
            series,
            notes,
            ..Default::default()
        })
    }
}
