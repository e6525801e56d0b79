//! `io.device-read`: hdparm -tT style timing. Buffered sequential reads
//! with the cache flushed first (-t), and cached re-reads of the same 2 MiB
//! (-T), each for ~3 s, repeated 12 times; the summary's trimmed mean is
//! the classic "run it a dozen times, drop the extremes" figure. Block
//! devices are opened read-only and never written.
//!
//! libc: mincore (rustix has no wrapper)

use rustix::fs::OFlags;
use rustix::io::Errno;
use std::fs::File;
use std::os::unix::fs::{FileExt, FileTypeExt, OpenOptionsExt};
use std::path::PathBuf;
use std::time::Instant;

use crate::engine::Spec;
use crate::engine::{
    Ctx, Experiment, Metric, MetricSpec, Needs, ParamKind, ParamSpec, Point, PointExtras, PointRun,
    RunDefaults, TrialValues,
};
use crate::experiments::common::cache_control::{drop_file_cache, fadvise_dontneed};
use crate::experiments::common::util::fill_file;
use crate::safety::AlignedBuf;
use crate::{Error, Result};

pub(crate) struct DeviceRead;

const CHUNK: usize = 2 << 20;
/// BLKFLSBUF: flush the buffer cache of a block device (what hdparm does).
const BLKFLSBUF: rustix::ioctl::Opcode = 0x1261;

pub(crate) static SPEC: Spec = Spec {
    name: "io.device-read",
    summary: "hdparm -tT style: cache-flushed sequential reads and cached re-reads, 12 times",
    method: "source=device (root only) opens the block device holding the target read-only \
         (O_RDONLY; it is never written); source=file creates a `size` file in the scratch \
         directory instead; source=auto (default) uses the device when it can be opened, else the \
         file, and says so in the notes. A trial: (1) buffered_read, like hdparm -t: flush the cache (device: \
         BLKFLSBUF ioctl + posix_fadvise(DONTNEED); file: root sync + drop_caches, otherwise \
         fdatasync + fadvise), then read sequentially from offset 0 in 2 MiB read() calls until `duration` seconds \
         or the end of the device or file, whichever comes first, as hdparm does; a device \
         read faster than `duration` is read again from the start only after another flush, \
         untimed, and mincore(2) on a read-only mapping checks before every pass that the \
         flush took (resident_after_flush; a pass with more than 5% still cached is not \
         timed: on a loop device under a mounted filesystem BLKFLSBUF may drop nothing, and \
         wrapping round a 512 MiB device then timed RAM at 13 GB/s against hdparm -t's \
         3.3 GB/s); (2) cached_read, like hdparm -T: read the first \
         2 MiB once, then re-read those same 2 MiB from the page cache for `duration` seconds. \
         Throughput in B/s. When buffered_read reaches half of cached_read the notes say \
         it is memory speed, not the device's. Defaults: 12 trials of 2 x 3 s, no warm-up; use the summary's \
         trimmed mean (lowest and highest dropped).",
    params: &[
            ParamSpec::new(
                "source",
                ParamKind::Choice(&["auto", "device", "file"]),
                "auto",
                "device = the target's block device (root); file = a scratch file; auto = the \
                 device when it can be opened read-only, else a file (the notes say which)",
            ),
            ParamSpec::new("duration", ParamKind::Duration, "3s", "seconds per timing")
                .range(0.05, 600.0),
            ParamSpec::new("size", ParamKind::Size, "1G", "file size for source=file")
                .range(4.0 * CHUNK as f64, (1u64 << 40) as f64),
        ],
    metrics: &[
            MetricSpec::higher(
                "buffered_read",
                "B/s",
                "sequential reads, cache flushed first (hdparm -t)",
            ),
            MetricSpec::higher(
                "cached_read",
                "B/s",
                "re-reads of 2 MiB from the page cache (hdparm -T)",
            ),
            MetricSpec::lower(
                "resident_after_flush",
                "ratio",
                "worst share of the range still in the page cache after a flush (mincore); \
                 above 0.05 a pass is not timed",
            ),
        ],
    needs: Needs::SCRATCH,
    defaults: RunDefaults::new(0, 12, 12, 110.0),
    hidden: false,
};

