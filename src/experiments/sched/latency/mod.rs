//! `sched.latency`: wake-up latency of a periodic task (cyclictest, rtla
//! timerlat), per CPU, idle or under a stated load, with the cause of every
//! spike.
//!
//! The experiment and its trial are here; `threads` sets up the
//! measuring threads, `notes` writes and reads the cause notes.

mod notes;
mod params;
#[cfg(test)]
mod tests;
mod threads;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::engine::Spec;
use crate::engine::{
    Ctx, Experiment, Fitted, Footprint, Metric, MetricSpec, Needs, ParamKind, ParamSpec,
    ParamValue, Point, PointExtras, PointRun, Room, RunDefaults, Series, TrialValues,
};
use crate::experiments::common::latency_cause::{
    tracefs_timerlat, Method, SpikeBoard, Tracer, COOL,
};
use crate::experiments::common::latency_load::{Mix, Running, Sizes};
use crate::stats::LatencyRecorder;
use crate::units::{format_size, seconds};
use crate::{Error, Result};

use notes::cause_notes;
pub(crate) use notes::{parse_cause_note, CauseNote};
use params::Params;
use threads::{hold_dma_latency, measure, mono_ns, try_fifo, ThreadOut};

pub(crate) const NAME: &str = "sched.latency";
pub(crate) const METRIC_MEAN: &str = "lat_mean";
pub(crate) const METRIC_P99: &str = "lat_p99";
pub(crate) const METRIC_P999: &str = "lat_p999";
pub(crate) const METRIC_MAX: &str = "lat_max";
/// Every cause note starts with this (read back by `advise`).
pub(crate) const CAUSE_PREFIX: &str = "spike cause: ";

/// OSADL-style histogram: 2 µs bins up to 1 ms, the last open-ended.
const BIN_NS: u64 = 2_000;
const BINS: usize = 501;
/// Spike points kept per CPU for the timeline series.
const TIMELINE_MAX: usize = 2000;

pub(crate) struct Latency;

