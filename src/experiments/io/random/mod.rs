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

mod psync;
pub mod steady;
mod uring;

use std::fs::File;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::Rng;

use super::cache_control::{fadvise_dontneed, logical_block_size};
use crate::engine::{
    Ctx, Experiment, MetricSpec, Needs, ParamKind, ParamSpec, Point, PointExtras, PointRun,
    RunDefaults, Series, TrialValues,
};
use crate::experiments::util::fill_file;
use crate::safety::AlignedBuf;
use crate::stats::{self, HistogramData, LatencyRecorder};
use crate::units::format_size;
use crate::{Error, Result};

/// Name and the metrics `advise` reads, as constants so a rename cannot
/// silently drop a finding (advise::evidence checks them against the registry).
pub const NAME: &str = "io.random";
pub const METRIC_IOPS: &str = "iops";
pub const METRIC_LAT_P99: &str = "lat_p99";
pub const METRIC_READ_P99: &str = "read_p99";

pub struct Random;

/// Largest block and depth (fio users sweep 512 B … 1 MiB, QD 1 … 256).
const MAX_BS: u64 = 1 << 20;
const MAX_DEPTH: u64 = 256;
/// Automatic file size: twice the RAM (so buffered reads mostly miss the
/// page cache) within these bounds, and at most half the free space.
const AUTO_MIN: u64 = 32 << 20;
const AUTO_MAX: u64 = 1 << 30;
/// Buffers may take at most this share of MemAvailable.
const MEM_SHARE: u64 = 4;

/// What one workload run does: the file, the block size, the share of reads.
pub(crate) struct Job<'a> {
    pub file: &'a File,
    pub path: &'a Path,
    pub bs: usize,
    /// Blocks of `bs` in the file; offsets are k × bs, k < blocks.
    pub blocks: u64,
    /// Percent of operations that read: 100 randread, 0 randwrite.
    pub read_pct: u32,
}

impl Job<'_> {
    /// The next operation: (offset, is_read), uniformly random.
    #[inline]
    pub fn next_op(&self, rng: &mut SmallRng) -> (u64, bool) {
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
    pub ops: u64,
    pub reads: u64,
    /// Seconds from the first operation's start to the last completion.
    pub elapsed: f64,
    pub read: LatencyRecorder,
    pub write: LatencyRecorder,
}

impl Tally {
    fn iops(&self) -> f64 {
        self.ops as f64 / self.elapsed.max(1e-9)
    }
    fn all(&self) -> LatencyRecorder {
        let mut a = self.read.clone();
        a.merge(&self.write);
        a
    }
}

