//! `mem.mmap-read`: read and sum a cached file through mmap, mapped once or
//! mapped and unmapped for every pass (lmbench `bw_mmap_rd` mmap_only and
//! open2close).

use std::fs::File;
use std::path::PathBuf;
use std::time::Instant;

use crate::engine::Spec;
use crate::engine::{
    Ctx, Experiment, Footprint, Metric, MetricSpec, Needs, ParamKind, ParamSpec, Point,
    PointExtras, PointRun, Room, RunDefaults, TrialValues,
};
use crate::experiments::common::util::{
    backing_note, calibrate, fill_file, fit_cached_file, layout_note, sum_bytes,
};
use crate::units::format_size;
use crate::{Error, Result};

pub(crate) struct MmapRead;

pub(crate) static SPEC: Spec = Spec {
    name: "mem.mmap-read",
    summary: "read and sum a cached file through mmap, mapped once or per pass (lmbench bw_mmap_rd)",
    method: "prepare() creates a file of `size` random bytes in the scratch directory, fsyncs it (so \
         no writeback runs during the trials) and reads it once through a mapping so every page \
         is in the page cache; the device is not involved. One pass sums the whole file as \
         64-bit words through a read-only MAP_SHARED mapping (the sum is black-boxed). \
         map=once: the file is mapped once in prepare() and the mapping is kept, so after the \
         first pass the page tables are populated and a pass is pure memory reading (lmbench \
         bw_mmap_rd mmap_only). map=each: every pass calls mmap(), sums, then munmap(), so the \
         timing includes the system calls, the minor page faults that map the cached pages \
         (with the kernel's fault-around) and the TLB shootdown of munmap (lmbench open2close, \
         except that the file stays open). A trial repeats passes until it lasts at least \
         the trial time (200 ms unless --trial-time); read_throughput = file bytes x passes / wall time, bytes counted once, B/s.",
    params: &[
            ParamSpec::new("size", ParamKind::Size, "64M", "file size")
                .range(4096.0, 64.0 * (1u64 << 30) as f64),
            ParamSpec::new(
                "map",
                ParamKind::Choice(&["once", "each"]),
                "once,each",
                "map the file once, or map and unmap it for every pass",
            ),
        ],
    metrics: &[MetricSpec::higher(
            "read_throughput",
            "B/s",
            "file bytes summed through the mapping per second, counted once",
        )],
    needs: Needs::SCRATCH,
    defaults: RunDefaults::new(1, 5, 15, 20.0),
    hidden: false,
};

// The metrics a trial emits, checked against the Spec while compiling.
const READ_THROUGHPUT: Metric = SPEC.emits("read_throughput");

/// A point's parameters, read by name once, here.
struct Params {
    size: u64,
    /// "once" or "each" (map and unmap every pass).
    map: String,
}

impl Params {
    fn parse(p: &Point) -> Result<Params> {
        Ok(Params {
            size: p.u64("size")?,
            map: p.text("map")?.to_string(),
        })
    }
}

impl Experiment for MmapRead {
    fn spec(&self) -> &'static Spec {
        &SPEC
    }
    fn scratch_bytes(&self, _p: &Point) -> u64 {
        // The file is fitted to the free space in prepare(); this is the least.
        FLOOR
    }
    fn validate(&self, p: &Point) -> Result<()> {
        // The file must stay cached while it is read.
        let size = Params::parse(p)?.size;
        crate::experiments::common::util::refuse_beyond_ram(self, size, "size", 1, "page cache")
    }
    fn footprint(&self, p: &Point, room: &Room) -> Footprint {
        let size = Params::parse(p)
            .and_then(|q| fitted_size(q.size, room))
            .map_or(0, |(f, _)| f);
        Footprint {
            setup_written: size,
            peak_memory: size,
            ..Footprint::default()
        }
    }
    fn prepare(&self, ctx: &Ctx, p: &Point) -> Result<Box<dyn PointRun>> {
        // The file must stay in the page cache: it follows the memory really
        // available (cgroup included) and the target's free space.
        let q = Params::parse(p)?;
        let (size, fit_notes) = fitted_size(q.size, &Room::for_ctx(ctx))?;
        let len = usize::try_from(size)
            .map_err(|_| Error::usage("mem.mmap-read: size does not fit in memory"))?;
        let scratch = ctx.scratch()?;
        scratch.ensure_space(size)?;
        let each = q.map == "each";
        let name = format!("mmap-read-{}-{size}", q.map);
        let path = scratch.file_path(&name);
        let mut file = scratch.create_file(&name, 0)?;
        fill_file(&mut file, &path, size, 42)?;
        file.sync_all()
            .map_err(|e| Error::io("cannot fsync", &path, e))?;
        let mut run = MmapRun {
            path,
            file,
            len,
            kept: None,
            each,
            passes: 1,
            notes: fit_notes,
        };
        run.notes.push(backing_note(ctx));
        run.notes.push(layout_note(len as u64));
        if !each {
            run.kept = Some(Mapping::new(&run.file, len, &run.path)?);
        }
        ctx.check_cancel()?;
        run.pass()?; // every page into the cache (and, for once, the page tables)
        run.passes = calibrate(ctx, || run.pass())?;
        Ok(Box::new(run))
    }
}

