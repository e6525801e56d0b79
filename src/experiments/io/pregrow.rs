//! `io.pregrow`: creating a file of known final size — let write() extend
//! it, zero-fill it first, ftruncate() it (sparse), fallocate() it, or
//! fallocate(FALLOC_FL_KEEP_SIZE) — timing creation, overwrite and total,
//! fsync included, like the classic "creation / write / total" table.

use rustix::fs::FallocateFlags;
use rustix::io::Errno;
use std::fs::File;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::engine::Spec;
use crate::engine::{
    Ctx, Experiment, Fitted, Footprint, Metric, MetricSpec, Needs, ParamKind, ParamSpec, Point,
    PointExtras, PointRun, Room, RunDefaults, TrialValues,
};
use crate::experiments::common::util::{backing_note, fit_disk, Fit, Skipped};
use crate::safety::AlignedBuf;
use crate::{Error, Result};

/// Name and the metrics `advise` reads, as constants so a rename cannot
/// silently drop a finding (advise::evidence checks them against the registry).
pub(crate) const NAME: &str = "io.pregrow";
pub(crate) const METRIC_TOTAL_TIME: &str = "total_time";

pub(crate) struct Pregrow;

const METHODS: &[&str] = &["extend", "zero-fill", "ftruncate", "fallocate", "keep-size"];

pub(crate) static SPEC: Spec = Spec {
    name: NAME,
    summary: "create a file of known size: extend / zero-fill / ftruncate / fallocate / keep-size",
    method:
        "Each trial creates a new file (O_CREAT|O_EXCL) in the scratch directory and times two \
         phases with a monotonic clock, both ending with fsync() inside the timing (the notes \
         count the fsync calls of each phase). Creation: method=extend leaves the new file \
         empty and only fsyncs it (committing the new inode; write() extends it in the write \
         phase); zero-fill writes `size` zero bytes in `record` pieces; \
         ftruncate sets the length with ftruncate() (on Linux this makes a sparse file: no blocks \
         are allocated, the notes show the allocated bytes); fallocate allocates blocks with \
         fallocate(mode 0); keep-size uses fallocate(FALLOC_FL_KEEP_SIZE), which allocates \
         without changing the length. Write: the file is written from offset 0 with `record`-byte \
         pwrite() calls of random data (buffered), then fsync(). total = creation + write. The \
         file is deleted after the trial, outside the timing. Times in seconds (lower is better). \
         A method the file system cannot do (fallocate on ext2, exfat, vfat, UBIFS…) is probed \
         with a 4 KiB fallocate() on a probe file before the point and the point is skipped \
         with the reason (no metrics, a note), so the other methods still run. `size` follows \
         the target's free space (at most half of it).",
    params: &[
        ParamSpec::new("size", ParamKind::Size, "128M", "final file size")
            .range(4096.0, (1u64 << 40) as f64),
        ParamSpec::new("record", ParamKind::Size, "1M", "bytes per write() call")
            .range(512.0, (64u64 << 20) as f64),
        ParamSpec::new(
            "method",
            ParamKind::Choice(METHODS),
            "extend,zero-fill,ftruncate,fallocate,keep-size",
            "how the file is created before it is written (sweep)",
        ),
    ],
    metrics: &[
        MetricSpec::lower("create_time", "s", "creation phase, fsync included"),
        MetricSpec::lower("write_time", "s", "overwrite phase, fsync included"),
        MetricSpec::lower(METRIC_TOTAL_TIME, "s", "creation + write"),
    ],
    needs: Needs::SCRATCH,
    defaults: RunDefaults::new(1, 3, 8, 75.0),
    hidden: false,
};

// The metrics a trial emits, checked against the Spec while compiling.
const CREATE_TIME: Metric = SPEC.emits("create_time");
const TOTAL_TIME: Metric = SPEC.emits("total_time");
const WRITE_TIME: Metric = SPEC.emits("write_time");

/// A point's parameters, read by name once, here.
struct Params {
    size: u64,
    record: u64,
    method: String,
}

impl Params {
    fn parse(p: &Point) -> Result<Params> {
        Ok(Params {
            size: p.u64("size")?,
            record: p.u64("record")?,
            method: p.text("method")?.to_string(),
        })
    }
}

