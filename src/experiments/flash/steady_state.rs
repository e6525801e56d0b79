//! `flash.steady-state`: sustained sequential writes until a steady state
//! (fio `ss=`-style rule in 1 s windows), reporting the card's write cache
//! (bytes before the drop), burst and steady rates and the write stalls of
//! the steady state, with the rate timeline.

use crate::engine::{
    Ctx, Experiment, Footprint, Metric, MetricSpec, Needs, ParamKind, ParamSpec, Point,
    PointExtras, PointRun, Room, RunDefaults, Spec, TrialValues,
};
use crate::experiments::common::flash::device::{for_writes, FdIo, DEVICE, OVERWRITE};
use crate::experiments::common::flash::steady::{self, Load, Outcome, Rule};
use crate::model::run::Series;
use crate::safety::AlignedBuf;
use crate::units::format_size;
use crate::{Error, Result};

pub(crate) const NAME: &str = "flash.steady-state";
pub(crate) const METRIC_STEADY: &str = "steady_rate";
pub(crate) const METRIC_CACHE: &str = "cache_bytes";
pub(crate) const METRIC_BURST: &str = "burst_rate";
pub(crate) const METRIC_WA: &str = "write_amplification";

/// The write size, shared with flash.open-units.
pub(crate) const CHUNK: ParamSpec =
    ParamSpec::new("chunk", ParamKind::Size, "64K", "bytes per write").range(4096.0, 16777216.0);

/// The rule's parameters, shared with flash.open-units.
pub(crate) const WINDOW: ParamSpec = ParamSpec::new(
    "window",
    ParamKind::Duration,
    "1s",
    "length of one rate window",
)
.range(0.05, 60.0);
pub(crate) const WINDOWS: ParamSpec = ParamSpec::new(
    "windows",
    ParamKind::Count,
    "10",
    "windows the steady-state rule looks at",
)
.range(3.0, 1000.0);
pub(crate) const RANGE: ParamSpec = ParamSpec::new(
    "range",
    ParamKind::Float,
    "0.25",
    "largest (max-min)/mean of their rates",
)
.range(0.001, 2.0);
pub(crate) const SLOPE: ParamSpec = ParamSpec::new(
    "slope",
    ParamKind::Float,
    "0.1",
    "largest change of their fitted line over the mean",
)
.range(0.001, 2.0);

pub(crate) static SPEC: Spec = Spec {
    name: NAME,
    summary: "write cache, burst and steady write rates and stalls, to a steady state (fio ss=)",
    method: "Writes `chunk`-byte blocks sequentially (O_DIRECT, wrapping inside `size`) and \
             keeps each write's latency. Every `window` seconds the window's rate is kept; \
             the state is steady when the last `windows` rates lie within `range` of their \
             mean and their least-squares line changes by less than `slope` of the mean \
             across them (fio's bw range and bw_slope, in windows long enough for a 5 MB/s \
             card). A burst must have been seen (a window under 70% of the first) or \
             `min_written` bytes written before the rule may stop the run, so a long cache \
             burst is not taken for the steady state. steady_rate: the mean of the steady \
             windows. cache_bytes: what the card took beyond the steady line, the mean of \
             written(t) − steady_rate·t over the steady windows (the steady line's intercept); \
             burst_bytes: written before the drop (cache·burst/(burst−steady)). \
             write_amplification: sectors written by the disk (/proc/diskstats) over the \
             bytes written, across the run. Stall \
             percentiles: the write latencies of the steady windows. Default: a file in the \
             scratch directory; device= with overwrite=yes writes a device raw.",
    params: &[
        DEVICE,
        OVERWRITE,
        ParamSpec::new(
            "size",
            ParamKind::Size,
            "1G",
            "bytes of the file or device written (wrapping)",
        )
        .range(1048576.0, (1u64 << 44) as f64),
        CHUNK,
        WINDOW,
        WINDOWS,
        RANGE,
        SLOPE,
        ParamSpec::new(
            "min_written",
            ParamKind::Size,
            "256M",
            "bytes before a steady state counts when no burst was seen",
        )
        .range(0.0, (1u64 << 44) as f64),
        ParamSpec::new(
            "max_time",
            ParamKind::Duration,
            "300s",
            "give up after this long",
        )
        .range(1.0, 86400.0),
    ],
    metrics: &[
        MetricSpec::higher(METRIC_STEADY, "B/s", "mean rate of the steady windows"),
        MetricSpec::higher(METRIC_BURST, "B/s", "rate of the first window"),
        MetricSpec::higher(
            METRIC_CACHE,
            "B",
            "write cache: bytes taken beyond the steady line",
        ),
        MetricSpec::higher("burst_bytes", "B", "bytes written before the drop"),
        MetricSpec::lower("stall_p50", "s", "median write latency in the steady state"),
        MetricSpec::lower(
            "stall_p99",
            "s",
            "99th percentile write latency in the steady state",
        ),
        MetricSpec::lower("stall_max", "s", "longest write in the steady state"),
        MetricSpec::higher("written", "B", "bytes written in the run"),
        MetricSpec::lower(
            METRIC_WA,
            "ratio",
            "bytes the disk's diskstats counted written over the bytes written (absent when \
             the disk's counters cannot be read; other writers to the disk count too)",
        ),
    ],
    needs: Needs::SCRATCH,
    defaults: RunDefaults::ONE_RECORDING,
    hidden: false,
};

