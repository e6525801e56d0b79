//! One io.random point: the steady-state search, the timed trials through
//! the psync or io_uring engine, and what each trial and the point report.
//!
//! libc: getrusage, RUSAGE_SELF, rusage, timeval (rustix has no getrusage)

use super::*;
use crate::engine::Metric;

// The metrics a trial emits, checked against the Spec while compiling.
const CPU_PER_OP: Metric = super::SPEC.emits(METRIC_CPU_PER_OP);
const FRESH_STEADY_RATIO: Metric = super::SPEC.emits("fresh_steady_ratio");
const LAT_MAX: Metric = super::SPEC.emits("lat_max");
const LAT_P50: Metric = super::SPEC.emits("lat_p50");
const LAT_P90: Metric = super::SPEC.emits("lat_p90");
const LAT_P99: Metric = super::SPEC.emits("lat_p99");
const LAT_P999: Metric = super::SPEC.emits("lat_p999");
const M_IOPS: Metric = super::SPEC.emits("iops");
const READ_P99: Metric = super::SPEC.emits("read_p99");
const STEADY_TIME: Metric = super::SPEC.emits("steady_time");
const THROUGHPUT: Metric = super::SPEC.emits("throughput");
const WRITE_P99: Metric = super::SPEC.emits("write_p99");

/// A point that cannot run here (io_uring missing): no metrics, the reason
/// in its notes.
pub(super) struct Skipped(pub(super) String);

impl PointRun for Skipped {
    fn trial(&mut self, _ctx: &Ctx) -> Result<TrialValues> {
        Ok(TrialValues::new())
    }
    fn finish(&mut self, _ctx: &Ctx) -> Result<PointExtras> {
        Ok(PointExtras {
            notes: vec![self.0.clone()],
            ..Default::default()
        })
    }
}

/// What the steady-state search found.
pub(super) struct Steady {
    /// (seconds since the start of writing, IOPS) per round.
    pub(super) rounds: Vec<(f64, f64)>,
    /// Seconds written until the rule held; None when the limit came first.
    pub(super) time: Option<f64>,
    pub(super) fresh: f64,
    pub(super) window: Option<steady::Window>,
}

pub(super) struct RandomRun {
    pub(super) file: File,
    pub(super) path: PathBuf,
    pub(super) size: u64,
    pub(super) bs: usize,
    pub(super) depth: usize,
    /// Workers, each with `depth` in flight: `bufs` holds jobs × depth.
    pub(super) jobs: usize,
    pub(super) engine: Engine,
    pub(super) direct: bool,
    pub(super) read_pct: u32,
    pub(super) duration: Duration,
    pub(super) bufs: Vec<AlignedBuf>,
    pub(super) seed: u64,
    pub(super) notes: Vec<String>,
    /// Latencies of the measured trials, merged.
    pub(super) total: Tally,
    pub(super) iops: Vec<f64>,
    pub(super) steady: Option<Steady>,
    /// The steady-state figures go out with the first measured trial.
    pub(super) steady_pending: bool,
    pub(super) label: String,
}

impl RandomRun {
    /// What the engines run: the file, the block size, the share of reads.
    fn job(&self) -> Job<'_> {
        Job {
            file: &self.file,
            path: &self.path,
            bs: self.bs,
            blocks: self.size / self.bs as u64,
            read_pct: self.read_pct,
        }
    }

    /// One timed run of the workload for `dur`.
    pub(super) fn measure(&mut self, ctx: &Ctx, dur: Duration) -> Result<Tally> {
        ctx.check_cancel()?;
        if !self.direct {
            // Not timed: start cold and clean.
            self.file
                .sync_data()
                .map_err(|e| Error::io("cannot fdatasync", &self.path, e))?;
            fadvise_dontneed(&self.file, &self.path)?;
        }
        self.seed += 1;
        // The buffers go to the engine while the job borrows the rest.
        let mut bufs = std::mem::take(&mut self.bufs);
        let cpu0 = process_cpu_ns();
        let t = match self.engine {
            Engine::Psync => psync::run(&self.job(), dur, &mut bufs, self.seed),
            Engine::IoUring => uring::run_jobs(&self.job(), dur, &mut bufs, self.seed, self.jobs),
        };
        self.bufs = bufs;
        let mut t = t?;
        t.cpu_ns = process_cpu_ns().saturating_sub(cpu0);
        ctx.check_cancel()?;
        if t.ops == 0 {
            return Err(Error::measurement(
                "io.random: no operation completed in the trial",
            ));
        }
        Ok(t)
    }

    /// Write in rounds until the SNIA rule holds or `limit` seconds passed.
    pub(super) fn find_steady(&mut self, ctx: &Ctx, round: Duration, limit: f64) -> Result<Steady> {
        let t0 = Instant::now();
        let mut rounds = Vec::new();
        let mut iops = Vec::new();
        loop {
            let t = self.measure(ctx, round)?;
            iops.push(t.iops());
            rounds.push((t0.elapsed().as_secs_f64(), t.iops()));
            let w = steady::window(&iops);
            if w.is_some_and(|w| w.steady()) {
                return Ok(Steady {
                    time: Some(t0.elapsed().as_secs_f64()),
                    fresh: iops[0],
                    rounds,
                    window: w,
                });
            }
            if t0.elapsed().as_secs_f64() + round.as_secs_f64() > limit {
                return Ok(Steady {
                    time: None,
                    fresh: iops[0],
                    rounds,
                    window: w,
                });
            }
        }
    }

    pub(super) fn series(
        &self,
        name: &str,
        x: (&str, &str),
        y: (&str, &str),
        pts: Vec<(f64, f64)>,
    ) -> Series {
        Series {
            name: format!("{name} {}", self.label),
            x_label: x.0.into(),
            x_unit: x.1.into(),
            y_label: y.0.into(),
            y_unit: y.1.into(),
            points: pts,
        }
    }
}

