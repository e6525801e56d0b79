//! `io.burst`: camera-style bursts. Frames of a few MB at a fixed frame
//! rate are written through the page cache; every write's latency is
//! measured from its slot (so a stall delays and is charged to the frames
//! behind it) and Dirty/Writeback and the dirty-throttling point are
//! sampled after every frame, so write stalls can be lined up with
//! dirty-limit crossings. mode=direct-write calls write() in the pacing
//! thread; mode=io-thread hands frames to a dedicated I/O thread through a
//! bounded queue, so the pacing thread only stalls if the queue is full
//! (the frame is then dropped); mode=io-uring submits each frame's write to
//! an io_uring (see `uring_pacer`), with up to `queue` writes in flight.

use std::convert::Infallible;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, TrySendError};
use std::time::{Duration, Instant};

use crate::engine::Spec;
use crate::engine::{
    Ctx, Experiment, Footprint, Metric, MetricSpec, Needs, ParamKind, ParamSpec, Point,
    PointExtras, PointRun, Room, RunDefaults, Series, TrialValues,
};
use crate::experiments::common::uring_pacer;
use crate::experiments::common::util::{backing_note, fit_disk, pace_frames, Fit, Skipped};
use crate::observe::dirty::{self, DirtyState};
use crate::safety::AlignedBuf;
use crate::stats::LatencyRecorder;
use crate::{Error, Result};

mod params;
use params::Params;

/// One value per run (the registry makes one per lookup).
#[derive(Default)]
pub(crate) struct Burst {
    /// Numbers the points of the run, so their files never collide.
    points: AtomicU64,
}

const BUCKET_NS: u64 = 10_000_000;
const BUCKETS: usize = 11;

/// Where writers start being throttled: the kernel's own thresholds when
/// /proc/vmstat has them, else our approximation.
fn throttle_point(d: &DirtyState) -> u64 {
    match (
        d.kernel_threshold_bytes,
        d.kernel_background_threshold_bytes,
    ) {
        (Some(t), Some(b)) => t / 2 + b / 2,
        _ => d.throttle_point(),
    }
}

/// One frame's sample, taken after its write (outside the timed region).
#[derive(Debug, Clone, Copy)]
struct Sample {
    /// Slot start, seconds after t0.
    t: f64,
    latency: f64,
    dirty_wb: u64,
    throttle: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    DirectWrite,
    IoThread,
    IoUring,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::DirectWrite => "direct-write",
            Mode::IoThread => "io-thread",
            Mode::IoUring => "io-uring",
        }
    }
}

