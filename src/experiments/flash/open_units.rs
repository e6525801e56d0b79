//! `flash.open-units`: how many units the card keeps open — the steady
//! write rate of 1, 2, … sequential streams written in turn (flashbench
//! `--open-au`, each count to its own steady state), and the count where it
//! collapses.

use crate::engine::{
    Ctx, Experiment, Footprint, Metric, MetricSpec, Needs, ParamKind, ParamSpec, Point,
    PointExtras, PointRun, Room, RunDefaults, Spec, TrialValues,
};
use crate::experiments::common::flash::device::{for_writes, FdIo, DEVICE, OVERWRITE};
use crate::experiments::common::flash::steady::Rule;
use crate::experiments::common::flash::streams::{self, Plan, COLLAPSE};
use crate::model::run::Series;
use crate::safety::AlignedBuf;
use crate::units::format_size;
use crate::{Error, Result};

use super::steady_state::{Writes, CHUNK, RANGE, SLOPE, WINDOW, WINDOWS};

pub(crate) const NAME: &str = "flash.open-units";
pub(crate) const METRIC_OPEN: &str = "open_units";

pub(crate) static SPEC: Spec = Spec {
    name: NAME,
    summary: "open-unit limit: steady write rate against 1..N concurrent sequential streams",
    method: "N streams each write `chunk` blocks sequentially in a region of their own \
             (`spacing` bytes apart, a multiple of the allocation unit), one block per \
             stream in turn (O_DIRECT), for N = 1, 2, … `streams`. Each count runs to the \
             steady state of flash.steady-state (same rule); from N = 2 on, a flush comes \
             first and the rule skips 1.2 × the bytes one stream's burst took, because the \
             card's cache first drains the previous count's data. open_units: the last N \
             before the steady rate falls below half of one stream's (the collapse); when no \
             count collapses it is `streams` and the notes say 'at least'. Default: a file \
             in the scratch directory; device= with overwrite=yes writes a device raw.",
    params: &[
        DEVICE,
        OVERWRITE,
        ParamSpec::new(
            "streams",
            ParamKind::Count,
            "8",
            "most concurrent streams tried",
        )
        .range(2.0, 64.0),
        ParamSpec::new(
            "spacing",
            ParamKind::Size,
            "16M",
            "bytes between streams (≥ the allocation unit)",
        )
        .range(1048576.0, (1u64 << 34) as f64),
        CHUNK,
        WINDOW,
        WINDOWS,
        RANGE,
        SLOPE,
        ParamSpec::new(
            "min_written",
            ParamKind::Size,
            "256M",
            "bytes one stream writes before a steady state counts when no burst was seen",
        )
        .range(0.0, (1u64 << 44) as f64),
        ParamSpec::new(
            "max_time",
            ParamKind::Duration,
            "300s",
            "seconds each stream count may take",
        )
        .range(1.0, 86400.0),
    ],
    metrics: &[
        MetricSpec::higher(
            METRIC_OPEN,
            "count",
            "streams the card sustains before the collapse",
        ),
        MetricSpec::higher("one_stream_rate", "B/s", "steady rate of one stream"),
        MetricSpec::higher(
            "collapsed_rate",
            "B/s",
            "steady rate at the collapse (0: none)",
        ),
    ],
    needs: Needs::SCRATCH,
    defaults: RunDefaults::ONE_RECORDING,
    hidden: false,
};

// The metrics a trial emits, checked against the Spec while compiling.
const COLLAPSED_RATE: Metric = SPEC.emits("collapsed_rate");
const ONE_STREAM_RATE: Metric = SPEC.emits("one_stream_rate");
const OPEN_UNITS: Metric = SPEC.emits(METRIC_OPEN);

pub(crate) struct OpenUnits;

/// A point's parameters, read by name once, here.
struct Params {
    streams: u64,
    spacing: u64,
    chunk: u64,
    w: Writes,
}

impl Params {
    fn parse(p: &Point) -> Result<Params> {
        Ok(Params {
            streams: p.u64("streams")?,
            spacing: p.u64("spacing")?,
            chunk: p.u64("chunk")?,
            w: Writes::parse(p)?,
        })
    }