/// User + system CPU time of this whole process so far (every thread: the
/// engine's workers and the idle main thread), from the kernel's own
/// accounting (getrusage RUSAGE_SELF), in nanoseconds.
fn process_cpu_ns() -> u64 {
    // SAFETY: rusage is plain data, filled by the call.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_SELF with a valid pointer cannot fail.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let ns = |tv: libc::timeval| tv.tv_sec as u64 * 1_000_000_000 + tv.tv_usec as u64 * 1_000;
    ns(ru.ru_utime) + ns(ru.ru_stime)
}

pub(super) fn p(d: &HistogramData, q: f64) -> f64 {
    d.percentile(q).unwrap_or(0.0)
}

impl PointRun for RandomRun {
    fn warmup_done(&mut self) {
        self.total = Tally::default();
        self.iops.clear();
        self.steady_pending = self.steady.is_some();
    }

    fn trial(&mut self, ctx: &Ctx) -> Result<TrialValues> {
        let t = self.measure(ctx, self.duration)?;
        let iops = t.iops();
        let all = t.all().to_data("");
        let mut v = TrialValues::new()
            .with(M_IOPS, iops)
            .with(THROUGHPUT, iops * self.bs as f64)
            .with(LAT_P50, p(&all, 50.0))
            .with(LAT_P90, p(&all, 90.0))
            .with(LAT_P99, p(&all, 99.0))
            .with(LAT_P999, p(&all, 99.9))
            .with(LAT_MAX, all.max)
            .with(CPU_PER_OP, t.cpu_per_op());
        if self.read_pct != 0 && self.read_pct != 100 {
            v.set(READ_P99, p(&t.read.to_data(""), 99.0));
            v.set(WRITE_P99, p(&t.write.to_data(""), 99.0));
        }
        if self.steady_pending {
            self.steady_pending = false;
            if let Some(s) = &self.steady {
                if let Some(time) = s.time {
                    v.set(STEADY_TIME, time);
                }
                if let Some(w) = s.window {
                    v.set(FRESH_STEADY_RATIO, s.fresh / w.mean.max(1e-9));
                }
            }
        }
        self.iops.push(iops);
        self.total.add(&t);
        Ok(v)
    }

