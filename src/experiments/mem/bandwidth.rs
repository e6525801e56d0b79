//! `mem.bandwidth`: memory bandwidth of read (sum), write (fill),
//! read-modify-write, copy (memcpy) and a STREAM triad, single thread and all
//! threads, plus a working-set sweep that shows each cache level's bandwidth
//! (lmbench `bw_mem`, mbw, STREAM).
//!
//! libc: memcpy, c_void (the copy kernel times the C library's memcpy, as STREAM does)

use std::sync::Barrier;
use std::time::Instant;

use crate::engine::{
    Ctx, Experiment, Fitted, Footprint, Metric, MetricSpec, ParamKind, ParamSpec, Point,
    PointExtras, PointRun, Room, RunDefaults, Series, TrialValues,
};
use crate::engine::{Needs, Spec};
use crate::experiments::common::child;
use crate::experiments::common::util::{fit_memory, Fit};
use crate::safety::AlignedBuf;
use crate::units::format_size;
use crate::{Error, Result};

use super::{cache_levels, sweep_sizes};

pub(crate) struct Bandwidth;

const KERNELS: &[&str] = &["read", "write", "rmw", "copy", "triad"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kernel {
    Read,
    Write,
    Rmw,
    Copy,
    Triad,
}

impl Kernel {
    fn parse(s: &str) -> Self {
        match s {
            "write" => Kernel::Write,
            "rmw" => Kernel::Rmw,
            "copy" => Kernel::Copy,
            "triad" => Kernel::Triad,
            _ => Kernel::Read,
        }
    }
    /// Arrays the kernel touches.
    fn arrays(self) -> usize {
        match self {
            Kernel::Read | Kernel::Write | Kernel::Rmw => 1,
            Kernel::Copy => 2,
            Kernel::Triad => 3,
        }
    }
    /// Bytes counted for one pass over arrays of `n` bytes each.
    fn counted(self, n: usize) -> u64 {
        match self {
            // STREAM: two arrays read, one written, 24 B per element.
            Kernel::Triad => 3 * n as u64,
            // read, write, rmw: the array once; copy: the copied size once
            // (mbw, lmbench bw_mem cp).
            _ => n as u64,
        }
    }
}

/// Base addresses of up to three arrays, shared read-only between threads
/// that each work on a disjoint byte range.
#[derive(Clone, Copy)]
struct Arrays([*mut u8; 3]);
// SAFETY: threads only touch disjoint ranges (see `kernel`).
unsafe impl Send for Arrays {}
unsafe impl Sync for Arrays {}

/// One pass of `k` over bytes `[lo, hi)` of each array.
///
/// # Safety
/// The range must lie inside every array `k` uses, be 8-byte aligned, and no
/// other thread may access that range of the arrays at the same time.
#[inline(never)]
unsafe fn kernel(k: Kernel, a: Arrays, lo: usize, hi: usize) {
    use std::hint::black_box;
    use std::slice::{from_raw_parts, from_raw_parts_mut};
    let n = hi - lo;
    let words = n / 8;
    match k {
        Kernel::Read => {
            let s = from_raw_parts(a.0[0].add(lo) as *const u64, words);
            let mut acc = 0u64;
            for &x in s {
                acc = acc.wrapping_add(x);
            }
            black_box(acc);
        }
        Kernel::Write => {
            let s = from_raw_parts_mut(a.0[0].add(lo) as *mut u64, words);
            // An opaque 64-bit value: the loop cannot become a byte memset.
            let v = black_box(0x0123_4567_89ab_cdefu64 ^ lo as u64);
            for x in s.iter_mut() {
                *x = v;
            }
            black_box(s.as_mut_ptr());
        }
        Kernel::Rmw => {
            let s = from_raw_parts_mut(a.0[0].add(lo) as *mut u64, words);
            let v = black_box(0x9e37_79b9_7f4a_7c15u64);
            for x in s.iter_mut() {
                *x = x.wrapping_add(v);
            }
            black_box(s.as_mut_ptr());
        }
        Kernel::Copy => {
            libc::memcpy(
                black_box(a.0[1].add(lo)) as *mut libc::c_void,
                black_box(a.0[0].add(lo)) as *const libc::c_void,
                n,
            );
        }
        Kernel::Triad => {
            let x = from_raw_parts_mut(a.0[0].add(lo) as *mut f64, words);
            let y = from_raw_parts(a.0[1].add(lo) as *const f64, words);
            let z = from_raw_parts(a.0[2].add(lo) as *const f64, words);
            let s = black_box(3.0f64);
            for ((x, &y), &z) in x.iter_mut().zip(y).zip(z) {
                *x = y + s * z;
            }
            black_box(x.as_mut_ptr());
        }
    }
}

pub(crate) static SPEC: Spec = Spec {
    name: "mem.bandwidth",
    summary: "memory bandwidth: read, write, read-modify-write, memcpy and STREAM triad, 1 and all threads (lmbench bw_mem, mbw, STREAM)",
    method: "prepare() allocates the arrays a kernel needs (`size` bytes each: 1 for read/write/rmw, \
         2 for copy, 3 for triad) once per point and writes every page, outside the timing. A \
         trial repeats whole passes over the arrays until it lasts at least the trial time (200 ms by default) and reports \
         counted bytes / wall time in B/s. Kernels: read = sum of 64-bit words; write = store an \
         opaque 64-bit value in every word (cannot be turned into memset); rmw = add to every \
         word in place; copy = one libc memcpy of the whole array (what mbw -t0 times); triad = \
         a[i] = b[i] + s*c[i] over f64 (STREAM). Byte accounting: read, write and rmw count the \
         array once; copy counts the copied bytes once (as mbw and lmbench bw_mem cp; STREAM \
         would count 2x); triad counts 3 arrays (STREAM). Write-allocate traffic (reading a \
         destination line before writing it) is never counted, so bus traffic of write, rmw and \
         triad is higher than reported. Results are black-boxed so the compiler cannot drop or \
         replace the work. threads=all splits the arrays into one contiguous slice per usable \
         CPU; threads are created before the clock starts and released together by a barrier; \
         the time runs from the barrier to the last thread's end. Arrays should be at least 4x \
         the last-level cache (sysfs) to measure DRAM; a note says when they are not. With \
         sweep=yes (threads=1 only), finish() measures the same kernel on the first N bytes \
         of the arrays for N from 4 KiB to `size`, 2 sizes per doubling, median of 3 \
         repetitions of >= 20 ms each, returned as a series (bandwidth vs working set per \
         array) that shows the L1/L2/L3/DRAM bandwidth steps. pin=yes (default) keeps a single \
         thread on the CPU it started on, and gives each of the all-threads workers a CPU of \
         its own.",
    params: &[
            ParamSpec::new("size", ParamKind::Size, "256M", "bytes per array")
                .range(4096.0, (1u64 << 40) as f64),
            ParamSpec::new(
                "kernel",
                ParamKind::Choice(KERNELS),
                "read,write,rmw,copy,triad",
                "read (sum), write (fill), rmw, copy (memcpy), triad (STREAM)",
            ),
            ParamSpec::new(
                "threads",
                ParamKind::Choice(&["1", "all"]),
                "1,all",
                "one thread, or one per usable CPU",
            ),
            ParamSpec::new(
                "sweep",
                ParamKind::Bool,
                "yes",
                "also measure the bandwidth-vs-size curve (threads=1 points)",
            ),
            super::pin_param(),
        ],
    metrics: &[MetricSpec::higher(
            "bandwidth",
            "B/s",
            "counted bytes per second (see method: copy counts bytes once, triad 3 arrays)",
        )],
    needs: Needs::NOTHING,
    defaults: RunDefaults::new(1, 5, 15, 60.0),
    hidden: false,
};

// The metrics a trial emits, checked against the Spec while compiling.
const BANDWIDTH: Metric = SPEC.emits("bandwidth");

/// A point's parameters, read by name once, here.
struct Params {
    /// As given (for notes), and parsed.
    kernel_name: String,
    kernel: Kernel,
    size: u64,
    /// threads=all: one worker per usable CPU.
    all_threads: bool,
    pin: bool,
    sweep: bool,
}

impl Params {
    fn parse(p: &Point) -> Result<Params> {
        let kernel_name = p.text("kernel")?.to_string();
        Ok(Params {
            kernel: Kernel::parse(&kernel_name),
            kernel_name,
            size: p.u64("size")?,
            all_threads: p.text("threads")? == "all",
            pin: p.bool("pin")?,
            sweep: p.bool("sweep")?,
        })
    }
}

impl Experiment for Bandwidth {
    fn spec(&self) -> &'static Spec {
        &SPEC
    }
    fn validate(&self, p: &Point) -> Result<()> {
        let q = Params::parse(p)?;
        crate::experiments::common::util::refuse_beyond_ram(
            self,
            q.size,
            "size",
            q.kernel.arrays() as u64,
            "arrays",
        )
    }
    fn footprint(&self, p: &Point, room: &Room) -> Footprint {
        let Ok(q) = Params::parse(p) else {
            return Footprint::default();
        };
        let k = q.kernel;
        Footprint {
            peak_memory: fitted_size(&q, room).map_or(0, |f| f.value * k.arrays() as u64),
            ..Footprint::default()
        }
    }
    fn prepare(&self, ctx: &Ctx, p: &Point) -> Result<Box<dyn PointRun>> {
        // The arrays follow the memory really available (cgroup included).
        let q = Params::parse(p)?;
        let fit = fitted_size(&q, &Room::read(None))?;
        let size = fit.value as usize;
        let kernel = q.kernel;
        let threads = if q.all_threads {
            child::usable_cpus().len()
        } else {
            1
        };
        let pin = q.pin;
        // threads=1 runs on this thread; threads=all pins its workers itself.
        let (pin_guard, cpu) = super::pin_here(pin && threads == 1)?;
        let mut bufs = Vec::with_capacity(kernel.arrays());
        for i in 0..kernel.arrays() {
            ctx.check_cancel()?;
            let mut b = AlignedBuf::zeroed(size)?;
            // Fault every page in (and give triad sane doubles: 1.0, 2.0, ...).
            let v = (i as f64 + 1.0).to_bits();
            for w in b.as_mut_slice().chunks_exact_mut(8) {
                w.copy_from_slice(&v.to_ne_bytes());
            }
            bufs.push(b);
        }
        let mut run = BandwidthRun {
            kernel,
            size,
            threads,
            arrays: Arrays([std::ptr::null_mut(); 3]),
            bufs,
            passes: 1,
            sweep: q.sweep && threads == 1,
            spread: (pin && threads > 1).then(crate::experiments::common::child::usable_cpus),
            _pin: pin_guard,
            cpu,
            fitted: fit.fitted("size", "memory budget"),
            fit_note: fit.note,
        };
        for (i, b) in run.bufs.iter_mut().enumerate() {
            run.arrays.0[i] = b.as_mut_slice().as_mut_ptr();
        }
        // Calibrate: one pass (after a warming one).
        run.timed(1, size)?;
        let t = run.timed(1, size)?;
        run.passes = ((ctx.trial_time().as_secs_f64() / t).ceil() as u64).max(1);
        Ok(Box::new(run))
    }
}

