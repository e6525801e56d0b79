//! `flash.capacity`: the fake-capacity check at file level (f3write then
//! f3read) inside the scratch directory. Opt-in: it writes `size` bytes, so
//! `size` has no default that fills anything.

use rustix::fs::OFlags;
use rustix::io::Errno;
use std::fs::{File, OpenOptions};
use std::io::{IsTerminal, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::PathBuf;
use std::time::Instant;

use crate::engine::{
    Ctx, Experiment, Footprint, Metric, MetricSpec, Needs, ParamKind, ParamSpec, Point,
    PointExtras, PointRun, Room, RunDefaults, Spec, TrialValues,
};
use crate::experiments::common::cache_control::fadvise_dontneed;
use crate::experiments::common::flash::capacity::{fill_and_verify, Verdict};
use crate::experiments::common::flash::FlashIo;
use crate::model::run::Series;
use crate::safety::AlignedBuf;
use crate::units::format_size;
use crate::{Error, Result};

pub(crate) const NAME: &str = "flash.capacity";
pub(crate) const METRIC_REAL: &str = "real_capacity";

pub(crate) static SPEC: Spec = Spec {
    name: NAME,
    summary: "fake-capacity check: fill files with position-stamped blocks, read them back (f3)",
    method: "Writes `size` bytes as files of `file_size` in the scratch directory, in \
             `block`-byte blocks that each carry their own position and a pattern keyed by \
             it (O_DIRECT where the file system has it, else fdatasync and \
             posix_fadvise(DONTNEED) so the reads come from the device), then reads every \
             block back. Intact: as written. Overwritten: it holds another position's block \
             (the card wraps addresses past its real size, as most fakes do). Corrupted: \
             anything else. real_capacity: the bytes read back intact; a card that wraps \
             keeps exactly its real size. Refused without `size` (it fills the file system) \
             and when the file system has less free space than `size`; the files are removed \
             after the check. Progress is shown on a terminal; the notes keep the rates.",
    params: &[
        ParamSpec::new(
            "size",
            ParamKind::Size,
            "0",
            "bytes to write and verify (required: e.g. size=1G; at most the free space)",
        )
        .range(0.0, (1u64 << 50) as f64),
        ParamSpec::new("file_size", ParamKind::Size, "256M", "bytes per file")
            .range(1048576.0, (1u64 << 40) as f64),
        ParamSpec::new("block", ParamKind::Size, "1M", "bytes per write and read")
            .range(4096.0, 67108864.0),
    ],
    metrics: &[
        MetricSpec::higher(METRIC_REAL, "B", "bytes that read back intact"),
        MetricSpec::lower("lost_bytes", "B", "bytes written that did not read back"),
        MetricSpec::lower(
            "overwritten_bytes",
            "B",
            "blocks holding another position's data",
        ),
        MetricSpec::higher("write_rate", "B/s", "fill rate, flush included"),
        MetricSpec::higher("read_rate", "B/s", "verify rate"),
    ],
    needs: Needs::SCRATCH,
    defaults: RunDefaults::ONE_RECORDING,
    hidden: false,
};

// The metrics a trial emits, checked against the Spec while compiling.
const LOST_BYTES: Metric = SPEC.emits("lost_bytes");
const OVERWRITTEN_BYTES: Metric = SPEC.emits("overwritten_bytes");
const READ_RATE: Metric = SPEC.emits("read_rate");
const REAL_CAPACITY: Metric = SPEC.emits(METRIC_REAL);
const WRITE_RATE: Metric = SPEC.emits("write_rate");

pub(crate) struct Capacity;

/// A point's parameters, read by name once, here.
#[derive(Default)]
struct Params {
    size: u64,
    file_size: u64,
    block: u64,
}

impl Params {
    fn parse(p: &Point) -> Result<Params> {
        Ok(Params {
            size: p.u64("size")?,
            file_size: p.u64("file_size")?,
            block: p.u64("block")?,
        })
    }
}

impl Experiment for Capacity {
    fn spec(&self) -> &'static Spec {
        &SPEC
    }
    fn validate(&self, p: &Point) -> Result<()> {
        let q = Params::parse(p)?;
        let (size, file, block) = (q.size, q.file_size, q.block);
        if size == 0 {
            return Err(Error::usage(
                "flash.capacity writes `size` bytes into the scratch directory's file system: \
                 give -p size=BYTES (e.g. size=1G; the free space at most) to opt in",
            ));
        }
        if block % 4096 != 0 || file % block != 0 || size < block {
            return Err(Error::usage(
                "block must be a multiple of 4 KiB, file_size a multiple of block, and size at \
                 least one block",
            ));
        }
        Ok(())
    }
    fn scratch_bytes(&self, p: &Point) -> u64 {
        Params::parse(p).map_or(0, |q| q.size)
    }
    fn footprint(&self, p: &Point, _room: &Room) -> Footprint {
        let q = Params::parse(p).unwrap_or_default();
        Footprint {
            trial_written: q.size,
            repeats: true,
            peak_memory: 2 * q.block + (1 << 20),
            ..Footprint::default()
        }
    }
    fn prepare(&self, ctx: &Ctx, p: &Point) -> Result<Box<dyn PointRun>> {
        let q = Params::parse(p)?;
        let size = q.size;
        // Bounded by the free space: the check never runs the disk full.
        ctx.scratch()?.ensure_space(size)?;
        let block = q.block as usize;
        Ok(Box::new(Run {
            dir: ctx.scratch_dir()?.to_path_buf(),
            size,
            file_size: q.file_size,
            a: AlignedBuf::zeroed(block)?,
            b: AlignedBuf::zeroed(block)?,
            notes: Vec::new(),
            series: Vec::new(),
        }))
    }
}