pub(crate) static SPEC: Spec = Spec {
    name: "io.burst",
    summary: "camera bursts: paced multi-MB writes through the page cache, stalls vs dirty limits",
    method: "One trial writes ceil(duration × fps) frames of `frame` random bytes, appended to a \
         new scratch file through the page cache (buffered pwrite(), never fsynced; the file is \
         unlinked after the trial, which discards its dirty pages, and a new one is used for \
         the next trial). Frame i is due at t0 + i/fps. mode=direct-write: the pacing thread \
         sleeps until the slot and calls pwrite() itself; latency = completion − slot start \
         (not − actual start, so a stall is charged to every frame queued behind it). \
         mode=io-thread: at each slot the pacing thread hands the frame (index and slot time; \
         the data buffer belongs to the I/O thread, no copy) to a dedicated I/O thread through \
         a bounded queue of `queue` frames with try_send; latency = time to enqueue from the \
         slot start; a full queue drops the frame (dropped_frames); the I/O thread's own lag \
         (its write completion − slot start) is reported as io_lag_p99/io_lag_max and the \
         deepest queue seen as max_backlog. A stall is a frame whose latency exceeds 1/fps \
         (frames that could not start before t0 + duration + max(1 s, duration/4) are \
         abandoned and counted as stalls). After every frame, outside the timing, \
         /proc/meminfo Dirty + Writeback (system-wide) and the throttle point are sampled: \
         the throttle point is where balance_dirty_pages() starts to throttle writers, half-way \
         between the background and the hard dirty threshold (the kernel's \
         nr_dirty_threshold and nr_dirty_background_threshold from /proc/vmstat when \
         present). stalls_at_limit counts stalls whose frame saw Dirty + Writeback at or above \
         the throttle point (before or after its write). Series (last trial): dirty+writeback, \
         throttle point and latency against time, so stalls can be lined up with crossings. \
         mode=io-uring: at each slot the pacing thread submits the frame's write to an \
         io_uring (one buffer per write in flight, at most `queue`; a frame due while all are \
         busy is dropped) and reaps completions while it waits for the next slot; latency = \
         time to submit (the kernel copies the frame into the page cache inline when it can and \
         hands the write to its io-wq workers when it would block, e.g. on dirty throttling), \
         io_lag = completion − slot start, as for io-thread. Defaults: 4 MiB \
         frames at 15 fps (60 MiB/s) for 20 s, direct-write and io-thread (io-uring on request), 1 trial each, no warm-up: about \
         45 s; on a machine with a lot of RAM the default 1.2 GB never reaches the dirty \
         limits — lower vm.dirty_bytes (tunelab tune) or write for longer to see throttling.",
    params: &[
            ParamSpec::new("frame", ParamKind::Size, "4M", "bytes per frame")
                .range(4096.0, (1u64 << 30) as f64),
            ParamSpec::new("fps", ParamKind::Float, "15", "frames per second").range(0.1, 1000.0),
            ParamSpec::new(
                "duration",
                ParamKind::Duration,
                "20s",
                "length of the burst = one trial",
            )
            .range(0.2, 3600.0),
            ParamSpec::new(
                "mode",
                ParamKind::Choice(&["direct-write", "io-thread", "io-uring"]),
                "direct-write,io-thread",
                "write() in the pacing thread, hand frames to an I/O thread, or submit them \
                 to an io_uring (where the kernel allows it)",
            ),
            ParamSpec::new(
                "queue",
                ParamKind::Count,
                "4",
                "io-thread: frames the queue holds; io-uring: writes in flight (one buffer \
                 each); beyond that frames are dropped",
            )
            .range(1.0, 4096.0),
        ],
    metrics: &[
            MetricSpec::lower(
                "p99_latency",
                "s",
                "99th percentile frame latency from the slot (write, or enqueue for io-thread)",
            ),
            MetricSpec::lower("max_latency", "s", "worst frame latency from the slot"),
            MetricSpec::lower("stalls", "count", "frames whose latency exceeded 1/fps"),
            MetricSpec::lower(
                "stalls_at_limit",
                "count",
                "stalls while Dirty + Writeback was at or above the throttle point",
            ),
            MetricSpec::lower(
                "dropped_frames",
                "count",
                "io-thread/io-uring: frames dropped because the queue was full",
            ),
            MetricSpec::lower(
                "io_lag_p99",
                "s",
                "io-thread/io-uring: 99th percentile of write completion − slot start",
            ),
            MetricSpec::lower(
                "io_lag_max",
                "s",
                "io-thread/io-uring: worst write completion − slot start",
            ),
            MetricSpec::lower(
                "max_backlog",
                "count",
                "io-thread/io-uring: deepest queue (frames handed over, not yet written)",
            ),
            MetricSpec::higher(
                "write_throughput",
                "B/s",
                "frame bytes written per second up to the last write's completion",
            ),
            MetricSpec::lower(
                "peak_dirty",
                "B",
                "highest Dirty + Writeback sampled (system-wide)",
            ),
        ],
    needs: Needs::SCRATCH,
    defaults: RunDefaults::ONE_RECORDING,
    hidden: false,
};

