//! `cpu.sustained`: keep every core busy for minutes and watch, second by
//! second, what the work gets done and why it slows down — the clock each
//! core really runs at, every temperature, cooling state and throttle
//! counter, the CPU quota of tunelab's cgroup, steal time and other
//! processes — then say "throttled: from X to Y after Z s at T °C" and which
//! of those caused it, or "no throttling".

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::clock::{add_chain, calibrate_chain, thread_cpu_s, CHAIN};
use super::kernels::{self, Lz, Path as KPath};
use crate::engine::{
    Ctx, Experiment, MetricSpec, ParamKind, ParamSpec, Point, PointExtras, PointRun, RunDefaults,
    Series, TrialValues,
};
use crate::experiments::ipc::child::{usable_cpus, PinGuard};
use crate::system::cpu::{sample, Sample};
use crate::{Error, Result};

pub const NAME: &str = "cpu.sustained";

/// A drop is throughput below this share of the start for DROP_ROWS rows in a row.
const DROP_BELOW: f64 = 0.9;
const DROP_ROWS: usize = 3;

pub struct Sustained;

impl Experiment for Sustained {
    fn name(&self) -> &'static str {
        NAME
    }
    fn summary(&self) -> &'static str {
        "all cores busy for minutes: throughput, clocks, temperatures, cooling and throttling per second, with the cause of a drop"
    }
    fn method(&self) -> &'static str {
        "Starts one thread per usable CPU, each pinned to its CPU, running `load` passes (see \
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
         unexplained."
    }
    fn params(&self) -> Vec<ParamSpec> {
        vec![
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
        ]
    }
    fn metrics(&self) -> Vec<MetricSpec> {
        vec![
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
        ]
    }
    fn defaults(&self) -> RunDefaults {
        RunDefaults::ONE_RECORDING
    }
    /// The verdict compares readings before and after a drop: refuse a
    /// recording too short for it before the load runs, not after.
    fn validate(&self, p: &Point) -> Result<()> {
        let (duration, interval) = (p.f64("duration")?, p.f64("interval")?);
        if duration < 4.0 * interval {
            return Err(Error::usage(format!(
                "cpu.sustained: duration {duration} s gives {} reading(s) at interval {interval} s; \
                 the verdict needs 4 (make duration at least 4 × interval)",
                (duration / interval).floor()
            )));
        }
        Ok(())
    }
    fn prepare(&self, _ctx: &Ctx, p: &Point) -> Result<Box<dyn PointRun>> {
        Ok(Box::new(SustainedRun {
            duration: p.f64("duration")?,
            interval: p.f64("interval")?,
            load: p.text("load")?.to_string(),
            rows: Vec::new(),
            started_unix: 0.0,
        }))
    }
}

/// One interval of the recording.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Row {
    /// Seconds since the load started, at the end of the interval.
    pub t: f64,
    pub dt: f64,
    /// Passes per second of all threads.
    pub throughput: f64,
    /// Probe clock per core (Hz; None: no probe finished this interval).
    pub clock: Vec<(usize, Option<f64>)>,
    /// scaling_cur_freq per CPU, Hz.
    pub cur_hz: Vec<(usize, Option<f64>)>,
    pub temps: Vec<(String, f64)>,
    pub cooling: Vec<(String, u64, u64)>,
    /// Throttle counter increments this interval.
    pub throttle_events: u64,
    /// Share of the machine's time stolen by the hypervisor / used by other processes.
    pub steal: f64,
    pub other: f64,
    /// CPUs' worth of quota (None: unlimited or no cgroup), periods throttled this interval.
    pub quota_cpus: Option<f64>,
    pub nr_throttled: u64,
}

impl Row {
    fn mean_clock(&self) -> Option<f64> {
        mean(self.clock.iter().filter_map(|c| c.1))
    }
    fn mean_cur(&self) -> Option<f64> {
        mean(self.cur_hz.iter().filter_map(|c| c.1))
    }
    fn max_temp(&self) -> Option<f64> {
        self.temps.iter().map(|t| t.1).reduce(f64::max)
    }
    fn cooling_sum(&self) -> u64 {
        self.cooling.iter().map(|c| c.1).sum()
    }
}