impl Experiment for Pregrow {
    fn spec(&self) -> &'static Spec {
        &SPEC
    }
    fn scratch_bytes(&self, p: &Point) -> u64 {
        // `size` is fitted to the free space in prepare(); a record is the least.
        Params::parse(p).map_or(0, |q| q.record)
    }
    fn footprint(&self, p: &Point, room: &Room) -> Footprint {
        let Ok(q) = Params::parse(p) else {
            return Footprint::default();
        };
        let size = fitted_size(&q, room).map_or(0, |f| f.value);
        let zero = q.method == "zero-fill";
        Footprint {
            trial_written: if zero { 2 * size } else { size },
            peak_memory: 2 * q.record,
            stored: size,
            ..Footprint::default()
        }
    }
    fn prepare(&self, ctx: &Ctx, p: &Point) -> Result<Box<dyn PointRun>> {
        let q = Params::parse(p)?;
        let fit = fitted_size(&q, &Room::for_ctx(ctx))?;
        let size = fit.value;
        let scratch = ctx.scratch()?;
        scratch.ensure_space(size)?;
        let method = q.method.as_str();
        let mode = match method {
            "fallocate" => Some(FallocateFlags::empty()),
            "keep-size" => Some(FallocateFlags::KEEP_SIZE),
            _ => None,
        };
        if let Some(mode) = mode {
            if let Some(why) = fallocate_unsupported(scratch.path(), mode)? {
                return Ok(Box::new(Skipped(format!(
                    "method={method}: {why}; {}",
                    backing_note(ctx)
                ))));
            }
        }
        let fitted = fit.fitted("size", "free space");
        let notes = fit.note.into_iter().chain([backing_note(ctx)]).collect();
        Ok(Box::new(PregrowRun {
            fitted,
            notes,
            dir: scratch.path().to_path_buf(),
            size,
            record: q.record as usize,
            method: q.method.clone(),
            data: AlignedBuf::random(q.record as usize, 17)?,
            zeros: AlignedBuf::zeroed(q.record as usize)?,
            n: 0,
            allocated_after_create: None,
            fsyncs: [0; 2],
        }))
    }
}

/// `size` fitted to half the target's free space, a multiple of `record`.
fn fitted_size(q: &Params, room: &Room) -> Result<Fit> {
    fit_disk("io.pregrow file", q.size, 1, q.record, q.record, room)
}

/// Some(reason) when fallocate(`mode`) is not supported in `dir` (probed on
/// a 4 KiB probe file, removed again).
fn fallocate_unsupported(dir: &Path, mode: FallocateFlags) -> Result<Option<String>> {
    let path = dir.join("pregrow-probe");
    let f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)
        .map_err(|e| Error::io("cannot create scratch file", &path, e))?;
    let _rm = Remove(&path);
    let e = match rustix::fs::fallocate(&f, mode, 0, 4096) {
        Ok(()) => return Ok(None),
        Err(e) => e,
    };
    match e {
        Errno::OPNOTSUPP | Errno::NOSYS => Ok(Some(format!(
            "fallocate({}) is not supported by this file system ({e})",
            if mode.is_empty() {
                "mode 0"
            } else {
                "FALLOC_FL_KEEP_SIZE"
            }
        ))),
        _ => Err(Error::io("cannot fallocate", &path, e.into())),
    }
}

struct PregrowRun {
    fitted: Option<Fitted>,
    notes: Vec<String>,
    dir: PathBuf,
    size: u64,
    record: usize,
    method: String,
    data: AlignedBuf,
    zeros: AlignedBuf,
    n: u64,
    allocated_after_create: Option<u64>,
    /// fsync() calls made inside the timed creation and write phases.
    fsyncs: [u64; 2],
}

fn write_all_at(f: &File, path: &Path, buf: &[u8], size: u64, record: usize) -> Result<()> {
    let mut off = 0u64;
    while off < size {
        let n = (size - off).min(record as u64) as usize;
        f.write_all_at(&buf[..n], off)
            .map_err(|e| Error::io("cannot write", path, e))?;
        off += n as u64;
        if off % (64 << 20) < record as u64 {
            crate::safety::signals::check()?;
        }
    }
    Ok(())
}

