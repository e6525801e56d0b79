//! `io.stream`: the personal-video-recorder test. A writer thread records
//! frames to a new file while a reader thread plays back frames of an
//! earlier recording, concurrently. mode=max runs both as fast as they can
//! (frames/s achieved, as in the classic study); mode=paced runs them in
//! real time, each frame due in its 1/fps slot, and measures every frame's
//! latency from its *intended* start so a stall is never hidden
//! (coordinated omission): frames completed after slot start + 1/fps are
//! deadline misses.

use rustix::fs::OFlags;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::engine::Spec;
use crate::engine::{
    Ctx, Experiment, Metric, MetricSpec, Needs, ParamKind, ParamSpec, Point, PointExtras, PointRun,
    RunDefaults, TrialValues,
};
use crate::experiments::common::background_load::{BackgroundLoad, Load, IO_LOAD_SPAN};
use crate::experiments::common::cache_control::{
    drop_file_cache, logical_block_size, open_with, DropMethod,
};
use crate::experiments::common::util::fill_file;
use crate::safety::AlignedBuf;
use crate::stats::LatencyRecorder;
use crate::{Error, Result};

mod pace;
use pace::{misses_by_second, run_stream, StreamOutcome, BUCKETS, BUCKET_NS};

/// One value per run (the registry makes one per lookup).
#[derive(Default)]
pub(crate) struct Stream {
    /// Numbers the points of the run, so their files never collide.
    points: AtomicU64,
}

/// Parse a bit rate in bits per second: `6M` = 6,000,000 b/s, `800k`,
/// `1.5M`, `2G`, `6000000`; decimal multipliers (k = 10^3, M = 10^6,
/// G = 10^9) and an optional `b`, `bit`, `bps`, `b/s` or `bit/s` suffix.
/// `B` (bytes) is refused so a byte rate is never mistaken for a bit rate.
pub(crate) fn parse_bitrate(raw: &str) -> Option<f64> {
    let mut s = raw.trim();
    for suffix in ["bit/s", "b/s", "bps", "bit", "b"] {
        if let Some(t) = s.strip_suffix(suffix) {
            s = t;
            break;
        }
    }
    let (num, mult) = match s.char_indices().last()? {
        (i, 'k' | 'K') => (&s[..i], 1e3),
        (i, 'M') => (&s[..i], 1e6),
        (i, 'G' | 'g') => (&s[..i], 1e9),
        _ => (s, 1.0),
    };
    let v: f64 = num.trim().parse().ok()?;
    let v = v * mult;
    (v.is_finite() && v > 0.0).then_some(v)
}

