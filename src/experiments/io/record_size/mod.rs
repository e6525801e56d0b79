//! `io.record-size`: sequential write then read of one file at a given
//! record size (bytes per write()/read() call), buffered, O_DIRECT or
//! O_SYNC — the classic "throughput vs record size" study. Small records
//! are dominated by per-call overhead; reads roughly double from 1 KiB to
//! 16 KiB records on real hardware.
//!
//! Here the declaration; `prepare` lays the file out, fitted to the free
//! space, the device's speed and the time budget; `run` times the passes.

mod prepare;
mod run;

use crate::engine::Spec;
use crate::engine::{
    Ctx, Experiment, Footprint, MetricSpec, Needs, ParamKind, ParamSpec, Point, PointRun, Room,
    RunDefaults,
};
use crate::experiments::common::cache_control::IoMode;
use crate::experiments::common::util::{fit_disk, Fit};
use crate::{Error, Result};

/// Name and the metrics `advise` reads, as constants so a rename cannot
/// silently drop a finding (advise::evidence checks them against the registry).
pub(crate) const NAME: &str = "io.record-size";
pub(crate) const METRIC_WRITE_THROUGHPUT: &str = "write_throughput";

pub(crate) struct RecordSize;

pub(crate) static SPEC: Spec = Spec {
    name: "io.record-size",
    summary: "sequential write and cold read of a file vs record size (buffered/direct/sync)",
    method: "Creates one file of `size` random bytes in the scratch directory (outside the timing). \
         A trial runs passes of: (1) open the file for writing with the mode's flags (buffered and \
         sync = O_SYNC: truncated to 0 first so the pass writes a new file and sub-page records \
         never read-modify-write uncached pages; direct = O_DIRECT: overwritten in place, as \
         fio does with its laid-out file), write it sequentially from offset 0 with \
         pwrite() calls of `record` bytes (one random buffer whose every 512-byte sector is \
         stamped with its file offset and a per-pass id before each call, like fio's default \
         scramble_buffers, so no two sectors of the file and no two passes hold the same data \
         for dedup or skip-identical-overwrite storage to elide), stop the clock (write_throughput_nofsync), fsync(), \
         stop the clock again (write_throughput: the closing fsync is inside this figure); \
         (2) drop the file's cached pages (buffered/sync: root uses sync + echo 1 > \
         /proc/sys/vm/drop_caches, otherwise fdatasync + posix_fadvise(DONTNEED), the notes \
         say which; direct: O_DIRECT reads bypass the cache) and read it back sequentially with \
         pread() calls of `record` bytes (read_throughput). Opening and cache dropping are not \
         timed. Passes repeat until each phase has run at least the trial time (200 ms by default); throughput = file \
         bytes × passes / timed seconds, in B/s. `record` is the sweep: each record size is \
         one point and the report plots each metric against it; every point also carries a \
         one-point series per metric named `<metric> mode=<mode>` (x = record in B) that \
         the charts join into the throughput-vs-record-size curve. Defaults: size 32 MiB, \
         mode=direct, records 1k…1m, 1 warm-up and 3-5 trials per point, so the 9-point \
         default run stays under 2 minutes on a small VM (1 KiB O_DIRECT records run at a few \
         tens of MB/s). Use -p mode=buffered,direct,sync for all three curves and a larger \
         size (e.g. 256M) on big machines; in direct mode `record` and `size` must be \
         multiples of the device's logical block size. mode=direct on a file system that \
         refuses O_DIRECT (tmpfs before 6.6, UBIFS, some FUSE) is measured buffered with the \
         closing fsync and the page cache dropped before each read instead, and the notes say \
         so; every result names what backs the target (a block device, or RAM for tmpfs, \
         which accepts O_DIRECT from 6.6 on and then shows RAM speed). Timings shorter than \
         100 ms are mostly start-up and the closing fsync: with mode=direct one timed phase \
         therefore sweeps the file several times back to back from one open (as fio's \
         time_based loops over its file), with one fsync after the last sweep, the number \
         calibrated (fastest of two untimed rounds, 1.5x margin) so that a phase lasts at least 100 ms; the notes give the sweeps and the \
         shortest phase. `size` follows the target's free space (at most half of it).",
    params: &[
            ParamSpec::new("size", ParamKind::Size, "32M", "file size")
                .range(4096.0, (1u64 << 40) as f64),
            ParamSpec::new(
                "record",
                ParamKind::Size,
                "1k,2k,4k,8k,16k,32k,64k,128k,1m",
                "bytes per write()/read() call (sweep)",
            )
            .range(1.0, (64u64 << 20) as f64),
            ParamSpec::new(
                "mode",
                ParamKind::Choice(IoMode::CHOICES),
                "direct",
                "buffered (page cache), direct (O_DIRECT) or sync (O_SYNC writes)",
            ),
            ParamSpec::new(
                "work",
                ParamKind::Choice(&["fixed", "sized"]),
                "fixed",
                "fixed: the whole `size` with a fixed trial count; sized: the file cut by a \
                 probe to what a phase of the trial time writes (a slow board)",
            ),
        ],
    metrics: &[
            MetricSpec::higher(
                "write_throughput",
                "B/s",
                "file bytes written per second, closing fsync inside the timing",
            ),
            MetricSpec::higher(
                "write_throughput_nofsync",
                "B/s",
                "file bytes written per second, closing fsync not timed",
            ),
            MetricSpec::higher(
                "read_throughput",
                "B/s",
                "file bytes read per second from the device (cache dropped or O_DIRECT)",
            ),
        ],
    needs: Needs::SCRATCH,
    defaults: RunDefaults::new(1, 3, 5, 90.0),
    hidden: false,
};