// The metrics a trial emits, checked against the Spec while compiling.
const BURST_BYTES: Metric = SPEC.emits("burst_bytes");
const BURST_RATE: Metric = SPEC.emits(METRIC_BURST);
const CACHE_BYTES: Metric = SPEC.emits(METRIC_CACHE);
const STALL_MAX: Metric = SPEC.emits("stall_max");
const STALL_P50: Metric = SPEC.emits("stall_p50");
const STALL_P99: Metric = SPEC.emits("stall_p99");
const STEADY_RATE: Metric = SPEC.emits(METRIC_STEADY);
const WRITE_AMPLIFICATION: Metric = SPEC.emits(METRIC_WA);
const WRITTEN: Metric = SPEC.emits("written");

/// The parameters flash.steady-state and flash.open-units share: where
/// they write, when they stop, and the steady-state rule.
pub(crate) struct Writes {
    /// A block device, or "none" (a file in the scratch directory).
    pub(crate) device: String,
    pub(crate) overwrite: bool,
    pub(crate) min_written: u64,
    pub(crate) max_time: f64,
    pub(crate) rule: Rule,
}

impl Writes {
    pub(crate) fn parse(p: &Point) -> Result<Writes> {
        Ok(Writes {
            device: p.text("device")?.to_string(),
            overwrite: p.bool("overwrite")?,
            min_written: p.u64("min_written")?,
            max_time: p.f64("max_time")?,
            rule: Rule {
                window: p.f64("window")?,
                windows: p.usize("windows")?,
                range: p.f64("range")?,
                slope: p.f64("slope")?,
            },
        })
    }
}

/// A point's parameters, read by name once, here.
struct Params {
    size: u64,
    chunk: u64,
    w: Writes,
}

impl Params {
    fn parse(p: &Point) -> Result<Params> {
        Ok(Params {
            size: p.u64("size")?,
            chunk: p.u64("chunk")?,
            w: Writes::parse(p)?,
        })
    }
}

pub(crate) struct SteadyState;

impl Experiment for SteadyState {
    fn spec(&self) -> &'static Spec {
        &SPEC
    }
    fn validate(&self, p: &Point) -> Result<()> {
        let q = Params::parse(p)?;
        if q.chunk % 4096 != 0 || q.size < 4 * q.chunk {
            return Err(Error::usage(
                "chunk must be a multiple of 4 KiB (O_DIRECT) and size at least 4 chunks",
            ));
        }
        Ok(())
    }
    fn scratch_bytes(&self, p: &Point) -> u64 {
        match Params::parse(p) {
            Ok(q) if q.w.device == "none" => q.size,
            _ => 0,
        }
    }
    fn footprint(&self, p: &Point, _room: &Room) -> Footprint {
        let (size, chunk) = Params::parse(p).map_or((0, 0), |q| (q.size, q.chunk));
        Footprint {
            setup_written: self.scratch_bytes(p),
            trial_written: size,
            repeats: true,
            // One chunk, and the latencies of the rule's windows.
            peak_memory: chunk + (4 << 20),
            ..Footprint::default()
        }
    }
    fn prepare(&self, ctx: &Ctx, p: &Point) -> Result<Box<dyn PointRun>> {
        let q = Params::parse(p)?;
        let size = q.size;
        let (io, note) = for_writes(ctx, &q.w.device, q.w.overwrite, size)?;
        let chunk = q.chunk;
        let disk = match q.w.device.as_str() {
            "none" => ctx.device.as_ref().map(|d| d.disk.clone()),
            dev => std::path::Path::new(dev)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned()),
        };
        Ok(Box::new(Run {
            io,
            disk,
            buf: AlignedBuf::random(chunk as usize, 40)?,
            load: Load {
                streams: 1,
                spacing: size,
                chunk,
                skip: 0,
                min_bytes: q.w.min_written,
                max_time: q.w.max_time,
            },
            rule: q.w.rule,
            notes: vec![note],
            timeline: Vec::new(),
        }))
    }
}

