//! `mem.latency`: load-to-use latency vs working-set size, by a dependent
//! pointer chase (lmbench `lat_mem_rd`, done with a random cyclic permutation
//! that defeats prefetchers, plus lmbench's fixed-stride chase), with page
//! size control and the cache plateaus derived from the curve and sysfs.
//!
//! The experiment, its chains and trial are here; `region` maps the
//! memory and reads the THP state.

mod params;
mod region;
#[cfg(test)]
mod tests;

use std::hint::black_box;
use std::time::Instant;

use rand::{Rng, SeedableRng};

use crate::engine::{
    Ctx, Experiment, Fitted, Footprint, Metric, MetricSpec, ParamKind, ParamSpec, Point,
    PointExtras, PointRun, Room, RunDefaults, Series, TrialValues,
};
use crate::engine::{Needs, Spec};
use crate::experiments::common::util::{fit_memory, Fit};
use crate::units::format_size;
use crate::{Error, Result};

use super::{cache_levels, sweep_sizes};
use crate::experiments::common::latency_curve::analyse;

use params::Params;
use region::{anon_huge, thp_setting, Region};

pub(crate) struct Latency;

const LINE: usize = 64;
const HUGE: usize = 2 << 20;
/// Word (8-byte slot) of each line used by the whole-buffer random chain;
/// the per-level chains use words 2, 4 and 6; the stride chain uses offsets
/// that are 8 mod 16 (odd words), so all chains coexist in one buffer.
const RANDOM_WORD: usize = 0;
/// Page of the page-cycling chase (lmbench uses getpagesize()).
const PAGE: usize = 4096;

pub(crate) static SPEC: Spec = Spec {
    name: "mem.latency",
    summary: "load-to-use latency vs working-set size: random and fixed-stride pointer chase, cache plateaus (lmbench lat_mem_rd)",
    method: "prepare() maps one anonymous buffer of `max` bytes (2 MiB aligned) once, advises it \
         MADV_NOHUGEPAGE (pages=4k) or MADV_HUGEPAGE (pages=thp) and writes every page, outside \
         the timing; the THP setting and how much of the buffer got huge pages are noted. A \
         chain of pointers is then a dependent load chase (each load's address is the value of \
         the previous load), timed with a monotonic clock over a calibrated number of loads, \
         and reported as seconds per load. Random chase: one pointer per 64-byte cache line, \
         the lines visited in a random cyclic permutation (Sattolo), which defeats hardware \
         prefetchers and includes TLB misses of the page size in use. Stride chase: a pointer \
         every `stride` bytes visited in address order, the prefetchable case lmbench calls \
         'main memory'. Trials (the metrics, with statistics): random chase inside each cache \
         level at a size taken from sysfs (L1/2, then the geometric mean of the level's and the \
         one below's size: the middle of the plateau), at `max` (lat_mem), and the \
         stride chase at `max` (lat_mem_stride); each lasts ~40 ms. The curve (one point, not a \
         sweep): finish() measures both chases at every size from `min` to `max` with \
         `per-doubling` sizes per doubling, median of 3 timings of >= 10 ms, after one warming \
         pass, and returns two series (latency vs working set). The L1/L2/L3/DRAM plateaus are \
         the medians of the random curve inside the lower half (log scale) of each level's sysfs \
         size range (DRAM: >= 2x the last-level cache); the step between two levels is where the curve crosses the \
         geometric mean of their plateaus; notes flag implausible results (a level not slower \
         than the one before it, or a step 3x past the sysfs size) and a step at under a third \
         of it (a shared cache of which this process gets a smaller share, as on a busy host \
         or VM, or the TLB reach of 4k pages). With pin=yes (default) the thread stays on the \
         CPU it started on for the whole point. chase=pages replaces every random chain (the \
         trials' and the curve's) by lmbench's page-cycling pattern (lat_mem_rd -t, \
         thrash_initialize): the pages in a random order, and the chain moves to the next page \
         on every load, visiting in each page the line that comes next in a bit-reversed line \
         order, until every line of every page has been visited once; every load then changes \
         page, so once the working set has more pages than the TLB holds every load also \
         misses the TLB, where the line-random chase still hits it now and then. Use it to \
         compare knees with lmbench. `max` follows the memory really available \
         (MemAvailable and the memory cgroup's limit): a smaller buffer is chosen, and said, \
         when it does not fit.",
    params: &[
            ParamSpec::new(
                "min",
                ParamKind::Size,
                "1k",
                "smallest working set of the curve",
            )
            .range(256.0, (1u64 << 40) as f64),
            ParamSpec::new(
                "max",
                ParamKind::Size,
                "256M",
                "largest working set (the buffer size)",
            )
            .range(4096.0, (1u64 << 40) as f64),
            ParamSpec::new(
                "per-doubling",
                ParamKind::Count,
                "4",
                "curve sizes per doubling of the working set",
            )
            .range(1.0, 16.0),
            ParamSpec::new(
                "stride",
                ParamKind::Size,
                "64",
                "distance between loads of the stride chase (multiple of 16 B)",
            )
            .range(16.0, (1u64 << 30) as f64),
            ParamSpec::new(
                "pages",
                ParamKind::Choice(&["4k", "thp"]),
                "4k",
                "4k: MADV_NOHUGEPAGE; thp: MADV_HUGEPAGE (transparent huge pages)",
            ),
            ParamSpec::new(
                "curve",
                ParamKind::Bool,
                "yes",
                "measure the latency-vs-size curve (series) at the end",
            ),
            ParamSpec::new(
                "chase",
                ParamKind::Choice(&["random", "pages"]),
                "random",
                "random: lines in a random cycle; pages: lmbench's page-cycling pattern \
                 (lat_mem_rd -t), a different page on every load",
            ),
            super::pin_param(),
        ],
    metrics: &[
            MetricSpec::lower(
                "lat_l1",
                "s",
                "random chase latency at half the L1 size (sysfs)",
            ),
            MetricSpec::lower(
                "lat_l2",
                "s",
                "random chase latency at sqrt(L1 x L2), mid-L2 (sysfs)",
            ),
            MetricSpec::lower(
                "lat_l3",
                "s",
                "random chase latency at sqrt(L2 x L3), mid-L3 (sysfs)",
            ),
            MetricSpec::lower("lat_mem", "s", "random chase latency at max"),
            MetricSpec::lower(
                "lat_mem_stride",
                "s",
                "fixed-stride chase latency at max (prefetchable)",
            ),
        ],
    needs: Needs::NOTHING,
    defaults: RunDefaults::new(1, 5, 20, 30.0),
    hidden: false,
};

