//! `flash.au-size`: the allocation unit and page of a card from read
//! timing (flashbench `-a`, automated), and whether its partitions and FAT
//! data areas sit on unit boundaries. Reads only, of a device the user names.

use std::path::Path;

use crate::engine::{
    Ctx, Experiment, Metric, MetricSpec, Needs, ParamKind, ParamSpec, Point, PointExtras, PointRun,
    RunDefaults, Spec, TrialValues,
};
use crate::experiments::common::flash::boundary::{self, fat_data_offset, Alignment, Plan};
use crate::experiments::common::flash::device::{Access, FdIo};
use crate::experiments::common::flash::FlashIo;
use crate::safety::AlignedBuf;
use crate::system::flash::partitions;
use crate::units::format_size;
use crate::{Error, Result};

pub(crate) const NAME: &str = "flash.au-size";
pub(crate) const METRIC_UNIT: &str = "unit_bytes";
pub(crate) const METRIC_MISALIGNED: &str = "misaligned";

pub(crate) static SPEC: Spec = Spec {
    name: NAME,
    summary: "allocation-unit and page size from read timing (flashbench -a), and alignment",
    method: "For each candidate size c (8 KiB, 16 KiB, … up to `max`), reads 8 KiB blocks \
             (O_DIRECT) at `positions` odd multiples b of c spread over the device, `repeats` \
             times each: `pre` ends at b, `on` straddles b, `post` starts at b. Only `on` \
             crosses a boundary, and it crosses every unit boundary no larger than c, so \
             diff(c) = median(on − (pre+post)/2) rises by one step at each unit size. A \
             step counts when it exceeds four standard errors of the diffs it joins and a \
             tenth of the largest diff; the largest counting step is the allocation unit, \
             the smallest (when another) the page. The notes list every candidate, the step \
             and its signal-to-noise ratio, then each partition's start and, for FAT, its \
             data area against the unit, with the sfdisk/mkfs.fat fix when misaligned. \
             Reads only, and only of the device named with `device` (never written).",
    params: &[
        ParamSpec::new(
            "device",
            ParamKind::Text,
            "none",
            "the block device to read, such as /dev/mmcblk0 (required: it is read, never written)",
        ),
        ParamSpec::new("max", ParamKind::Size, "64M", "largest candidate unit size")
            .range(16384.0, (1u64 << 34) as f64),
        ParamSpec::new(
            "positions",
            ParamKind::Count,
            "8",
            "boundaries sampled per candidate",
        )
        .range(1.0, 256.0),
        ParamSpec::new(
            "repeats",
            ParamKind::Count,
            "4",
            "reads of each pre/on/post triple",
        )
        .range(1.0, 100.0),
    ],
    metrics: &[
        MetricSpec::higher(METRIC_UNIT, "B", "the allocation unit found"),
        MetricSpec::higher("page_bytes", "B", "the page found (0: no smaller step)"),
        MetricSpec::higher("unit_step", "s", "extra read time across a unit boundary"),
        MetricSpec::higher(
            "snr",
            "ratio",
            "the unit step over its standard error (capped at 1000)",
        ),
        MetricSpec::lower(
            METRIC_MISALIGNED,
            "count",
            "partitions or FAT data areas off a unit boundary",
        ),
    ],
    needs: Needs::NOTHING,
    defaults: RunDefaults::ONE_RECORDING,
    hidden: false,
};

// The metrics a trial emits, checked against the Spec while compiling.
const MISALIGNED: Metric = SPEC.emits(METRIC_MISALIGNED);
const PAGE_BYTES: Metric = SPEC.emits("page_bytes");
const SNR: Metric = SPEC.emits("snr");
const UNIT_BYTES: Metric = SPEC.emits(METRIC_UNIT);
const UNIT_STEP: Metric = SPEC.emits("unit_step");

pub(crate) struct AuSize;

/// A point's parameters, read by name once, here.
struct Params {
    device: String,
    max: u64,
    positions: usize,
    repeats: usize,
}