fn mean(it: impl Iterator<Item = f64>) -> Option<f64> {
    let (s, n) = it.fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    (n > 0).then(|| s / n as f64)
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(v[v.len() / 2])
}

/// Ticks of CPU time this process has used (utime + stime of /proc/<root>/self/stat).
fn own_ticks(root: &Path) -> u64 {
    let s = std::fs::read_to_string(root.join("proc/self/stat")).unwrap_or_default();
    // Fields after the ")" of the command name: state is field 3; utime 14, stime 15.
    let rest = s.rsplit_once(')').map(|x| x.1).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let g = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    g(11) + g(12)
}

/// Builds rows from consecutive sysfs samples and the workers' counters.
pub struct Recorder {
    root: PathBuf,
    cpus: Vec<usize>,
    prev: Sample,
    prev_own: u64,
}

impl Recorder {
    pub fn new(root: &Path, cpus: &[usize]) -> Recorder {
        Recorder {
            root: root.to_path_buf(),
            cpus: cpus.to_vec(),
            prev: sample(root, cpus),
            prev_own: own_ticks(root),
        }
    }

    /// Read the machine now and make the row of the interval that just ended.
    pub fn row(
        &mut self,
        t: f64,
        dt: f64,
        throughput: f64,
        clock: Vec<(usize, Option<f64>)>,
    ) -> Row {
        let s = sample(&self.root, &self.cpus);
        let own = own_ticks(&self.root);
        let total = s.total_ticks.saturating_sub(self.prev.total_ticks).max(1) as f64;
        let busy = s.busy_ticks.saturating_sub(self.prev.busy_ticks);
        let mine = own.saturating_sub(self.prev_own);
        let count = |x: &Sample| x.throttle.iter().map(|c| c.1).sum::<u64>();
        let row = Row {
            t,
            dt,
            throughput,
            clock,
            cur_hz: s
                .cur_khz
                .iter()
                .map(|(c, k)| (*c, k.map(|k| k as f64 * 1e3)))
                .collect(),
            temps: s.temps.clone(),
            cooling: s.cooling.clone(),
            throttle_events: count(&s).saturating_sub(count(&self.prev)),
            steal: s.steal_ticks.saturating_sub(self.prev.steal_ticks) as f64 / total,
            other: busy.saturating_sub(mine) as f64 / total,
            quota_cpus: s.quota.as_ref().and_then(|q| q.cpus()),
            nr_throttled: match (&s.quota, &self.prev.quota) {
                (Some(a), Some(b)) => a.nr_throttled.saturating_sub(b.nr_throttled),
                _ => 0,
            },
        };
        self.prev = s;
        self.prev_own = own;
        row
    }
}

/// What the recording shows.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    pub start: f64,
    pub end: f64,
    /// Seconds from the start of the load to the drop, and its causes.
    pub drop: Option<(f64, Vec<String>)>,
    pub temp_at_drop: Option<f64>,
    pub peak_temp: Option<f64>,
    pub text: String,
}

