//! `io.file-read`: read a file that is in the page cache in fixed chunks and
//! sum the bytes — lmbench `bw_file_rd` "io_only" (`open=once`) and
//! "open2close" (`open=each`). Measures the read() path and memory copy, not
//! the device.

use std::fs::File;
use std::path::PathBuf;
use std::time::Instant;

use crate::engine::{
    Ctx, Experiment, Footprint, Metric, MetricSpec, Needs, ParamKind, ParamSpec, Point,
    PointExtras, PointRun, Room, TrialValues,
};
use crate::engine::{RunDefaults, Spec};
use crate::experiments::common::util::{
    backing_note, calibrate, fill_file, fit_cached_file, layout_note, read_through, sum_bytes,
};
use crate::safety::AlignedBuf;
use crate::{Error, Result};

pub(crate) struct FileRead;

pub(crate) static SPEC: Spec = Spec {
    name: "io.file-read",
    summary: "read a cached file in chunks and sum it (lmbench bw_file_rd)",
    method: "Creates a file of `size` random bytes in the scratch directory and reads it once so it is \
         in the page cache. A trial reads the whole file sequentially with pread() in `chunk`-byte \
         pieces and sums every byte, repeated in passes so that one trial lasts at least the trial time (200 ms by default). \
         open=each opens and closes the file for every pass (open2close). Throughput counts the \
         file bytes once per pass, in B/s; the device is not involved.",
    params: &[
            ParamSpec::new("size", ParamKind::Size, "64M", "file size")
                .range(4096.0, 64.0 * (1u64 << 30) as f64),
            ParamSpec::new("chunk", ParamKind::Size, "64k", "bytes per read() call")
                .range(1.0, (1u64 << 30) as f64),
            ParamSpec::new(
                "open",
                ParamKind::Choice(&["once", "each"]),
                "once",
                "open the file once, or each pass",
            ),
        ],
    metrics: &[MetricSpec::higher(
            "read_throughput",
            "B/s",
            "file bytes read and summed per second",
        )],
    needs: Needs::SCRATCH,
    defaults: RunDefaults::STANDARD,
    hidden: false,
};

// The metrics a trial emits, checked against the Spec while compiling.
const READ_THROUGHPUT: Metric = SPEC.emits("read_throughput");

/// A point's parameters, read by name once, here.
struct Params {
    size: u64,
    chunk: u64,
    /// open=each: open and close the file for every pass.
    each: bool,
}

impl Params {
    fn parse(p: &Point) -> Result<Params> {
        Ok(Params {
            size: p.u64("size")?,
            chunk: p.u64("chunk")?,
            each: p.text("open")? == "each",
        })
    }
}

impl Experiment for FileRead {
    fn spec(&self) -> &'static Spec {
        &SPEC
    }
    fn validate(&self, p: &Point) -> Result<()> {
        let q = Params::parse(p)?;
        if q.chunk > q.size {
            return Err(Error::usage(format!(
                "io.file-read: chunk ({}) is larger than the file size ({}); use a smaller chunk",
                q.chunk, q.size
            )));
        }
        Ok(())
    }
    fn scratch_bytes(&self, p: &Point) -> u64 {
        // The file is fitted to the free space in prepare(); this is the least.
        Params::parse(p).map_or(0, |q| q.chunk).max(1 << 20)
    }
    fn footprint(&self, p: &Point, room: &Room) -> Footprint {
        let Ok(q) = Params::parse(p) else {
            return Footprint::default();
        };
        let size = fitted_size(&q, room).map_or(0, |(f, _)| f);
        Footprint {
            setup_written: size,
            peak_memory: size + q.chunk,
            ..Footprint::default()
        }
    }
    fn prepare(&self, ctx: &Ctx, p: &Point) -> Result<Box<dyn PointRun>> {
        // The file must stay cached: it follows the memory really available
        // (cgroup included) and the target's free space.
        let q = Params::parse(p)?;
        let (size, mut notes) = fitted_size(&q, &Room::for_ctx(ctx))?;
        notes.push(backing_note(ctx));
        notes.push(layout_note(size));
        let scratch = ctx.scratch()?;
        scratch.ensure_space(size)?;
        // One file per point (a sweep prepares several), removed when the point ends.
        let name = format!("file-read-{size}-{:08x}", rand::random::<u32>());
        let path = scratch.file_path(&name);
        let mut f = scratch.create_file(&name, 0)?;
        fill_file(&mut f, &path, size, 42)?;
        let mut run = FileReadRun {
            path,
            file: f,
            size,
            each: q.each,
            buf: AlignedBuf::zeroed(q.chunk as usize)?,
            chunk: q.chunk as usize,
            passes: 1,
            notes,
        };
        run.pass()?; // pulls every page into the cache
        run.passes = calibrate(ctx, || run.pass())?;
        Ok(Box::new(run))
    }
}

/// `size`, shrunk to what the memory budget (the file stays cached) and
/// half the free space hold, a multiple of `chunk`; notes say why.
fn fitted_size(q: &Params, room: &Room) -> Result<(u64, Vec<String>)> {
    let chunk = q.chunk.max(1);
    let floor = chunk.max(1 << 20);
    fit_cached_file("io.file-read file", q.size, chunk, floor, room)
}

struct FileReadRun {
    notes: Vec<String>,
    path: PathBuf,
    file: File,
    size: u64,
    each: bool,
    buf: AlignedBuf,
    chunk: usize,
    passes: u64,
}

impl FileReadRun {
    fn pass(&mut self) -> Result<()> {
        let reopened;
        let file = if self.each {
            reopened =
                File::open(&self.path).map_err(|e| Error::io("cannot open", &self.path, e))?;
            &reopened
        } else {
            &self.file
        };
        let buf = &mut self.buf.as_mut_slice()[..self.chunk];
        read_through(file, &self.path, self.size, buf, |piece| {
            sum_bytes(piece);
            Ok(())
        })
    }
}

impl Drop for FileReadRun {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

impl PointRun for FileReadRun {
    fn trial(&mut self, ctx: &Ctx) -> Result<TrialValues> {
        let t = Instant::now();
        for _ in 0..self.passes {
            ctx.check_cancel()?;
            self.pass()?;
        }
        let bytes = self.size * self.passes;
        Ok(TrialValues::new().with(READ_THROUGHPUT, bytes as f64 / t.elapsed().as_secs_f64()))
    }

    fn finish(&mut self, _ctx: &Ctx) -> Result<PointExtras> {
        let mut notes = std::mem::take(&mut self.notes);
        notes.push(format!(
            "page cache: file pre-read, reads served from memory; {} passes per trial, {} per pass",
            self.passes,
            crate::units::format_size(self.size)
        ));
        Ok(PointExtras {
            notes,
            ..Default::default()
        })
    }
}
