//! `io.cache`: the page cache vs the device. (a) O_DIRECT|O_SYNC large
//! writes give the device's raw rate; (b) buffered writes of an
//! application-sized record over a short run that fits under the dirty
//! limit look much faster; (c) the same over a run well past the limit
//! converge to the device rate. A short buffered benchmark lies.

use rustix::fs::OFlags;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::time::Instant;

use crate::engine::Spec;
use crate::engine::{
    Ctx, Experiment, Footprint, Metric, MetricSpec, Needs, ParamKind, ParamSpec, Point,
    PointExtras, PointRun, Room, RunDefaults, Series, TrialValues,
};
use crate::experiments::common::cache_control::{open_with, IoMode};
use crate::experiments::common::util::{backing_note, fill_file, fit_disk};
use crate::observe::dirty;
use crate::safety::AlignedBuf;
use crate::units::format_size;
use crate::{Error, Result};

/// Name and the metrics `advise` reads, as constants so a rename cannot
/// silently drop a finding (advise::evidence checks them against the registry).
pub(crate) const NAME: &str = "io.cache";
pub(crate) const METRIC_DIRECT_THROUGHPUT: &str = "direct_throughput";

pub(crate) struct Cache;

const MIB: u64 = 1 << 20;

/// The short and long run sizes, each either asked for or chosen from the
/// dirty thresholds (`0 = auto`), and the thresholds they were chosen from.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Sizes {
    short: u64,
    long: u64,
    short_auto: bool,
    long_auto: bool,
    background: u64,
    hard: u64,
}

impl Sizes {
    /// `short`/`long` as given (0 = auto) against the thresholds in bytes.
    fn resolve(short: u64, long: u64, background: u64, hard: u64) -> Sizes {
        let hard = hard.max(64 * MIB);
        let background = background.max(32 * MIB);
        Sizes {
            short: match short {
                0 => (background / 2).clamp(32 * MIB, 256 * MIB),
                v => v,
            },
            long: match long {
                0 => (hard + hard / 2).max(1 << 30),
                v => v,
            },
            short_auto: short == 0,
            long_auto: long == 0,
            background,
            hard,
        }
    }

    /// The sizes in words, "auto" only for a size tunelab chose.
    fn words(&self) -> String {
        let how = |auto: bool, rule: &str| {
            if auto {
                format!("auto: {rule}")
            } else {
                "as given".to_string()
            }
        };
        format!(
            "dirty thresholds now: background {} / hard {}; short run {} ({}), long run {} ({})",
            format_size(self.background),
            format_size(self.hard),
            format_size(self.short),
            how(self.short_auto, "half the background threshold, 32-256 MiB"),
            format_size(self.long),
            how(self.long_auto, "1.5 x the hard threshold, at least 1 GiB"),
        )
    }

    /// A long run that stays under the hard threshold is never throttled
    /// to the device rate, so long_ratio measures the cache.
    fn long_warning(&self, long: u64) -> Option<String> {
        (long < self.hard).then(|| {
            format!(
                "warning: the long run ({}) is below the hard dirty threshold ({}): its writes                  never reach the limit, so long_throughput is the page cache's rate, not the                  device's, and long_ratio stays far above 1; use long=0 (auto) or at least {}",
                format_size(long),
                format_size(self.hard),
                format_size(self.hard + self.hard / 2)
            )
        })
    }
}

/// A point's parameters, read by name once, here.
struct Params {
    /// 0: auto (see `Sizes::resolve`).
    short: u64,
    long: u64,
    record: u64,
    direct_size: u64,
    direct_record: u64,
}

impl Params {
    fn parse(p: &Point) -> Result<Params> {
        Ok(Params {
            short: p.u64("short")?,
            long: p.u64("long")?,
            record: p.u64("record")?,
            direct_size: p.u64("direct_size")?,
            direct_record: p.u64("direct_record")?,
        })
    }
}

/// The run sizes of `q` against the current dirty thresholds.
fn run_sizes(q: &Params) -> Sizes {
    let st = dirty::read().unwrap_or_default();
    Sizes::resolve(
        q.short,
        q.long,
        st.kernel_background_threshold_bytes
            .unwrap_or(st.background_threshold_bytes),
        st.kernel_threshold_bytes.unwrap_or(st.threshold_bytes),
    )
}

