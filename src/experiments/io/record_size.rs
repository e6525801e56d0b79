//! `io.record-size`: sequential write then read of one file at a given
//! record size (bytes per write()/read() call), buffered, O_DIRECT or
//! O_SYNC — the classic "throughput vs record size" study. Small records
//! are dominated by per-call overhead; reads roughly double from 1 KiB to
//! 16 KiB records on real hardware.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::time::Instant;

use super::cache_control::{drop_file_cache, logical_block_size, open_with, DropMethod, IoMode};
use crate::engine::{
    Ctx, Experiment, Fitted, Footprint, MetricSpec, Needs, ParamKind, ParamSpec, Point,
    PointExtras, PointRun, Room, RunDefaults, Series, TrialValues,
};
use crate::experiments::util::{backing_note, fill_file, fit_disk, Fit, MIN_TRIAL};
use crate::safety::AlignedBuf;
use crate::stats;
use crate::units::format_size;
use crate::{Error, Result};

/// Name and the metrics `advise` reads, as constants so a rename cannot
/// silently drop a finding (advise::evidence checks them against the registry).
pub const NAME: &str = "io.record-size";
pub const METRIC_WRITE_THROUGHPUT: &str = "write_throughput";

pub struct RecordSize;

impl Experiment for RecordSize {
    fn name(&self) -> &'static str {
        "io.record-size"
    }
    fn summary(&self) -> &'static str {
        "sequential write and cold read of a file vs record size (buffered/direct/sync)"
    }
    fn method(&self) -> &'static str {
        "Creates one file of `size` random bytes in the scratch directory (outside the timing). \
         A trial runs passes of: (1) open the file for writing with the mode's flags (buffered and \
         sync = O_SYNC: truncated to 0 first so the pass writes a new file and sub-page records \
         never read-modify-write uncached pages; direct = O_DIRECT: overwritten in place, as \
         fio does with its laid-out file), write it sequentially from offset 0 with \
         pwrite() calls of `record` bytes (one random buffer whose every 512-byte sector is \
         stamped with its file offset and a per-pass id before each call, like fio's default \
         scramble_buffers, so no two sectors of the file and no two passes hold the same data \
         for dedup or skip-identical-overwrite storage to elide), stop the clock (write_throughput_nofsync), fsync(), \
         stop the clock again (write_throughput: the closing fsync is inside this figure); \
         (2) drop the file's cached pages (buffered/sync: root uses sync + echo 1 > \
         /proc/sys/vm/drop_caches, otherwise fdatasync + posix_fadvise(DONTNEED), the notes \
         say which; direct: O_DIRECT reads bypass the cache) and read it back sequentially with \
         pread() calls of `record` bytes (read_throughput). Opening and cache dropping are not \
         timed. Passes repeat until each phase has run at least 200 ms; throughput = file \
         bytes × passes / timed seconds, in B/s. `record` is the sweep: each record size is \
         one point and the report plots each metric against it; every point also carries a \
         one-point series per metric named `<metric> mode=<mode>` (x = record in B) that \
         the charts join into the throughput-vs-record-size curve. Defaults: size 32 MiB, \
         mode=direct, records 1k…1m, 1 warm-up and 3-5 trials per point, so the 9-point \
         default run stays under 2 minutes on a small VM (1 KiB O_DIRECT records run at a few \
         tens of MB/s). Use -p mode=buffered,direct,sync for all three curves and a larger \
         size (e.g. 256M) on big machines; in direct mode `record` and `size` must be \
         multiples of the device's logical block size. mode=direct on a file system that \
         refuses O_DIRECT (tmpfs before 6.6, UBIFS, some FUSE) is measured buffered with the \
         closing fsync and the page cache dropped before each read instead, and the notes say \
         so; every result names what backs the target (a block device, or RAM for tmpfs, \
         which accepts O_DIRECT from 6.6 on and then shows RAM speed). Timings shorter than \
         100 ms are mostly start-up and the closing fsync: with mode=direct one timed phase \
         therefore sweeps the file several times back to back from one open (as fio's \
         time_based loops over its file), with one fsync after the last sweep, the number \
         calibrated (fastest of two untimed rounds, 1.5x margin) so that a phase lasts at least 100 ms; the notes give the sweeps and the \
         shortest phase. `size` follows the target's free space (at most half of it)."
    }
    fn params(&self) -> Vec<ParamSpec> {
        vec![
            ParamSpec::new("size", ParamKind::Size, "32M", "file size")
                .range(4096.0, (1u64 << 40) as f64),
            ParamSpec::new(
                "record",
                ParamKind::Size,
                "1k,2k,4k,8k,16k,32k,64k,128k,1m",
                "bytes per write()/read() call (sweep)",
            )
            .range(1.0, (64u64 << 20) as f64),
            ParamSpec::new(
                "mode",
                ParamKind::Choice(IoMode::CHOICES),
                "direct",
                "buffered (page cache), direct (O_DIRECT) or sync (O_SYNC writes)",
            ),
        ]
    }
    fn metrics(&self) -> Vec<MetricSpec> {
        vec![
            MetricSpec::higher(
                "write_throughput",
                "B/s",
                "file bytes written per second, closing fsync inside the timing",
            ),
            MetricSpec::higher(
                "write_throughput_nofsync",
                "B/s",
                "file bytes written per second, closing fsync not timed",
            ),
            MetricSpec::higher(
                "read_throughput",
                "B/s",
                "file bytes read per second from the device (cache dropped or O_DIRECT)",
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
            budget: 90.0,
        }
    }
    fn validate(&self, p: &Point) -> Result<()> {
        let (size, record) = (p.u64("size")?, p.u64("record")?);
        if record > size {
            return Err(Error::usage(format!(
                "io.record-size: record ({record}) is larger than size ({size}); use a larger size"
            )));
        }
        if size % record != 0 {
            return Err(Error::usage(format!(
                "io.record-size: size ({size}) must be a multiple of record ({record})"
            )));
        }
        Ok(())
    }
    fn scratch_bytes(&self, p: &Point) -> u64 {
        // `size` is fitted to the free space in prepare(); one record is the least.
        p.u64("record").unwrap_or(0)
    }
    fn footprint(&self, p: &Point, room: &Room) -> Footprint {
        let size = fitted_size(p, room).map_or(0, |f| f.value);
        Footprint {
            // The fill, and two calibration writes with mode=direct.
            setup_written: 3 * size,
            trial_written: size,
            repeats: true,
            peak_memory: p.u64("record").unwrap_or(0),
            stored: size,
        }
    }
    fn prepare(&self, ctx: &Ctx, p: &Point) -> Result<Box<dyn PointRun>> {
        let started = Instant::now();
        let fit = fitted_size(p, &Room::for_ctx(ctx))?;
        let size = fit.value;
        let record = p.usize("record")?;
        let asked = IoMode::parse(p.text("mode")?)?;
        let mut mode = asked;
        let scratch = ctx.scratch()?;
        let fitted = fit.fitted("size", "free space");
        let mut notes: Vec<String> = fit.note.into_iter().collect();
        notes.push(backing_note(ctx));
        if mode == IoMode::Direct {
            let lbs = logical_block_size(scratch.path());
            if !(record as u64).is_multiple_of(lbs) || size % lbs != 0 {
                return Err(Error::usage(format!(
                    "io.record-size: with mode=direct, record ({record}) and size ({size}) must be \
                     multiples of the device's logical block size ({lbs} B); use larger records \
                     or mode=buffered"
                )));
            }
        }
        scratch.ensure_space(size)?;
        let name = format!("record-size-{}-{record}", mode.as_str());
        let path = scratch.file_path(&name);
        let mut f = scratch.create_file(&name, 0)?;
        // A budgeted point first probes the device on a prefix of the file
        // (a 20 MB/s flash takes seconds per pass of the whole file), then
        // lays out only what its share of the budget has time for.
        let time = ctx.point_time();
        let rec = record as u64;
        let mut probe = match time {
            Some(_) => (PROBE_START / rec * rec).clamp(rec, size),
            None => size,
        };
        fill_file(&mut f, &path, probe, 7)?;
        f.sync_all()
            .map_err(|e| Error::io("cannot fsync", &path, e))?;
        if mode == IoMode::Direct {
            if let Err(why) = direct_refused(&path) {
                mode = IoMode::Buffered;
                notes.push(format!(
                    "mode=direct is not supported here ({why}): measured as mode=buffered \
                     instead, with the closing fsync timed and the page cache dropped before \
                     each read"
                ));
            }
        }
        let mut run = RecordSizeRun {
            fitted,
            path: path.clone(),
            size: probe,
            record,
            mode,
            asked,
            buf: AlignedBuf::random(record, 11)?,
            drop_method: None,
            passes: Vec::new(),
            samples: Default::default(),
            sweeps: 1,
            shortest: f64::INFINITY,
            notes,
        };
        let mut size = size;
        let mut probed = None;
        if let Some(t) = time {
            // Grow the probe until a phase lasts long enough to time (a fast
            // device) or the probe is PROBE_BYTES: 1 KiB O_DIRECT records on a
            // throttled USB stick run at a few hundred kB/s, and a 4 MiB
            // probe alone then took most of a minute.
            let top = (PROBE_BYTES / rec * rec).clamp(rec, size);
            let (mut w0, mut w, mut r);
            loop {
                run.size = probe;
                (w0, w, r) = run.probe(ctx, 1)?;
                if w0.min(r) >= PROBE_TIMED || probe >= top {
                    break;
                }
                let next = (probe * 4).min(top);
                fill_file(&mut f, &path, next - probe, 9)?;
                f.sync_all()
                    .map_err(|e| Error::io("cannot fsync", &path, e))?;
                probe = next;
            }
            // Phases under 100 ms: the fastest of two rounds (a preemption
            // must not make the device look slow).
            if w0.min(r) < MIN_PHASE {
                let (a, b, c) = run.probe(ctx, 1)?;
                (w0, w, r) = (w0.min(a), w.min(b), r.min(c));
            }
            probed = Some((w0, r));
            if let Some(fit) = fit_to_time(size, record as u64, probe, w, r, t, started) {
                size = fit.size;
                run.fitted = Some(Fitted {
                    param: "size",
                    used: crate::engine::ParamValue::Int(size),
                    why: "device speed and time budget".into(),
                });
                run.notes.push(fit.note);
            }
        }
        if size > probe {
            fill_file(&mut f, &path, size - probe, 8)?;
            f.sync_all()
                .map_err(|e| Error::io("cannot fsync", &path, e))?;
        }
        drop(f);
        run.size = size;
        if mode == IoMode::Direct {
            // Calibrate (untimed for the result): with O_DIRECT a timed phase
            // sweeps the file often enough to last >= 100 ms; the cache is not
            // involved, so a second sweep is as cold as the first.
            // The fastest of two rounds, and a 1.5x margin: a calibration
            // pass slowed by a preemption must not leave phases short.
            // A probe long enough to time (a slow device) gives the phase
            // time of the whole file by proportion; otherwise (or without a
            // probe) two rounds over the whole file, cheap on a fast device.
            let fastest = match probed {
                Some((w0, r)) if w0.min(r) >= PROBE_TIMED => w0.min(r) * size as f64 / probe as f64,
                _ => {
                    let (w0, _, r) = run.probe(ctx, 2)?;
                    w0.min(r)
                }
            };
            run.sweeps = (1.5 * MIN_PHASE / fastest.max(1e-6))
                .ceil()
                .clamp(1.0, 10_000.0) as u64;
        }
        Ok(Box::new(run))
    }
}

