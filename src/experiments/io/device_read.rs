//! `io.device-read`: hdparm -tT style timing. Buffered sequential reads
//! with the cache flushed first (-t), and cached re-reads of the same 2 MiB
//! (-T), each for ~3 s, repeated 12 times; the summary's trimmed mean is
//! the classic "run it a dozen times, drop the extremes" figure. Block
//! devices are opened read-only and never written.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, FileTypeExt, OpenOptionsExt};
use std::path::PathBuf;
use std::time::Instant;

use super::cache_control::{drop_file_cache, fadvise_dontneed};
use crate::engine::{
    Ctx, Experiment, MetricSpec, Needs, ParamKind, ParamSpec, Point, PointExtras, PointRun,
    RunDefaults, TrialValues,
};
use crate::experiments::util::fill_file;
use crate::safety::AlignedBuf;
use crate::{Error, Result};

pub struct DeviceRead;

const CHUNK: usize = 2 << 20;
/// BLKFLSBUF: flush the buffer cache of a block device (what hdparm does).
const BLKFLSBUF: libc::c_ulong = 0x1261;

impl Experiment for DeviceRead {
    fn name(&self) -> &'static str {
        "io.device-read"
    }
    fn summary(&self) -> &'static str {
        "hdparm -tT style: cache-flushed sequential reads and cached re-reads, 12 times"
    }
    fn method(&self) -> &'static str {
        "source=device (root only) opens the block device holding the target read-only \
         (O_RDONLY; it is never written); source=file creates a `size` file in the scratch \
         directory instead; source=auto (default) uses the device when it can be opened, else the \
         file, and says so in the notes. A trial: (1) buffered_read, like hdparm -t: flush the cache (device: \
         BLKFLSBUF ioctl + posix_fadvise(DONTNEED); file: root sync + drop_caches, otherwise \
         fdatasync + fadvise), then read sequentially from offset 0 in 2 MiB read() calls for \
         `duration` seconds (at the end of the device or file the cache is flushed again, \
         untimed, and reading wraps to the start); (2) cached_read, like hdparm -T: read the first \
         2 MiB once, then re-read those same 2 MiB from the page cache for `duration` seconds. \
         Throughput in B/s. Defaults: 12 trials of 2 x 3 s, no warm-up; use the summary's \
         trimmed mean (lowest and highest dropped)."
    }
    fn params(&self) -> Vec<ParamSpec> {
        vec![
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
        ]
    }
    fn metrics(&self) -> Vec<MetricSpec> {
        vec![
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
        ]
    }
    fn needs(&self) -> Needs {
        Needs::SCRATCH
    }
    fn defaults(&self) -> RunDefaults {
        RunDefaults {
            warmup: 0,
            min_trials: 12,
            max_trials: 12,
            budget: 110.0,
        }
    }
    fn validate(&self, p: &Point) -> Result<()> {
        if p.text("source")? == "device" && !crate::safety::is_root() {
            return Err(Error::privilege(
                "io.device-read source=device reads the block device and needs root \
                 (run with sudo, or use -p source=file to time a scratch file)",
            ));
        }
        Ok(())
    }
    fn scratch_bytes(&self, p: &Point) -> u64 {
        match p.text("source") {
            Ok("device") => 0,
            _ => p.u64("size").unwrap_or(0),
        }
    }
    fn prepare(&self, ctx: &Ctx, p: &Point) -> Result<Box<dyn PointRun>> {
        let duration = p.f64("duration")?;
        let source = p.text("source")?;
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
                let size = p.u64("size")?;
                let scratch = ctx.scratch()?;
                scratch.ensure_space(size)?;
                let path = scratch.file_path("device-read");
                let mut f = scratch.create_file("device-read", 0)?;
                fill_file(&mut f, &path, size, 31)?;
                (path, f, false, size)
            }
        };
        Ok(Box::new(DeviceReadRun {
            path,
            file,
            is_dev,
            size: size / CHUNK as u64 * CHUNK as u64,
            duration,
            buf: AlignedBuf::zeroed(CHUNK)?,
            flush_note: String::new(),
            fallback,
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
        .custom_flags(libc::O_NOATIME)
        .open(&path)
        .or_else(|_| File::open(&path))
        .map_err(|e| match e.raw_os_error() {
            Some(libc::EPERM) | Some(libc::EACCES) => Error::environment(format!(
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
}

impl DeviceReadRun {
    fn flush(&mut self, ctx: &Ctx) -> Result<()> {
        if self.is_dev {
            // SAFETY: BLKFLSBUF takes no argument data; the fd is read-only.
            let rc = unsafe { libc::ioctl(self.file.as_raw_fd(), BLKFLSBUF as _, 0) };
            fadvise_dontneed(&self.file, &self.path)?;
            self.flush_note = if rc == 0 {
                "cache flushed with BLKFLSBUF + posix_fadvise(DONTNEED) on the device".into()
            } else {
                "BLKFLSBUF failed; cache dropped with posix_fadvise(DONTNEED) only".into()
            };
        } else {
            self.flush_note = drop_file_cache(&self.file, &self.path, ctx.is_root)?
                .note()
                .into();
        }
        Ok(())
    }
}

impl PointRun for DeviceReadRun {
    fn trial(&mut self, ctx: &Ctx) -> Result<TrialValues> {
        // -t: flushed sequential reads.
        self.flush(ctx)?;
        let mut off = 0u64;
        let mut bytes = 0u64;
        let mut timed = 0.0;
        let mut t = Instant::now();
        while timed + t.elapsed().as_secs_f64() < self.duration {
            ctx.check_cancel()?;
            if off >= self.size {
                timed += t.elapsed().as_secs_f64();
                self.flush(ctx)?;
                off = 0;
                t = Instant::now();
            }
            let n = self
                .file
                .read_at(self.buf.as_mut_slice(), off)
                .map_err(|e| Error::io("cannot read", &self.path, e))?;
            if n == 0 {
                off = self.size;
                continue;
            }
            off += n as u64;
            bytes += n as u64;
        }
        timed += t.elapsed().as_secs_f64();
        let buffered = bytes as f64 / timed;

        // -T: cached re-reads of the first 2 MiB.
        self.file
            .read_at(self.buf.as_mut_slice(), 0)
            .map_err(|e| Error::io("cannot read", &self.path, e))?;
        let mut bytes = 0u64;
        let t = Instant::now();
        let mut i = 0u32;
        while t.elapsed().as_secs_f64() < self.duration {
            if i % 64 == 0 {
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
        Ok(TrialValues::new()
            .with("buffered_read", buffered)
            .with("cached_read", cached))
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
            "use the trimmed mean of each metric (lowest and highest trial dropped), as with \
                 repeated hdparm -tT runs"
                .into(),
        ];
        notes.retain(|n| !n.is_empty());
        Ok(PointExtras {
            notes,
            ..Default::default()
        })
    }
}
