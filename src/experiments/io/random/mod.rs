//! `io.random`: small random I/O at a queue depth — IOPS, throughput and
//! completion-latency percentiles, what fio, KDiskMark and elbencho answer
//! first. Random reads, writes or a read/write mix of `bs`-byte blocks at
//! uniformly random block-aligned offsets of one preallocated scratch file,
//! with `depth` operations in flight through `engine=psync` (one thread per
//! operation, `psync.rs`) or `engine=io_uring` (one ring, `uring.rs`),
//! direct (O_DIRECT) or buffered. Optionally it first writes until IOPS is
//! steady by SNIA's rule (`steady.rs`), so a flash device's cliff shows.
//!
//! Linux native AIO (fio's libaio) is not offered: it is asynchronous only
//! for O_DIRECT (buffered io_submit() blocks and silently runs at depth 1,
//! which would mislabel the depth), io_uring replaced it on 5.1+ kernels,
//! and on older board kernels psync threads reach the same device queue
//! depth; it would add a second hand-written syscall engine for no figure
//! the other two cannot give.

mod file;
mod psync;
mod run;
pub(crate) mod steady;
mod uring;

use file::{open, SharedFile};
use run::{RandomRun, Skipped};

use std::fs::File;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::Rng;

use crate::engine::Spec;
use crate::engine::{
    Ctx, Experiment, MetricSpec, Needs, ParamKind, ParamSpec, Point, PointExtras, PointRun,
    RunDefaults, Series, TrialValues,
};
use crate::experiments::common::cache_control::{fadvise_dontneed, logical_block_size};
use crate::experiments::common::util::fill_file;
use crate::safety::AlignedBuf;
use crate::stats::{self, HistogramData, LatencyRecorder};
use crate::units::format_size;
use crate::{Error, Result};

/// Name and the metrics `advise` reads, as constants so a rename cannot
/// silently drop a finding (advise::evidence checks them against the registry).
pub(crate) const NAME: &str = "io.random";
pub(crate) const METRIC_IOPS: &str = "iops";
pub(crate) const METRIC_LAT_P99: &str = "lat_p99";
pub(crate) const METRIC_READ_P99: &str = "read_p99";
pub(crate) const METRIC_CPU_PER_OP: &str = "cpu_per_op";

/// io.random; one value per run (the registry makes one per lookup), so
/// the file its points share is run-level state, not a global.
#[derive(Default)]
pub(crate) struct Random {
    shared: SharedFile,
}

/// Largest block and depth (fio users sweep 512 B … 1 MiB, QD 1 … 256).
const MAX_BS: u64 = 1 << 20;
const MAX_DEPTH: u64 = 256;
/// Workers (fio numjobs), and the most psync threads they may add up to
/// (jobs × depth): a thread each costs a stack, and a board has 64 MB.
const MAX_JOBS: u64 = 64;
const MAX_PSYNC_THREADS: usize = 1024;
/// Automatic file size: twice the RAM (so buffered reads mostly miss the
/// page cache) within these bounds, and at most half the free space.
const AUTO_MIN: u64 = 32 << 20;
const AUTO_MAX: u64 = 1 << 30;
/// Buffers may take at most this share of MemAvailable.
const MEM_SHARE: u64 = 4;

/// What one workload run does: the file, the block size, the share of reads.
pub(crate) struct Job<'a> {
    pub(crate) file: &'a File,
    pub(crate) path: &'a Path,
    pub(crate) bs: usize,
    /// Blocks of `bs` in the file; offsets are k × bs, k < blocks.
    pub(crate) blocks: u64,
    /// Percent of operations that read: 100 randread, 0 randwrite.
    pub(crate) read_pct: u32,
}

impl Job<'_> {
    /// The next operation: (offset, is_read), uniformly random.
    #[inline]
    pub(crate) fn next_op(&self, rng: &mut SmallRng) -> (u64, bool) {
        let off = rng.gen_range(0..self.blocks) * self.bs as u64;
        let read = match self.read_pct {
            100 => true,
            0 => false,
            p => rng.gen_range(0..100) < p,
        };
        (off, read)
    }
}