pub(crate) static SPEC: Spec = Spec {
    name: NAME,
    summary: "wake-up latency of a periodic task per CPU, idle or under load, and what caused each spike (cyclictest / rtla timerlat)",
    method: "As cyclictest -m -a -t --policy: one thread per selected CPU, pinned, SCHED_FIFO at \
         `priority` (or SCHED_OTHER, whose default 50 µs timer slack is part of what it sees), \
         the process locked in memory (mlockall MCL_CURRENT|MCL_FUTURE|MCL_ONFAULT). Each thread sleeps \
         with clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME) to its next due time (one \
         `period` after the previous one, the first one period after the thread starts) and on waking reads CLOCK_MONOTONIC: latency = woken - due. A period already past on \
         waking is skipped (counted in overruns) instead of being slept to, so one stall is one \
         sample. Latencies go into an HDR histogram per thread, preallocated; the loop neither \
         allocates nor logs. A trial lasts `duration`; its metrics are over every sample of \
         every selected CPU (min, mean, p50, p99, p99.9, max, count above `threshold`), so the \
         engine's stop rule and CIs work on per-trial figures; per-CPU histograms (2 µs bins \
         to 1 ms, OSADL plot) cover all measured trials. The load mix (`load`) starts before and \
         stops after each trial. A wake-up later than `threshold` is explained while the trial \
         runs: which task held the CPU between the due time and the switch to the measuring \
         thread (perf_event_open context-switch records, CLOCK_MONOTONIC; armed on a CPU by a late \
         wake-up for the next 100 ms of wake-ups, then off for nine times as long, so the spike \
         that arms it and those in the pause are counted, not attributed), else which device IRQ or softirq fired on that CPU around \
         it (/proc/interrupts, /proc/softirqs); the method used is stated with every cause.",
    params: &[
            ParamSpec::new(
                "cpus",
                ParamKind::Text,
                "all",
                "CPUs measured together: all (every CPU tunelab may use), N, N-M, or N+M+…; \
                 a comma list sweeps (one point per set)",
            ),
            ParamSpec::new("period", ParamKind::Duration, "1ms", "wake-up period")
                .range(50e-6, 1.0),
            ParamSpec::new("duration", ParamKind::Duration, "1s", "length of one trial")
                .range(0.05, 3600.0),
            ParamSpec::new(
                "policy",
                ParamKind::Choice(&["fifo", "other"]),
                "fifo",
                "SCHED_FIFO (falls back to other with a note when not permitted) or SCHED_OTHER",
            ),
            ParamSpec::new("priority", ParamKind::Count, "95", "SCHED_FIFO priority")
                .range(1.0, 99.0),
            ParamSpec::new(
                "load",
                ParamKind::Text,
                "none",
                "load during each trial: none, or a '+'-joined mix of messaging (hackbench), \
                 storage (recorder-like page-cache writes in scratch), memory (copy \
                 bandwidth); all = the three",
            ),
            ParamSpec::new(
                "threshold",
                ParamKind::Duration,
                "500us",
                "a wake-up later than this is a spike: counted and explained",
            )
            .range(1e-6, 10.0),
            ParamSpec::new(
                "causes",
                ParamKind::Choice(&["auto", "perf", "irq", "off"]),
                "auto",
                "how spikes are explained: perf context-switch records (auto falls back to \
                 irq), /proc/interrupts+softirqs deltas, or not at all",
            ),
            ParamSpec::new(
                "cpu_dma_latency",
                ParamKind::Choice(&["off", "0"]),
                "off",
                "0: hold /dev/cpu_dma_latency at 0 µs (no deep C-states) during the point \
                 (needs root; an open fd, released on any exit)",
            ),
        ],
    metrics: &[
            MetricSpec::lower("lat_min", "s", "shortest wake-up latency"),
            MetricSpec::lower(METRIC_MEAN, "s", "mean wake-up latency"),
            MetricSpec::lower("lat_p50", "s", "median wake-up latency"),
            MetricSpec::lower(METRIC_P99, "s", "99th percentile wake-up latency"),
            MetricSpec::lower(METRIC_P999, "s", "99.9th percentile wake-up latency"),
            MetricSpec::lower(METRIC_MAX, "s", "longest wake-up latency"),
            MetricSpec::lower(
                "over_threshold",
                "count",
                "wake-ups later than the threshold (spikes)",
            ),
            MetricSpec::lower("overruns", "count", "periods skipped because already past"),
        ],
    needs: // Scratch for the storage load; nothing is written without it.
        Needs::SCRATCH,
    defaults: RunDefaults::new(1, 5, 10, 60.0),
    hidden: false,
};

// The metrics a trial emits, checked against the Spec while compiling.
const LAT_MAX: Metric = SPEC.emits(METRIC_MAX);
const LAT_MEAN: Metric = SPEC.emits(METRIC_MEAN);
const LAT_MIN: Metric = SPEC.emits("lat_min");
const LAT_P50: Metric = SPEC.emits("lat_p50");
const LAT_P99: Metric = SPEC.emits(METRIC_P99);
const LAT_P999: Metric = SPEC.emits(METRIC_P999);
const OVERRUNS: Metric = SPEC.emits("overruns");
const OVER_THRESHOLD: Metric = SPEC.emits("over_threshold");