pub(crate) static SPEC: Spec = Spec {
    name: "io.stream",
    summary: "record and play back a video stream concurrently (PVR): frames/s or deadline misses",
    method: "Frame size = bitrate / 8 / fps bytes (bitrate in bits per second: 6M = 6,000,000 b/s \
         = 25,000-byte frames at 30 fps); with direct=yes it is rounded up to the device's \
         logical block size (the notes give the size used). prepare() writes the 'earlier \
         recording' (duration × fps frames of random data) in the scratch directory, syncs the \
         file system (syncfs, so the flusher does the writeback and a write throttle does not \
         slow preparation); the file is dropped from the page cache before every trial (root: \
         drop_caches, else fadvise DONTNEED; the notes say which; not timed), so playback reads \
         come from the device. One trial streams for \
         `duration`: a writer thread appends frames to a new file with pwrite() while a reader \
         thread reads the recording frame by frame with pread(). direct=no (default) uses the \
         page cache as a real recorder does: playback is a cold read through read-ahead, issued \
         by the reader itself, so a device read throttle (cgroup v1 blkio) bites; recording \
         lands in the page cache and is written back later by the kernel's flusher (not \
         timed, never fsynced, and not subject to a v1 write throttle). direct=yes opens both \
         files with O_DIRECT so every frame is device I/O in both directions. mode=max: each \
         thread does its frames back to back until all are done or `duration` has passed; \
         record_fps / playback_fps = frames completed / seconds to the last one; latency = \
         service time of the frame. mode=paced: frame i of each stream is due at t0 + i/fps; \
         its latency is completion time − intended slot start (not − actual start), so a \
         stall makes every later frame late too (coordinated omission is not hidden); a frame \
         completed more than 1/fps after its slot start missed its deadline; frames that \
         cannot start before t0 + duration + max(1 s, duration/4) are abandoned and also \
         count as missed; fps = frames completed / max(duration, time to the last one). \
         missed_frames counts both streams, miss_ratio = missed / (2 × frames). Latencies go \
         into 10 ms buckets (0–9, …, 90–99, 100+ ms) and an HDR histogram per stream, merged \
         over trials. load=cpu|memory|io runs a built-in background load during the trial: \
         one spinning thread per CPU, a thread writing every cache line of a 256 MiB buffer \
         (or half the memory budget: MemAvailable and the memory cgroup), or a thread rewriting a 64 MiB scratch file in 1 MiB blocks \
         with fdatasync every 8 MiB. One trial lasts `duration` (default 60 s), so the \
         default run is 1 trial, no warm-up: about 60-70 s with preparation; use \
         -p duration=5s for quick runs and --trials N for statistics.",
    params: &[
            ParamSpec::new(
                "mode",
                ParamKind::Choice(&["max", "paced"]),
                "paced",
                "max: as fast as possible (frames/s); paced: real time, deadlines",
            ),
            ParamSpec::new(
                "bitrate",
                ParamKind::Text,
                "6M",
                "stream bit rate in bits per second, decimal: 6M = 6,000,000 b/s, 800k, 1.5M",
            ),
            ParamSpec::new("fps", ParamKind::Float, "30", "frames per second").range(1.0, 1000.0),
            ParamSpec::new(
                "duration",
                ParamKind::Duration,
                "60s",
                "length of the stream = one trial",
            )
            .range(0.5, 3600.0),
            ParamSpec::new(
                "direct",
                ParamKind::Bool,
                "no",
                "O_DIRECT for recording and playback (default: page cache, cold playback)",
            ),
            ParamSpec::new(
                "load",
                ParamKind::Choice(Load::CHOICES),
                "none",
                "background load during the trial: none, cpu, memory or io",
            ),
        ],
    metrics: &[
            MetricSpec::higher("record_fps", "ops/s", "frames recorded per second"),
            MetricSpec::higher("playback_fps", "ops/s", "frames played back per second"),
            MetricSpec::lower(
                "missed_frames",
                "count",
                "paced: frames (both streams) completed after slot start + 1/fps, or abandoned",
            ),
            MetricSpec::lower(
                "miss_ratio",
                "fraction",
                "paced: missed frames / frames due (both streams)",
            ),
            MetricSpec::higher("frames_due", "count", "paced: frames due (both streams), miss_ratio's chances"),
            MetricSpec::lower(
                "miss_ratio_dispersion",
                "ratio",
                "paced: how much more the misses varied between the trial's seconds than chance \
                 (Pearson's chi-square over k - 1 of the 1 s blocks, at least 1): bursts",
            ),
            MetricSpec::lower("record_missed", "count", "paced: recorded frames missed"),
            MetricSpec::lower("playback_missed", "count", "paced: played frames missed"),
            MetricSpec::lower(
                "record_p99",
                "s",
                "99th percentile frame latency, recording",
            ),
            MetricSpec::lower(
                "playback_p99",
                "s",
                "99th percentile frame latency, playback",
            ),
        ],
    needs: Needs::SCRATCH,
    defaults: RunDefaults::ONE_RECORDING,
    hidden: false,
};

// The metrics a trial emits, checked against the Spec while compiling.
const FRAMES_DUE: Metric = SPEC.emits("frames_due");
const MISSED_FRAMES: Metric = SPEC.emits("missed_frames");
const MISS_RATIO: Metric = SPEC.emits("miss_ratio");
const MISS_RATIO_DISPERSION: Metric = SPEC.emits("miss_ratio_dispersion");
const PLAYBACK_FPS: Metric = SPEC.emits("playback_fps");
const PLAYBACK_MISSED: Metric = SPEC.emits("playback_missed");
const PLAYBACK_P99: Metric = SPEC.emits("playback_p99");
const RECORD_FPS: Metric = SPEC.emits("record_fps");
const RECORD_MISSED: Metric = SPEC.emits("record_missed");
const RECORD_P99: Metric = SPEC.emits("record_p99");

