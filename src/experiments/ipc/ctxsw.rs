//! `ipc.ctxsw`: context-switch time, lmbench `lat_ctx` method: a ring of N
//! processes passes a token through pipes, each process summing a private
//! working set before passing it on; the same work done by one process
//! (pipe write + read + sum, no switch) is measured and subtracted.
//!
//! libc: close (in the forked workers: async-signal-safe)

use std::collections::BTreeMap;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::engine::{
    Ctx, Experiment, Metric, MetricSpec, ParamKind, ParamSpec, Point, PointExtras, PointRun,
    RunDefaults, Series, TrialValues,
};
use crate::engine::{Needs, Spec};
use crate::experiments::common::child::{
    self, check_open_files, check_process_limit, Children, CpuSet, PinGuard,
};
use crate::experiments::common::pingpong::pipe;
use crate::experiments::common::util::sum_bytes;
use crate::safety::AlignedBuf;
use crate::units::format_size;
use crate::{Error, Result};

/// Medians of finished points, per (cpu, size), for the "context switch vs
/// processes" curves: (procs, median ctxsw in s).
type Curves = BTreeMap<(String, u64), Vec<(u64, f64)>>;

#[derive(Default)]
pub(crate) struct Ctxsw {
    curves: Arc<Mutex<Curves>>,
}

const TOKEN: [u8; 4] = *b"tok!";

pub(crate) static SPEC: Spec = Spec {
    name: "ipc.ctxsw",
    summary: "context-switch time vs number of processes and working set (lmbench lat_ctx)",
    method: "lmbench lat_ctx. prepare() creates `procs` pipes and forks procs-1 children; with \
         tunelab they form a ring: process i reads a 4-byte token from pipe i, sums its private \
         working set of `size` bytes (64-bit words, black-boxed; each child writes its copy \
         once so the pages are its own, not shared copy-on-write), and writes the token into \
         pipe i+1. A trial sends the token round the ring until at least the trial time (200 ms by default) has passed \
         (monotonic clock, measured by tunelab); hop = wall time / (rounds x procs). Overhead \
         = the same work without a switch, measured once per point in prepare() by tunelab \
         alone on the same CPU placement: write the token into one of `procs` pipes, read it \
         back, sum a `size` working set (median of 5 batches of >= 20 ms). ctxsw = hop - \
         overhead, seconds per context switch (one switch per hop). As in lmbench, the \
         overhead sums one cache-warm buffer while the ring's processes each bring their own \
         working set back into the cache, so ctxsw includes the cache refill that a real switch \
         causes (it grows with procs x size once that exceeds the caches). cpu=same pins every \
         process of the ring (and the overhead measurement) to one CPU: pure context switches. \
         cpu=any lets the scheduler place them: a hop may then be a cross-CPU wake-up (an IPI, \
         and on a VM the wake-up of an idle vCPU), which can cost far more than a switch. \
         Series: for each (cpu, size), the median ctxsw of every trial() of each point vs procs, \
         over the points run so far; the last point of each group (procs varies fastest) \
         carries the complete curve (warm-up trials requested with --warmup are included in \
         it; by default there are none: prepare() runs the ring for 100 ms instead). \
         Defaults: procs 2..64 (powers of two) x size 0, 16k, 64k x cpu same, any = 36 points \
         of exactly 5 trials of 200 ms, about 1 minute on 2 CPUs; on a noisy machine read the \
         cpu=same curves, cpu=any mixes in the cost of cross-CPU wake-ups.",
    params: &[
            ParamSpec::new(
                "cpu",
                ParamKind::Choice(&["same", "any"]),
                "same,any",
                "same: all processes pinned to one CPU; any: the scheduler places them",
            ),
            ParamSpec::new(
                "size",
                ParamKind::Size,
                "0,16k,64k",
                "private working set each process sums per hop",
            )
            .range(0.0, (64u64 << 20) as f64),
            ParamSpec::new(
                "procs",
                ParamKind::Count,
                "2,4,8,16,32,64",
                "processes in the ring (tunelab + procs-1 children)",
            )
            // Up to above PID_MAX_LIMIT (4M), so that validate() says why.
            .range(2.0, (1u64 << 23) as f64),
        ],
    metrics: &[
            MetricSpec::lower(
                "ctxsw",
                "s",
                "context switch time: ring time per hop minus the single-process overhead",
            ),
            MetricSpec::lower(
                "hop",
                "s",
                "raw ring time per hop (pipe write + read + sum + one switch)",
            ),
        ],
    needs: Needs::NOTHING,
    defaults: // 36 default points: exactly 5 trials each, so that the budget is
        // not eaten by the first points of a noisy machine. No warm-up trial:
        // prepare() runs the ring for 100 ms first.
        RunDefaults::new(0, 5, 5, 100.0),
    hidden: false,
};

// The metrics a trial emits, checked against the Spec while compiling.
const CTXSW: Metric = SPEC.emits("ctxsw");
const HOP: Metric = SPEC.emits("hop");