/// `size` fitted to half the target's free space, a multiple of `record`.
fn fitted_size(p: &Point, room: &Room) -> Result<Fit> {
    let record = p.u64("record")?;
    fit_disk(
        "io.record-size file",
        p.u64("size")?,
        1,
        record,
        record,
        room,
    )
}

/// Err(reason) when the file system refuses O_DIRECT on `path`.
fn direct_refused(path: &std::path::Path) -> std::result::Result<(), String> {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
    {
        Ok(_) => Ok(()),
        Err(e) => Err(format!("open with O_DIRECT: {e}")),
    }
}

/// Shortest timed phase (one write or one read of the file) worth timing.
const MIN_PHASE: f64 = 0.1;

/// Bytes of the file a budgeted point probes the device with before it
/// decides how much of the file its share of the budget has time for: it
/// starts at PROBE_START and grows 4x until a phase lasts PROBE_TIMED.
const PROBE_START: u64 = 256 << 10;
const PROBE_BYTES: u64 = 4 << 20;

/// The least file the time fitting leaves (or one record): a trial repeats
/// passes until each phase has lasted MIN_TRIAL, so a small file still
/// times well; below this the per-pass open and fsync weigh too much.
const FIT_FLOOR: u64 = 256 << 10;

/// A probe phase at least this long is timed well enough to scale to the
/// whole file (shorter: a fast device, calibrated on the whole file).
const PROBE_TIMED: f64 = 0.02;