/// A point's parameters, read by name once, here.
struct Params {
    /// As given (for messages), and in bits per second.
    bitrate: String,
    bps: f64,
    fps: f64,
    duration: f64,
    direct: bool,
    load: Load,
    paced: bool,
}

impl Params {
    /// A bitrate that is not one is a usage error here.
    fn parse(p: &Point) -> Result<Params> {
        let raw = p.text("bitrate")?;
        let Some(bps) = parse_bitrate(raw) else {
            return Err(Error::usage(format!(
                "io.stream: bitrate '{raw}' is not a bit rate (e.g. 6M = 6,000,000 bits/s, 800k)"
            )));
        };
        Ok(Params {
            bitrate: raw.to_string(),
            bps,
            fps: p.f64("fps")?,
            duration: p.f64("duration")?,
            direct: p.bool("direct")?,
            load: Load::parse(p.text("load")?),
            paced: p.text("mode")? == "paced",
        })
    }
}

impl Experiment for Stream {
    fn spec(&self) -> &'static Spec {
        &SPEC
    }
    fn validate(&self, p: &Point) -> Result<()> {
        let q = Params::parse(p)?;
        let raw = &q.bitrate;
        let frame = q.bps / 8.0 / q.fps;
        if !(1.0..=(256u64 << 20) as f64).contains(&frame) {
            return Err(Error::usage(format!(
                "io.stream: bitrate {raw} at {} fps gives {frame:.0}-byte frames; choose a \
                 bitrate and fps giving 1 B … 256 MiB per frame",
                q.fps
            )));
        }
        Ok(())
    }
    fn scratch_bytes(&self, p: &Point) -> u64 {
        let Ok(q) = Params::parse(p) else {
            return 0;
        };
        let one = (q.bps / 8.0 * q.duration) as u64 + (1 << 20) + (q.fps as u64) * 4096;
        let io = if q.load == Load::Io { IO_LOAD_SPAN } else { 0 };
        2 * one + io
    }
    fn trial_seconds(&self, p: &Point) -> Option<f64> {
        Params::parse(p).ok().map(|q| q.duration)
    }
    fn prepare(&self, ctx: &Ctx, p: &Point) -> Result<Box<dyn PointRun>> {
        let q = Params::parse(p)?;
        let (bps, fps, duration, direct, load) = (q.bps, q.fps, q.duration, q.direct, q.load);
        let scratch = ctx.scratch()?;
        let mut frame = (bps / 8.0 / fps).ceil() as u64;
        if direct {
            let lbs = logical_block_size(scratch.path()).max(512);
            frame = frame.div_ceil(lbs) * lbs;
        }
        let frames = (duration * fps).ceil().max(1.0) as u64;
        let size = frames * frame;
        scratch.ensure_space(self.scratch_bytes(p).max(2 * size))?;
        // Names unique per point: the scratch directory is shared by a sweep.
        let id = self.points.fetch_add(1, Ordering::Relaxed);
        let rec_name = format!("stream-{id}-recording");
        let path = scratch.file_path(&rec_name);
        let mut f = scratch.create_file(&rec_name, 0)?;
        fill_file(&mut f, &path, size, 17)?;
        // syncfs: the flusher writes the recording back, so a cgroup v1
        // write throttle on this process does not slow preparation down.
        let _ = rustix::fs::syncfs(&f);
        // No cache drop here: every trial drops the recording's pages right
        // before it reads (a second sync + drop_caches cost 0.3-1.5 s of a
        // quick study and bought nothing). Until then the method is the one
        // the trial will use.
        let drop_method = if ctx.is_root {
            DropMethod::DropCaches
        } else {
            DropMethod::Fadvise
        };
        drop(f);
        let load_path = scratch.file_path(&format!("stream-{id}-load-io"));
        let io_load = if load == Load::Io {
            Some(scratch.create_file(&format!("stream-{id}-load-io"), 0)?)
        } else {
            None
        };
        Ok(Box::new(StreamRun {
            id,
            recording: path,
            load_path,
            record_dir: scratch.path().to_path_buf(),
            frame: frame as usize,
            frames,
            fps,
            duration,
            paced: q.paced,
            direct,
            load,
            io_load,
            wbuf: Some(AlignedBuf::random(frame as usize, 23)?),
            rbuf: Some(AlignedBuf::zeroed(frame as usize)?),
            drop_method,
            trials: 0,
            rec_total: LatencyRecorder::with_buckets(BUCKET_NS, BUCKETS),
            play_total: LatencyRecorder::with_buckets(BUCKET_NS, BUCKETS),
            abandoned: 0,
        }))
    }
}

