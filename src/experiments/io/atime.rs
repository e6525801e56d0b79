//! `io.atime`: the cost of access-time updates. Create many small files,
//! then read them all back (like `cat * > /dev/null`), and count how many
//! reads updated an inode's atime. With root, compare strictatime,
//! relatime, noatime and lazytime on a loop-mounted scratch filesystem
//! that tunelab creates and removes.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::time::Instant;

use crate::engine::Spec;
use crate::engine::{
    Ctx, Experiment, Metric, MetricSpec, Needs, ParamKind, ParamSpec, Point, PointExtras, PointRun,
    RunDefaults, TrialValues,
};
use crate::lab::{LoopFs, LoopFsOptions};
use crate::safety::AlignedBuf;
use crate::{Error, Result};

pub(crate) struct Atime;

/// Smallest loop image: room for ext4's journal and the default 1000 files
/// (it was 128 MiB; a board's flash rarely has that to spare).
const IMAGE_MIN: u64 = 32 << 20;

const MODES: &[&str] = &["current", "strictatime", "relatime", "noatime", "lazytime"];

/// The atime mode in a list of mount options as /proc/mounts shows them:
/// `relatime` and `noatime` are listed, strictatime is the absence of both.
pub(crate) fn atime_mode(options: &[String]) -> String {
    let has = |o: &str| options.iter().any(|x| x == o);
    let base = if has("noatime") {
        "noatime"
    } else if has("relatime") {
        "relatime"
    } else {
        "strictatime"
    };
    if has("lazytime") {
        format!("{base},lazytime")
    } else {
        base.to_string()
    }
}

pub(crate) static SPEC: Spec = Spec {
    name: "io.atime",
    summary: "read back many small files: the cost of atime updates (strictatime/relatime/noatime/lazytime)",
    method: "Creates `files` files of `file_size` random bytes and syncs them (untimed). A trial \
         reads every file once (open, read() to EOF, close — like cat * > /dev/null, from the page \
         cache), timed (read_files_per_s), then calls syncfs() so that inodes dirtied by atime \
         updates are written, timed together with the reads (read_sync_files_per_s). atime_updates \
         counts the files whose st_atime changed during the pass (stat before and after, \
         untimed). atime=current uses the target as mounted and reports its mode \
         (strictatime/relatime/noatime, plus lazytime); the other values (root only) create a \
         ext4 image of twice the files' size, at least 32 MiB (sparse: mkfs writes little of it), on a loop device inside the scratch directory, mount it with that \
         option, run there, and unmount and delete it afterwards. Under relatime only the first \
         read after a modification (or after 24 h) updates atime, so later trials show its \
         steady state.",
    params: &[
            ParamSpec::new("files", ParamKind::Count, "1000", "number of files").range(1.0, 1_000_000.0),
            ParamSpec::new("file_size", ParamKind::Size, "4k", "bytes per file").range(0.0, (64u64 << 20) as f64),
            ParamSpec::new(
                "atime",
                ParamKind::Choice(MODES),
                "current,strictatime,relatime,noatime,lazytime",
                "current = the target as mounted; others mount a loop filesystem with that option (root)",
            ),
        ],
    metrics: &[
            MetricSpec::higher(
                "read_files_per_s",
                "ops/s",
                "files opened, read and closed per second",
            ),
            MetricSpec::higher(
                "read_sync_files_per_s",
                "ops/s",
                "the same with the closing syncfs() timed",
            ),
            MetricSpec::lower(
                "atime_updates",
                "count",
                "files whose atime changed during one pass",
            ),
        ],
    needs: Needs::SCRATCH,
    defaults: RunDefaults::new(1, 5, 10, 60.0),
    hidden: false,
};

// The metrics a trial emits, checked against the Spec while compiling.
const ATIME_UPDATES: Metric = SPEC.emits("atime_updates");
const READ_FILES_PER_S: Metric = SPEC.emits("read_files_per_s");
const READ_SYNC_FILES_PER_S: Metric = SPEC.emits("read_sync_files_per_s");

/// A point's parameters, read by name once, here.
struct Params {
    /// The mount option tried, or "current" (the target as mounted).
    atime: String,
    files: u64,
    file_size: u64,
}

impl Params {
    fn parse(p: &Point) -> Result<Params> {
        Ok(Params {
            atime: p.text("atime")?.to_string(),
            files: p.u64("files")?,
            file_size: p.u64("file_size")?,
        })
    }
}