// The metrics a trial emits, checked against the Spec while compiling.
const DROPPED_FRAMES: Metric = SPEC.emits("dropped_frames");
const IO_LAG_MAX: Metric = SPEC.emits("io_lag_max");
const IO_LAG_P99: Metric = SPEC.emits("io_lag_p99");
const MAX_BACKLOG: Metric = SPEC.emits("max_backlog");
const MAX_LATENCY: Metric = SPEC.emits("max_latency");
const P99_LATENCY: Metric = SPEC.emits("p99_latency");
const PEAK_DIRTY: Metric = SPEC.emits("peak_dirty");
const STALLS: Metric = SPEC.emits("stalls");
const STALLS_AT_LIMIT: Metric = SPEC.emits("stalls_at_limit");
const WRITE_THROUGHPUT: Metric = SPEC.emits("write_throughput");

impl Experiment for Burst {
    fn spec(&self) -> &'static Spec {
        &SPEC
    }
    fn scratch_bytes(&self, p: &Point) -> u64 {
        // The burst is shortened to the free space in prepare(); one
        // second of frames is the least.
        Params::parse(p).map_or(0, |q| q.frame * q.fps.ceil() as u64)
    }
    fn trial_seconds(&self, p: &Point) -> Option<f64> {
        Params::parse(p).ok().map(|q| q.duration)
    }
    fn footprint(&self, p: &Point, room: &Room) -> Footprint {
        let Ok(q) = Params::parse(p) else {
            return Footprint::default();
        };
        let frame = q.frame;
        Footprint {
            trial_written: fitted_frames(&q, room).map_or(0, |(n, _)| n * frame),
            stored: fitted_frames(&q, room).map_or(0, |(n, _)| n * frame),
            peak_memory: match q.mode {
                Mode::DirectWrite => frame,
                _ => frame * (q.queue + 1),
            },
            ..Footprint::default()
        }
    }
    fn prepare(&self, ctx: &Ctx, p: &Point) -> Result<Box<dyn PointRun>> {
        let q = Params::parse(p)?;
        let (frame, fps) = (q.frame as usize, q.fps);
        let (frames, fit_note) = fitted_frames(&q, &Room::for_ctx(ctx))?;
        let duration = frames as f64 / fps;
        let scratch = ctx.scratch()?;
        scratch.ensure_space(frames * frame as u64)?;
        let mut notes: Vec<String> = fit_note.into_iter().collect();
        notes.push(backing_note(ctx));
        dirty::read()
            .map_err(|e| Error::environment(format!("cannot read the dirty page state: {e}")))?;
        let mode = q.mode;
        let mut uring_bufs = Vec::new();
        if mode == Mode::IoUring {
            // A kernel without io_uring (or with it disabled) skips the
            // point with the reason; the other modes still run.
            if let Err(e) = uring_pacer::available() {
                return Ok(Box::new(Skipped(format!(
                    "mode=io-uring: io_uring is not available here ({e}); mode=io-thread \
                     measures the same hand-over with a thread"
                ))));
            }
            for k in 0..q.queue {
                uring_bufs.push(AlignedBuf::random(frame, 31 + k)?);
            }
        }
        Ok(Box::new(BurstRun {
            id: self.points.fetch_add(1, Ordering::Relaxed),
            dir: scratch.path().to_path_buf(),
            frame,
            fps,
            duration,
            frames,
            notes,
            mode,
            uring_bufs,
            queue: q.queue as usize,
            buf: Some(AlignedBuf::random(frame, 31)?),
            trials: 0,
            lat: LatencyRecorder::with_buckets(BUCKET_NS, BUCKETS),
            io_lag: LatencyRecorder::with_buckets(BUCKET_NS, BUCKETS),
            samples: Vec::new(),
            io_samples: Vec::new(),
        }))
    }
}