struct StreamRun {
    id: u64,
    recording: PathBuf,
    load_path: PathBuf,
    record_dir: PathBuf,
    frame: usize,
    frames: u64,
    fps: f64,
    duration: f64,
    paced: bool,
    direct: bool,
    load: Load,
    io_load: Option<File>,
    wbuf: Option<AlignedBuf>,
    rbuf: Option<AlignedBuf>,
    drop_method: DropMethod,
    trials: u64,
    rec_total: LatencyRecorder,
    play_total: LatencyRecorder,
    abandoned: u64,
}

fn io_err<'a>(what: &'a str, path: &'a Path) -> impl Fn(std::io::Error) -> Error + 'a {
    move |e| Error::io(what, path, e)
}

impl PointRun for StreamRun {
    fn warmup_done(&mut self) {
        self.rec_total = LatencyRecorder::with_buckets(BUCKET_NS, BUCKETS);
        self.play_total = LatencyRecorder::with_buckets(BUCKET_NS, BUCKETS);
    }

    fn trial(&mut self, ctx: &Ctx) -> Result<TrialValues> {
        ctx.check_cancel()?;
        // Not timed: evict the recording (the last trial read it in).
        {
            let f = File::open(&self.recording).map_err(io_err("cannot open", &self.recording))?;
            self.drop_method = drop_file_cache(&f, &self.recording, ctx.is_root, &ctx.cache_drops)?;
        }
        self.trials += 1;
        let rec_name = format!("stream-{}-record-{}", self.id, self.trials);
        let rec_path = self.record_dir.join(&rec_name);
        let flags = if self.direct {
            OFlags::DIRECT.bits() as i32
        } else {
            0
        };
        let writer = ctx.scratch()?.create_file(&rec_name, flags)?;
        let reader = open_with(&self.recording, false, flags)?;
        let (frames, frame, fps, paced) = (self.frames, self.frame, self.fps, self.paced);
        let wbuf = self.wbuf.take().expect("write buffer");
        let mut rbuf = self.rbuf.take().expect("read buffer");
        let _load = BackgroundLoad::start(self.load, self.io_load.as_ref())?;
        // Both threads start at t0, a moment from now.
        let t0 = Instant::now() + Duration::from_millis(20);
        let last_slot = frames as f64 / fps;
        let hard_stop = if paced {
            t0 + Duration::from_secs_f64(last_slot + (self.duration / 4.0).max(1.0))
        } else {
            t0 + Duration::from_secs_f64(self.duration)
        };
        let data: &[u8] = &wbuf.as_slice()[..frame];
        let buf: &mut [u8] = &mut rbuf.as_mut_slice()[..frame];
        let (wf, rf) = (&writer, &reader);
        let (rec, play) = std::thread::scope(|s| {
            let w = s.spawn(move || {
                run_stream(frames, fps, paced, t0, hard_stop, |i| {
                    wf.write_all_at(data, i * frame as u64)
                })
            });
            let r = s.spawn(move || {
                run_stream(frames, fps, paced, t0, hard_stop, |i| {
                    let mut done = 0;
                    while done < frame {
                        let n = rf.read_at(&mut buf[done..], i * frame as u64 + done as u64)?;
                        if n == 0 {
                            return Err(std::io::Error::new(
                                std::io::ErrorKind::UnexpectedEof,
                                "recording shorter than expected",
                            ));
                        }
                        done += n;
                    }
                    std::hint::black_box(&buf[..]);
                    Ok(())
                })
            });
            (w.join(), r.join())
        });
        drop(_load);
        self.wbuf = Some(wbuf);
        self.rbuf = Some(rbuf);
        // Not timed: the new recording goes (unlink discards its dirty pages).
        drop(writer);
        let _ = std::fs::remove_file(&rec_path);
        ctx.check_cancel()?;
        let panicked = || Error::measurement("io.stream: a stream thread panicked");
        let rec = rec
            .map_err(|_| panicked())?
            .map_err(io_err("cannot write", &rec_path))?;
        let play = play
            .map_err(|_| panicked())?
            .map_err(io_err("cannot read", &self.recording))?;
        let fps_of = |o: &StreamOutcome| {
            let secs = if paced {
                o.last_done.max(last_slot)
            } else {
                o.last_done
            };
            o.completed as f64 / secs.max(1e-9)
        };
        let p99 = |o: &StreamOutcome| o.lat.to_data("").percentile(99.0).unwrap_or(f64::INFINITY);
        let mut v = TrialValues::new()
            .with(RECORD_FPS, fps_of(&rec))
            .with(PLAYBACK_FPS, fps_of(&play));
        if paced {
            let (rm, pm) = (frames - rec.on_time(), frames - play.on_time());
            v.set(MISSED_FRAMES, (rm + pm) as f64);
            v.set(MISS_RATIO, (rm + pm) as f64 / (2 * frames) as f64);
            v.set(FRAMES_DUE, (2 * frames) as f64);
            let blocks = misses_by_second(frames, fps, &rec, &play);
            v.set(
                MISS_RATIO_DISPERSION,
                crate::stats::proportion::dispersion(&blocks),
            );
            v.set(RECORD_MISSED, rm as f64);
            v.set(PLAYBACK_MISSED, pm as f64);
        }
        v.set(RECORD_P99, p99(&rec));
        v.set(PLAYBACK_P99, p99(&play));
        self.abandoned += (frames - rec.completed) + (frames - play.completed);
        self.rec_total.merge(&rec.lat);
        self.play_total.merge(&play.lat);
        Ok(v)
    }