pub(crate) static SPEC: Spec = Spec {
    name: NAME,
    summary: "page cache vs device: direct writes, short and long buffered runs, inflation factor",
    method: "A trial runs three phases in the scratch directory. (a) device rate: overwrite a \
         `direct_size` file (laid out beforehand) with O_DIRECT|O_SYNC writes of `direct_record` \
         bytes — each write returns when the data is on the device; direct_throughput = bytes / \
         seconds. Then sync() (untimed) so the cache starts clean. (b) short buffered run: write a \
         new file of `short` bytes (0 = auto: half the background dirty threshold, 32-256 MiB, so \
         it fits under the dirty limit) in `record`-byte buffered write() calls, timed WITHOUT \
         fsync, as a naive benchmark does (short_throughput). (c) long buffered run: the same for \
         `long` bytes (0 = auto: 1.5 x the kernel's hard dirty threshold nr_dirty_threshold, at \
         least 1 GiB), timed without fsync (long_throughput) and with the closing fsync \
         (long_throughput_fsync); Dirty and Writeback are read from /proc/meminfo every 64 MiB and \
         stored as series against the bytes written, with the cumulative throughput, so the \
         convergence to the device rate is visible. inflation = short / direct; long_ratio = long / \
         direct. Files are fsynced and deleted between phases, outside the timing. The background \
         sampler's Dirty/Writeback (1 Hz) is stored with the run as well.",
    params: &[
            ParamSpec::new(
                "record",
                ParamKind::Size,
                "9M",
                "application write size for (b) and (c)",
            )
            .range(512.0, (1u64 << 30) as f64),
            ParamSpec::new(
                "direct_size",
                ParamKind::Size,
                "512M",
                "bytes written in phase (a)",
            )
            .range(MIB as f64, (1u64 << 40) as f64),
            ParamSpec::new(
                "direct_record",
                ParamKind::Size,
                "4M",
                "O_DIRECT|O_SYNC write size in (a)",
            )
            .range(4096.0, (1u64 << 30) as f64),
            ParamSpec::new(
                "short",
                ParamKind::Size,
                "0",
                "bytes in the short run (b); 0 = auto",
            )
            .range(0.0, (1u64 << 40) as f64),
            ParamSpec::new(
                "long",
                ParamKind::Size,
                "0",
                "bytes in the long run (c); 0 = auto",
            )
            .range(0.0, (1u64 << 42) as f64),
        ],
    metrics: &[
            MetricSpec::higher(
                METRIC_DIRECT_THROUGHPUT,
                "B/s",
                "(a) O_DIRECT|O_SYNC write rate: the device",
            ),
            MetricSpec::higher(
                "short_throughput",
                "B/s",
                "(b) short buffered run, no fsync",
            ),
            MetricSpec::higher("long_throughput", "B/s", "(c) long buffered run, no fsync"),
            MetricSpec::higher(
                "long_throughput_fsync",
                "B/s",
                "(c) long buffered run, closing fsync timed",
            ),
            MetricSpec::higher("inflation", "ratio", "short_throughput / direct_throughput"),
            MetricSpec::higher("long_ratio", "ratio", "long_throughput / direct_throughput"),
        ],
    needs: Needs::SCRATCH,
    defaults: RunDefaults::new(0, 3, 3, 100.0),
    hidden: false,
};

// The metrics a trial emits, checked against the Spec while compiling.
const DIRECT_THROUGHPUT: Metric = SPEC.emits("direct_throughput");
const INFLATION: Metric = SPEC.emits("inflation");
const LONG_RATIO: Metric = SPEC.emits("long_ratio");
const LONG_THROUGHPUT: Metric = SPEC.emits("long_throughput");
const LONG_THROUGHPUT_FSYNC: Metric = SPEC.emits("long_throughput_fsync");
const SHORT_THROUGHPUT: Metric = SPEC.emits("short_throughput");