    fn finish(&mut self, _ctx: &Ctx) -> Result<PointExtras> {
        let mut ex = PointExtras::default();
        let all = self.total.all().to_data("completion latency");
        if !self.iops.is_empty() {
            let iops = stats::summarize(&self.iops).median;
            ex.series.push(self.series(
                "iops vs depth",
                ("depth", "count"),
                ("iops", "ops/s"),
                vec![(self.depth as f64, iops)],
            ));
            ex.series.push(self.series(
                "p99 latency vs IOPS",
                ("iops", "ops/s"),
                ("p99 latency", "s"),
                vec![(iops, p(&all, 99.0))],
            ));
        }
        ex.histograms.push(all);
        if self.read_pct != 0 && self.read_pct != 100 {
            ex.histograms
                .push(self.total.read.to_data("read completion latency"));
            ex.histograms
                .push(self.total.write.to_data("write completion latency"));
        }
        if let Some(s) = &self.steady {
            ex.series.push(self.series(
                "steady-state search",
                ("time", "s"),
                ("iops", "ops/s"),
                s.rounds.clone(),
            ));
            let last = s.rounds.len();
            ex.notes.push(match (s.time, s.window) {
                (Some(t), Some(w)) => format!(
                    "steady state after {t:.1} s ({last} rounds): window mean {:.0} IOPS, rounds \
                     within ±{:.1}% of it, fitted line changes {:.1}% across the window (rule: \
                     ±10%, 10%); fresh (first round) {:.0} IOPS = {:.2} × steady",
                    w.mean,
                    w.data * 100.0,
                    w.slope * 100.0,
                    s.fresh,
                    s.fresh / w.mean.max(1e-9)
                ),
                (_, w) => format!(
                    "NOT steady within the time limit ({last} rounds){}: the trials measured a \
                     device that was still changing; fresh_steady_ratio uses the last 5 rounds",
                    w.map(|w| format!(
                        ", last 5 rounds: mean {:.0} IOPS, ±{:.1}%, line {:.1}%",
                        w.mean,
                        w.data * 100.0,
                        w.slope * 100.0
                    ))
                    .unwrap_or_default()
                ),
            });
        }
        ex.notes.extend(self.notes.iter().cloned());
        if !self.iops.is_empty() {
            let own = own_ns_per_op(&self.job(), self.engine);
            // The threads sharing the work: psync one per operation in
            // flight, io_uring one per ring. Each pays the bookkeeping of
            // its own operations, so its time per operation is the budget.
            let threads = match self.engine {
                Engine::Psync => self.jobs * self.depth,
                Engine::IoUring => self.jobs,
            };
            let per_op = 1e9 * threads as f64 / stats::summarize(&self.iops).median;
            let share = own / per_op;
            ex.notes.push(format!(
                "tunelab's own work per operation (random offset, clock reads, latency \
                 recording), measured on this machine after the trials: {own:.0} ns, {:.1}% of \
                 the time the {} has per operation at the median IOPS",
                share * 100.0,
                match self.engine {
                    Engine::Psync => "thread",
                    Engine::IoUring => "ring's thread",
                }
            ));
        }
        ex.notes.push(format!(
            "{}{} × {} operations in flight ({}), {}; latency = completion − start per operation, \
             HDR histograms merged across {} and trials",
            if self.jobs > 1 {
                format!("{} jobs × ", self.jobs)
            } else {
                String::new()
            },
            self.depth,
            format_size(self.bs as u64),
            match (self.engine, self.total.registered) {
                (Engine::Psync, _) => "one pread/pwrite thread each".to_string(),
                (Engine::IoUring, registered) => format!(
                    "one io_uring{} {}, latency from queuing to the ring",
                    if self.jobs > 1 { " per job" } else { "" },
                    match registered {
                        Some((true, true)) => {
                            "with the file and buffers registered (fio registerfiles, fixedbufs)"
                        }
                        Some((true, false)) => {
                            "with the file registered (the buffers were refused: locked-memory \
                             limit?)"
                        }
                        _ => "(file and buffers not registered: the kernel refused)",
                    }
                ),
            },
            if self.direct {
                "O_DIRECT: page cache bypassed"
            } else {
                "buffered: the file's cache dropped (fdatasync + fadvise DONTNEED) before each \
                 trial; writes not fsynced in the trial"
            },
            if self.engine == Engine::Psync {
                "threads"
            } else {
                "completions"
            }
        ));
        Ok(ex)
    }
}

/// Nanoseconds of tunelab's own work per operation, without the I/O: the
/// next random offset, the clock reads the engine does per operation (psync:
/// two, around the call; io_uring: one per reaped batch, counted as one per
/// operation, the worst case of batches of one) and recording the latency in
/// an HDR histogram. Timed over enough operations to take ~10 ms.
pub(super) fn own_ns_per_op(job: &Job, engine: Engine) -> f64 {
    use rand::SeedableRng;
    const N: u32 = 100_000;
    let clocks = match engine {
        Engine::Psync => 2,
        Engine::IoUring => 1,
    };
    let mut rng = SmallRng::seed_from_u64(7);
    let mut rec = LatencyRecorder::new();
    let t0 = Instant::now();
    let mut prev = t0;
    for _ in 0..N {
        let (off, read) = job.next_op(&mut rng);
        std::hint::black_box((off, read));
        let mut now = prev;
        for _ in 0..clocks {
            now = Instant::now();
        }
        rec.record_ns((now - prev).as_nanos() as u64 + (off & 0xff));
        prev = now;
    }
    std::hint::black_box(&rec);
    t0.elapsed().as_nanos() as f64 / f64::from(N)
}