impl Params {
    /// device=none (the default) is a usage error: this reads a device.
    fn parse(p: &Point) -> Result<Params> {
        let device = match p.text("device")? {
            "none" => {
                return Err(Error::usage(
                    "flash.au-size reads a block device: name it with -p device=/dev/mmcblk0 \
                     (it is only read); a file system's file has no unit boundaries to find",
                ))
            }
            d => d.to_string(),
        };
        Ok(Params {
            device,
            max: p.u64("max")?,
            positions: p.usize("positions")?,
            repeats: p.usize("repeats")?,
        })
    }
}

impl Experiment for AuSize {
    fn spec(&self) -> &'static Spec {
        &SPEC
    }
    fn validate(&self, p: &Point) -> Result<()> {
        Params::parse(p).map(|_| ())
    }
    fn prepare(&self, _ctx: &Ctx, p: &Point) -> Result<Box<dyn PointRun>> {
        let q = Params::parse(p)?;
        let path = q.device;
        let io = FdIo::block_device(Path::new(&path), Access::Read)?;
        Ok(Box::new(Run {
            io,
            path,
            plan: Plan {
                max: q.max,
                positions: q.positions,
                repeats: q.repeats,
                ..Plan::default()
            },
            notes: Vec::new(),
        }))
    }
}

struct Run {
    io: FdIo,
    path: String,
    plan: Plan,
    notes: Vec<String>,
}

impl PointRun for Run {
    fn trial(&mut self, ctx: &Ctx) -> Result<TrialValues> {
        let mut buf = AlignedBuf::zeroed((2 * self.plan.half) as usize)?;
        let found = boundary::find(&mut self.io, &self.plan, buf.as_mut_slice(), &|| {
            ctx.check_cancel()
        })?;
        self.notes = found
            .candidates
            .iter()
            .map(|c| {
                format!(
                    "candidate {:>9}: diff {:8.1} µs ± {:.1}, step {:+8.1} µs{}",
                    format_size(c.size),
                    c.diff * 1e6,
                    c.noise * 1e6,
                    c.step * 1e6,
                    if c.significant { "  step" } else { "" }
                )
            })
            .collect();
        let Some(unit) = found.unit else {
            return Err(Error::measurement(format!(
                "no read-time step above the noise on {} between 8 KiB and {}: raise repeats= \
                 or positions=, or the device hides its units (a USB bridge, a RAM disk)",
                self.path,
                format_size(self.plan.max)
            )));
        };
        let confidence = match found.snr {
            s if s >= 10.0 => "high",
            s if s >= 4.0 => "medium",
            _ => "low",
        };
        self.notes.push(format!(
            "unit {} (the largest step), page {}; signal/noise {:.0} ({confidence})",
            format_size(unit),
            found.page.map_or("not seen".into(), format_size),
            found.snr
        ));
        let misaligned = self.alignment(unit, &mut buf)?;
        let step = found
            .candidates
            .iter()
            .find(|c| c.size == unit)
            .map_or(0.0, |c| c.step);
        Ok(TrialValues::new()
            .with(UNIT_BYTES, unit as f64)
            .with(PAGE_BYTES, found.page.unwrap_or(0) as f64)
            .with(UNIT_STEP, step)
            .with(SNR, found.snr)
            .with(MISALIGNED, misaligned as f64))
    }
    fn finish(&mut self, _ctx: &Ctx) -> Result<PointExtras> {
        Ok(PointExtras {
            notes: std::mem::take(&mut self.notes),
            ..PointExtras::default()
        })
    }
}

impl Run {
    /// Each partition of the named disk against the unit; FAT boot sectors
    /// are read (from the named device) to place their data areas.
    fn alignment(&mut self, unit: u64, buf: &mut AlignedBuf) -> Result<usize> {
        let disk = Path::new(&self.path)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let parts = partitions(Path::new("/"), &disk);
        if parts.is_empty() {
            self.notes
                .push(format!("{disk}: no partitions in sysfs (a partition itself, or none): alignment not checked"));
            return Ok(0);
        }
        let mut bad = 0;
        for (name, start) in parts {
            let data = match self.io.read_at(buf.as_mut_slice(), start) {
                Ok(()) => fat_data_offset(buf.as_slice()),
                Err(_) => None,
            };
            let a = Alignment {
                partition: name,
                start,
                data,
                unit,
            };
            bad += usize::from(!a.aligned());
            self.notes.push(a.verdict());
        }
        Ok(bad)
    }
}