// The metrics a trial emits, checked against the Spec while compiling.
const LAT_MEM: Metric = SPEC.emits("lat_mem");
const LAT_L1: Metric = SPEC.emits("lat_l1");
const LAT_L2: Metric = SPEC.emits("lat_l2");
const LAT_L3: Metric = SPEC.emits("lat_l3");
const LAT_MEM_STRIDE: Metric = SPEC.emits("lat_mem_stride");

impl Experiment for Latency {
    fn spec(&self) -> &'static Spec {
        &SPEC
    }
    fn validate(&self, p: &Point) -> Result<()> {
        let Params {
            min, max, stride, ..
        } = Params::parse(p)?;
        if min > max {
            return Err(Error::usage(format!(
                "mem.latency: min ({}) is larger than max ({}); swap them",
                format_size(min),
                format_size(max)
            )));
        }
        if stride % 16 != 0 {
            return Err(Error::usage(format!(
                "mem.latency: stride {stride} is not a multiple of 16 B; use e.g. 16, 64, 128"
            )));
        }
        if stride * 2 > max {
            return Err(Error::usage(format!(
                "mem.latency: stride ({}) is larger than half the array (max = {}): the chase \
                 needs at least two loads; use a smaller stride or a larger max",
                format_size(stride),
                format_size(max)
            )));
        }
        Ok(())
    }
    fn footprint(&self, p: &Point, room: &Room) -> Footprint {
        Footprint {
            peak_memory: Params::parse(p)
                .and_then(|q| fitted_max(&q, room))
                .map_or(0, |f| f.value),
            ..Footprint::default()
        }
    }
    fn prepare(&self, ctx: &Ctx, p: &Point) -> Result<Box<dyn PointRun>> {
        let q = Params::parse(p)?;
        let fit = fitted_max(&q, &Room::read(None))?;
        let max = (fit.value as usize).max(4096);
        let thp = q.thp;
        let (pin, cpu) = super::pin_here(q.pin)?;
        let region = Region::new(max, thp)?;
        let caches = cache_levels();
        let mut run = LatencyRun {
            base: region.ptr,
            region,
            max,
            min: (q.min as usize).min(max),
            per_doubling: q.per_doubling,
            stride: q.stride as usize,
            curve: q.curve,
            caches: caches.iter().map(|c| c.size).collect(),
            levels: Vec::new(),
            mem_loads: 0,
            stride_loads: 0,
            thp,
            pages: q.pages,
            fitted: fit.fitted("max", "memory budget"),
            fit_note: fit.note,
            _pin: pin,
            cpu,
        };
        // Whole-buffer random chain (word 0) and stride chain (odd words).
        run.build_chain(max / LINE, RANDOM_WORD, 1);
        run.build_stride(max);
        ctx.check_cancel()?;
        // Per-level chains inside the caches sysfs reports.
        let names = [LAT_L1, LAT_L2, LAT_L3];
        let mut prev = 0u64;
        for c in caches.iter().take(3) {
            let target = (probe_size(prev, c.size) as usize / LINE * LINE).min(max);
            if target as u64 > prev && target >= LINE * 4 {
                let word = 2 * c.level as usize;
                run.build_chain(target / LINE, word, 100 + c.level as u64);
                run.levels.push(Level {
                    metric: names[(c.level as usize - 1).min(2)],
                    start: word * 8,
                    bytes: target,
                    loads: 0,
                });
            }
            prev = c.size;
        }
        // Calibrate every chase to ~40 ms.
        for i in 0..run.levels.len() {
            let l = &run.levels[i];
            run.levels[i].loads = run.calibrate(l.start, l.bytes / LINE);
        }
        run.mem_loads = run.calibrate(RANDOM_WORD * 8, max / LINE);
        run.stride_loads = run.calibrate(8, max / run.stride);
        Ok(Box::new(run))
    }
}