struct BandwidthRun {
    kernel: Kernel,
    size: usize,
    threads: usize,
    arrays: Arrays,
    /// Owns the memory `arrays` points into.
    bufs: Vec<AlignedBuf>,
    passes: u64,
    sweep: bool,
    /// threads=all with pin: worker i runs on spread[i % len].
    spread: Option<Vec<usize>>,
    /// threads=1 with pin: keeps this thread on `cpu` until the point ends.
    _pin: super::PinGuard,
    cpu: Option<usize>,
    /// Why the arrays are smaller than asked, if they are.
    fitted: Option<Fitted>,
    fit_note: Option<String>,
}

/// `size` per array, shrunk to what the memory budget holds for the
/// kernel's arrays (at least 64 KiB each).
fn fitted_size(q: &Params, room: &Room) -> Result<Fit> {
    fit_memory(
        &format!("mem.bandwidth kernel={} arrays", q.kernel_name),
        q.size / 4096 * 4096,
        q.kernel.arrays() as u64,
        4096,
        64 << 10,
        room,
    )
}

impl BandwidthRun {
    /// `passes` passes over the first `n` bytes of the arrays with all the
    /// point's threads: seconds.
    fn timed(&self, passes: u64, n: usize) -> Result<f64> {
        let (k, a) = (self.kernel, self.arrays);
        if self.threads <= 1 {
            let t = Instant::now();
            for _ in 0..passes {
                // SAFETY: n <= size of every array, one thread.
                unsafe { kernel(k, a, 0, n) };
            }
            return Ok(t.elapsed().as_secs_f64());
        }
        let nt = self.threads;
        // Per-thread slices on 4 KiB boundaries.
        let per = (n / nt).div_ceil(4096) * 4096;
        let barrier = Barrier::new(nt);
        // Each worker times itself; the run lasts from the first start to the
        // last end. (A clock read by a coordinating thread after the barrier
        // would start late whenever the busy workers hold every CPU.)
        let spans: Vec<(Instant, Instant)> = std::thread::scope(|s| {
            let workers: Vec<_> = (0..nt)
                .map(|i| {
                    let lo = (i * per).min(n);
                    let hi = ((i + 1) * per).min(n);
                    let barrier = &barrier;
                    let cpu = self.spread.as_ref().map(|c| c[i % c.len()]);
                    s.spawn(move || {
                        if let Some(c) = cpu {
                            child::pin_self(&child::CpuSet::one(c));
                        }
                        barrier.wait();
                        let t0 = Instant::now();
                        for _ in 0..passes {
                            // SAFETY: [lo, hi) are disjoint per thread and inside every array.
                            unsafe { kernel(k, a, lo, hi) };
                        }
                        (t0, Instant::now())
                    })
                })
                .collect();
            workers.into_iter().filter_map(|w| w.join().ok()).collect()
        });
        let first = spans.iter().map(|s| s.0).min();
        let last = spans.iter().map(|s| s.1).max();
        match (first, last) {
            (Some(a), Some(b)) if spans.len() == nt => Ok((b - a).as_secs_f64()),
            _ => Err(Error::measurement("mem.bandwidth: a worker thread failed")),
        }
    }