// The metrics a trial emits, checked against the Spec while compiling.
const BUFFERED_READ: Metric = SPEC.emits("buffered_read");
const CACHED_READ: Metric = SPEC.emits("cached_read");
const RESIDENT_AFTER_FLUSH: Metric = SPEC.emits("resident_after_flush");

/// A point's parameters, read by name once, here.
struct Params {
    /// "device", "file" or "auto".
    source: String,
    size: u64,
    duration: f64,
}

impl Params {
    fn parse(p: &Point) -> Result<Params> {
        Ok(Params {
            source: p.text("source")?.to_string(),
            size: p.u64("size")?,
            duration: p.f64("duration")?,
        })
    }
}

impl Experiment for DeviceRead {
    fn spec(&self) -> &'static Spec {
        &SPEC
    }
    fn validate(&self, p: &Point) -> Result<()> {
        if Params::parse(p)?.source == "device" {
            crate::safety::require_root(|| {
                "io.device-read source=device reads the block device and needs root \
                 (run with sudo, or use -p source=file to time a scratch file)"
                    .into()
            })?;
        }
        Ok(())
    }
    fn scratch_bytes(&self, p: &Point) -> u64 {
        match Params::parse(p) {
            Ok(q) if q.source != "device" => q.size,
            _ => 0,
        }
    }
    fn trial_seconds(&self, p: &Point) -> Option<f64> {
        Params::parse(p).ok().map(|q| q.duration)
    }
    fn prepare(&self, ctx: &Ctx, p: &Point) -> Result<Box<dyn PointRun>> {
        let q = Params::parse(p)?;
        let (duration, source) = (q.duration, q.source.as_str());
        let mut fallback = None;
        let dev = if source == "file" {
            None
        } else {
            match open_device(ctx) {
                Ok(d) => Some(d),
                Err(e) if source == "auto" => {
                    fallback = Some(format!("source=auto: using a scratch file because {e}"));
                    None
                }
                Err(e) => return Err(e),
            }
        };
        let (path, file, is_dev, size) = match dev {
            Some((path, f, size)) => (path, f, true, size),
            None => {
                let size = q.size;
                let scratch = ctx.scratch()?;
                scratch.ensure_space(size)?;
                let path = scratch.file_path("device-read");
                let mut f = scratch.create_file("device-read", 0)?;
                fill_file(&mut f, &path, size, 31)?;
                (path, f, false, size)
            }
        };
        let file_probe = file
            .try_clone()
            .map_err(|e| Error::io("cannot dup", &path, e))?;
        Ok(Box::new(DeviceReadRun {
            path,
            file,
            is_dev,
            size: size / CHUNK as u64 * CHUNK as u64,
            duration,
            buf: AlignedBuf::zeroed(CHUNK)?,
            flush_note: String::new(),
            fallback,
            last_pass: 0,
            passes: Vec::new(),
            cut_short: 0,
            first_cached: 0,
            ratios: Vec::new(),
            mincore_ok: resident_share(&file_probe, CHUNK as u64).is_some(),
        }))
    }
}