/// `max`, shrunk to what the memory budget holds (at least 64 KiB and
/// two strides), with the reason when it is.
fn fitted_max(q: &Params, room: &Room) -> Result<Fit> {
    let floor = (64u64 << 10).max(2 * q.stride);
    fit_memory(
        "mem.latency buffer (max)",
        (q.max / 4096 * 4096).max(4096),
        1,
        4096,
        floor,
        room,
    )
}

/// (working set in bytes, seconds per load) points.
type Curve = Vec<(f64, f64)>;

struct Level {
    metric: Metric,
    /// Byte offset of the chain's first slot.
    start: usize,
    bytes: usize,
    loads: u64,
}

struct LatencyRun {
    base: *mut u8,
    /// Owns the memory `base` points into.
    #[allow(dead_code)]
    region: Region,
    max: usize,
    min: usize,
    per_doubling: u32,
    stride: usize,
    curve: bool,
    caches: Vec<u64>,
    levels: Vec<Level>,
    mem_loads: u64,
    stride_loads: u64,
    thp: bool,
    /// chase=pages: lmbench's page-cycling chains instead of line-random ones.
    pages: bool,
    fitted: Option<Fitted>,
    fit_note: Option<String>,
    /// Keeps the thread on `cpu` until the point ends.
    _pin: super::PinGuard,
    cpu: Option<usize>,
}

/// Follow `loads` dependent pointers from `start`.
///
/// # Safety
/// `start` must begin a cycle of pointers that each point to the next.
#[inline(never)]
unsafe fn chase(start: *const u8, loads: u64) -> *const u8 {
    let mut p = start as *const *const u8;
    for _ in 0..loads.div_ceil(16) {
        // 16 dependent loads per iteration.
        p = *p as *const *const u8;
        p = *p as *const *const u8;
        p = *p as *const *const u8;
        p = *p as *const *const u8;
        p = *p as *const *const u8;
        p = *p as *const *const u8;
        p = *p as *const *const u8;
        p = *p as *const *const u8;
        p = *p as *const *const u8;
        p = *p as *const *const u8;
        p = *p as *const *const u8;
        p = *p as *const *const u8;
        p = *p as *const *const u8;
        p = *p as *const *const u8;
        p = *p as *const *const u8;
        p = *p as *const *const u8;
    }
    black_box(p as *const u8)
}

impl LatencyRun {
    fn slot(&self, off: usize) -> *mut usize {
        // SAFETY (callers): off + 8 <= max.
        unsafe { self.base.add(off) as *mut usize }
    }