    /// Bandwidth vs working set (threads=1): median of 3 timings of >= 20 ms.
    fn sweep(&self, ctx: &Ctx) -> Result<Vec<(f64, f64)>> {
        let mut points = Vec::new();
        for n in sweep_sizes(4096, self.size as u64, 2) {
            ctx.check_cancel()?;
            let n = (n as usize / 64 * 64).max(64);
            let one = self.timed(1, n)?.max(1e-9);
            let reps = ((0.02 / one).ceil() as u64).max(1);
            let mut v: Vec<f64> = (0..3)
                .map(|_| {
                    self.timed(reps, n)
                        .map(|t| self.kernel.counted(n) as f64 * reps as f64 / t)
                })
                .collect::<Result<_>>()?;
            v.sort_by(f64::total_cmp);
            points.push((n as f64, v[1]));
        }
        Ok(points)
    }
}

impl PointRun for BandwidthRun {
    fn fitted(&self) -> Vec<Fitted> {
        self.fitted.clone().into_iter().collect()
    }
    fn trial(&mut self, ctx: &Ctx) -> Result<TrialValues> {
        ctx.check_cancel()?;
        let t = self.timed(self.passes, self.size)?;
        let bytes = self.kernel.counted(self.size) * self.passes;
        Ok(TrialValues::new().with(BANDWIDTH, bytes as f64 / t))
    }