/// Makes every 512-byte sector of a block unique before it is written (its
/// offset and a sequence number in the first 16 bytes), like fio's default
/// scramble_buffers, so deduplicating storage cannot skip the write.
pub(crate) fn stamp(block: &mut [u8], off: u64, seq: u64) {
    for (i, sector) in block.chunks_mut(512).enumerate() {
        if sector.len() >= 16 {
            sector[..8].copy_from_slice(&(off + i as u64 * 512).to_le_bytes());
            sector[8..16].copy_from_slice(&seq.to_le_bytes());
        }
    }
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

/// The file the points of a run share (laying out a board-sized file per
/// point would dominate the run): its path and size. Removed with the
/// scratch directory.
static SHARED: Mutex<Option<(PathBuf, u64)>> = Mutex::new(None);

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

impl Experiment for Random {
    fn name(&self) -> &'static str {
        NAME
    }
    fn summary(&self) -> &'static str {
        "random reads/writes at a queue depth: IOPS and latency percentiles (fio randread/randwrite)"
    }
    fn method(&self) -> &'static str {
        "Lays out one scratch file of `size` random bytes (buffered writes + fsync, not timed; \
         shared by the points of a run), then a trial runs `duration` seconds of `bs`-byte \
         operations at uniformly random bs-aligned offsets (rw=randread, randwrite, or randrw \
         with `mix` % reads), keeping `depth` operations in flight: engine=psync runs `depth` \
         threads each doing one pread()/pwrite() at a time (fio psync, numjobs=depth), \
         engine=io_uring keeps `depth` operations queued on one ring from one thread (fio \
         io_uring, iodepth=depth). Every block written has each 512-byte sector stamped with its \
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
         a half plus the layout."
    }
    fn params(&self) -> Vec<ParamSpec> {
        vec![
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
        ]
    }
    fn metrics(&self) -> Vec<MetricSpec> {
        vec![
            MetricSpec::higher(METRIC_IOPS, "ops/s", "completed operations per second"),
            MetricSpec::higher("throughput", "B/s", "IOPS × block size"),
            MetricSpec::lower("lat_p50", "s", "median completion latency"),
            MetricSpec::lower("lat_p90", "s", "90th percentile completion latency"),
            MetricSpec::lower(METRIC_LAT_P99, "s", "99th percentile completion latency"),
            MetricSpec::lower("lat_p999", "s", "99.9th percentile completion latency"),
            MetricSpec::lower("lat_max", "s", "worst completion latency"),
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
        ]
    }
    fn needs(&self) -> Needs {
        Needs::SCRATCH
    }
    fn defaults(&self) -> RunDefaults {
        RunDefaults {
            warmup: 1,
            min_trials: 3,
            max_trials: 5,
            budget: 120.0,
        }
    }
    fn validate(&self, p: &Point) -> Result<()> {
        let (bs, size) = (p.u64("bs")?, p.u64("size")?);
        if size != 0 && size < bs {
            return Err(Error::usage(format!(
                "io.random: size ({}) is smaller than one block (bs = {}); use a larger size \
                 or size=0 (auto)",
                format_size(size),
                format_size(bs)
            )));
        }
        if p.bool("steady")? && p.text("rw")? == "randread" {
            return Err(Error::usage(
                "io.random: steady=yes writes until the device is steady, so it needs \
                 rw=randwrite or rw=randrw",
            ));
        }
        Ok(())
    }
    fn scratch_bytes(&self, p: &Point) -> u64 {
        p.u64("size").unwrap_or(0)
    }
    fn prepare(&self, ctx: &Ctx, p: &Point) -> Result<Box<dyn PointRun>> {
        let bs = p.usize("bs")?;
        let depth = p.usize("depth")?;
        let engine = match p.text("engine")? {
            "io_uring" => Engine::IoUring,
            _ => Engine::Psync,
        };
        let want_direct = p.text("mode")? == "direct";
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
        let buffers = (depth * bs) as u64;
        if mem.available > 0 && buffers > mem.available / MEM_SHARE {
            return Err(Error::environment(format!(
                "io.random: depth × bs = {} of buffers is more than a quarter of the available \
                 memory ({}); use a smaller depth or bs",
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
        let (size, size_note) = match p.u64("size")? {
            0 => {
                // The run's shared file counts as free: it is what this
                // point would reuse, and otherwise every point would see
                // less space and lay out a smaller file.
                let free = scratch.free_bytes()? + shared_bytes_in(scratch.path());
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
        let path = shared_file(ctx, size)?;
        let (file, direct, open_notes) = open(&path, want_direct)?;
        let read_pct = read_pct(p.text("rw")?, p.f64("mix")?);
        let bufs = (0..depth)
            .map(|k| AlignedBuf::random(bs, 0x5eed + k as u64))
            .collect::<Result<Vec<_>>>()?;
        let mut run = RandomRun {
            file,
            path,
            size,
            bs,
            depth,
            engine,
            direct,
            read_pct,
            duration: Duration::from_secs_f64(p.f64("duration")?),
            bufs,
            seed: 1,
            notes: vec![size_note],
            total: Tally::default(),
            iops: Vec::new(),
            steady: None,
            steady_pending: false,
            label: format!(
                "rw={} bs={} engine={} mode={}",
                p.text("rw")?,
                format_size(bs as u64),
                engine.name(),
                if direct { "direct" } else { "buffered" }
            ),
        };
        run.notes.extend(open_notes);
        if p.bool("steady")? {
            run.steady = Some(run.find_steady(
                ctx,
                Duration::from_secs_f64(p.f64("round")?),
                p.f64("steady_limit")?,
            )?);
        }
        Ok(Box::new(run))
    }
}

/// Bytes of the run's shared file when it is in `dir`.
fn shared_bytes_in(dir: &Path) -> u64 {
    let shared = SHARED.lock().unwrap_or_else(|e| e.into_inner());
    match shared.as_ref() {
        Some((path, _)) if path.parent() == Some(dir) => {
            std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
        }
        _ => 0,
    }
}

/// The run's shared file of `size` bytes, laid out on first use.
fn shared_file(ctx: &Ctx, size: u64) -> Result<PathBuf> {
    let scratch = ctx.scratch()?;
    let mut shared = SHARED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((path, s)) = shared.as_ref() {
        let here = path.parent() == Some(scratch.path());
        let ok = std::fs::metadata(path).is_ok_and(|m| m.len() == size);
        if here && ok && *s == size {
            return Ok(path.clone());
        }
        if here {
            let _ = std::fs::remove_file(path);
        }
    }
    *shared = None;
    scratch.ensure_space(size)?;
    let name = format!("random-{size}-{:08x}", rand::random::<u32>());
    let path = scratch.file_path(&name);
    let mut f = scratch.create_file(&name, 0)?;
    let laid = fill_file(&mut f, &path, size, 0x7a).and_then(|()| {
        f.sync_all()
            .map_err(|e| Error::io("cannot fsync", &path, e))
    });
    if let Err(e) = laid {
        drop(f);
        let _ = std::fs::remove_file(&path);
        return Err(e);
    }
    // The layout must not leave the file in the page cache.
    let _ = fadvise_dontneed(&f, &path);
    *shared = Some((path.clone(), size));
    Ok(path)
}

/// Open for reading and writing, O_DIRECT when asked and supported. The
/// note says when direct I/O fell back to buffered (ramfs, vfat on old
/// kernels, UBIFS, tmpfs before 6.6) or when the file is in memory anyway.
fn open(path: &Path, direct: bool) -> Result<(File, bool, Vec<String>)> {
    let o = |flags| {
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(flags)
            .open(path)
    };
    let fs = crate::system::mount_for_path(path).map(|m| m.fs_type);
    let mut notes = Vec::new();
    if matches!(fs.as_deref(), Some("tmpfs") | Some("ramfs")) {
        notes.push(format!(
            "the target is {}: the file lives in memory, so no storage device is measured",
            fs.as_deref().unwrap_or("?")
        ));
    }
    if direct {
        match o(libc::O_DIRECT) {
            Ok(f) => return Ok((f, true, notes)),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                let f = o(0).map_err(|e| Error::io("cannot open", path, e))?;
                notes.push(format!(
                    "mode=direct fell back to BUFFERED: {} does not support O_DIRECT; these \
                     figures include the page cache",
                    fs.as_deref().unwrap_or("this file system")
                ));
                return Ok((f, false, notes));
            }
            Err(e) => return Err(Error::io("cannot open", path, e)),
        }
    }
    Ok((
        o(0).map_err(|e| Error::io("cannot open", path, e))?,
        false,
        notes,
    ))
}

/// A point that cannot run here (io_uring missing): no metrics, the reason
/// in its notes.
struct Skipped(String);

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
struct Steady {
    /// (seconds since the start of writing, IOPS) per round.
    rounds: Vec<(f64, f64)>,
    /// Seconds written until the rule held; None when the limit came first.
    time: Option<f64>,
    fresh: f64,
    window: Option<steady::Window>,
}

struct RandomRun {
    file: File,
    path: PathBuf,
    size: u64,
    bs: usize,
    depth: usize,
    engine: Engine,
    direct: bool,
    read_pct: u32,
    duration: Duration,
    bufs: Vec<AlignedBuf>,
    seed: u64,
    notes: Vec<String>,
    /// Latencies of the measured trials, merged.
    total: Tally,
    iops: Vec<f64>,
    steady: Option<Steady>,
    /// The steady-state figures go out with the first measured trial.
    steady_pending: bool,
    label: String,
}

impl RandomRun {
    /// One timed run of the workload for `dur`.
    fn measure(&mut self, ctx: &Ctx, dur: Duration) -> Result<Tally> {
        ctx.check_cancel()?;
        if !self.direct {
            // Not timed: start cold and clean.
            self.file
                .sync_data()
                .map_err(|e| Error::io("cannot fdatasync", &self.path, e))?;
            fadvise_dontneed(&self.file, &self.path)?;
        }
        self.seed += 1;
        let job = Job {
            file: &self.file,
            path: &self.path,
            bs: self.bs,
            blocks: self.size / self.bs as u64,
            read_pct: self.read_pct,
        };
        let t = match self.engine {
            Engine::Psync => psync::run(&job, dur, &mut self.bufs, self.seed),
            Engine::IoUring => uring::run(&job, dur, &mut self.bufs, self.seed),
        }?;
        ctx.check_cancel()?;
        if t.ops == 0 {
            return Err(Error::measurement(
                "io.random: no operation completed in the trial",
            ));
        }
        Ok(t)
    }

    /// Write in rounds until the SNIA rule holds or `limit` seconds passed.
    fn find_steady(&mut self, ctx: &Ctx, round: Duration, limit: f64) -> Result<Steady> {
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

    fn series(&self, name: &str, x: (&str, &str), y: (&str, &str), pts: Vec<(f64, f64)>) -> Series {
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

fn p(d: &HistogramData, q: f64) -> f64 {
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
            .with("iops", iops)
            .with("throughput", iops * self.bs as f64)
            .with("lat_p50", p(&all, 50.0))
            .with("lat_p90", p(&all, 90.0))
            .with("lat_p99", p(&all, 99.0))
            .with("lat_p999", p(&all, 99.9))
            .with("lat_max", all.max);
        if self.read_pct != 0 && self.read_pct != 100 {
            v.set("read_p99", p(&t.read.to_data(""), 99.0));
            v.set("write_p99", p(&t.write.to_data(""), 99.0));
        }
        if self.steady_pending {
            self.steady_pending = false;
            if let Some(s) = &self.steady {
                if let Some(time) = s.time {
                    v.set("steady_time", time);
                }
                if let Some(w) = s.window {
                    v.set("fresh_steady_ratio", s.fresh / w.mean.max(1e-9));
                }
            }
        }
        self.iops.push(iops);
        self.total.ops += t.ops;
        self.total.reads += t.reads;
        self.total.read.merge(&t.read);
        self.total.write.merge(&t.write);
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
            let job = Job {
                file: &self.file,
                path: &self.path,
                bs: self.bs,
                blocks: self.size / self.bs as u64,
                read_pct: self.read_pct,
            };
            let own = own_ns_per_op(&job, self.engine);
            // Per thread (psync) or per ring: the time one operation slot has.
            let per_op = 1e9 * self.depth as f64 / stats::summarize(&self.iops).median;
            let share = match self.engine {
                // One thread per operation: each pays its own bookkeeping.
                Engine::Psync => own / per_op,
                // One thread keeps the whole depth: it pays for every operation.
                Engine::IoUring => own / (per_op / self.depth as f64),
            };
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
            "{} × {} operations in flight ({}), {}; latency = completion − start per operation, \
             HDR histograms merged across {} and trials",
            self.depth,
            format_size(self.bs as u64),
            match self.engine {
                Engine::Psync => "one pread/pwrite thread each",
                Engine::IoUring => "one io_uring, latency from queuing to the ring",
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
fn own_ns_per_op(job: &Job, engine: Engine) -> f64 {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_size_fits_boards_and_hosts() {
        const MIB: u64 = 1 << 20;
        // 64 MB board with 1 GB of free flash: 2 × RAM.
        assert_eq!(auto_size(64 * MIB, 1000 * MIB).0, 128 * MIB);
        // 16 MB board: at least 32 MiB.
        assert_eq!(auto_size(16 * MIB, 1000 * MIB).0, 32 * MIB);
        // Big host: capped at 1 GiB.
        assert_eq!(auto_size(24 << 30, 50 << 30).0, 1 << 30);
        // Little free space: half of it, whole MiB.
        let (s, why) = auto_size(256 * MIB, 101 * MIB);
        assert_eq!(s, 50 * MIB);
        assert!(why.contains("half the free space"), "{why}");
        // Below the 32 MiB floor because of space: not quoted as "within" it.
        let (s, why) = auto_size(64 * MIB, 47 * MIB);
        assert_eq!(s, 23 * MIB);
        assert!(
            why.starts_with("size=auto: 23 MiB = half the free space"),
            "{why}"
        );
        assert!(!why.contains("23 MiB = 2 × MemTotal"), "{why}");
    }

    #[test]
    fn ops_are_aligned_in_range_and_mixed_as_asked() {
        use rand::SeedableRng;
        let f = tempfile::tempfile().unwrap();
        let job = Job {
            file: &f,
            path: Path::new("x"),
            bs: 4096,
            blocks: 10,
            read_pct: 70,
        };
        let mut rng = SmallRng::seed_from_u64(3);
        let mut reads = 0;
        for _ in 0..10_000 {
            let (off, r) = job.next_op(&mut rng);
            assert_eq!(off % 4096, 0);
            assert!(off < 10 * 4096);
            reads += r as u32;
        }
        assert!((6700..7300).contains(&reads), "{reads}");
        let all_reads = Job {
            read_pct: 100,
            ..job
        };
        assert!((0..100).all(|_| all_reads.next_op(&mut rng).1));
    }

    #[test]
    fn stamps_make_sectors_unique() {
        let mut b = vec![0u8; 4096];
        stamp(&mut b, 8192, 5);
        let s: Vec<&[u8]> = b.chunks(512).collect();
        for i in 0..s.len() {
            for j in i + 1..s.len() {
                assert_ne!(s[i], s[j]);
            }
        }
        assert_eq!(&b[512..520], &(8192u64 + 512).to_le_bytes());
    }

    /// ramfs refuses O_DIRECT on every kernel (root: it mounts one).
    #[test]
    fn direct_open_falls_back_to_buffered_on_ramfs() {
        if !crate::safety::is_root() {
            eprintln!("SKIPPED: mounting a ramfs needs root");
            return;
        }
        let dir = tempfile::tempdir_in("/var/tmp").unwrap();
        let mounted = std::process::Command::new("mount")
            .args(["-t", "ramfs", "ramfs"])
            .arg(dir.path())
            .status()
            .is_ok_and(|s| s.success());
        if !mounted {
            eprintln!("SKIPPED: cannot mount a ramfs");
            return;
        }
        let path = dir.path().join("f");
        std::fs::write(&path, vec![1u8; 8192]).unwrap();
        let got = open(&path, true);
        let buffered = open(&path, false);
        let _ = std::process::Command::new("umount")
            .arg(dir.path())
            .status();
        let (_, direct, notes) = got.unwrap();
        assert!(!direct);
        let notes = notes.join("\n");
        assert!(
            notes.contains("mode=direct fell back to BUFFERED: ramfs"),
            "{notes}"
        );
        assert!(
            notes.contains("the target is ramfs: the file lives in memory"),
            "{notes}"
        );
        let (_, direct, notes) = buffered.unwrap();
        assert!(!direct);
        assert!(!notes.join(" ").contains("fell back"));
    }

    #[test]
    fn a_skipped_point_has_no_metrics_and_says_why() {
        let ctx = Ctx::new(None, PathBuf::from("/"), None);
        let mut s = Skipped("skipped: engine=io_uring is not available here (test)".into());
        assert!(s.trial(&ctx).unwrap().0.is_empty());
        let ex = s.finish(&ctx).unwrap();
        assert!(ex.notes[0].contains("io_uring is not available"));
    }
}