/// The time fitting's margin: trials are sized to take at most this share
/// of the time they are given (the validity guard, fsync, the odd slow pass).
const TIME_MARGIN: f64 = 0.7;

/// `size` cut so that `t.trials` trials (a write and a read phase each) fit
/// in what is left of the point's share of the budget, from the fastest
/// write and read phases (`w`, `r` seconds) of a probe of `probe` bytes.
/// None when the whole size fits (a fast device keeps its size).
struct TimeFit {
    size: u64,
    note: String,
}

fn fit_to_time(
    size: u64,
    record: u64,
    probe: u64,
    w: f64,
    r: f64,
    t: crate::engine::PointTime,
    started: Instant,
) -> Option<TimeFit> {
    let per_byte = (w + r).max(1e-9) / probe as f64;
    let left = (t.seconds - started.elapsed().as_secs_f64()).max(0.0);
    // The trials, and laying out the rest of the file (one more write).
    let per_trial = left * TIME_MARGIN / (t.trials + 1) as f64;
    if per_byte * size as f64 <= per_trial {
        return None;
    }
    // Whole records; at least one, and at least FIT_FLOOR when the share is
    // too short even for that (the trials then take longer than planned).
    let fitted = ((per_trial / per_byte) as u64 / record * record)
        .max(record)
        .max(FIT_FLOOR.min(size) / record * record)
        .min(size);
    if fitted >= size {
        return None;
    }
    Some(TimeFit {
        size: fitted,
        note: format!(
            "fitted to the device's speed: size {} instead of {} — the probe wrote at {} and \
             read at {} with {} records, so {} trials of the whole file would not fit in this \
             point's {:.0} s share of the time budget (raise it with --budget)",
            format_size(fitted),
            format_size(size),
            crate::units::human(probe as f64 / w.max(1e-9), "B/s"),
            crate::units::human(probe as f64 / r.max(1e-9), "B/s"),
            format_size(record),
            t.trials,
            t.seconds
        ),
    })
}