struct Run {
    io: FdIo,
    /// The disk whose diskstats count the device bytes.
    disk: Option<String>,
    buf: AlignedBuf,
    load: Load,
    rule: Rule,
    notes: Vec<String>,
    timeline: Vec<(f64, f64)>,
}

impl Run {
    fn sectors_written(&self) -> Option<u64> {
        let disk = self.disk.as_deref()?;
        crate::observe::iostat::read_one(disk)
            .ok()?
            .map(|c| c.sectors_written)
    }
}

impl PointRun for Run {
    fn trial(&mut self, ctx: &Ctx) -> Result<TrialValues> {
        let before = self.sectors_written();
        let o = steady::run(
            &mut self.io,
            &self.load,
            &self.rule,
            self.buf.as_slice(),
            &|| ctx.check_cancel(),
        )?;
        self.timeline = o.timeline.iter().map(|w| (w.end, w.rate)).collect();
        let Some(s) = o.steady else {
            return Err(Error::measurement(format!(
                "no steady state in {:.0} s ({} written): raise max_time=, or loosen range= \
                 or slope= (the notes' timeline shows the rates)",
                o.elapsed,
                format_size(o.written)
            )));
        };
        self.notes.extend(describe(&o, &self.rule));
        let mut v = TrialValues::new();
        if let (Some(a), Some(b)) = (before, self.sectors_written()) {
            v.set(
                WRITE_AMPLIFICATION,
                (b.saturating_sub(a) * 512) as f64 / o.written.max(1) as f64,
            );
        }
        Ok(v.with(STEADY_RATE, s)
            .with(BURST_RATE, o.burst_rate)
            .with(CACHE_BYTES, o.cache_bytes())
            .with(BURST_BYTES, o.burst_bytes())
            .with(STALL_P50, o.latency(0.5))
            .with(STALL_P99, o.latency(0.99))
            .with(STALL_MAX, o.latency(1.0))
            .with(WRITTEN, o.written as f64))
    }
    fn finish(&mut self, _ctx: &Ctx) -> Result<PointExtras> {
        Ok(PointExtras {
            series: vec![timeline(std::mem::take(&mut self.timeline))],
            notes: std::mem::take(&mut self.notes),
            ..PointExtras::default()
        })
    }
}

/// The rate of every window against time: the burst, the drop, the stalls.
pub(crate) fn timeline(points: Vec<(f64, f64)>) -> Series {
    Series {
        name: "write rate per window".into(),
        x_label: "time".into(),
        x_unit: "s".into(),
        y_label: "rate".into(),
        y_unit: "B/s".into(),
        points,
    }
}

/// How the run decided, for the notes.
pub(crate) fn describe(o: &Outcome, rule: &Rule) -> Vec<String> {
    let mut v = vec![format!(
        "steady after {:.1} s and {}: the last {} windows of {} s within {:.0}% range and \
         {:.0}% slope",
        o.elapsed,
        format_size(o.written),
        rule.windows,
        rule.window,
        rule.range * 100.0,
        rule.slope * 100.0
    )];
    if o.cache_bytes() > 0.0 {
        v.push(format!(
            "write cache ~{}: the burst ran {} before the drop",
            format_size(o.cache_bytes() as u64),
            format_size(o.burst_bytes() as u64)
        ));
    } else {
        v.push("no write cache seen: the first window already ran at the steady rate".into());
    }
    v
}