impl Experiment for Latency {
    fn spec(&self) -> &'static Spec {
        &SPEC
    }
    fn validate(&self, p: &Point) -> Result<()> {
        let q = Params::parse(p)?;
        if q.period * 10.0 > q.duration {
            return Err(Error::usage(format!(
                "sched.latency: duration {} holds fewer than 10 periods of {}; use a longer \
                 duration or a shorter period",
                seconds(q.duration),
                seconds(q.period)
            )));
        }
        Ok(())
    }
    fn trial_seconds(&self, p: &Point) -> Option<f64> {
        Params::parse(p).ok().map(|q| q.duration)
    }
    fn footprint(&self, p: &Point, room: &Room) -> Footprint {
        let (mix, secs) = Params::parse(p).map_or((Mix::default(), 1.0), |q| (q.mix, q.duration));
        let sizes = Sizes::fit(room.disk_free, room.memory);
        Footprint {
            setup_written: 0,
            // The writer wraps in its file but keeps writing: a guess at
            // 50 MB/s for a trial, flagged as repeating.
            trial_written: if mix.storage {
                sizes.file.max((secs * 50e6) as u64)
            } else {
                0
            },
            repeats: mix.storage,
            peak_memory: if mix.memory { 2 * sizes.mem as u64 } else { 0 },
            // The recorder load's file (memory on a RAM-backed target).
            stored: if mix.storage { sizes.file } else { 0 },
        }
    }
    fn prepare(&self, ctx: &Ctx, p: &Point) -> Result<Box<dyn PointRun>> {
        let q = Params::parse(p)?;
        let (cpus, mix) = (q.cpus, q.mix);
        let sizes = Sizes::fit(Room::for_ctx(ctx).disk_free, Room::for_ctx(ctx).memory);
        let mut notes = Vec::new();
        let mut fitted = Vec::new();
        let mut fifo = q.fifo;
        if let Some(prio) = fifo {
            if let Err(why) = try_fifo(prio) {
                fifo = None;
                notes.push(format!(
                    "SCHED_FIFO {prio} not permitted ({why}): measured as SCHED_OTHER; run as \
                     root (or with CAP_SYS_NICE / an RLIMIT_RTPRIO) for real-time figures"
                ));
                fitted.push(Fitted {
                    param: "policy",
                    used: ParamValue::Text("other".into()),
                    why: "SCHED_FIFO not permitted".into(),
                });
            }
        }
        let file = if mix.storage {
            let f = ctx.scratch()?.create_file("latency-load.dat", 0)?;
            notes.push(format!(
                "storage load file: {} in scratch, wrapped and rewritten",
                format_size(sizes.file)
            ));
            Some(f)
        } else {
            None
        };
        let dma = match q.dma_zero {
            true => Some(hold_dma_latency()?),
            false => None,
        };
        if dma.is_some() {
            notes.push(
                "/dev/cpu_dma_latency held at 0 µs for the point: an open file descriptor, \
                 released by the kernel on any exit (SIGKILL included), so no journal entry is \
                 needed"
                    .into(),
            );
        }
        let mode = q.causes.as_str();
        let tracer = if mode == "off" {
            None
        } else {
            let t = Tracer::open(&cpus, mode).map_err(Error::environment)?;
            for w in &t.why {
                notes.push(format!(
                    "spike causes: perf unavailable, using irq deltas: {w}"
                ));
            }
            Some(t)
        };
        if let Some(tl) = tracefs_timerlat() {
            notes.push(format!("tracefs: {tl}"));
        }
        // Locked as pages are first touched (MCL_ONFAULT, Linux 4.4+): plain
        // MCL_CURRENT|MCL_FUTURE populates every mapping whole — the binary,
        // each thread's 2 MiB stack, the load's buffers — which gets the
        // process OOM-killed on a 64 MiB board. Older kernels refuse the flag
        // (EINVAL): then lock the classic way.
        use rustix::mm::{mlockall, MlockAllFlags};
        let flags = MlockAllFlags::CURRENT | MlockAllFlags::FUTURE;
        let lock = mlockall(flags | MlockAllFlags::ONFAULT).or_else(|_| mlockall(flags));
        let locked = lock.is_ok();
        if let Err(e) = lock {
            notes.push(format!(
                "mlockall failed ({e}): page faults may add to the latencies; run as root or \
                 raise `ulimit -l`"
            ));
        }
        Ok(Box::new(LatencyRun {
            boards: cpus
                .iter()
                .map(|_| Arc::new(SpikeBoard::default()))
                .collect(),
            cum: cpus.iter().map(|_| recorder()).collect(),
            cpus,
            period_ns: (q.period * 1e9) as u64,
            duration: q.duration,
            threshold_ns: (q.threshold * 1e9) as u64,
            fifo,
            mix,
            sizes,
            file,
            tracer,
            _dma: dma,
            locked,
            notes,
            fitted,
            load_lines: Vec::new(),
            t0_ns: None,
            dropped: 0,
        }))
    }
}

fn recorder() -> LatencyRecorder {
    LatencyRecorder::with_buckets(BIN_NS, BINS)
}