struct Run {
    dir: PathBuf,
    size: u64,
    file_size: u64,
    a: AlignedBuf,
    b: AlignedBuf,
    notes: Vec<String>,
    series: Vec<Series>,
}

impl PointRun for Run {
    fn trial(&mut self, ctx: &Ctx) -> Result<TrialValues> {
        let mut files = Files::new(self.dir.clone(), self.file_size, self.size);
        let tty = std::io::stderr().is_terminal();
        let mut show = |phase: &str, done: u64, total: u64| {
            if tty {
                eprint!(
                    "\r{NAME}: {phase} {} of {} ({:.0}%)   ",
                    format_size(done),
                    format_size(total),
                    done as f64 * 100.0 / total.max(1) as f64
                );
                let _ = std::io::stderr().flush();
            }
        };
        let seed = files.origin.elapsed().as_nanos() as u64;
        let v = fill_and_verify(
            &mut files,
            self.size,
            self.a.as_mut_slice(),
            self.b.as_mut_slice(),
            seed,
            &mut show,
            &|| ctx.check_cancel(),
        );
        if tty {
            eprintln!();
        }
        let direct = files.direct;
        files.remove()?;
        let v = v?;
        self.notes.extend(describe(&v, direct, self.size));
        self.series = vec![
            rates("fill rate", v.write_rates.clone()),
            rates("verify rate", v.read_rates.clone()),
        ];
        let lost = v.written - v.intact;
        Ok(TrialValues::new()
            .with(REAL_CAPACITY, v.real_capacity() as f64)
            .with(LOST_BYTES, lost as f64)
            .with(OVERWRITTEN_BYTES, v.overwritten as f64)
            .with(WRITE_RATE, v.written as f64 / v.write_seconds.max(1e-9))
            .with(READ_RATE, v.written as f64 / v.read_seconds.max(1e-9)))
    }
    fn finish(&mut self, _ctx: &Ctx) -> Result<PointExtras> {
        Ok(PointExtras {
            series: std::mem::take(&mut self.series),
            notes: std::mem::take(&mut self.notes),
            ..PointExtras::default()
        })
    }
}

fn rates(name: &str, points: Vec<(f64, f64)>) -> Series {
    Series {
        name: name.into(),
        x_label: "bytes done".into(),
        x_unit: "B".into(),
        y_label: "rate".into(),
        y_unit: "B/s".into(),
        points,
    }
}