    fn finish(&mut self, ctx: &Ctx) -> Result<PointExtras> {
        let mut notes = vec![format!(
            "{} array(s) of {} ({} threads), {} passes per trial; counted bytes per pass: {}; \
             write-allocate traffic not counted",
            self.kernel.arrays(),
            format_size(self.size as u64),
            self.threads,
            self.passes,
            format_size(self.kernel.counted(self.size))
        )];
        notes.extend(self.fit_note.clone());
        notes.push(match (&self.spread, self.cpu) {
            (Some(cpus), _) => format!("worker threads pinned one per CPU to {cpus:?}"),
            (None, Some(c)) => format!("measured on CPU {c} (pinned)"),
            (None, None) => "not pinned: the scheduler places the threads".into(),
        });
        notes.push(super::memory_note(
            "arrays",
            (self.size * self.kernel.arrays()) as u64,
        ));
        let llc = cache_levels().iter().map(|c| c.size).max();
        match llc {
            Some(llc) if (self.size as u64) < 4 * llc => notes.push(format!(
                "arrays ({}) are smaller than 4x the last-level cache ({}): part of the traffic \
                 may be served by the cache, not DRAM",
                format_size(self.size as u64),
                format_size(llc)
            )),
            None => notes.push("cache sizes unknown (no sysfs cache information)".into()),
            _ => {}
        }
        let mut series = Vec::new();
        if self.sweep {
            series.push(Series {
                name: format!("{:?} bandwidth vs working set", self.kernel).to_lowercase(),
                x_label: "working set per array".into(),
                x_unit: "B".into(),
                y_label: "bandwidth".into(),
                y_unit: "B/s".into(),
                points: self.sweep(ctx)?,
            });
        }
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

    #[test]
    fn kernels_do_the_work() {
        let mut bufs: Vec<AlignedBuf> = (0..3).map(|_| AlignedBuf::zeroed(8192).unwrap()).collect();
        for (i, b) in bufs.iter_mut().enumerate() {
            for w in b.as_mut_slice().chunks_exact_mut(8) {
                w.copy_from_slice(&(i as f64 + 1.0).to_bits().to_ne_bytes());
            }
        }
        let a = Arrays([
            bufs[0].as_mut_slice().as_mut_ptr(),
            bufs[1].as_mut_slice().as_mut_ptr(),
            bufs[2].as_mut_slice().as_mut_ptr(),
        ]);
        // SAFETY: ranges inside 8 KiB arrays, one thread.
        unsafe { kernel(Kernel::Triad, a, 0, 8192) };
        let x = f64::from_ne_bytes(bufs[0].as_slice()[8..16].try_into().unwrap());
        assert_eq!(x, 2.0 + 3.0 * 3.0);
        // SAFETY: as above.
        unsafe { kernel(Kernel::Copy, a, 0, 4096) };
        assert_eq!(bufs[1].as_slice()[..4096], bufs[0].as_slice()[..4096]);
        assert_ne!(bufs[1].as_slice()[4096..], bufs[0].as_slice()[4096..]);
        assert_eq!(Kernel::Copy.counted(100), 100);
        assert_eq!(Kernel::Triad.counted(100), 300);
    }
}