impl Experiment for Atime {
    fn spec(&self) -> &'static Spec {
        &SPEC
    }
    fn validate(&self, p: &Point) -> Result<()> {
        let q = Params::parse(p)?;
        if q.atime != "current" {
            crate::safety::require_root(|| {
                format!(
                    "io.atime atime={} mounts a loop filesystem and needs root (run with sudo, \
                     or use -p atime=current to measure the target as mounted)",
                    q.atime
                )
            })?;
        }
        Ok(())
    }
    fn scratch_bytes(&self, p: &Point) -> u64 {
        let Ok(q) = Params::parse(p) else {
            return IMAGE_MIN;
        };
        let data = q.files * (q.file_size + 4096);
        match q.atime.as_str() {
            "current" => data,
            _ => (data * 2).max(IMAGE_MIN),
        }
    }
    fn prepare(&self, ctx: &Ctx, p: &Point) -> Result<Box<dyn PointRun>> {
        let scratch = ctx.scratch()?;
        let Params {
            atime: mode,
            files,
            file_size,
        } = Params::parse(p)?;
        let file_size = file_size as usize;
        let (loopfs, dir, mode_label) = if mode == "current" {
            let dir = scratch.path().join("atime-files");
            std::fs::create_dir(&dir).map_err(|e| Error::io("cannot create directory", &dir, e))?;
            let m = crate::system::mount_for_path(&ctx.target)
                .map(|m| atime_mode(&m.options))
                .unwrap_or_else(|| "unknown".into());
            (None, dir, format!("target as mounted: {m}"))
        } else {
            let size = (files * (file_size as u64 + 4096) * 2).max(IMAGE_MIN);
            scratch.ensure_space(size)?;
            let opts = LoopFsOptions {
                size,
                mount_options: mode.clone(),
                ..Default::default()
            };
            let lfs = LoopFs::create(scratch.path(), &format!("atime-{mode}"), &opts)?;
            let dir = lfs.mount_point().to_path_buf();
            let m = crate::system::mount_for_path(&dir)
                .map(|m| atime_mode(&m.options))
                .unwrap_or_else(|| mode.clone());
            (
                Some(lfs),
                dir,
                format!("loop ext4 mounted with {mode} (effective: {m})"),
            )
        };
        let buf = AlignedBuf::random(file_size.max(1), 41)?;
        let mut paths = Vec::with_capacity(files as usize);
        for i in 0..files {
            if i % 256 == 0 {
                ctx.check_cancel()?;
            }
            let pth = dir.join(format!("a{i:07}"));
            std::fs::write(&pth, &buf.as_slice()[..file_size])
                .map_err(|e| Error::io("cannot write", &pth, e))?;
            paths.push(pth);
        }
        let d = File::open(&dir).map_err(|e| Error::io("cannot open directory", &dir, e))?;
        syncfs(&d)?;
        Ok(Box::new(AtimeRun {
            _loopfs: loopfs,
            dir_fd: d,
            paths,
            buf: AlignedBuf::zeroed(65536)?,
            mode_label,
        }))
    }
}

fn syncfs(d: &File) -> Result<()> {
    rustix::fs::syncfs(d)
        .map_err(|e| Error::measurement(format!("syncfs failed: {}", std::io::Error::from(e))))?;
    Ok(())
}

struct AtimeRun {
    // Field order matters: files and the directory fd close before the
    // loop filesystem is unmounted.
    dir_fd: File,
    paths: Vec<PathBuf>,
    buf: AlignedBuf,
    mode_label: String,
    _loopfs: Option<LoopFs>,
}

impl AtimeRun {
    fn atimes(&self) -> Vec<(i64, i64)> {
        self.paths
            .iter()
            .map(|p| {
                std::fs::metadata(p)
                    .map(|m| (m.atime(), m.atime_nsec()))
                    .unwrap_or((0, 0))
            })
            .collect()
    }
}

impl PointRun for AtimeRun {
    fn trial(&mut self, ctx: &Ctx) -> Result<TrialValues> {
        let before = self.atimes();
        if let Some(newest) = before.iter().max() {
            wait_for_coarse_clock_past(*newest);
        }
        let t = Instant::now();
        for (i, p) in self.paths.iter().enumerate() {
            if i % 256 == 0 {
                ctx.check_cancel()?;
            }
            let mut f = File::open(p).map_err(|e| Error::io("cannot open", p, e))?;
            loop {
                let n = f
                    .read(self.buf.as_mut_slice())
                    .map_err(|e| Error::io("cannot read", p, e))?;
                if n == 0 {
                    break;
                }
                std::hint::black_box(&self.buf.as_slice()[..n]);
            }
        }
        let read = t.elapsed().as_secs_f64();
        syncfs(&self.dir_fd)?;
        let with_sync = t.elapsed().as_secs_f64();
        let after = self.atimes();
        let updates = before.iter().zip(&after).filter(|(a, b)| a != b).count();
        let n = self.paths.len() as f64;
        Ok(TrialValues::new()
            .with(READ_FILES_PER_S, n / read)
            .with(READ_SYNC_FILES_PER_S, n / with_sync)
            .with(ATIME_UPDATES, updates as f64))
    }

    fn finish(&mut self, _ctx: &Ctx) -> Result<PointExtras> {
        Ok(PointExtras {
            notes: vec![
                format!("atime mode: {}", self.mode_label),
                "reads are served from the page cache; the cost of atime shows as dirtied inodes \
                 written by syncfs()"
                    .into(),
            ],
            ..Default::default()
        })
    }
}

/// The kernel stamps atime from its coarse clock (one tick, 1–10 ms). A read
/// in the same tick as the previous one leaves atime unchanged even under
/// strictatime, so before timing wait (untimed) until the coarse clock has
/// passed every atime seen; then each update the kernel makes is visible.
fn wait_for_coarse_clock_past(newest: (i64, i64)) {
    let deadline = Instant::now() + std::time::Duration::from_secs(1);
    while coarse_realtime() <= newest && Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

fn coarse_realtime() -> (i64, i64) {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::RealtimeCoarse);
    // rustix's Timespec is 64-bit on every target (32-bit ARM boards too).
    #[allow(clippy::useless_conversion)]
    (i64::from(ts.tv_sec), i64::from(ts.tv_nsec))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atime_mode_from_options() {
        let o = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(atime_mode(&o(&["rw", "relatime"])), "relatime");
        assert_eq!(atime_mode(&o(&["rw", "noatime"])), "noatime");
        assert_eq!(atime_mode(&o(&["rw"])), "strictatime");
        assert_eq!(
            atime_mode(&o(&["rw", "strictatime", "lazytime"])),
            "strictatime,lazytime"
        );
    }
}