    /// The bytes the streams span.
    fn region(&self) -> u64 {
        self.streams * self.spacing
    }
}

impl Experiment for OpenUnits {
    fn spec(&self) -> &'static Spec {
        &SPEC
    }
    fn validate(&self, p: &Point) -> Result<()> {
        let q = Params::parse(p)?;
        if q.chunk % 4096 != 0 || q.spacing % q.chunk != 0 {
            return Err(Error::usage(
                "chunk must be a multiple of 4 KiB (O_DIRECT) and spacing a multiple of chunk",
            ));
        }
        Ok(())
    }
    fn scratch_bytes(&self, p: &Point) -> u64 {
        match Params::parse(p) {
            Ok(q) if q.w.device == "none" => q.region(),
            _ => 0,
        }
    }
    fn footprint(&self, p: &Point, _room: &Room) -> Footprint {
        let (region, chunk) = Params::parse(p).map_or((0, 0), |q| (q.region(), q.chunk));
        Footprint {
            setup_written: self.scratch_bytes(p),
            trial_written: region,
            repeats: true,
            peak_memory: chunk + (4 << 20),
            ..Footprint::default()
        }
    }
    fn prepare(&self, ctx: &Ctx, p: &Point) -> Result<Box<dyn PointRun>> {
        let q = Params::parse(p)?;
        let (io, note) = for_writes(ctx, &q.w.device, q.w.overwrite, q.region())?;
        let chunk = q.chunk;
        Ok(Box::new(Run {
            io,
            buf: AlignedBuf::random(chunk as usize, 41)?,
            plan: Plan {
                max_streams: q.streams as usize,
                spacing: q.spacing,
                chunk,
                min_bytes: q.w.min_written,
                max_time: q.w.max_time,
            },
            rule: q.w.rule,
            notes: vec![note],
            curve: Vec::new(),
        }))
    }
}

struct Run {
    io: FdIo,
    buf: AlignedBuf,
    plan: Plan,
    rule: Rule,
    notes: Vec<String>,
    curve: Vec<(f64, f64)>,
}

impl PointRun for Run {
    fn trial(&mut self, ctx: &Ctx) -> Result<TrialValues> {
        let o = streams::measure(
            &mut self.io,
            &self.plan,
            &self.rule,
            self.buf.as_slice(),
            &|| ctx.check_cancel(),
        )?;
        for pt in &o.points {
            self.notes.push(match pt.rate {
                Some(r) => format!(
                    "{} stream(s): steady {}/s after {:.1} s",
                    pt.streams,
                    format_size(r as u64),
                    pt.elapsed
                ),
                None => format!(
                    "{} stream(s): no steady state in {:.0} s",
                    pt.streams, pt.elapsed
                ),
            });
        }
        self.curve = o
            .points
            .iter()
            .filter_map(|p| Some((p.streams as f64, p.rate?)))
            .collect();
        let base = o.points[0].rate.unwrap_or(0.0);
        let (open, collapsed) = match o.collapse_at {
            Some(n) => {
                self.notes.push(format!(
                    "collapse at {n} streams (below {:.0}% of one stream's rate): the card keeps {} unit(s) open",
                    COLLAPSE * 100.0,
                    n - 1
                ));
                (n - 1, o.points.last().and_then(|p| p.rate).unwrap_or(0.0))
            }
            None => {
                self.notes.push(format!(
                    "no collapse up to {} streams: the card keeps at least {} units open",
                    self.plan.max_streams, self.plan.max_streams
                ));
                (self.plan.max_streams, 0.0)
            }
        };
        Ok(TrialValues::new()
            .with(OPEN_UNITS, open as f64)
            .with(ONE_STREAM_RATE, base)
            .with(COLLAPSED_RATE, collapsed))
    }
    fn finish(&mut self, _ctx: &Ctx) -> Result<PointExtras> {
        Ok(PointExtras {
            series: vec![Series {
                name: "steady rate per stream count".into(),
                x_label: "streams".into(),
                x_unit: "count".into(),
                y_label: "rate".into(),
                y_unit: "B/s".into(),
                points: std::mem::take(&mut self.curve),
            }],
            notes: std::mem::take(&mut self.notes),
            ..PointExtras::default()
        })
    }
}