/// A point's parameters, read by name once, here.
struct Params {
    size: u64,
    record: u64,
    mode: IoMode,
    /// work=sized: a file sized to the trial time when no budget sizes it.
    sized: bool,
}

impl Params {
    fn parse(p: &Point) -> Result<Params> {
        Ok(Params {
            size: p.u64("size")?,
            record: p.u64("record")?,
            mode: IoMode::parse(p.text("mode")?)?,
            sized: p.text("work")? == "sized",
        })
    }
}

impl Experiment for RecordSize {
    fn spec(&self) -> &'static Spec {
        &SPEC
    }
    fn validate(&self, p: &Point) -> Result<()> {
        let q = Params::parse(p)?;
        let (size, record) = (q.size, q.record);
        if record > size {
            return Err(Error::usage(format!(
                "io.record-size: record ({record}) is larger than size ({size}); use a larger size"
            )));
        }
        if size % record != 0 {
            return Err(Error::usage(format!(
                "io.record-size: size ({size}) must be a multiple of record ({record})"
            )));
        }
        Ok(())
    }
    fn scratch_bytes(&self, p: &Point) -> u64 {
        // `size` is fitted to the free space in prepare(); one record is the least.
        Params::parse(p).map_or(0, |q| q.record)
    }
    fn footprint(&self, p: &Point, room: &Room) -> Footprint {
        let Ok(q) = Params::parse(p) else {
            return Footprint::default();
        };
        let size = fitted_size(&q, room).map_or(0, |f| f.value);
        Footprint {
            // The fill, and two calibration writes with mode=direct.
            setup_written: 3 * size,
            trial_written: size,
            repeats: true,
            peak_memory: q.record,
            stored: size,
        }
    }
    fn prepare(&self, ctx: &Ctx, p: &Point) -> Result<Box<dyn PointRun>> {
        prepare::prepare(ctx, &Params::parse(p)?)
    }
}

/// `size` fitted to half the target's free space, a multiple of `record`.
fn fitted_size(q: &Params, room: &Room) -> Result<Fit> {
    fit_disk("io.record-size file", q.size, 1, q.record, q.record, room)
}