struct RecordSizeRun {
    fitted: Option<Fitted>,
    path: PathBuf,
    size: u64,
    record: usize,
    /// The mode measured, and the one asked for (they differ after a fallback).
    mode: IoMode,
    asked: IoMode,
    buf: AlignedBuf,
    /// Sweeps over the file per timed phase (direct: calibrated to >= 100 ms).
    sweeps: u64,
    /// Shortest timed phase seen, seconds.
    shortest: f64,
    notes: Vec<String>,
    drop_method: Option<DropMethod>,
    passes: Vec<u64>,
    /// (write, write_nofsync, read) per trial, for the series.
    samples: [Vec<f64>; 3],
}

// A point's file goes when the point ends, not with the scratch directory at
// the end of the run: on a small partition the next point is fitted to the
// space this one leaves.
impl Drop for RecordSizeRun {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

impl RecordSizeRun {
    /// One write pass: (seconds without fsync, seconds with fsync).
    fn write_pass(&mut self, ctx: &Ctx) -> Result<(f64, f64)> {
        // Buffered and O_SYNC writes start from an empty file, so sub-page
        // records never read-modify-write uncached pages; O_DIRECT
        // overwrites the allocated file in place, like fio does.
        let trunc = if self.mode == IoMode::Direct {
            0
        } else {
            libc::O_TRUNC
        };
        let f = open_with(&self.path, true, self.mode.write_flags() | trunc)?;
        let rec = self.record;
        let pass = pass_id();
        let buf = &mut self.buf.as_mut_slice()[..rec];
        let t = Instant::now();
        let mut calls = 0u32;
        for sweep in 0..self.sweeps {
            let mut off = 0u64;
            while off < self.size {
                stamp_record(buf, off, pass.wrapping_add(sweep));
                let n = f
                    .write_at(buf, off)
                    .map_err(|e| Error::io("cannot write", &self.path, e))?;
                if n == 0 {
                    return Err(Error::measurement("write() returned 0"));
                }
                off += n as u64;
                calls = calls.wrapping_add(1);
                if calls.is_multiple_of(4096) {
                    ctx.check_cancel()?;
                }
            }
        }
        let nofsync = t.elapsed().as_secs_f64();
        f.sync_all()
            .map_err(|e| Error::io("cannot fsync", &self.path, e))?;
        let with = t.elapsed().as_secs_f64();
        Ok((nofsync, with))
    }