impl Experiment for Cache {
    fn spec(&self) -> &'static Spec {
        &SPEC
    }
    fn validate(&self, p: &Point) -> Result<()> {
        let q = Params::parse(p)?;
        if q.direct_record % 4096 != 0 || q.direct_size % q.direct_record != 0 {
            return Err(Error::usage(
                "io.cache: direct_record must be a multiple of 4 KiB and divide direct_size",
            ));
        }
        Ok(())
    }
    fn scratch_bytes(&self, p: &Point) -> u64 {
        // The long run is shortened to the free space in prepare().
        Params::parse(p).map_or(0, |q| q.direct_size + run_sizes(&q).short)
    }
    fn footprint(&self, p: &Point, room: &Room) -> Footprint {
        let Ok(q) = Params::parse(p) else {
            return Footprint::default();
        };
        let Sizes { short, long, .. } = run_sizes(&q);
        let direct = q.direct_size;
        let long = fit_disk("", long, 1, MIB, 1, room).map_or(long, |f| f.value);
        Footprint {
            setup_written: direct,
            trial_written: direct + short + long,
            stored: direct + short.max(long),
            peak_memory: q.record.max(q.direct_record),
            ..Footprint::default()
        }
    }
    fn prepare(&self, ctx: &Ctx, p: &Point) -> Result<Box<dyn PointRun>> {
        let scratch = ctx.scratch()?;
        let q = Params::parse(p)?;
        let sizes = run_sizes(&q);
        let (short, long, mut why) = (sizes.short, sizes.long, sizes.words());
        let direct_size = q.direct_size;
        // The long run must outgrow the dirty limits, but never fill a
        // board's flash: at most half the free space (the note says when it
        // was cut, and then the run may end before the device rate shows).
        let fit = fit_disk(
            "io.cache long run",
            long,
            1,
            MIB,
            short.max(MIB),
            &Room::for_ctx(ctx),
        )?;
        let long = fit.value;
        if let Some(n) = fit.note {
            why = format!("{why}; {n}: the long run may not reach the dirty limits");
        }
        let warning = sizes.long_warning(long);
        why = format!("{why}; {}", backing_note(ctx));
        scratch.ensure_space(direct_size + short.max(long))?;
        let name = "cache-direct";
        let direct_path = scratch.file_path(name);
        let mut f = scratch.create_file(name, 0)?;
        fill_file(&mut f, &direct_path, direct_size, 21)?;
        f.sync_all()
            .map_err(|e| Error::io("cannot fsync", &direct_path, e))?;
        drop(f);
        let (record, direct_record) = (q.record as usize, q.direct_record as usize);
        Ok(Box::new(CacheRun {
            dir: scratch.path().to_path_buf(),
            direct_path,
            direct_size,
            direct_record,
            short,
            long,
            why,
            warning,
            buf: AlignedBuf::random(record.max(direct_record), 23)?,
            record,
            n: 0,
            trace: Vec::new(),
        }))
    }
}

struct CacheRun {
    dir: PathBuf,
    direct_path: PathBuf,
    direct_size: u64,
    direct_record: usize,
    short: u64,
    long: u64,
    why: String,
    /// Set when the long run is too short to reach the dirty limit.
    warning: Option<String>,
    buf: AlignedBuf,
    record: usize,
    n: u64,
    /// (bytes written, seconds, dirty, writeback) of the last long run.
    trace: Vec<TracePoint>,
}

/// (bytes written, seconds, Dirty, Writeback).
type TracePoint = (f64, f64, f64, f64);

struct Remove(PathBuf);
impl Drop for Remove {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

impl CacheRun {
    /// Buffered run of `size` bytes into a new file: (seconds without
    /// fsync, seconds with fsync).
    fn buffered(&mut self, ctx: &Ctx, size: u64, tag: &str, trace: bool) -> Result<(f64, f64)> {
        let path = self.dir.join(format!("cache-{tag}-{}", self.n));
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| Error::io("cannot create scratch file", &path, e))?;
        let _rm = Remove(path.clone());
        let buf = &self.buf.as_slice()[..self.record];
        if trace {
            self.trace.clear();
        }
        let mut next_mark = 0u64;
        let t = Instant::now();
        let mut done = 0u64;
        while done < size {
            let n = (size - done).min(self.record as u64) as usize;
            std::io::Write::write_all(&mut f, &buf[..n])
                .map_err(|e| Error::io("cannot write", &path, e))?;
            done += n as u64;
            if done >= next_mark {
                ctx.check_cancel()?;
                if trace {
                    let s = dirty::read().unwrap_or_default();
                    self.trace.push((
                        done as f64,
                        t.elapsed().as_secs_f64(),
                        s.dirty_bytes as f64,
                        s.writeback_bytes as f64,
                    ));
                }
                next_mark = done + 64 * MIB;
            }
        }
        let nofsync = t.elapsed().as_secs_f64();
        f.sync_all()
            .map_err(|e| Error::io("cannot fsync", &path, e))?;
        Ok((nofsync, t.elapsed().as_secs_f64()))
    }