/// What a workload run measured.
#[derive(Default)]
pub(crate) struct Tally {
    pub(crate) ops: u64,
    pub(crate) reads: u64,
    /// The first operation's start and the last completion.
    pub(crate) span: Option<(Instant, Instant)>,
    pub(crate) read: LatencyRecorder,
    pub(crate) write: LatencyRecorder,
    /// io_uring: whether the file and the buffers were registered.
    pub(crate) registered: Option<(bool, bool)>,
    /// The process's user + system CPU over the trial (getrusage), ns.
    pub(crate) cpu_ns: u64,
}

impl Tally {
    /// Seconds from the first operation's start to the last completion.
    fn elapsed(&self) -> f64 {
        self.span.map_or(0.0, |(a, b)| (b - a).as_secs_f64())
    }
    fn iops(&self) -> f64 {
        self.ops as f64 / self.elapsed().max(1e-9)
    }
    /// Seconds of the process's CPU (user + system) per completed operation.
    fn cpu_per_op(&self) -> f64 {
        self.cpu_ns as f64 * 1e-9 / self.ops.max(1) as f64
    }
    /// Widen the span to take in a worker that ran from `start` to `end`.
    fn cover(&mut self, start: Instant, end: Instant) {
        self.span = Some(
            self.span
                .map_or((start, end), |(a, b)| (a.min(start), b.max(end))),
        );
    }
    /// Add another worker's tally: its operations, latencies and time; the
    /// file and buffers count as registered only where every ring did.
    fn add(&mut self, o: &Tally) {
        self.ops += o.ops;
        self.cpu_ns += o.cpu_ns;
        self.reads += o.reads;
        self.read.merge(&o.read);
        self.write.merge(&o.write);
        if let Some((start, end)) = o.span {
            self.cover(start, end);
        }
        self.registered = match (self.registered, o.registered) {
            (Some((f, b)), Some((g, c))) => Some((f && g, b && c)),
            (mine, theirs) => mine.or(theirs),
        };
    }
    fn all(&self) -> LatencyRecorder {
        let mut a = self.read.clone();
        a.merge(&self.write);
        a
    }
}

/// Each worker thread's result: what it returned, or why it did not run
/// (it could not start: `fewer` says what to ask for instead) or ended
/// (it panicked).
fn join_all<T>(
    handles: Vec<std::io::Result<std::thread::ScopedJoinHandle<'_, Result<T>>>>,
    what: &str,
    fewer: &str,
) -> Vec<Result<T>> {
    handles
        .into_iter()
        .map(|h| match h {
            Ok(h) => h
                .join()
                .unwrap_or_else(|_| Err(Error::measurement(format!("io.random: {what} panicked")))),
            Err(e) => Err(Error::environment(format!(
                "io.random: cannot start {what} ({e}); use {fewer}"
            ))),
        })
        .collect()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Engine {
    Psync,
    IoUring,
}

impl Engine {
    fn name(self) -> &'static str {
        match self {
            Engine::Psync => "psync",
            Engine::IoUring => "io_uring",
        }
    }
}

/// The automatic file size and how it was chosen.
fn auto_size(mem_total: u64, free: u64) -> (u64, String) {
    let want = (2 * mem_total).clamp(AUTO_MIN, AUTO_MAX);
    let size = want.min(free / 2) & !((1 << 20) - 1);
    let why = if size < want {
        // Space, not memory, decided: say so rather than quote a range the
        // size is outside of.
        format!(
            "size=auto: {} = half the free space ({}), less than the {} wanted (2 × MemTotal \
             {} within {}..{}): a file smaller than twice the RAM may be partly cached",
            format_size(size),
            format_size(free),
            format_size(want),
            format_size(mem_total),
            format_size(AUTO_MIN),
            format_size(AUTO_MAX),
        )
    } else {
        format!(
            "size=auto: {} = 2 × MemTotal ({}) within {}..{}, at most half the free space ({})",
            format_size(size),
            format_size(mem_total),
            format_size(AUTO_MIN),
            format_size(AUTO_MAX),
            format_size(free)
        )
    };
    (size, why)
}

fn read_pct(rw: &str, mix: f64) -> u32 {
    match rw {
        "randread" => 100,
        "randwrite" => 0,
        _ => mix.round() as u32,
    }
}