struct LatencyRun {
    cpus: Vec<usize>,
    boards: Vec<Arc<SpikeBoard>>,
    /// Per CPU, every measured trial.
    cum: Vec<LatencyRecorder>,
    period_ns: u64,
    duration: f64,
    threshold_ns: u64,
    fifo: Option<i32>,
    mix: Mix,
    sizes: Sizes,
    file: Option<std::fs::File>,
    tracer: Option<Tracer>,
    _dma: Option<std::fs::File>,
    locked: bool,
    notes: Vec<String>,
    fitted: Vec<Fitted>,
    load_lines: Vec<String>,
    /// Start of the first measured trial (timeline origin).
    t0_ns: Option<u64>,
    /// Spikes past the boards' capacity.
    dropped: u64,
}

impl Drop for LatencyRun {
    fn drop(&mut self) {
        if self.locked {
            // Undoes our mlockall.
            let _ = rustix::mm::munlockall();
        }
    }
}

impl PointRun for LatencyRun {
    fn trial(&mut self, ctx: &Ctx) -> Result<TrialValues> {
        ctx.check_cancel()?;
        self.boards.iter().for_each(|b| b.reset());
        let load = Running::start(&self.mix, &self.sizes, self.file.as_ref())?;
        if self.mix.messaging {
            // Let the separate messaging process start up first.
            std::thread::sleep(Duration::from_millis(200));
        }
        if let Some(t) = &mut self.tracer {
            t.start_trial();
        }
        // As cyclictest, each thread's first wake-up is one period after it
        // starts: not aligned to whole milliseconds (where the tick fires)
        // nor across CPUs. All stop at the same time.
        let start_ns = mono_ns();
        let end_ns = start_ns + self.period_ns + (self.duration * 1e9) as u64;
        self.t0_ns.get_or_insert(start_ns);
        let stop = Arc::new(AtomicBool::new(false));
        let mut handles = Vec::with_capacity(self.cpus.len());
        for (i, &cpu) in self.cpus.iter().enumerate() {
            let (board, stop) = (self.boards[i].clone(), stop.clone());
            let (fifo, period, thr) = (self.fifo, self.period_ns, self.threshold_ns);
            let rec = recorder();
            let trigger = self.tracer.as_ref().and_then(|t| t.trigger(i, period));
            let h = std::thread::Builder::new()
                .name(format!("tl-lat-cpu{cpu}"))
                .stack_size(256 << 10)
                .spawn(move || measure(cpu, fifo, period, end_ns, thr, &board, &stop, rec, trigger))
                .map_err(|e| Error::environment(format!("cannot start a measuring thread: {e}")))?;
            handles.push(h);
        }
        // Meanwhile: explain spikes as they come, and stop promptly on ^C.
        let mut cancelled = None;
        while handles.iter().any(|h| !h.is_finished()) {
            std::thread::sleep(Duration::from_millis(10));
            if let Some(t) = &mut self.tracer {
                let boards: Vec<&SpikeBoard> = self.boards.iter().map(|b| &**b).collect();
                t.poll(&boards);
            }
            if let Err(e) = ctx.check_cancel() {
                stop.store(true, Ordering::Relaxed);
                cancelled = Some(e);
            }
        }
        let outs: Vec<ThreadOut> = handles
            .into_iter()
            .map(|h| {
                h.join()
                    .map_err(|_| Error::measurement("a measuring thread panicked"))
            })
            .collect::<Result<_>>()?;
        if let Some(t) = &mut self.tracer {
            let boards: Vec<&SpikeBoard> = self.boards.iter().map(|b| &**b).collect();
            t.stop_trial(&boards);
        }
        self.load_lines = load.stop()?;
        if let Some(e) = cancelled {
            return Err(e);
        }
        let mut all = LatencyRecorder::new();
        let mut overruns = 0;
        for (i, o) in outs.iter().enumerate() {
            if let Err(why) = &o.setup {
                return Err(Error::environment(format!(
                    "sched.latency on CPU {}: {why}",
                    self.cpus[i]
                )));
            }
            all.merge(&o.rec);
            self.cum[i].merge(&o.rec);
            overruns += o.overruns;
        }
        self.dropped += self
            .boards
            .iter()
            .map(|b| b.dropped.load(Ordering::Relaxed))
            .sum::<u64>();
        let d = all.to_data("all");
        if d.count == 0 {
            return Err(Error::measurement("sched.latency: no wake-up measured"));
        }
        let pct = |p| d.percentile(p).unwrap_or(d.max);
        Ok(TrialValues::new()
            .with(LAT_MIN, d.min)
            .with(LAT_MEAN, d.mean)
            .with(LAT_P50, pct(50.0))
            .with(LAT_P99, pct(99.0))
            .with(LAT_P999, pct(99.9))
            .with(LAT_MAX, d.max)
            .with(OVER_THRESHOLD, all.count_above_ns(self.threshold_ns) as f64)
            .with(OVERRUNS, overruns as f64))
    }