/// Judge a recording (rows in time order). Needs at least 4 rows.
pub fn analyse(rows: &[Row]) -> Option<Verdict> {
    if rows.len() < 4 {
        return None;
    }
    // The first row holds thread start-up; the start is the next few.
    let base_rows = &rows[1..(1 + (rows.len() / 4).clamp(1, 5)).min(rows.len())];
    let start = median(base_rows.iter().map(|r| r.throughput).collect())?;
    let q = rows.len() - (rows.len() / 4).max(1);
    let end = median(rows[q..].iter().map(|r| r.throughput).collect())?;
    let peak_temp = rows.iter().filter_map(Row::max_temp).reduce(f64::max);
    let from = 1 + base_rows.len();
    let at = (from..rows.len().saturating_sub(DROP_ROWS - 1)).find(|&i| {
        rows[i..i + DROP_ROWS]
            .iter()
            .all(|r| r.throughput < DROP_BELOW * start)
    });
    let fmt = |v: f64| crate::units::human(v, "ops/s");
    let Some(i) = at else {
        let temp = peak_temp
            .map(|t| format!(", peak {t:.1} °C"))
            .unwrap_or_else(|| ", no temperature sensor exposed".into());
        return Some(Verdict {
            start,
            end,
            drop: None,
            temp_at_drop: None,
            peak_temp,
            text: format!(
                "no throttling: {} at the start, {} at the end ({:.0}%) over {:.0} s{temp}",
                fmt(start),
                fmt(end),
                end * 100.0 / start.max(1e-12),
                rows.last().map_or(0.0, |r| r.t)
            ),
        });
    };
    let before = &rows[i.saturating_sub(3).max(1)..i];
    let after = &rows[i..(i + 3).min(rows.len())];
    let causes = causes(before, after);
    let when = rows[i].t - rows[i].dt;
    let low = median(rows[i..].iter().map(|r| r.throughput).collect()).unwrap_or(end);
    let temp_at_drop = rows[i].max_temp();
    let at_temp = temp_at_drop
        .map(|t| format!(" at {t:.1} °C"))
        .unwrap_or_else(|| " (no temperature sensor exposed)".into());
    let text = format!(
        "throttled: from {} to {} after {when:.0} s{at_temp} — cause: {}",
        fmt(start),
        fmt(low),
        causes.join("; ")
    );
    Some(Verdict {
        start,
        end,
        drop: Some((when, causes)),
        temp_at_drop,
        peak_temp,
        text,
    })
}