/// The smallest file worth timing.
const FLOOR: u64 = 1 << 20;

/// `size`, shrunk to what both the memory budget (the file stays cached)
/// and the free space hold; the notes say why when it is.
fn fitted_size(size: u64, room: &Room) -> Result<(u64, Vec<String>)> {
    fit_cached_file("mem.mmap-read file", size, 4096, FLOOR, room)
}

/// A read-only shared mapping of a whole file, unmapped on drop.
struct Mapping {
    ptr: *mut std::ffi::c_void,
    len: usize,
}

impl Mapping {
    fn new(file: &File, len: usize, path: &std::path::Path) -> Result<Self> {
        // SAFETY: a fresh read-only mapping of an open file; checked below.
        let ptr = unsafe {
            rustix::mm::mmap(
                std::ptr::null_mut(),
                len,
                rustix::mm::ProtFlags::READ,
                rustix::mm::MapFlags::SHARED,
                file,
                0,
            )
        }
        .map_err(|e| Error::io("cannot mmap", path, e.into()))?;
        Ok(Mapping { ptr, len })
    }

    fn sum(&self) -> u64 {
        // SAFETY: the mapping covers `len` readable bytes while self lives;
        // the file is ours and is never truncated.
        let s = unsafe { std::slice::from_raw_parts(self.ptr as *const u8, self.len) };
        sum_bytes(s)
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly what mmap returned.
        let _ = unsafe { rustix::mm::munmap(self.ptr, self.len) };
    }
}

struct MmapRun {
    path: PathBuf,
    file: File,
    len: usize,
    kept: Option<Mapping>,
    each: bool,
    passes: u64,
    notes: Vec<String>,
}

impl MmapRun {
    fn pass(&mut self) -> Result<()> {
        match &self.kept {
            Some(m) => {
                m.sum();
            }
            None => {
                let m = Mapping::new(&self.file, self.len, &self.path)?;
                m.sum();
            }
        }
        Ok(())
    }
}

impl Drop for MmapRun {
    fn drop(&mut self) {
        // Unmap before the file goes; free the scratch space for the next point.
        self.kept = None;
        let _ = std::fs::remove_file(&self.path);
    }
}

impl PointRun for MmapRun {
    fn trial(&mut self, ctx: &Ctx) -> Result<TrialValues> {
        let t = Instant::now();
        for _ in 0..self.passes {
            ctx.check_cancel()?;
            self.pass()?;
        }
        let bytes = self.len as u64 * self.passes;
        Ok(TrialValues::new().with(READ_THROUGHPUT, bytes as f64 / t.elapsed().as_secs_f64()))
    }

    fn finish(&mut self, _ctx: &Ctx) -> Result<PointExtras> {
        let mut notes = std::mem::take(&mut self.notes);
        notes.extend([
            format!(
                "page cache: file fsynced and pre-read, served from memory; {} ({} per pass, {} \
                 passes per trial)",
                if self.each {
                    "mmap + sum + munmap every pass: system calls and page faults timed"
                } else {
                    "mapped once, page tables populated before the trials"
                },
                format_size(self.len as u64),
                self.passes
            ),
            super::memory_note("file", self.len as u64),
        ]);
        Ok(PointExtras {
            notes,
            ..Default::default()
        })
    }
}