pub(crate) static SPEC: Spec = Spec {
    name: NAME,
    summary: "random reads/writes at a queue depth: IOPS and latency percentiles (fio randread/randwrite)",
    method: "Lays out one scratch file of `size` random bytes (buffered writes + fsync, not timed; \
         shared by the points of a run), then a trial runs `duration` seconds of `bs`-byte \
         operations at uniformly random bs-aligned offsets (rw=randread, randwrite, or randrw \
         with `mix` % reads), keeping `depth` operations in flight: engine=psync runs `depth` \
         threads each doing one pread()/pwrite() at a time (fio psync, numjobs=depth), \
         engine=io_uring keeps `depth` operations queued on one ring from one thread (fio \
         io_uring, iodepth=depth), with the file and buffers registered where the kernel \
         allows (fio registerfiles, fixedbufs; the notes say which). jobs=N runs N such \
         workers at once on the one file (fio numjobs=N): psync N × depth threads, io_uring N \
         threads with a ring each; IOPS counts them all, their latencies share the \
         histograms. Every block written has each 512-byte sector stamped with its \
         offset and a sequence number (like fio's scramble_buffers) so nothing can be \
         deduplicated. mode=direct opens the file with O_DIRECT (bs must be a multiple of the \
         device's logical block size); where the file system has no O_DIRECT (tmpfs, vfat, \
         UBIFS) the point runs buffered and its notes say so. mode=buffered goes through the \
         page cache: before every trial the file is fdatasync'ed and its pages dropped with \
         posix_fadvise(DONTNEED) (not timed), so each trial starts cold; buffered writes are \
         never fsynced inside a trial (as fio without fsync=). IOPS = completed operations / \
         seconds from the first start to the last completion; throughput = IOPS × bs in B/s. \
         Latency = completion − start of each operation (psync: around the call; io_uring: from \
         queuing to the ring, so the submit call is inside, fio's `lat`), recorded in HDR \
         histograms (3 significant digits) merged across threads; lat_* are the trial's \
         percentiles, the point's histogram merges its measured trials. io_uring reads the \
         clock once per reaped batch (the completion time of the batch and the start of the \
         operations replacing it); psync twice per operation. Each point's notes give \
         tunelab's own work per operation (offset, clock, histogram), timed on the machine \
         after the trials, and its share of the time per operation. Series: `iops vs depth` \
         (x = depth) and `p99 latency vs IOPS` (x = IOPS), one point per sweep point, which the \
         report joins into curves. steady=yes (writes only): before the trials, write in rounds \
         of `round` seconds until the last 5 rounds' IOPS are each within ±10% of their mean and \
         their least-squares line changes by at most 10% of the mean across the window (±5% \
         about its middle; SNIA PTS), or until `steady_limit`; steady_time = seconds written \
         until then, fresh_steady_ratio = first round's IOPS / the window's mean IOPS; the \
         trials then measure the steady device. size=0 (auto) = 2 × MemTotal within 32 MiB..1 \
         GiB and at most half the free space. Defaults (4 KiB, QD 1/8/32, randread and randwrite, \
         psync and io_uring, direct, 1 s trials, 1 warm-up + 3-5 trials) take about a minute and \
         a half plus the layout.",
    params: &[
            ParamSpec::new(
                "rw",
                ParamKind::Choice(&["randread", "randwrite", "randrw"]),
                "randread,randwrite",
                "random reads, random writes, or a mix (see mix)",
            ),
            ParamSpec::new("mix", ParamKind::Float, "70", "randrw: percent of reads")
                .range(1.0, 99.0),
            ParamSpec::new("bs", ParamKind::Size, "4k", "bytes per operation")
                .range(512.0, MAX_BS as f64),
            ParamSpec::new(
                "depth",
                ParamKind::Count,
                "1,8,32",
                "operations in flight (queue depth)",
            )
            .range(1.0, MAX_DEPTH as f64),
            ParamSpec::new(
                "engine",
                ParamKind::Choice(&["psync", "io_uring"]),
                "psync,io_uring",
                "psync: one thread per operation in flight; io_uring: one ring (skipped where \
                 the kernel has none)",
            ),
            ParamSpec::new(
                "jobs",
                ParamKind::Count,
                "1",
                "independent workers, each keeping `depth` operations in flight (fio numjobs): \
                 psync runs jobs × depth threads, io_uring one ring and thread per job",
            )
            .range(1.0, MAX_JOBS as f64)
            .omitted_at_default(),
            ParamSpec::new(
                "mode",
                ParamKind::Choice(&["direct", "buffered"]),
                "direct",
                "direct (O_DIRECT, falls back to buffered where unsupported) or buffered",
            ),
            ParamSpec::new(
                "size",
                ParamKind::Size,
                "0",
                "file size; 0 = auto (2 × RAM, 32 MiB..1 GiB, at most half the free space)",
            )
            .range(0.0, (1u64 << 40) as f64),
            ParamSpec::new("duration", ParamKind::Duration, "1s", "length of one trial")
                .range(0.1, 3600.0),
            ParamSpec::new(
                "steady",
                ParamKind::Bool,
                "no",
                "write until IOPS is steady (SNIA rule) before measuring; writes only",
            ),
            ParamSpec::new(
                "round",
                ParamKind::Duration,
                "5s",
                "steady=yes: length of one round",
            )
            .range(0.1, 600.0),
            ParamSpec::new(
                "steady_limit",
                ParamKind::Duration,
                "300s",
                "steady=yes: give up after writing this long",
            )
            .range(1.0, 86400.0),
        ],
    metrics: &[
            MetricSpec::higher(METRIC_IOPS, "ops/s", "completed operations per second"),
            MetricSpec::higher("throughput", "B/s", "IOPS × block size"),
            MetricSpec::lower("lat_p50", "s", "median completion latency"),
            MetricSpec::lower("lat_p90", "s", "90th percentile completion latency"),
            MetricSpec::lower(METRIC_LAT_P99, "s", "99th percentile completion latency"),
            MetricSpec::lower("lat_p999", "s", "99.9th percentile completion latency"),
            MetricSpec::lower("lat_max", "s", "worst completion latency"),
            MetricSpec::lower(
                METRIC_CPU_PER_OP,
                "s",
                "tunelab's CPU time (user + system, getrusage) per completed operation",
            ),
            MetricSpec::lower(METRIC_READ_P99, "s", "randrw: 99th percentile read latency"),
            MetricSpec::lower("write_p99", "s", "randrw: 99th percentile write latency"),
            MetricSpec::lower(
                "steady_time",
                "s",
                "steady=yes: seconds of writing until IOPS was steady",
            ),
            MetricSpec::lower(
                "fresh_steady_ratio",
                "ratio",
                "steady=yes: first round's IOPS / steady IOPS (1 = no cliff)",
            ),
        ],
    needs: Needs::SCRATCH,
    defaults: RunDefaults::new(1, 3, 5, 120.0),
    hidden: false,
};