/// Open the block device holding the target, read-only: (path, file, size).
fn open_device(ctx: &Ctx) -> Result<(PathBuf, File, u64)> {
    let dev = ctx.device.as_ref().ok_or_else(|| {
        Error::environment(format!(
            "{} is not on a block device (tmpfs, overlay, network?); use -p source=file",
            ctx.target.display()
        ))
    })?;
    let path = PathBuf::from(format!("/dev/{}", dev.name));
    let meta = std::fs::metadata(&path).map_err(|e| Error::io("cannot examine", &path, e))?;
    if !meta.file_type().is_block_device() {
        return Err(Error::environment(format!(
            "{} is not a block device",
            path.display()
        )));
    }
    if !ctx.is_root {
        return Err(Error::privilege(format!(
            "reading {} needs root (run with sudo, or use -p source=file)",
            path.display()
        )));
    }
    // Read-only, always.
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(OFlags::NOATIME.bits() as i32)
        .open(&path)
        .or_else(|_| File::open(&path))
        .map_err(|e| match Errno::from_io_error(&e) {
            Some(Errno::PERM) | Some(Errno::ACCESS) => Error::environment(format!(
                "opening {} read-only was refused even as root ({e}): a container or device \
                 cgroup forbids it; use -p source=file",
                path.display()
            )),
            _ => Error::io("cannot open (read-only)", &path, e),
        })?;
    // lseek(SEEK_END) gives a block device's size.
    let size = std::io::Seek::seek(&mut &f, std::io::SeekFrom::End(0)).unwrap_or(0);
    if size < CHUNK as u64 {
        return Err(Error::environment(format!(
            "cannot read the size of {}",
            path.display()
        )));
    }
    Ok((path, f, size))
}

struct DeviceReadRun {
    path: PathBuf,
    file: File,
    is_dev: bool,
    size: u64,
    duration: f64,
    buf: AlignedBuf,
    flush_note: String,
    fallback: Option<String>,
    /// Bytes the last buffered pass read (the range the next flush must empty).
    last_pass: u64,
    /// Buffered passes per trial.
    passes: Vec<u32>,
    /// Passes skipped because the flush did not take.
    cut_short: u32,
    /// Trials whose first pass started with more than STILL_CACHED cached.
    first_cached: u32,
    /// buffered_read / cached_read per trial.
    ratios: Vec<f64>,
    mincore_ok: bool,
}