    /// A random cyclic chain over lines `0..lines`, in word `word` of each
    /// line (Sattolo's algorithm run in place on the slots themselves, so no
    /// memory besides the buffer is needed).
    fn build_random(&mut self, lines: usize, word: usize, seed: u64) {
        let lines = lines.max(1);
        let off = |i: usize| i * LINE + word * 8;
        // SAFETY: every slot lies inside the buffer (lines * 64 <= max).
        unsafe {
            for i in 0..lines {
                *self.slot(off(i)) = i;
            }
            let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
            for i in (1..lines).rev() {
                let j = rng.gen_range(0..i);
                std::ptr::swap(self.slot(off(i)), self.slot(off(j)));
            }
            for i in 0..lines {
                let next = *self.slot(off(i));
                *self.slot(off(i)) = self.base as usize + off(next);
            }
        }
    }

    /// The point's kind of random chain over lines `0..lines` in word `word`.
    fn build_chain(&mut self, lines: usize, word: usize, seed: u64) {
        if self.pages && lines * LINE >= 2 * PAGE {
            self.build_page_cycling(lines * LINE / PAGE, word, seed);
        } else {
            self.build_random(lines, word, seed);
        }
    }

    /// lmbench's page-cycling chain over pages `0..npages`: pages in a
    /// random order; round r visits, in every page k of that order, line
    /// `order[(k + r) % lines_per_page]` of a bit-reversed line order, so
    /// every load lands on another page and each line is visited once.
    fn build_page_cycling(&mut self, npages: usize, word: usize, seed: u64) {
        let mut pages: Vec<usize> = (0..npages).collect();
        let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
        for i in (1..npages).rev() {
            pages.swap(i, rng.gen_range(0..=i));
        }
        let order = bit_reversed(PAGE / LINE);
        let n = order.len();
        let at = |k: usize, r: usize| pages[k] * PAGE + order[(k + r) % n] * LINE + word * 8;
        let first = at(0, 0);
        let mut prev = first;
        for r in 0..n {
            for k in 0..npages {
                if (r, k) == (0, 0) {
                    continue;
                }
                let cur = at(k, r);
                // SAFETY: npages * PAGE <= max, so every slot is inside.
                unsafe { *self.slot(prev) = self.base as usize + cur };
                prev = cur;
            }
        }
        // SAFETY: as above.
        unsafe { *self.slot(prev) = self.base as usize + first };
    }

    /// A chain visiting offsets 8, 8+stride, 8+2*stride, ... below `bytes`,
    /// then back to the first.
    fn build_stride(&mut self, bytes: usize) {
        let n = (bytes / self.stride).max(1);
        // SAFETY: (n-1)*stride + 16 <= bytes <= max.
        unsafe {
            for k in 0..n {
                let next = if k + 1 == n { 0 } else { k + 1 };
                *self.slot(8 + k * self.stride) = self.base as usize + 8 + next * self.stride;
            }
        }
    }

    /// Seconds per load over `loads` loads from byte offset `start`.
    fn time(&self, start: usize, loads: u64) -> f64 {
        let t = Instant::now();
        // SAFETY: chains are built before they are chased.
        unsafe { chase(self.base.add(start), loads) };
        t.elapsed().as_secs_f64() / loads.div_ceil(16).saturating_mul(16) as f64
    }

    /// Loads for ~40 ms (after one pass over `elements`, capped at 1M loads).
    fn calibrate(&self, start: usize, elements: usize) -> u64 {
        self.time(start, (elements as u64).clamp(16, 1 << 18));
        let per = self.time(start, 20_000).max(1e-11);
        ((0.04 / per) as u64).max(1000)
    }

    /// The random and stride curves, and the sizes measured.
    fn curves(&mut self, ctx: &Ctx) -> Result<(Curve, Curve)> {
        let mut random = Vec::new();
        let mut stride = Vec::new();
        // Largest first: the whole-buffer chains the trials chased are
        // still there for it (rebuilding a 64 MiB random chain costs
        // ~0.3 s); each smaller size then builds its own over them.
        let mut sizes = sweep_sizes(self.min as u64, self.max as u64, self.per_doubling);
        sizes.reverse();
        for size in sizes {
            ctx.check_cancel()?;
            let size = (size as usize).max(LINE) / LINE * LINE;
            let whole = size == self.max;
            if !whole {
                self.build_chain(size / LINE, RANDOM_WORD, size as u64);
            }
            random.push((size as f64, self.measure(RANDOM_WORD * 8, size / LINE)));
            if size >= 2 * self.stride {
                if !whole {
                    self.build_stride(size);
                }
                stride.push((size as f64, self.measure(8, size / self.stride)));
            }
        }
        random.reverse();
        stride.reverse();
        Ok((random, stride))
    }