/// Frames of one trial: ceil(duration × fps), fewer when they would not
/// fit in half the target's free space (at least one second's worth).
fn fitted_frames(q: &Params, room: &Room) -> Result<(u64, Option<String>)> {
    let (frame, fps) = (q.frame, q.fps);
    let want = (q.duration * fps).ceil().max(1.0) as u64;
    let floor = fps.ceil().max(1.0) as u64;
    let Fit { value, note } = fit_disk(
        "io.burst frames",
        want * frame,
        1,
        frame,
        floor.min(want) * frame,
        room,
    )?;
    Ok((
        value / frame.max(1),
        note.map(|n| {
            format!(
                "{n}: the burst lasts {:.1} s instead of {:.1} s",
                (value / frame.max(1)) as f64 / fps,
                want as f64 / fps
            )
        }),
    ))
}

struct BurstRun {
    id: u64,
    dir: PathBuf,
    frame: usize,
    fps: f64,
    duration: f64,
    frames: u64,
    notes: Vec<String>,
    mode: Mode,
    queue: usize,
    buf: Option<AlignedBuf>,
    /// mode=io-uring: one buffer per write in flight.
    uring_bufs: Vec<AlignedBuf>,
    trials: u64,
    /// Merged over trials.
    lat: LatencyRecorder,
    io_lag: LatencyRecorder,
    /// Last trial's per-frame samples (pacing thread).
    samples: Vec<Sample>,
    /// Last trial's io-thread (t, lag) pairs.
    io_samples: Vec<(f64, f64)>,
}

/// The I/O thread's result: (lag recorder, (t, lag) per frame, bytes
/// written, seconds from t0 to the last completion).
type IoOutcome = (LatencyRecorder, Vec<(f64, f64)>, u64, f64);

impl BurstRun {
    fn sample(t: f64, latency: f64) -> Sample {
        let d = dirty::read().unwrap_or_default();
        Sample {
            t,
            latency,
            dirty_wb: d.dirty_bytes + d.writeback_bytes,
            throttle: throttle_point(&d),
        }
    }
}

impl PointRun for BurstRun {
    fn warmup_done(&mut self) {
        self.lat = LatencyRecorder::with_buckets(BUCKET_NS, BUCKETS);
        self.io_lag = LatencyRecorder::with_buckets(BUCKET_NS, BUCKETS);
    }