    /// `first`: the first pass of a trial drops the whole page cache (root);
    /// later passes of the same trial only evict this file's pages, which is
    /// enough for a clean file and keeps short passes from calling
    /// drop_caches hundreds of times.
    /// The fastest write and read phases of untimed rounds over the
    /// current size (a round slowed by a preemption does not count).
    /// Returns (write without fsync, write with fsync, read) seconds.
    fn probe(&mut self, ctx: &Ctx, rounds: usize) -> Result<(f64, f64, f64)> {
        let (mut w0, mut w, mut r) = (f64::INFINITY, f64::INFINITY, f64::INFINITY);
        for _ in 0..rounds {
            let (a, b) = self.write_pass(ctx)?;
            w0 = w0.min(a);
            w = w.min(b);
            r = r.min(self.read_pass(ctx, false)?);
        }
        Ok((w0, w, r))
    }

    fn read_pass(&mut self, ctx: &Ctx, first: bool) -> Result<f64> {
        if self.mode != IoMode::Direct {
            let f = File::open(&self.path).map_err(|e| Error::io("cannot open", &self.path, e))?;
            let m = drop_file_cache(&f, &self.path, ctx.is_root && first)?;
            if first {
                self.drop_method = Some(m);
            }
        }
        let f = open_with(&self.path, false, self.mode.read_flags())?;
        let rec = self.record;
        let buf = &mut self.buf.as_mut_slice()[..rec];
        let t = Instant::now();
        let mut calls = 0u32;
        for _ in 0..self.sweeps {
            let mut off = 0u64;
            while off < self.size {
                let n = f
                    .read_at(buf, off)
                    .map_err(|e| Error::io("cannot read", &self.path, e))?;
                if n == 0 {
                    return Err(Error::measurement(format!(
                        "{} is shorter than expected",
                        self.path.display()
                    )));
                }
                std::hint::black_box(&buf[..n]);
                off += n as u64;
                calls = calls.wrapping_add(1);
                if calls.is_multiple_of(4096) {
                    ctx.check_cancel()?;
                }
            }
        }
        Ok(t.elapsed().as_secs_f64())
    }
}

/// A value that differs between write passes, also across runs (the clock in
/// ns), so a pass never rewrites a block with the content it already holds.
fn pass_id() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// Makes every 512-byte sector of a record unique before it is written, as
/// fio does by default (scramble_buffers=1): the sector's file offset and the
/// pass id go into its first 16 bytes. Without it every record of the file is
/// the same buffer and every pass rewrites identical data, which storage that
/// deduplicates or skips identical overwrites (ZFS nopwrite, a host caching a
/// VM's disk) completes without writing: measured ~3 GB/s vs fio's ~1 GB/s on
/// a host-cached virtio disk. Records under 16 bytes are left as they are.
fn stamp_record(rec: &mut [u8], off: u64, pass: u64) {
    for (i, sector) in rec.chunks_mut(512).enumerate() {
        if sector.len() >= 16 {
            let at = off + (i as u64) * 512;
            sector[..8].copy_from_slice(&at.to_le_bytes());
            sector[8..16].copy_from_slice(&pass.to_le_bytes());
        }
    }
}

impl PointRun for RecordSizeRun {
    fn fitted(&self) -> Vec<Fitted> {
        self.fitted.clone().into_iter().collect()
    }
    fn trial(&mut self, ctx: &Ctx) -> Result<TrialValues> {
        let (mut w0, mut w1, mut r) = (0.0, 0.0, 0.0);
        let mut passes = 0u64;
        let mut shortest = f64::INFINITY;
        let min = MIN_TRIAL.as_secs_f64();
        while passes == 0 || ((w0 < min || r < min) && passes < 1000) {
            ctx.check_cancel()?;
            let (a, b) = self.write_pass(ctx)?;
            let c = self.read_pass(ctx, passes == 0)?;
            self.shortest = self.shortest.min(a).min(c);
            shortest = shortest.min(a).min(c);
            w0 += a;
            w1 += b;
            r += c;
            passes += 1;
        }
        self.passes.push(passes);
        let bytes = (self.size * self.sweeps * passes) as f64;
        // The calibration ran on a machine that may have sped up since (a
        // busy neighbour went quiet): lengthen later phases so they last.
        if self.mode == IoMode::Direct && shortest < MIN_PHASE {
            self.sweeps = ((self.sweeps as f64) * 1.5 * MIN_PHASE / shortest.max(1e-6))
                .ceil()
                .clamp(1.0, 10_000.0) as u64;
        }
        let v = [bytes / w1, bytes / w0, bytes / r];
        for (s, x) in self.samples.iter_mut().zip(v) {
            s.push(x);
        }
        Ok(TrialValues::new()
            .with("write_throughput", v[0])
            .with("write_throughput_nofsync", v[1])
            .with("read_throughput", v[2]))
    }