    /// Median of 3 timings of >= 10 ms, after a warming pass when the chain
    /// could fit in a cache (beyond that every load misses anyway, and a
    /// random sub-walk of a random cycle is as good as the whole cycle).
    fn measure(&self, start: usize, elements: usize) -> f64 {
        if elements <= 1 << 18 {
            self.time(start, (elements as u64).max(16));
        }
        let per = self.time(start, 4096).max(1e-11);
        let loads = ((0.01 / per) as u64)
            .max((elements as u64).min(1 << 16))
            .min(50_000_000);
        let mut v = [0.0; 3];
        for x in v.iter_mut() {
            *x = self.time(start, loads);
        }
        v.sort_by(f64::total_cmp);
        v[1]
    }
}

impl PointRun for LatencyRun {
    fn fitted(&self) -> Vec<Fitted> {
        self.fitted.clone().into_iter().collect()
    }
    fn trial(&mut self, ctx: &Ctx) -> Result<TrialValues> {
        let mut v = TrialValues::new();
        for l in &self.levels {
            ctx.check_cancel()?;
            v.set(l.metric, self.time(l.start, l.loads));
        }
        ctx.check_cancel()?;
        v.set(LAT_MEM, self.time(RANDOM_WORD * 8, self.mem_loads));
        v.set(LAT_MEM_STRIDE, self.time(8, self.stride_loads));
        Ok(v)
    }

    fn finish(&mut self, ctx: &Ctx) -> Result<PointExtras> {
        let mut notes = vec![
            format!(
                "buffer {} ({}), THP: enabled={} defrag={}, AnonHugePages of tunelab after \
                 touching: {}",
                format_size(self.max as u64),
                if self.thp {
                    "MADV_HUGEPAGE"
                } else {
                    "MADV_NOHUGEPAGE"
                },
                thp_setting("enabled"),
                thp_setting("defrag"),
                anon_huge().map_or("unknown".into(), format_size)
            ),
            format!(
                "sysfs data caches: {}",
                if self.caches.is_empty() {
                    "unknown".to_string()
                } else {
                    self.caches
                        .iter()
                        .enumerate()
                        .map(|(i, s)| format!("L{} {}", i + 1, format_size(*s)))
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            ),
        ];
        notes.extend(self.fit_note.clone());
        if self.pages {
            notes.push(format!(
                "chase=pages: random chains use lmbench's page-cycling pattern (lat_mem_rd -t): \
                 every load goes to another {PAGE} B page"
            ));
        }
        notes.push(super::memory_note("pointer buffer", self.max as u64));
        notes.push(match self.cpu {
            Some(c) => format!("measured on CPU {c} (pinned)"),
            None => "not pinned: the scheduler may move the thread between timings".into(),
        });
        for l in &self.levels {
            notes.push(format!(
                "{} measured at {} working set",
                l.metric.name(),
                format_size(l.bytes as u64)
            ));
        }
        let mut series = Vec::new();
        if self.curve {
            let (random, stride) = self.curves(ctx)?;
            let a = analyse(&random, &self.caches);
            notes.extend(a.describe());
            let mk = |name: String, points| Series {
                name,
                x_label: "working set".into(),
                x_unit: "B".into(),
                y_label: "load-to-use latency".into(),
                y_unit: "s".into(),
                points,
            };
            series.push(mk("random chase".into(), random));
            series.push(mk(format!("stride chase ({} B)", self.stride), stride));
        }
        Ok(PointExtras {
            series,
            notes,
            ..Default::default()
        })
    }
}

/// 0..n in bit-reversed order (n a power of two), lmbench's
/// words_initialize: consecutive visits to a page are far apart in it.
fn bit_reversed(n: usize) -> Vec<usize> {
    let bits = n.trailing_zeros();
    (0..n)
        .map(|i| {
            if bits == 0 {
                0
            } else {
                i.reverse_bits() >> (usize::BITS - bits)
            }
        })
        .collect()
}

/// Where to measure a level's latency: in the middle of its plateau on a
/// log scale, between the level below (which then no longer holds the set)
/// and its own size; L1 at half its size. Not just under the size, where a
/// shared or partly associative cache is already missing.
fn probe_size(below: u64, size: u64) -> u64 {
    if below == 0 {
        size / 2
    } else {
        ((below as f64) * (size as f64)).sqrt() as u64
    }
}