    fn trial(&mut self, ctx: &Ctx) -> Result<TrialValues> {
        ctx.check_cancel()?;
        self.trials += 1;
        let name = format!("burst-{}-{}", self.id, self.trials);
        let path = self.dir.join(&name);
        let file = ctx.scratch()?.create_file(&name, 0)?;
        let (frames, frame, fps) = (self.frames, self.frame, self.fps);
        let period = 1.0 / fps;
        let mut lat = LatencyRecorder::with_buckets(BUCKET_NS, BUCKETS);
        let mut samples = Vec::with_capacity(frames as usize);
        let mut buf = self.buf.take().expect("frame buffer");
        let t0 = Instant::now() + Duration::from_millis(10);
        let hard_stop =
            t0 + Duration::from_secs_f64(frames as f64 / fps + (self.duration / 4.0).max(1.0));
        let mut dropped = 0u64;
        let mut max_backlog = 0u64;
        let mut abandoned = 0u64;
        let (bytes, last_done, io_out) = match self.mode {
            Mode::DirectWrite => {
                let mut written = 0u64;
                let mut last = 0.0;
                let paced = pace_frames(frames, t0, fps, hard_stop, |i, slot| {
                    file.write_all_at(&buf.as_slice()[..frame], i * frame as u64)?;
                    let done = Instant::now();
                    let l = done.saturating_duration_since(slot);
                    lat.record(l);
                    written += frame as u64;
                    last = (done - t0).as_secs_f64();
                    samples.push(Self::sample((slot - t0).as_secs_f64(), l.as_secs_f64()));
                    Ok(true)
                });
                match paced {
                    Ok(n) => abandoned = n,
                    Err(e) => {
                        self.buf = Some(buf);
                        drop(file);
                        let _ = std::fs::remove_file(&path);
                        return Err(Error::io("cannot write", &path, e));
                    }
                }
                (written, last, None)
            }
            Mode::IoThread => {
                let (tx, rx) = sync_channel::<(u64, Instant)>(self.queue);
                let done_count = AtomicU64::new(0);
                let (done_ref, file_ref) = (&done_count, &file);
                let out = std::thread::scope(|s| {
                    let io = s.spawn(move || -> std::io::Result<(IoOutcome, AlignedBuf)> {
                        let mut lag = LatencyRecorder::with_buckets(BUCKET_NS, BUCKETS);
                        let mut series = Vec::with_capacity(frames as usize);
                        let (mut written, mut last) = (0u64, 0.0);
                        for (i, slot) in rx.iter() {
                            file_ref.write_all_at(&buf.as_slice()[..frame], i * frame as u64)?;
                            let done = Instant::now();
                            done_ref.fetch_add(1, Ordering::Relaxed);
                            let l = done.saturating_duration_since(slot);
                            lag.record(l);
                            series.push(((slot - t0).as_secs_f64(), l.as_secs_f64()));
                            written += frame as u64;
                            last = (done - t0).as_secs_f64();
                        }
                        Ok(((lag, series, written, last), buf))
                    });
                    let mut sent = 0u64;
                    let paced = pace_frames::<Infallible>(frames, t0, fps, hard_stop, |i, slot| {
                        let r = tx.try_send((i, slot));
                        let done = Instant::now();
                        match r {
                            Ok(()) => sent += 1,
                            Err(TrySendError::Full(_)) => dropped += 1,
                            // The I/O thread failed: its error is reported below.
                            Err(TrySendError::Disconnected(_)) => return Ok(false),
                        }
                        let l = done.saturating_duration_since(slot);
                        lat.record(l);
                        let backlog = sent.saturating_sub(done_count.load(Ordering::Relaxed));
                        max_backlog = max_backlog.max(backlog);
                        samples.push(Self::sample((slot - t0).as_secs_f64(), l.as_secs_f64()));
                        Ok(true)
                    });
                    let Ok(n) = paced;
                    abandoned = n;
                    drop(tx);
                    io.join()
                });
                match out {
                    Ok(Ok((o, b))) => {
                        buf = b;
                        let (bytes, last) = (o.2, o.3);
                        (bytes, last, Some(o))
                    }
                    Ok(Err(e)) => {
                        let _ = std::fs::remove_file(&path);
                        self.buf = AlignedBuf::random(frame, 31).ok();
                        return Err(Error::io("cannot write", &path, e));
                    }
                    Err(_) => {
                        let _ = std::fs::remove_file(&path);
                        return Err(Error::measurement("io.burst: the I/O thread panicked"));
                    }
                }
            }
            Mode::IoUring => {
                let pacer = uring_pacer::Pacer {
                    file: &file,
                    frame,
                    frames,
                    fps,
                    t0,
                    hard_stop,
                    bucket_ns: BUCKET_NS,
                    buckets: BUCKETS,
                };
                let out = uring_pacer::pace(&pacer, &self.uring_bufs, |slot, l| {
                    lat.record(l);
                    samples.push(Self::sample((slot - t0).as_secs_f64(), l.as_secs_f64()));
                });
                let h = match out {
                    Ok(h) => h,
                    Err(e) => {
                        self.buf = Some(buf);
                        let _ = std::fs::remove_file(&path);
                        return Err(e);
                    }
                };
                dropped = h.dropped;
                max_backlog = h.max_backlog;
                abandoned = h.abandoned;
                (
                    h.written,
                    h.last,
                    Some((h.lag, h.series, h.written, h.last)),
                )
            }
        };
        self.buf = Some(buf);
        // Not timed: unlink discards the trial's dirty pages.
        let _ = std::fs::remove_file(&path);
        ctx.check_cancel()?;
        let data = lat.to_data("");
        let stalls = samples.iter().filter(|s| s.latency > period).count() as u64 + abandoned;
        let mut at_limit = 0u64;
        for (k, s) in samples.iter().enumerate() {
            let before = k.checked_sub(1).map(|j| samples[j].dirty_wb).unwrap_or(0);
            if s.latency > period && s.dirty_wb.max(before) >= s.throttle {
                at_limit += 1;
            }
        }
        let peak = samples.iter().map(|s| s.dirty_wb).max().unwrap_or(0);
        let mut v = TrialValues::new()
            .with(P99_LATENCY, data.percentile(99.0).unwrap_or(0.0))
            .with(MAX_LATENCY, data.max)
            .with(STALLS, stalls as f64)
            .with(STALLS_AT_LIMIT, at_limit as f64)
            .with(WRITE_THROUGHPUT, bytes as f64 / last_done.max(1e-9))
            .with(PEAK_DIRTY, peak as f64);
        if let Some((io_lag, io_series, _, _)) = io_out {
            let d = io_lag.to_data("");
            v.set(DROPPED_FRAMES, dropped as f64);
            v.set(IO_LAG_P99, d.percentile(99.0).unwrap_or(0.0));
            v.set(IO_LAG_MAX, d.max);
            v.set(MAX_BACKLOG, max_backlog as f64);
            self.io_lag.merge(&io_lag);
            self.io_samples = io_series;
        }
        self.lat.merge(&lat);
        self.samples = samples;
        Ok(v)
    }