    fn warmup_done(&mut self) {
        self.cum = self.cpus.iter().map(|_| recorder()).collect();
        self.t0_ns = None;
        self.dropped = 0;
        if let Some(t) = &mut self.tracer {
            t.causes.clear();
        }
    }

    fn fitted(&self) -> Vec<Fitted> {
        self.fitted.clone()
    }

    fn finish(&mut self, _ctx: &Ctx) -> Result<PointExtras> {
        let mut x = PointExtras::default();
        let mut max_per_cpu = Vec::new();
        for (i, &cpu) in self.cpus.iter().enumerate() {
            let h = self.cum[i].to_data(&format!("wake-up latency cpu{cpu}"));
            max_per_cpu.push((cpu as f64, h.max));
            x.histograms.push(h);
        }
        x.series.push(Series {
            name: "max wake-up latency per CPU".into(),
            x_label: "CPU".into(),
            x_unit: "".into(),
            y_label: "max latency".into(),
            y_unit: "s".into(),
            points: max_per_cpu,
        });
        x.notes.push(format!(
            "{} on CPU(s) {}, period {}, threshold {}; load: {}; memory {}",
            self.fifo
                .map_or("SCHED_OTHER".to_string(), |p| format!("SCHED_FIFO {p}")),
            self.cpus
                .iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join(" "),
            seconds(self.period_ns as f64 / 1e9),
            seconds(self.threshold_ns as f64 / 1e9),
            if self.mix.is_none() {
                "none (idle)".to_string()
            } else {
                self.load_lines.join("; ")
            },
            if self.locked {
                "locked (mlockall)"
            } else {
                "not locked"
            }
        ));
        x.notes.append(&mut self.notes);
        if let Some(t) = &self.tracer {
            let t0 = self.t0_ns.unwrap_or(0);
            for &cpu in &self.cpus {
                let pts: Vec<(f64, f64)> = t
                    .causes
                    .iter()
                    .filter(|c| c.cpu == cpu)
                    .take(TIMELINE_MAX)
                    .map(|c| {
                        (
                            c.due_ns.saturating_sub(t0) as f64 / 1e9,
                            c.latency_ns as f64 / 1e9,
                        )
                    })
                    .collect();
                if !pts.is_empty() {
                    x.series.push(Series {
                        name: format!("spikes cpu{cpu}"),
                        x_label: "time".into(),
                        x_unit: "s".into(),
                        y_label: "wake-up latency".into(),
                        y_unit: "s".into(),
                        points: pts,
                    });
                }
            }
            if t.method == Method::PerfSwitch {
                x.notes.push(format!(
                    "spike causes: perf context-switch records, armed on a CPU by a wake-up \
                     later than {} for its next 100 ms of wake-ups, then off for {} times as long: \
                     at most one wake-up in {} pays for the tracing, none while none is late",
                    seconds(self.threshold_ns as f64 / 1e9),
                    COOL,
                    COOL + 1
                ));
            }
            x.notes.extend(cause_notes(&t.causes, t.method.as_str()));
            if t.causes.is_empty() {
                x.notes.push(format!(
                    "no spike above {} to explain (method {})",
                    seconds(self.threshold_ns as f64 / 1e9),
                    t.method.as_str()
                ));
            }
            if t.lost() > 0 {
                x.notes.push(format!(
                    "{} context-switch records lost (too many switches between polls): causes \
                     of some spikes may be missing",
                    t.lost()
                ));
            }
        }
        if self.dropped > 0 {
            x.notes.push(format!(
                "{} spikes beyond {} per CPU and trial were counted but not explained",
                self.dropped,
                crate::experiments::common::latency_cause::SPIKES_PER_TRIAL
            ));
        }
        Ok(x)
    }
}