/// A point's parameters, read by name once, here.
struct Params {
    bs: usize,
    /// 0: auto (see `auto_size`).
    size: u64,
    depth: usize,
    jobs: usize,
    engine: Engine,
    direct: bool,
    rw: String,
    mix: f64,
    duration: f64,
    steady: bool,
    round: f64,
    steady_limit: f64,
}

impl Params {
    fn parse(p: &Point) -> Result<Params> {
        Ok(Params {
            bs: p.usize("bs")?,
            size: p.u64("size")?,
            depth: p.usize("depth")?,
            jobs: p.usize("jobs")?,
            engine: match p.text("engine")? {
                "io_uring" => Engine::IoUring,
                _ => Engine::Psync,
            },
            direct: p.text("mode")? == "direct",
            rw: p.text("rw")?.to_string(),
            mix: p.f64("mix")?,
            duration: p.f64("duration")?,
            steady: p.bool("steady")?,
            round: p.f64("round")?,
            steady_limit: p.f64("steady_limit")?,
        })
    }
}

impl Experiment for Random {
    fn spec(&self) -> &'static Spec {
        &SPEC
    }
    fn validate(&self, p: &Point) -> Result<()> {
        let q = Params::parse(p)?;
        let (bs, size) = (q.bs as u64, q.size);
        if size != 0 && size < bs {
            return Err(Error::usage(format!(
                "io.random: size ({}) is smaller than one block (bs = {}); use a larger size \
                 or size=0 (auto)",
                format_size(size),
                format_size(bs)
            )));
        }
        if q.steady && q.rw == "randread" {
            return Err(Error::usage(
                "io.random: steady=yes writes until the device is steady, so it needs \
                 rw=randwrite or rw=randrw",
            ));
        }
        let (jobs, depth) = (q.jobs, q.depth);
        if q.engine == Engine::Psync && jobs * depth > MAX_PSYNC_THREADS {
            return Err(Error::usage(format!(
                "io.random: engine=psync with jobs={jobs} and depth={depth} needs {} threads, \
                 more than {MAX_PSYNC_THREADS}; use fewer jobs or a smaller depth, or \
                 engine=io_uring (one thread per job)",
                jobs * depth
            )));
        }
        Ok(())
    }
    fn trial_seconds(&self, p: &Point) -> Option<f64> {
        Params::parse(p).ok().map(|q| q.duration)
    }
    fn scratch_bytes(&self, p: &Point) -> u64 {
        Params::parse(p).map_or(0, |q| q.size)
    }
    fn prepare(&self, ctx: &Ctx, p: &Point) -> Result<Box<dyn PointRun>> {
        let q = Params::parse(p)?;
        let (bs, depth, jobs, engine) = (q.bs, q.depth, q.jobs, q.engine);
        let want_direct = q.direct;
        let scratch = ctx.scratch()?;
        if want_direct {
            let lbs = logical_block_size(scratch.path());
            if !(bs as u64).is_multiple_of(lbs) {
                return Err(Error::usage(format!(
                    "io.random: with mode=direct, bs ({bs} B) must be a multiple of the device's \
                     logical block size ({lbs} B); use bs={lbs} or a multiple, or mode=buffered"
                )));
            }
        }
        let mem = crate::observe::procmem::read_system().unwrap_or_default();
        let buffers = (jobs * depth * bs) as u64;
        if mem.available > 0 && buffers > mem.available / MEM_SHARE {
            return Err(Error::environment(format!(
                "io.random: jobs × depth × bs = {} of buffers is more than a quarter of the \
                 available memory ({}); use fewer jobs, a smaller depth or bs",
                format_size(buffers),
                format_size(mem.available)
            )));
        }
        if engine == Engine::IoUring {
            if let Err(why) = uring::available() {
                return Ok(Box::new(Skipped(format!(
                    "skipped: engine=io_uring is not available here ({why}); engine=psync measures \
                     the same depth with threads"
                ))));
            }
        }
        let (size, size_note) = match q.size {
            0 => {
                // The run's shared file counts as free: it is what this
                // point would reuse, and otherwise every point would see
                // less space and lay out a smaller file.
                let free = scratch.free_bytes()? + self.shared.bytes_in(scratch.path());
                let (s, why) = auto_size(mem.total, free);
                if s < (bs as u64).max(8 << 20) {
                    return Err(Error::environment(format!(
                        "io.random: only {} free in {}: not enough for a test file of at least 8 MiB \
                         (free some space or choose another --target)",
                        format_size(free),
                        scratch.path().display()
                    )));
                }
                (s, why)
            }
            s => (s, format!("size = {}", format_size(s))),
        };
        let path = self.shared.get(ctx, size)?;
        let (file, direct, open_notes) = open(&path, want_direct)?;
        let read_pct = read_pct(&q.rw, q.mix);
        let bufs = (0..jobs * depth)
            .map(|k| AlignedBuf::random(bs, 0x5eed + k as u64))
            .collect::<Result<Vec<_>>>()?;
        let mut run = RandomRun {
            file,
            path,
            size,
            bs,
            depth,
            jobs,
            engine,
            direct,
            read_pct,
            duration: Duration::from_secs_f64(q.duration),
            bufs,
            seed: 1,
            notes: vec![size_note],
            total: Tally::default(),
            iops: Vec::new(),
            steady: None,
            steady_pending: false,
            label: format!(
                "rw={} bs={} engine={} mode={}{}",
                q.rw,
                format_size(bs as u64),
                engine.name(),
                if direct { "direct" } else { "buffered" },
                if jobs > 1 {
                    format!(" jobs={jobs}")
                } else {
                    String::new()
                }
            ),
        };
        run.notes.extend(open_notes);
        if q.steady {
            run.steady =
                Some(run.find_steady(ctx, Duration::from_secs_f64(q.round), q.steady_limit)?);
        }
        Ok(Box::new(run))
    }
}

#[cfg(test)]
mod tests;