fn fallocate(f: &File, path: &Path, mode: FallocateFlags, len: u64) -> Result<()> {
    if let Err(e) = rustix::fs::fallocate(f, mode, 0, len) {
        if e == Errno::OPNOTSUPP {
            return Err(Error::environment(format!(
                "fallocate is not supported on the file system of {} (choose another --target \
                 or another method)",
                path.display()
            )));
        }
        return Err(Error::io("cannot fallocate", path, e.into()));
    }
    Ok(())
}

struct Remove<'a>(&'a Path);
impl Drop for Remove<'_> {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(self.0);
    }
}

impl PointRun for PregrowRun {
    fn fitted(&self) -> Vec<Fitted> {
        self.fitted.clone().into_iter().collect()
    }
    fn trial(&mut self, ctx: &Ctx) -> Result<TrialValues> {
        ctx.check_cancel()?;
        self.n += 1;
        let path = self.dir.join(format!("pregrow-{}-{}", self.method, self.n));
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| Error::io("cannot create scratch file", &path, e))?;
        let _rm = Remove(&path);
        let sync = |f: &File, count: &mut u64| {
            *count += 1;
            f.sync_all()
                .map_err(|e| Error::io("cannot fsync", &path, e))
        };
        let t = Instant::now();
        match self.method.as_str() {
            "extend" => {}
            "zero-fill" => {
                write_all_at(&f, &path, self.zeros.as_slice(), self.size, self.record)?;
            }
            "ftruncate" => f
                .set_len(self.size)
                .map_err(|e| Error::io("cannot ftruncate", &path, e))?,
            "fallocate" => fallocate(&f, &path, FallocateFlags::empty(), self.size)?,
            _ => fallocate(&f, &path, FallocateFlags::KEEP_SIZE, self.size)?,
        }
        // Every method, extend included, ends its creation with an fsync.
        sync(&f, &mut self.fsyncs[0])?;
        let create = t.elapsed().as_secs_f64();
        if self.allocated_after_create.is_none() {
            self.allocated_after_create = f.metadata().ok().map(|m| m.blocks() * 512);
        }
        let t = Instant::now();
        write_all_at(&f, &path, self.data.as_slice(), self.size, self.record)?;
        sync(&f, &mut self.fsyncs[1])?;
        let write = t.elapsed().as_secs_f64();
        drop(f);
        Ok(TrialValues::new()
            .with(CREATE_TIME, create)
            .with(WRITE_TIME, write)
            .with(TOTAL_TIME, create + write))
    }

    fn finish(&mut self, _ctx: &Ctx) -> Result<PointExtras> {
        let mut notes = std::mem::take(&mut self.notes);
        notes.push(format!(
            "method={}: fsync inside both phases ({} in creation, {} in write over {} trials); \
             {} written in {}-byte buffered pwrite() calls",
            self.method,
            self.fsyncs[0],
            self.fsyncs[1],
            self.n,
            crate::units::format_size(self.size),
            self.record
        ));
        if let Some(a) = self.allocated_after_create {
            notes.push(format!(
                "allocated after the creation phase: {} of {}{}",
                crate::units::format_size(a),
                crate::units::format_size(self.size),
                if self.method == "ftruncate" {
                    " — ftruncate makes a sparse file on Linux: no blocks are reserved"
                } else {
                    ""
                }
            ));
        }
        Ok(PointExtras {
            notes,
            ..Default::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::params::expand_points;

    #[test]
    fn extend_fsyncs_inside_its_creation_phase() {
        let o = [
            ("method".to_string(), "extend".to_string()),
            ("size".to_string(), "64K".to_string()),
            ("record".to_string(), "16K".to_string()),
        ];
        let p = &expand_points(SPEC.params, &o).unwrap()[0];
        let dir = tempfile::tempdir().unwrap();
        let scratch = crate::safety::Scratch::create(Some(dir.path())).unwrap();
        let ctx = Ctx::new(
            Some(std::sync::Arc::new(scratch)),
            dir.path().to_path_buf(),
            None,
        );
        let mut run = Pregrow.prepare(&ctx, p).unwrap();
        for _ in 0..3 {
            let v = run.trial(&ctx).unwrap();
            let create = v.0.iter().find(|(n, _)| *n == "create_time").unwrap().1;
            assert!(create > 0.0, "create_time {create}");
        }
        let notes = run.finish(&ctx).unwrap().notes.join("\n");
        assert!(
            notes.contains("(3 in creation, 3 in write over 3 trials)"),
            "{notes}"
        );
    }
}