    fn finish(&mut self, _ctx: &Ctx) -> Result<PointExtras> {
        let mode = self.mode.name();
        let series_of = |name: &str, y_label: &str, y_unit: &str, points: Vec<(f64, f64)>| Series {
            name: format!("{name} mode={mode}"),
            x_label: "time".into(),
            x_unit: "s".into(),
            y_label: y_label.into(),
            y_unit: y_unit.into(),
            points,
        };
        let mut series = vec![
            series_of(
                "dirty+writeback",
                "dirty+writeback",
                "B",
                self.samples
                    .iter()
                    .map(|s| (s.t, s.dirty_wb as f64))
                    .collect(),
            ),
            series_of(
                "throttle point",
                "throttle point",
                "B",
                self.samples
                    .iter()
                    .map(|s| (s.t, s.throttle as f64))
                    .collect(),
            ),
            series_of(
                "write latency",
                "latency",
                "s",
                self.samples.iter().map(|s| (s.t, s.latency)).collect(),
            ),
        ];
        let mut histograms = vec![self.lat.to_data(match self.mode {
            Mode::DirectWrite => "write latency",
            Mode::IoThread => "enqueue latency",
            Mode::IoUring => "submit latency",
        })];
        if self.mode != Mode::DirectWrite {
            let lag = format!("{mode} lag");
            series.push(series_of(
                &lag,
                "lag",
                "s",
                std::mem::take(&mut self.io_samples),
            ));
            histograms.push(self.io_lag.to_data(&format!("{mode} write completion lag")));
        }
        let throttle = self.samples.first().map(|s| s.throttle).unwrap_or(0);
        let mut notes = std::mem::take(&mut self.notes);
        notes.push(format!(
            "{} frames of {} at {} fps per trial, {}; page cache, never fsynced; \
                 throttle point at start {}; Dirty/Writeback are system-wide and sampled after \
                 every frame outside the timing",
            self.frames,
            crate::units::format_size(self.frame as u64),
            self.fps,
            match self.mode {
                Mode::DirectWrite => "write() in the pacing thread".to_string(),
                Mode::IoThread => format!("I/O thread behind a queue of {} frames", self.queue),
                Mode::IoUring => format!("io_uring with up to {} writes in flight", self.queue),
            },
            crate::units::format_size(throttle)
        ));
        Ok(PointExtras {
            series,
            histograms,
            notes,
        })
    }
}