    fn direct(&mut self, ctx: &Ctx) -> Result<f64> {
        let f: File = open_with(
            &self.direct_path,
            true,
            IoMode::Direct.write_flags() | OFlags::SYNC.bits() as i32,
        )?;
        let buf = &self.buf.as_slice()[..self.direct_record];
        let t = Instant::now();
        let mut off = 0u64;
        while off < self.direct_size {
            ctx.check_cancel()?;
            f.write_all_at(buf, off)
                .map_err(|e| Error::io("cannot write", &self.direct_path, e))?;
            off += buf.len() as u64;
        }
        Ok(t.elapsed().as_secs_f64())
    }
}

fn sync_all() {
    rustix::fs::sync();
}

impl PointRun for CacheRun {
    fn trial(&mut self, ctx: &Ctx) -> Result<TrialValues> {
        self.n += 1;
        sync_all();
        let direct = self.direct_size as f64 / self.direct(ctx)?;
        sync_all();
        let (s, _) = self.buffered(ctx, self.short, "short", false)?;
        let short = self.short as f64 / s;
        sync_all();
        let (l, lf) = self.buffered(ctx, self.long, "long", true)?;
        let (long, long_f) = (self.long as f64 / l, self.long as f64 / lf);
        Ok(TrialValues::new()
            .with(DIRECT_THROUGHPUT, direct)
            .with(SHORT_THROUGHPUT, short)
            .with(LONG_THROUGHPUT, long)
            .with(LONG_THROUGHPUT_FSYNC, long_f)
            .with(INFLATION, short / direct)
            .with(LONG_RATIO, long / direct))
    }

    fn finish(&mut self, _ctx: &Ctx) -> Result<PointExtras> {
        let mk = |name: &str, y_unit: &str, f: &dyn Fn(&TracePoint) -> f64| Series {
            name: name.into(),
            x_label: "bytes written".into(),
            x_unit: "B".into(),
            y_label: name.into(),
            y_unit: y_unit.into(),
            points: self.trace.iter().map(|p| (p.0, f(p))).collect(),
        };
        let series = vec![
            mk("long run cumulative throughput", "B/s", &|p| {
                if p.1 > 0.0 {
                    p.0 / p.1
                } else {
                    0.0
                }
            }),
            mk("Dirty", "B", &|p| p.2),
            mk("Writeback", "B", &|p| p.3),
        ];
        let mut notes: Vec<String> = self.warning.clone().into_iter().collect();
        notes.push(self.why.clone());
        Ok(PointExtras {
            series,
            notes: [
                notes,
                vec![
                "short_throughput and long_throughput exclude the closing fsync: they show what a \
                 naive buffered benchmark reports; long_throughput_fsync includes it"
                    .into(),
                "series from the last trial's long run; Dirty/Writeback read from /proc/meminfo every 64 MiB"
                    .into(),
                ],
            ]
            .concat(),
            ..Default::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    #[test]
    fn only_a_size_tunelab_chose_is_called_auto() {
        let given = Sizes::resolve(16 * MIB, 64 * MIB, 100 * MIB, 400 * MIB);
        assert_eq!((given.short, given.long), (16 * MIB, 64 * MIB));
        let w = given.words();
        assert!(!w.contains("auto"), "{w}");
        assert_eq!(w.matches("as given").count(), 2, "{w}");
        let auto = Sizes::resolve(0, 0, 100 * MIB, 400 * MIB);
        assert_eq!((auto.short, auto.long), (50 * MIB, GIB));
        assert_eq!(auto.words().matches("auto:").count(), 2);
        let mixed = Sizes::resolve(16 * MIB, 0, 100 * MIB, 400 * MIB);
        let w = mixed.words();
        assert!(w.contains("short run 16 MiB (as given)"), "{w}");
        assert!(w.contains("(auto: 1.5 x the hard threshold"), "{w}");
    }

    #[test]
    fn a_long_run_under_the_hard_threshold_is_warned_about() {
        let s = Sizes::resolve(16 * MIB, 64 * MIB, 100 * MIB, 400 * MIB);
        let w = s
            .long_warning(s.long)
            .expect("64 MiB < 400 MiB hard threshold");
        assert!(
            w.contains("below the hard dirty threshold (400 MiB)"),
            "{w}"
        );
        assert!(w.contains("at least 600 MiB"), "{w}");
        assert_eq!(s.long_warning(400 * MIB), None);
        let auto = Sizes::resolve(0, 0, 100 * MIB, 400 * MIB);
        assert_eq!(auto.long_warning(auto.long), None);
    }
}