/// The verdict in words, as f3read says it.
pub(crate) fn describe(v: &Verdict, direct: bool, asked: u64) -> Vec<String> {
    let mut n = vec![if direct {
        "written and read with O_DIRECT".to_string()
    } else {
        "no O_DIRECT here: fdatasync and posix_fadvise(DONTNEED) before the reads".to_string()
    }];
    if v.written < asked {
        n.push(format!(
            "the file system reported full after {} of the {} asked for: only that was verified",
            format_size(v.written),
            format_size(asked)
        ));
    }
    if !v.is_fake() {
        n.push(format!(
            "OK: all {} read back as written",
            format_size(v.written)
        ));
        return n;
    }
    n.push(format!(
        "FAKE or failing: only {} of {} read back intact ({} overwritten by other positions, \
         {} corrupted); first bad block at {}",
        format_size(v.intact),
        format_size(v.written),
        format_size(v.overwritten),
        format_size(v.corrupted),
        format_size(v.first_bad.unwrap_or(0))
    ));
    if let Some(w) = v.wrap {
        n.push(format!(
            "addresses wrap every {}: the card holds about that much whatever it reports",
            format_size(w)
        ));
    }
    n
}

/// The check's address space as files of `file_size` in `dir`.
struct Files {
    dir: PathBuf,
    file_size: u64,
    len: u64,
    open: Vec<(File, PathBuf)>,
    direct: bool,
    origin: Instant,
    /// Where the file system said it was full.
    full: Option<u64>,
}

impl Files {
    fn new(dir: PathBuf, file_size: u64, len: u64) -> Files {
        Files {
            dir,
            file_size,
            len,
            open: Vec::new(),
            direct: true,
            origin: Instant::now(),
            full: None,
        }
    }

    /// The file holding `offset`, created in order as the fill reaches it.
    fn file(&mut self, offset: u64) -> Result<(&File, &PathBuf, u64)> {
        let idx = (offset / self.file_size) as usize;
        while self.open.len() <= idx {
            let path = self.dir.join(format!("fill-{:05}.dat", self.open.len()));
            let open = |flags: i32| {
                OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create_new(true)
                    .custom_flags(flags)
                    .open(&path)
            };
            let file = match open(OFlags::DIRECT.bits() as i32) {
                Ok(f) => f,
                Err(_) => {
                    self.direct = false;
                    let _ = std::fs::remove_file(&path);
                    open(0).map_err(|e| Error::io("creating", &path, e))?
                }
            };
            self.open.push((file, path));
        }
        let (f, p) = &self.open[idx];
        Ok((f, p, offset % self.file_size))
    }

    fn remove(self) -> Result<()> {
        for (f, p) in self.open {
            drop(f);
            // A fake card may lose the files themselves (wrapped writes over
            // the directory): gone is removed.
            match std::fs::remove_file(&p) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(Error::io("removing", &p, e))
                }
                _ => {}
            }
        }
        Ok(())
    }
}

impl FlashIo for Files {
    fn len(&self) -> u64 {
        self.full.unwrap_or(self.len)
    }
    fn read_at(&mut self, buf: &mut [u8], offset: u64) -> Result<()> {
        let (f, p, at) = self.file(offset)?;
        f.read_exact_at(buf, at)
            .map_err(|e| Error::io("reading", p, e))
    }
    fn write_at(&mut self, buf: &[u8], offset: u64) -> Result<()> {
        let (f, p, at) = self.file(offset)?;
        match f.write_all_at(buf, at) {
            // Full: the fill ends here (len shrinks), as f3write's does; a
            // fake card whose wrapped writes broke the allocation table
            // reports full early, and that is part of the verdict.
            Err(e)
                if matches!(
                    Errno::from_io_error(&e),
                    Some(Errno::NOSPC) | Some(Errno::DQUOT)
                ) =>
            {
                self.full = Some(offset);
                Ok(())
            }
            other => other.map_err(|e| Error::io("writing", p, e)),
        }
    }
    fn flush(&mut self) -> Result<()> {
        for (f, p) in &self.open {
            f.sync_data().map_err(|e| Error::io("syncing", p, e))?;
            if !self.direct {
                fadvise_dontneed(f, p)?;
            }
        }
        Ok(())
    }
    fn now(&self) -> f64 {
        self.origin.elapsed().as_secs_f64()
    }
}