/// A point's parameters, read by name once, here.
struct Params {
    procs: u64,
    size: u64,
    /// "same" (every process pinned to one CPU) or "any".
    cpu: String,
}

impl Params {
    fn parse(p: &Point) -> Result<Params> {
        Ok(Params {
            procs: p.u64("procs")?,
            size: p.u64("size")?,
            cpu: p.text("cpu")?.to_string(),
        })
    }
}

impl Experiment for Ctxsw {
    fn spec(&self) -> &'static Spec {
        &SPEC
    }
    fn validate(&self, p: &Point) -> Result<()> {
        let Params { procs, size, .. } = Params::parse(p)?;
        let total = procs.saturating_mul(size);
        if let Some(avail) = crate::experiments::mem::mem_available() {
            if total > avail / 2 {
                return Err(Error::usage(format!(
                    "ipc.ctxsw: procs x size = {} of working sets but only {} of memory is \
                     available; use fewer processes or a smaller size",
                    format_size(total),
                    format_size(avail)
                )));
            }
        }
        check_process_limit("ipc.ctxsw", procs - 1)?;
        // Ring pipes plus the overhead pipes, all open in tunelab at once.
        let fds = 4 * procs + 32;
        check_open_files(fds, |lim| {
            format!(
                "ipc.ctxsw: procs={procs} needs about {fds} open files but the limit is \
                 {lim}; use fewer processes or raise `ulimit -n`"
            )
        })
    }
    fn prepare(&self, ctx: &Ctx, p: &Point) -> Result<Box<dyn PointRun>> {
        let q = Params::parse(p)?;
        let procs = q.procs as usize;
        let size = q.size as usize / 8 * 8;
        let cpu = q.cpu;
        let pin_cpu = (cpu == "same").then(|| child::usable_cpus()[0]);
        let pin = PinGuard::new(pin_cpu)?;
        let mut own = AlignedBuf::zeroed(size.max(8))?;
        own.as_mut_slice().fill(1);
        let overhead = measure_overhead(ctx, procs, &own.as_slice()[..size])?;

        let mut pipes: Vec<(OwnedFd, OwnedFd)> = Vec::with_capacity(procs);
        for _ in 0..procs {
            pipes.push(pipe()?);
        }
        // Every ring descriptor, so that each child can close those it does
        // not use: when one process of the ring dies, its successor then sees
        // EOF, and so on round to tunelab, instead of everyone blocking.
        let all: Vec<RawFd> = pipes
            .iter()
            .flat_map(|(r, w)| [r.as_raw_fd(), w.as_raw_fd()])
            .collect();
        let set = pin_cpu.map(CpuSet::one);
        let mut kids = Children::new();
        for i in 1..procs {
            ctx.check_cancel()?;
            let rfd = pipes[i].0.as_raw_fd();
            let wfd = pipes[(i + 1) % procs].1.as_raw_fd();
            let mut data = AlignedBuf::zeroed(size.max(8))?;
            let all = &all;
            kids.spawn(move || {
                for &fd in all {
                    if fd != rfd && fd != wfd {
                        // SAFETY: close is async-signal-safe; fd is an inherited copy.
                        unsafe { libc::close(fd) };
                    }
                }
                if let Some(s) = &set {
                    if !child::pin_self(s) {
                        return 3;
                    }
                }
                // Write every page: private copies, not the parent's COW pages.
                for b in data.as_mut_slice().iter_mut() {
                    *b = i as u8;
                }
                let data = &data.as_slice()[..size];
                let mut t = [0u8; 4];
                loop {
                    if !child::read_exact(rfd, &mut t) {
                        return 0;
                    }
                    sum_bytes(data);
                    if !child::write_all(wfd, &t) {
                        return 1;
                    }
                }
            })?;
        }
        // tunelab keeps only its read end (pipe 0) and write end (pipe 1).
        let mut pipes = pipes.into_iter();
        let (read, _) = pipes.next().expect("procs >= 2");
        let (_, write) = pipes.next().expect("procs >= 2");
        drop(pipes);
        let mut run = RingRun {
            kids,
            read: read.as_raw_fd(),
            write: write.as_raw_fd(),
            _fds: [read, write],
            own,
            size,
            procs,
            cpu,
            overhead,
            rounds: 0,
            ctxsw: Vec::new(),
            curves: Arc::clone(&self.curves),
            _pin: pin,
        };
        // Warm-up: every child running, its working set touched, for 100 ms.
        let warm = Instant::now();
        while warm.elapsed().as_secs_f64() < 0.1 {
            run.rounds(ctx, (64 / procs as u64).max(1))?;
        }
        Ok(Box::new(run))
    }
}

