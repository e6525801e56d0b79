//! The experiment engine: what an experiment declares, what a trial returns,
//! and the runner that repeats trials until the statistics are trustworthy.
//!
//! Names are checked once, where they are declared. Parameters: each
//! experiment reads its `Point` in one `parse` function into its own typed
//! struct, which the rest of the experiment is handed (tests/architecture.rs
//! keeps by-name reads inside `parse`); the stored point stays the name →
//! value map, so old runs load unchanged. Metrics: a trial emits a `Metric`
//! handle, never a string, and a handle is made only by `Spec::emits` (or
//! `metric_in` for a list several experiments share) in a `const` item,
//! which the compiler evaluates: a name missing from the Spec's metrics
//! fails the build. The runner still checks each emitted name against the
//! experiment's own Spec, for a handle borrowed from another experiment.

pub mod catalog;
pub(crate) mod import;
pub mod measure;
pub mod observer;
pub mod params;
pub(crate) mod pipeline;
pub(crate) mod process;
pub mod runner;
pub(crate) mod session;
pub(crate) mod spec;
pub(crate) mod start;
pub mod verbs;

use std::path::{Path, PathBuf};
use std::sync::Arc;

// The run model lives in the bottom module `crate::model` (store and report
// read it without the engine); experiments name its types through the engine.
pub(crate) use crate::model::run::{MetricResult, Series};
pub use crate::model::Better;
pub use params::{ParamKind, ParamSpec, ParamValue, Point};
pub use spec::{metric_in, Metric, MetricSpec, Needs, RunDefaults, Spec};

use crate::safety::{signals, Scratch};
use crate::stats::HistogramData;
use crate::system::BlockDevice;
use crate::{Error, Result};

/// The values one trial measured, one per metric (a metric may be absent in
/// some modes).
#[derive(Debug, Clone, Default)]
pub struct TrialValues(pub(crate) Vec<(&'static str, f64)>);

impl TrialValues {
    pub fn new() -> Self {
        TrialValues(Vec::with_capacity(4))
    }
    pub(crate) fn set(&mut self, metric: Metric, value: f64) -> &mut Self {
        self.0.push((metric.name(), value));
        self
    }
    pub fn with(mut self, metric: Metric, value: f64) -> Self {
        self.0.push((metric.name(), value));
        self
    }
}

/// What a point produces besides per-trial metrics, collected once at the end.
#[derive(Debug, Clone, Default)]
pub struct PointExtras {
    pub(crate) series: Vec<Series>,
    pub(crate) histograms: Vec<HistogramData>,
    /// How the figures were obtained (cache dropped? fsync timed?) and caveats.
    pub(crate) notes: Vec<String>,
}

/// Everything a running experiment may use.
pub struct Ctx {
    scratch: Option<Arc<Scratch>>,
    pub(crate) target: PathBuf,
    pub(crate) device: Option<BlockDevice>,
    pub(crate) is_root: bool,
    /// Failed page-cache drops here, which the validity guard flags
    /// (`cache_control::drop_file_cache` counts them).
    pub(crate) cache_drops: crate::observe::validity::CacheDrops,
    /// The time the point being prepared may take (set by the runner).
    point_time: std::sync::Mutex<Option<PointTime>>,
    /// Shortest time one trial should take, in ns (set by the runner from
    /// the plan).
    trial_ns: std::sync::atomic::AtomicU64,
}

/// Shortest time one trial should take unless the plan says otherwise
/// (`--trial-time`, a profile's `trial_time`): shorter work is batched
/// until it lasts this long, as lmbench's ENOUGH does.
pub const DEFAULT_TRIAL_TIME: std::time::Duration = std::time::Duration::from_millis(200);

/// What the runner allows the point it is about to prepare: its share of
/// what is left of the run's budget, and the trials (warm-up and the most
/// measured trials the plan allows) it should fit in it. Experiments whose trial length follows a size (a
/// file written and read on a slow device) size themselves to fit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct PointTime {
    pub(crate) seconds: f64,
    pub(crate) trials: usize,
}

impl Ctx {
    pub fn new(
        scratch: Option<Arc<Scratch>>,
        target: PathBuf,
        device: Option<BlockDevice>,
    ) -> Self {
        Ctx {
            scratch,
            target,
            device,
            is_root: crate::safety::is_root(),
            cache_drops: Default::default(),
            point_time: std::sync::Mutex::new(None),
            trial_ns: std::sync::atomic::AtomicU64::new(DEFAULT_TRIAL_TIME.as_nanos() as u64),
        }
    }

    /// Shortest time one trial should take: work shorter than this is
    /// repeated within the trial.
    pub(crate) fn trial_time(&self) -> std::time::Duration {
        std::time::Duration::from_nanos(self.trial_ns.load(std::sync::atomic::Ordering::Relaxed))
    }

    pub(crate) fn set_trial_time(&self, t: std::time::Duration) {
        self.trial_ns
            .store(t.as_nanos() as u64, std::sync::atomic::Ordering::Relaxed);
    }

    /// The time the point being prepared may take; None when the run has
    /// a fixed trial count (no budget) or runs outside the runner.
    pub(crate) fn point_time(&self) -> Option<PointTime> {
        self.point_time.lock().ok().and_then(|t| *t)
    }

    pub(crate) fn set_point_time(&self, t: Option<PointTime>) {
        if let Ok(mut g) = self.point_time.lock() {
            *g = t;
        }
    }

    /// The private scratch directory of this run.
    pub(crate) fn scratch(&self) -> Result<&Scratch> {
        self.scratch.as_deref().ok_or_else(|| {
            Error::measurement("internal: experiment did not declare it needs scratch space")
        })
    }

    pub(crate) fn scratch_dir(&self) -> Result<&Path> {
        Ok(self.scratch()?.path())
    }

    /// Returns `Err(Interrupted)` once SIGINT/SIGTERM/SIGHUP arrived; call it
    /// in long loops so a run stops promptly and cleans up.
    pub(crate) fn check_cancel(&self) -> Result<()> {
        signals::check()
    }
}

/// What one point will cost the machine, estimated before anything runs so
/// a study can say up front how much it writes (flash wear) and how much
/// memory it needs. Experiments size themselves to the `Room` first, so the
/// estimate is of what will really run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Footprint {
    /// Bytes written to the target once, when the point is set up.
    pub(crate) setup_written: u64,
    /// Bytes written to the target per trial (warm-up trials too).
    pub(crate) trial_written: u64,
    /// `trial_written` is one pass of a trial that repeats passes until it
    /// has lasted long enough: a fast device writes a multiple of it.
    pub(crate) repeats: bool,
    /// Peak bytes of data buffers (and page cache the point must keep
    /// resident) while the point runs, tunelab's own memory not included.
    pub(crate) peak_memory: u64,
    /// Bytes of files the point keeps on the target at its peak, beyond
    /// any already counted in `peak_memory`: on a RAM-backed target (tmpfs,
    /// ramfs, zram) they are memory too.
    pub(crate) stored: u64,
}