/// Why throughput fell between `before` and `after`, strongest evidence first.
fn causes(before: &[Row], after: &[Row]) -> Vec<String> {
    let m = |rows: &[Row], f: &dyn Fn(&Row) -> Option<f64>| mean(rows.iter().filter_map(f));
    let mut out = Vec::new();
    // The highest quota before and the lowest after: a drop found a reading
    // early on a noisy ramp still sees the quota change inside the window.
    let qb = before.iter().filter_map(|r| r.quota_cpus).reduce(f64::max);
    let qa = after.iter().filter_map(|r| r.quota_cpus).reduce(f64::min);
    let thr_b = m(before, &|r| Some(r.nr_throttled as f64)).unwrap_or(0.0);
    let thr_a = m(after, &|r| Some(r.nr_throttled as f64)).unwrap_or(0.0);
    match (qb, qa) {
        (Some(b), Some(a)) if a < b * 0.95 => out.push(format!(
            "CPU quota (cgroup quota lowered from {b:.2} to {a:.2} CPUs; throttled periods {thr_b:.0} -> {thr_a:.0} per interval)"
        )),
        (None, Some(a)) => out.push(format!(
            "CPU quota (cgroup quota set to {a:.2} CPUs; throttled periods {thr_b:.0} -> {thr_a:.0} per interval)"
        )),
        _ if thr_a > thr_b + 1.0 => out.push(format!(
            "CPU quota (cgroup throttled periods {thr_b:.0} -> {thr_a:.0} per interval)"
        )),
        _ => {}
    }
    let mut thermal = Vec::new();
    let cool_b = before.last().map_or(0, Row::cooling_sum);
    let cool_a = after.iter().map(Row::cooling_sum).max().unwrap_or(0);
    if cool_a > cool_b {
        thermal.push(format!("cooling state {cool_b} -> {cool_a}"));
    }
    let events: u64 = after.iter().map(|r| r.throttle_events).sum();
    if events > 0 {
        thermal.push(format!("{events} throttle events"));
    }
    for (what, f) in [
        ("cpufreq", &Row::mean_cur as &dyn Fn(&Row) -> Option<f64>),
        ("measured clock", &Row::mean_clock),
    ] {
        if let (Some(b), Some(a)) = (m(before, f), m(after, f)) {
            if a < 0.95 * b {
                thermal.push(format!("{what} {:.0} -> {:.0} MHz", b / 1e6, a / 1e6));
            }
        }
    }
    if !thermal.is_empty() {
        let tb = m(before, &Row::max_temp);
        let ta = after.iter().filter_map(Row::max_temp).reduce(f64::max);
        let temp = match (tb, ta) {
            (Some(b), Some(a)) => format!(", temperature {b:.1} -> {a:.1} °C"),
            _ => ", no temperature exposed".into(),
        };
        let kind = if cool_a > cool_b || events > 0 || ta.is_some_and(|a| tb.is_some_and(|b| a > b))
        {
            "thermal"
        } else {
            "clock lowered (governor, firmware or power limit; no thermal evidence)"
        };
        out.push(format!("{kind} ({}{temp})", thermal.join(", ")));
    }
    let sb = m(before, &|r| Some(r.steal)).unwrap_or(0.0);
    let sa = m(after, &|r| Some(r.steal)).unwrap_or(0.0);
    if sa > sb + 0.05 {
        out.push(format!(
            "steal (hypervisor took {:.0}% -> {:.0}% of the machine)",
            sb * 100.0,
            sa * 100.0
        ));
    }
    let ob = m(before, &|r| Some(r.other)).unwrap_or(0.0);
    let oa = m(after, &|r| Some(r.other)).unwrap_or(0.0);
    if oa > ob + 0.05 {
        out.push(format!(
            "another process (busy outside tunelab {:.0}% -> {:.0}% of the machine)",
            ob * 100.0,
            oa * 100.0
        ));
    }
    if out.is_empty() {
        out.push(
            "unexplained (no quota, thermal, clock, steal or other-process change seen)".into(),
        );
    }
    out
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
        out.set("throughput_start", v.start);
        out.set("throughput_end", v.end);
        out.set("sustained_ratio", v.end / v.start.max(1e-12));
        if let Some((t, _)) = &v.drop {
            out.set("throttled_after", *t);
        }
        let q = self.rows.len() - (self.rows.len() / 4).max(1);
        if let Some(c) = median(self.rows[q..].iter().filter_map(Row::mean_clock).collect()) {
            out.set("clock_end", c);
        }
        if let Some(t) = v.peak_temp {
            out.set("peak_temp", t);
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
        let names: Vec<String> = rows
            .first()
            .map(|r| r.temps.iter().map(|t| t.0.clone()).collect())
            .unwrap_or_default();
        for n in names {
            series.push(line(
                format!("temperature {n}"),
                "°C",
                rows.iter()
                    .filter_map(|r| Some((r.t, r.temps.iter().find(|t| t.0 == n)?.1)))
                    .collect(),
            ));
        }
        let cool: Vec<String> = rows
            .first()
            .map(|r| r.cooling.iter().map(|c| c.0.clone()).collect())
            .unwrap_or_default();
        for n in cool {
            series.push(line(
                format!("cooling {n}"),
                "count",
                rows.iter()
                    .filter_map(|r| Some((r.t, r.cooling.iter().find(|c| c.0 == n)?.1 as f64)))
                    .collect(),
            ));
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn put(root: &Path, rel: &str, v: &str) {
        let p = root.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, v).unwrap();
    }

    /// A fixture /sys and /proc: the temperature climbs 2 °C per second;
    /// at 70 °C the cooling device steps up and the clock falls from
    /// 1.5 GHz to 1.0 GHz; throughput follows the clock.
    #[test]
    fn a_temperature_ramp_with_frequency_steps_is_thermal() {
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        let cpus = [0usize, 1];
        let write = |sec: u64| {
            let temp = 50_000 + 2000 * sec;
            let hot = temp >= 70_000;
            put(r, "sys/class/thermal/thermal_zone0/type", "cpu-thermal");
            put(r, "sys/class/thermal/thermal_zone0/temp", &temp.to_string());
            put(r, "sys/class/thermal/cooling_device0/type", "cpufreq-cpu0");
            put(r, "sys/class/thermal/cooling_device0/max_state", "4");
            put(
                r,
                "sys/class/thermal/cooling_device0/cur_state",
                if hot { "2" } else { "0" },
            );
            for c in cpus {
                put(
                    r,
                    &format!("sys/devices/system/cpu/cpu{c}/cpufreq/scaling_cur_freq"),
                    if hot { "1000000" } else { "1500000" },
                );
            }
            // Only the load runs: 2 CPUs busy, 100 ticks per second each.
            put(
                r,
                "proc/stat",
                &format!("cpu  {} 0 0 0 0 0 0 0 0 0\n", 200 * sec),
            );
            hot
        };
        write(0);
        let mut rec = Recorder::new(r, &cpus);
        let mut rows = Vec::new();
        for sec in 1..=30u64 {
            let hot = write(sec);
            let hz = if hot { 1.0e9 } else { 1.5e9 };
            rows.push(rec.row(
                sec as f64,
                1.0,
                hz / 1e6,
                vec![(0, Some(hz)), (1, Some(hz))],
            ));
        }
        assert_eq!(
            rows[3].temps,
            vec![("thermal_zone0 cpu-thermal".to_string(), 58.0)]
        );
        let v = analyse(&rows).unwrap();
        let (when, causes) = v.drop.clone().unwrap();
        assert_eq!(
            when, 9.0,
            "70 °C is read at 10 s, ending the interval from 9 s: {}",
            v.text
        );
        assert!(
            causes[0].starts_with("thermal (cooling state 0 -> 2"),
            "{causes:?}"
        );
        assert!(causes[0].contains("cpufreq 1500 -> 1000 MHz"), "{causes:?}");
        assert_eq!(causes.len(), 1, "{causes:?}");
        assert!(
            v.text
                .starts_with("throttled: from 1500 ops/s to 1000 ops/s after 9 s at 70.0 °C"),
            "{}",
            v.text
        );
    }

    fn row(t: f64, throughput: f64) -> Row {
        Row {
            t,
            dt: 1.0,
            throughput,
            clock: vec![(0, Some(2e9))],
            ..Row::default()
        }
    }

    #[test]
    fn a_lowered_quota_is_not_thermal() {
        let mut rows: Vec<Row> = (1..=20).map(|s| row(s as f64, 100.0)).collect();
        for r in &mut rows {
            r.quota_cpus = Some(2.0);
        }
        for r in &mut rows[9..] {
            r.throughput = 50.0;
            r.quota_cpus = Some(1.0);
            r.nr_throttled = 10;
        }
        let v = analyse(&rows).unwrap();
        let (when, causes) = v.drop.unwrap();
        assert_eq!(when, 9.0);
        assert_eq!(causes.len(), 1, "{causes:?}");
        assert!(
            causes[0].starts_with("CPU quota (cgroup quota lowered from 2.00 to 1.00"),
            "{causes:?}"
        );
        assert!(
            v.text.contains("(no temperature sensor exposed)"),
            "{}",
            v.text
        );
    }

    #[test]
    fn a_quota_lowered_just_after_a_noisy_drop_is_still_the_cause() {
        // Throughput sags a reading before the quota halves (as a 1-CPU quota
        // over 2 threads does on a live machine): the window still holds it.
        let mut rows: Vec<Row> = (1..=20).map(|s| row(s as f64, 100.0)).collect();
        for (i, r) in rows.iter_mut().enumerate() {
            r.quota_cpus = Some(if i >= 10 { 0.5 } else { 1.0 });
            r.throughput = match i {
                0..=8 => 100.0,
                9 => 62.0,
                _ => 30.0,
            };
        }
        let (_, causes) = analyse(&rows).unwrap().drop.unwrap();
        assert!(
            causes[0].starts_with("CPU quota (cgroup quota lowered from 1.00 to 0.50"),
            "{causes:?}"
        );
    }

    #[test]
    fn steady_load_and_other_causes() {
        let rows: Vec<Row> = (1..=10)
            .map(|s| row(s as f64, 100.0 + (s % 3) as f64))
            .collect();
        let v = analyse(&rows).unwrap();
        assert!(v.drop.is_none());
        assert!(v.text.starts_with("no throttling"), "{}", v.text);
        let mut rows: Vec<Row> = (1..=12).map(|s| row(s as f64, 100.0)).collect();
        for r in &mut rows[6..] {
            r.throughput = 60.0;
            r.steal = 0.3;
        }
        let c = analyse(&rows).unwrap().drop.unwrap().1;
        assert!(c[0].starts_with("steal"), "{c:?}");
        for r in &mut rows[6..] {
            r.steal = 0.0;
            r.other = 0.4;
        }
        let c = analyse(&rows).unwrap().drop.unwrap().1;
        assert!(c[0].starts_with("another process"), "{c:?}");
        assert!(analyse(&rows[..3]).is_none());
    }
}