    fn finish(&mut self, _ctx: &Ctx) -> Result<PointExtras> {
        let mut notes = vec![
            format!(
                "frame {} B ({:.0} b/s at {} fps), {} frames per stream per trial, {}; {}",
                self.frame,
                self.frame as f64 * 8.0 * self.fps,
                self.fps,
                self.frames,
                if self.direct {
                    "O_DIRECT recording and playback"
                } else {
                    "page cache: recording buffered (never fsynced, unlinked after the trial), \
                     playback cold through read-ahead"
                },
                if self.paced {
                    "paced: latency from the intended slot start, deadline 1/fps"
                } else {
                    "max: frames back to back, latency = service time"
                }
            ),
            self.drop_method.note().to_string(),
        ];
        if self.abandoned > 0 {
            notes.push(format!(
                "{} frames (all trials, both streams) were not completed before the stop \
                 (t0 + duration{}); paced mode counts them as missed",
                self.abandoned,
                if self.paced { " + grace" } else { "" }
            ));
        }
        if self.load != Load::None {
            notes.push(format!(
                "background load during every trial: {}",
                match self.load {
                    Load::Cpu => "cpu (one spinning thread per CPU)",
                    Load::Memory => "memory (a thread writing every cache line of a large buffer)",
                    _ => "io (a thread rewriting a 64 MiB scratch file, fdatasync every 8 MiB)",
                }
            ));
        }
        Ok(PointExtras {
            histograms: vec![
                self.rec_total.to_data("record frame latency"),
                self.play_total.to_data("playback frame latency"),
            ],
            notes,
            ..Default::default()
        })
    }
}

impl Drop for StreamRun {
    fn drop(&mut self) {
        // The scratch directory goes at the end of the run; a sweep's
        // points should not pile up their recordings until then.
        self.io_load = None;
        let _ = std::fs::remove_file(&self.recording);
        let _ = std::fs::remove_file(&self.load_path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bitrates_are_bits_per_second() {
        let bits = [
            ("6M", 6e6),
            ("6Mb/s", 6e6),
            ("800k", 8e5),
            ("1.5Mbps", 1.5e6),
            ("6000000", 6e6),
        ];
        for (raw, bps) in bits {
            assert_eq!(parse_bitrate(raw), Some(bps), "{raw}");
        }
        // Bytes, zero and words are not bit rates.
        for raw in ["6MB", "0", "fast"] {
            assert_eq!(parse_bitrate(raw), None, "{raw}");
        }
    }

    #[test]
    fn background_load_stops() {
        let l = BackgroundLoad::start(Load::Cpu, None).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        drop(l);
    }
}