    fn finish(&mut self, _ctx: &Ctx) -> Result<PointExtras> {
        let names = [
            "write_throughput",
            "write_throughput_nofsync",
            "read_throughput",
        ];
        let series = names
            .iter()
            .zip(&self.samples)
            .filter(|(_, s)| !s.is_empty())
            .map(|(n, s)| Series {
                name: format!("{n} mode={}", self.mode.as_str()),
                x_label: "record".into(),
                x_unit: "B".into(),
                y_label: (*n).into(),
                y_unit: "B/s".into(),
                points: vec![(self.record as f64, stats::summarize(s).median)],
            })
            .collect();
        let mut notes = std::mem::take(&mut self.notes);
        notes.push(format!(
            "timing: each timed write or read phase sweeps the {} file {} time(s) from one \
             open (one fsync after the last write sweep); shortest phase {:.0} ms{}",
            format_size(self.size),
            self.sweeps,
            self.shortest * 1e3,
            if self.shortest < MIN_PHASE {
                format!(
                    " — under the {:.0} ms a timing should last: start-up and the closing fsync \
                     weigh more{}",
                    MIN_PHASE * 1e3,
                    if self.mode == IoMode::Direct {
                        ""
                    } else {
                        " (buffered and sync passes cannot repeat within one timing without \
                         reading the cache: use a larger size)"
                    }
                )
            } else {
                String::new()
            }
        ));
        if self.asked != self.mode {
            notes.push(format!(
                "measured mode={} although mode={} was asked (see above)",
                self.mode.as_str(),
                self.asked.as_str()
            ));
        }
        notes.push(format!(
            "mode={} ({}); {} per pass, passes per trial: {:?}; write_throughput includes the closing fsync, \
             write_throughput_nofsync does not",
            self.mode.as_str(),
            match self.mode {
                IoMode::Buffered => "page cache",
                IoMode::Direct => "O_DIRECT, page cache bypassed",
                IoMode::Sync => "O_SYNC writes",
            },
            format_size(self.size),
            self.passes
        ));
        match (self.mode, self.drop_method) {
            (IoMode::Direct, _) => {
                notes.push("reads use O_DIRECT: the page cache is not involved".into())
            }
            (_, Some(m)) => {
                notes.push(m.note().into());
                if m == DropMethod::DropCaches {
                    notes.push(
                        "drop_caches before the first pass of each trial; later passes of the \
                         same trial evict the file with fdatasync + posix_fadvise(DONTNEED)"
                            .into(),
                    );
                }
            }
            _ => {}
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
    fn a_slow_device_gets_a_file_its_trials_have_time_for() {
        const MIB: u64 = 1 << 20;
        let t = crate::engine::PointTime {
            seconds: 10.0,
            trials: 4,
        };
        let now = Instant::now();
        // 20 MB/s: a 4 MiB probe takes ~0.2 s to write and to read.
        let (w, r) = (0.21, 0.21);
        let f = fit_to_time(32 * MIB, 4096, 4 * MIB, w, r, t, now).expect("cut");
        // 10 s × 0.7 over 5 (4 trials + the layout): 1.4 s a trial, 0.42 s
        // per 4 MiB of write + read → 13.3 MiB, whole records.
        assert!(f.size > 12 * MIB && f.size < 14 * MIB, "{}", f.size);
        assert_eq!(f.size % 4096, 0);
        assert!(f.note.contains("instead of 32 MiB"), "{}", f.note);
        assert!(f.note.contains("10 s share"), "{}", f.note);
        // A fast device (2 GB/s) keeps its whole file.
        assert!(fit_to_time(32 * MIB, 4096, 4 * MIB, 0.002, 0.002, t, now).is_none());
        // No time at all: never below the floor, or one record.
        let none = crate::engine::PointTime {
            seconds: 0.0,
            trials: 4,
        };
        let f = fit_to_time(32 * MIB, 4096, 4 * MIB, w, r, none, now).unwrap();
        assert_eq!(f.size, FIT_FLOOR);
        let f = fit_to_time(32 * MIB, MIB, 4 * MIB, w, r, none, now).unwrap();
        assert_eq!(f.size, MIB);
    }

    #[test]
    fn stamps_make_sectors_and_passes_unique() {
        let mut a = vec![7u8; 2048];
        stamp_record(&mut a, 4096, 1);
        let sectors: Vec<&[u8]> = a.chunks(512).collect();
        for i in 0..sectors.len() {
            for j in i + 1..sectors.len() {
                assert_ne!(sectors[i], sectors[j]);
            }
        }
        assert_eq!(&a[512..520], &(4096u64 + 512).to_le_bytes());
        let mut b = a.clone();
        stamp_record(&mut b, 4096, 2);
        assert_ne!(a, b);
        // Short records are stamped when they can hold a stamp, left alone otherwise.
        let mut c = vec![0u8; 100];
        stamp_record(&mut c, 8, 3);
        assert_eq!(&c[..8], &8u64.to_le_bytes());
        let mut d = vec![0u8; 8];
        stamp_record(&mut d, 8, 3);
        assert_eq!(d, [0u8; 8]);
    }
}