/// What the machine has room for, read when a point is sized: the memory
/// budget for data buffers (`system::limits`: MemAvailable and the memory
/// cgroup) and the free space of the target.
#[derive(Debug, Clone, Default)]
pub struct Room {
    /// Bytes a point may give its data buffers (None: unknown).
    pub(crate) memory: Option<u64>,
    /// Where `memory` came from, for notes.
    pub(crate) memory_why: String,
    /// Free bytes on the target's file system (None: unknown).
    pub(crate) disk_free: Option<u64>,
    /// Largest file the target's file system holds, when it is small
    /// (vfat: 4 GiB − 1), with the file system's name.
    pub(crate) max_file: Option<(u64, String)>,
    /// The target keeps its files in RAM (tmpfs, ramfs, a zram device):
    /// what backs it, e.g. "tmpfs". `disk_free` is then no more than the
    /// memory budget, because every file written there is memory.
    pub(crate) ram: Option<String>,
}

impl Room {
    /// A fixed room for tests: `memory` bytes of budget, `disk` free.
    #[cfg(test)]
    pub(crate) fn fixture(memory: u64, disk: Option<u64>) -> Room {
        Room {
            memory: Some(memory),
            memory_why: "fixture".into(),
            disk_free: disk,
            ..Room::default()
        }
    }

    /// Read now, for `target` (None: memory only).
    pub(crate) fn read(target: Option<&Path>) -> Room {
        let limits = crate::system::limits::MemoryLimits::read();
        let mount = target.and_then(crate::system::mount_for_path);
        let ram = mount.as_ref().and_then(ram_backing);
        let memory = limits.budget();
        let mut memory_why = format!(
            "{}; budget = 3/4 of the smaller less {} for tunelab",
            limits.explain(),
            crate::units::format_size(limits.reserve())
        );
        let disk_free = target
            .and_then(|t| crate::safety::scratch::free_bytes(t).ok())
            .map(|f| match (&ram, memory) {
                // Files on a RAM-backed target are memory: its free space is
                // no more than the memory budget (ramfs has no limit at all,
                // statvfs says 0 or u64::MAX).
                (Some(_), Some(m)) => {
                    if f == u64::MAX || f > m {
                        m
                    } else {
                        f
                    }
                }
                (_, _) if f == u64::MAX => limits.available().unwrap_or(f),
                _ => f,
            });
        if let Some(r) = &ram {
            memory_why.push_str(&format!(
                "; the target is {r}: its files count against the same memory"
            ));
        }
        Room {
            memory,
            memory_why,
            disk_free,
            max_file: mount.and_then(|m| match m.fs_type.as_str() {
                "vfat" | "msdos" | "fat" => Some(((4u64 << 30) - 1, m.fs_type)),
                _ => None,
            }),
            ram,
        }
    }