/// Seconds per hop of the same work without a context switch.
fn measure_overhead(ctx: &Ctx, procs: usize, data: &[u8]) -> Result<f64> {
    let mut pipes = Vec::with_capacity(procs);
    for _ in 0..procs {
        pipes.push(pipe()?);
    }
    let fds: Vec<(RawFd, RawFd)> = pipes
        .iter()
        .map(|(r, w)| (r.as_raw_fd(), w.as_raw_fd()))
        .collect();
    let batch = |n: u64| -> Result<f64> {
        let mut t = [0u8; 4];
        let start = Instant::now();
        for k in 0..n {
            let (r, w) = fds[k as usize % fds.len()];
            if !child::write_all(w, &TOKEN) || !child::read_exact(r, &mut t) {
                return Err(Error::measurement(
                    "ipc.ctxsw: pipe write/read failed while measuring the overhead",
                ));
            }
            sum_bytes(data);
        }
        Ok(start.elapsed().as_secs_f64())
    };
    // Hops for about 20 ms.
    let mut n = 64u64;
    loop {
        ctx.check_cancel()?;
        let t = batch(n)?;
        if t >= 0.02 {
            break;
        }
        n = if t <= 0.0 {
            n * 16
        } else {
            ((n as f64 * 0.025 / t) as u64).max(n * 2)
        };
    }
    let mut v = Vec::with_capacity(5);
    for _ in 0..5 {
        ctx.check_cancel()?;
        v.push(batch(n)? / n as f64);
    }
    v.sort_by(f64::total_cmp);
    Ok(v[2])
}

struct RingRun {
    kids: Children,
    read: RawFd,
    write: RawFd,
    /// Owns the descriptors `read` and `write` refer to.
    _fds: [OwnedFd; 2],
    own: AlignedBuf,
    size: usize,
    procs: usize,
    cpu: String,
    overhead: f64,
    rounds: u64,
    ctxsw: Vec<f64>,
    curves: Arc<Mutex<Curves>>,
    _pin: PinGuard,
}

impl RingRun {
    /// `n` trips of the token round the ring: seconds.
    fn rounds(&mut self, ctx: &Ctx, n: u64) -> Result<f64> {
        let data = &self.own.as_slice()[..self.size];
        let mut t = [0u8; 4];
        let start = Instant::now();
        for k in 0..n {
            if k % 1024 == 1023 {
                ctx.check_cancel()?;
            }
            sum_bytes(data);
            if !child::write_all(self.write, &TOKEN) || !child::read_exact(self.read, &mut t) {
                self.kids.kill_all();
                return Err(Error::measurement(
                    "ipc.ctxsw: a process of the ring stopped answering (killed?)",
                ));
            }
        }
        Ok(start.elapsed().as_secs_f64())
    }
}

impl PointRun for RingRun {
    fn trial(&mut self, ctx: &Ctx) -> Result<TrialValues> {
        let start = Instant::now();
        let mut n = 0u64;
        // Blocks of about 256 hops, until the trial lasts the trial time.
        let block = (256 / self.procs as u64).max(1);
        let min = ctx.trial_time();
        while start.elapsed() < min {
            self.rounds(ctx, block)?;
            n += block;
        }
        let t = start.elapsed().as_secs_f64();
        self.rounds = n;
        let hop = t / (n * self.procs as u64) as f64;
        let cs = hop - self.overhead;
        self.ctxsw.push(cs);
        Ok(TrialValues::new().with(CTXSW, cs).with(HOP, hop))
    }

    fn finish(&mut self, _ctx: &Ctx) -> Result<PointExtras> {
        let mut notes = vec![format!(
            "ring of {} processes ({}), working set {} each; overhead (pipe write + read + sum, \
             no switch) = {:.3} us per hop, subtracted; {} rounds ({} hops) in the last trial",
            self.procs,
            if self.cpu == "same" {
                "all pinned to one CPU"
            } else {
                "placed by the scheduler"
            },
            format_size(self.size as u64),
            self.overhead * 1e6,
            self.rounds,
            self.rounds * self.procs as u64
        )];
        let mut series = Vec::new();
        if !self.ctxsw.is_empty() {
            let mut v = self.ctxsw.clone();
            v.sort_by(f64::total_cmp);
            let median = if v.len() % 2 == 1 {
                v[v.len() / 2]
            } else {
                (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2.0
            };
            if median < 0.0 {
                notes.push(
                    "the ring hop was faster than the single-process overhead: the machine was \
                     too noisy for the subtraction; look at `hop`"
                        .into(),
                );
            }
            let mut curves = self.curves.lock().unwrap_or_else(|e| e.into_inner());
            let curve = curves
                .entry((self.cpu.clone(), self.size as u64))
                .or_default();
            // A procs value seen before: a new run of the same sweep starts.
            if curve.iter().any(|&(p, _)| p == self.procs as u64) {
                curve.clear();
            }
            curve.push((self.procs as u64, median));
            curve.sort_by_key(|&(p, _)| p);
            series.push(Series {
                name: format!(
                    "ctxsw vs processes, size={}, cpu={}",
                    format_size(self.size as u64),
                    self.cpu
                ),
                x_label: "processes in the ring".into(),
                x_unit: "count".into(),
                y_label: "context switch time".into(),
                y_unit: "s".into(),
                points: curve.iter().map(|&(p, y)| (p as f64, y)).collect(),
            });
        }
        Ok(PointExtras {
            series,
            notes,
            ..Default::default()
        })
    }
}