// The scratch file of source=file goes with its point (the next point creates
// it again); a device is never removed.
impl Drop for DeviceReadRun {
    fn drop(&mut self) {
        if !self.is_dev {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// A flush "took" when at most this share of the range stayed cached.
const STILL_CACHED: f64 = 0.05;
/// A "device" figure at least this share of the cached figure is RAM speed.
const NEAR_CACHED: f64 = 0.5;

/// Share of the first `len` bytes of `file` resident in the page cache,
/// from mincore(2) over a read-only shared mapping, 64 MiB at a time (no
/// page is touched, so nothing is read in). None if it cannot be mapped.
fn resident_share(file: &File, len: u64) -> Option<f64> {
    let page = rustix::param::page_size().max(4096) as u64;
    let window = 64u64 << 20;
    let mut vec = vec![0u8; (window / page) as usize];
    let (mut resident, mut pages) = (0u64, 0u64);
    let mut off = 0u64;
    while off < len {
        let n = (len - off).min(window);
        // SAFETY: a fresh PROT_READ shared mapping of our own fd, unmapped
        // below; mincore writes one byte per page into `vec`, which is large
        // enough for `n` bytes.
        unsafe {
            use rustix::mm::{mmap, munmap, MapFlags, ProtFlags};
            let p = mmap(
                std::ptr::null_mut(),
                n as usize,
                ProtFlags::READ,
                MapFlags::SHARED,
                file,
                off,
            )
            .ok()?;
            let np = n.div_ceil(page) as usize;
            let rc = libc::mincore(p, n as usize, vec.as_mut_ptr());
            let _ = munmap(p, n as usize);
            if rc != 0 {
                return None;
            }
            resident += vec[..np].iter().filter(|&&b| b & 1 == 1).count() as u64;
            pages += np as u64;
        }
        off += n;
    }
    (pages > 0).then(|| resident as f64 / pages as f64)
}

/// A warning when buffered ("device") reads run near the cached figure.
fn device_verdict(ratios: &[f64], is_dev: bool) -> Option<String> {
    if ratios.is_empty() {
        return None;
    }
    let mut r = ratios.to_vec();
    r.sort_by(|a, b| a.total_cmp(b));
    let median = r[r.len() / 2];
    (median >= NEAR_CACHED).then(|| {
        format!(
            "warning: the buffered (\"{}\") reads ran at {:.0}% of the cached reads: that is \
             memory speed, not {}. Typical causes: a RAM-backed device (zram, a loop device whose \
             backing file sits in the page cache), or a cache the flush could not drop. Do not \
             read buffered_read as a device figure here.",
            if is_dev { "device" } else { "file" },
            median * 100.0,
            if is_dev {
                "the device's"
            } else {
                "the storage's"
            }
        )
    })
}

impl DeviceReadRun {
    fn flush(&mut self, ctx: &Ctx) -> Result<()> {
        if self.is_dev {
            // SAFETY: BLKFLSBUF takes no argument data; the fd is read-only.
            let rc = unsafe {
                rustix::ioctl::ioctl(&self.file, rustix::ioctl::NoArg::<BLKFLSBUF>::new())
            };
            fadvise_dontneed(&self.file, &self.path)?;
            self.flush_note = if rc.is_ok() {
                "cache flushed with BLKFLSBUF + posix_fadvise(DONTNEED) on the device".into()
            } else {
                "BLKFLSBUF failed; cache dropped with posix_fadvise(DONTNEED) only".into()
            };
        } else {
            self.flush_note =
                drop_file_cache(&self.file, &self.path, ctx.is_root, &ctx.cache_drops)?
                    .note()
                    .into();
        }
        Ok(())
    }
}

impl PointRun for DeviceReadRun {
    fn trial(&mut self, ctx: &Ctx) -> Result<TrialValues> {
        // -t: flushed sequential passes from offset 0, each stopping at the
        // end of the device (or file), like hdparm. A pass starts only after
        // a flush that mincore(2) shows took: a pass read from the page cache
        // is not a device figure (on a loop device under a mounted
        // filesystem BLKFLSBUF can leave everything cached, and wrapping
        // round a small device then timed RAM).
        let mut bytes = 0u64;
        let mut timed = 0.0;
        let mut passes = 0u32;
        let mut worst = 0.0f64;
        while timed < self.duration {
            self.flush(ctx)?;
            let check = if self.last_pass == 0 {
                self.size.min(1 << 30)
            } else {
                self.last_pass
            };
            let resident = resident_share(&self.file, check);
            if let Some(r) = resident {
                if r > STILL_CACHED && passes > 0 {
                    self.cut_short += 1;
                    break;
                }
                if r > STILL_CACHED {
                    self.first_cached += 1;
                }
                worst = worst.max(r);
            }
            passes += 1;
            let mut off = 0u64;
            let t = Instant::now();
            while off < self.size && timed + t.elapsed().as_secs_f64() < self.duration {
                if off.is_multiple_of(64 << 20) {
                    ctx.check_cancel()?;
                }
                let n = self
                    .file
                    .read_at(self.buf.as_mut_slice(), off)
                    .map_err(|e| Error::io("cannot read", &self.path, e))?;
                if n == 0 {
                    break;
                }
                off += n as u64;
            }
            timed += t.elapsed().as_secs_f64();
            bytes += off;
            self.last_pass = off.max(CHUNK as u64);
        }
        self.passes.push(passes);
        let buffered = bytes as f64 / timed;

        // -T: cached re-reads of the first 2 MiB.
        self.file
            .read_at(self.buf.as_mut_slice(), 0)
            .map_err(|e| Error::io("cannot read", &self.path, e))?;
        let mut bytes = 0u64;
        let t = Instant::now();
        let mut i = 0u32;
        while t.elapsed().as_secs_f64() < self.duration {
            if i.is_multiple_of(64) {
                ctx.check_cancel()?;
            }
            i += 1;
            let n = self
                .file
                .read_at(self.buf.as_mut_slice(), 0)
                .map_err(|e| Error::io("cannot read", &self.path, e))?;
            std::hint::black_box(&self.buf.as_slice()[..n]);
            bytes += n as u64;
        }
        let cached = bytes as f64 / t.elapsed().as_secs_f64();
        self.ratios.push(buffered / cached);
        let mut v = TrialValues::new()
            .with(BUFFERED_READ, buffered)
            .with(CACHED_READ, cached);
        if self.mincore_ok {
            v.set(RESIDENT_AFTER_FLUSH, worst);
        }
        Ok(v)
    }

    fn finish(&mut self, _ctx: &Ctx) -> Result<PointExtras> {
        let mut notes = vec![
            format!(
                "source: {} ({}, opened read-only)",
                self.path.display(),
                if self.is_dev {
                    "block device"
                } else {
                    "scratch file"
                }
            ),
            self.flush_note.clone(),
            self.fallback.clone().unwrap_or_default(),
            // A scratch file's cached_read depends on how it was written.
            if self.is_dev {
                String::new()
            } else {
                crate::experiments::common::util::layout_note(self.size)
            },
            format!(
                "buffered_read: passes from offset 0 that stop at the end of the {} ({} B), each \
                 after a flush checked with mincore(2); passes per trial: {}",
                if self.is_dev { "device" } else { "file" },
                self.size,
                self.passes
                    .iter()
                    .map(|p| p.to_string())
                    .collect::<Vec<_>>()
                    .join(" ")
            ),
            "use the trimmed mean of each metric (lowest and highest trial dropped), as with \
                 repeated hdparm -tT runs"
                .into(),
        ];
        if !self.mincore_ok {
            notes.push(
                "cannot check with mincore(2) whether the flush emptied the cache (mmap of the \
                 source refused): buffered_read may include cached data"
                    .into(),
            );
        }
        if self.cut_short > 0 {
            notes.push(format!(
                "warning: {} time(s) the flush left more than {:.0}% of the range in the page \
                 cache; those passes were not timed (the trial ended early instead)",
                self.cut_short,
                STILL_CACHED * 100.0
            ));
        }
        if self.first_cached > 0 {
            notes.push(format!(
                "warning: in {} trial(s) the flush left more than {:.0}% of the range in the page \
                 cache before the first pass (see resident_after_flush): those buffered_read \
                 figures include cached data",
                self.first_cached,
                STILL_CACHED * 100.0
            ));
        }
        notes.extend(device_verdict(&self.ratios, self.is_dev));
        notes.retain(|n| !n.is_empty());
        Ok(PointExtras {
            notes,
            ..Default::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// The flush check (issue 11.6): mincore sees a file's pages leave and
    /// come back into the page cache.
    #[test]
    fn resident_share_follows_the_page_cache() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let mut f = File::create(&path).unwrap();
        f.write_all(&vec![7u8; 8 << 20]).unwrap();
        f.sync_all().unwrap();
        let f = File::open(&path).unwrap();
        fadvise_dontneed(&f, &path).unwrap();
        let cold = resident_share(&f, 8 << 20).unwrap();
        let mut buf = vec![0u8; 1 << 20];
        for i in 0..8u64 {
            f.read_at(&mut buf, i << 20).unwrap();
        }
        let warm = resident_share(&f, 8 << 20).unwrap();
        assert!(cold < STILL_CACHED, "after DONTNEED: {cold}");
        assert!(warm > 0.9, "after reading: {warm}");
    }

    #[test]
    fn a_device_figure_near_the_cached_one_is_flagged() {
        assert!(device_verdict(&[0.9, 1.0, 0.95], true)
            .unwrap()
            .contains("memory speed"));
        assert!(device_verdict(&[0.2, 0.3, 0.25], true).is_none());
        assert!(device_verdict(&[], true).is_none());
    }
}