    /// Room for `ctx`'s target.
    pub(crate) fn for_ctx(ctx: &Ctx) -> Room {
        Room::read(Some(
            ctx.scratch
                .as_deref()
                .map(Scratch::path)
                .unwrap_or(ctx.target.as_path()),
        ))
    }
}

/// What backs a RAM-based mount: "tmpfs", "ramfs", or the zram device
/// ("zram0 (compressed RAM)"); None for anything else.
pub(crate) fn ram_backing(m: &crate::system::MountFact) -> Option<String> {
    match m.fs_type.as_str() {
        "tmpfs" | "ramfs" | "shmem" | "devtmpfs" => Some(m.fs_type.clone()),
        _ => {
            let dev = m.source.strip_prefix("/dev/")?;
            dev.starts_with("zram")
                .then(|| format!("{} on {dev} (compressed RAM)", m.fs_type))
        }
    }
}

/// State for one point: created by `prepare` (allocations, files), then
/// `trial` is called repeatedly. Drop releases everything.
pub trait PointRun {
    fn trial(&mut self, ctx: &Ctx) -> Result<TrialValues>;
    /// Called once after the warm-up trials, before the measured ones: a
    /// point that accumulates across trials (histograms) starts afresh here.
    fn warmup_done(&mut self) {}
    fn finish(&mut self, _ctx: &Ctx) -> Result<PointExtras> {
        Ok(PointExtras::default())
    }
    /// Parameters the point ran with a value other than the one asked for
    /// (a size fitted to the memory or disk there was), asked after
    /// `finish`: the runner stores the value used in the point's params and
    /// notes what was asked for and why.
    fn fitted(&self) -> Vec<Fitted> {
        Vec::new()
    }
}

/// A parameter value a point changed to fit the machine.
#[derive(Debug, Clone, PartialEq)]
pub struct Fitted {
    pub(crate) param: &'static str,
    /// The value the point really ran with.
    pub(crate) used: ParamValue,
    /// Why, in a few words ("memory budget 48 MiB").
    pub(crate) why: String,
}

/// What one experiment does; what it *is* (name, parameters, metrics,
/// needs, defaults) is its `Spec`, plain data in a `static`.
pub trait Experiment: Send + Sync {
    /// The declaration every reader (registry, `list`, `--help`, parameter
    /// parsing, stored kinds, docs) reads.
    fn spec(&self) -> &'static Spec;
    /// Cross-parameter checks, before anything runs.
    fn validate(&self, _point: &Point) -> Result<()> {
        Ok(())
    }
    /// Scratch bytes a point will write, checked against free space first.
    fn scratch_bytes(&self, _point: &Point) -> u64 {
        0
    }
    fn prepare(&self, ctx: &Ctx, point: &Point) -> Result<Box<dyn PointRun>>;
    /// What the point will write and hold in memory once sized to `room`
    /// (default: its scratch bytes written once, no data buffers).
    fn footprint(&self, point: &Point, _room: &Room) -> Footprint {
        Footprint {
            setup_written: self.scratch_bytes(point),
            ..Footprint::default()
        }
    }
    /// Seconds one trial of `point` lasts when a parameter fixes it (a
    /// `duration`), for a study's forecast; None when the machine decides.
    fn trial_seconds(&self, _point: &Point) -> Option<f64> {
        None
    }
}

/// Short reads of the Spec (borrowed from the static, never copied).
impl<'a> dyn Experiment + 'a {
    pub(crate) fn name(&self) -> &'static str {
        self.spec().name
    }
    pub(crate) fn params(&self) -> &'static [ParamSpec] {
        self.spec().params
    }
    pub(crate) fn metrics(&self) -> &'static [MetricSpec] {
        self.spec().metrics
    }
    pub(crate) fn needs(&self) -> Needs {
        self.spec().needs
    }
    pub(crate) fn defaults(&self) -> RunDefaults {
        self.spec().defaults
    }
}
