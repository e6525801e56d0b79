//! `tunelab monitor`'s sampling: every view reads cumulative counters
//! (`crate::observe`), and per interval turns their change into rates — a
//! JSON object, and through `report::monitor` (rendering apart from
//! sampling) a table and OpenMetrics gauges, for the CLI to print in the
//! format asked for. [`plan`] starts the view (its first counters read,
//! an unreadable source refused before any sample); [`Planned::measure`]
//! runs the interval loop, each sample handed to the CLI to print.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::observe::dirtywatch::{DirtySample, DirtyWatch};
use crate::observe::hogs::{self, HogsFilter, HogsReader, TaskTimes};
use crate::observe::{dirty, hints, iostat, irq, pressure, vmstat};
use crate::report::monitor as text;
use crate::{Error, Result};

mod delta_view;
mod dirty_view;
mod hogs_view;
mod iostat_view;
mod irq_view;
mod slab_view;
mod vmstat_view;

use delta_view::*;
use dirty_view::*;
use hogs_view::*;
use iostat_view::*;
use irq_view::*;
use slab_view::*;
use vmstat_view::*;

/// What to watch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Vmstat,
    Iostat,
    Hogs,
    Irq,
    Slab,
    Dirty,
    Psi,
    Power,
}

impl Kind {
    /// Every view: its name (the CLI's word, the JSON's "view") and what it
    /// shows (the CLI's help).
    pub(crate) const ALL: [(Kind, &'static str, &'static str); 8] = [
        (
            Kind::Vmstat,
            "vmstat",
            "procs, memory, swap, io, system, cpu (like procps vmstat)",
        ),
        (
            Kind::Iostat,
            "iostat",
            "per-device r/s, w/s, kB/s, await, aqu-sz, areq-sz, %util (like iostat -x)",
        ),
        (
            Kind::Hogs,
            "hogs",
            "processes (or threads) using the most CPU (like QNX hogs)",
        ),
        (
            Kind::Irq,
            "irq",
            "interrupt and softirq rates per source and CPU (like sar -I)",
        ),
        (
            Kind::Slab,
            "slab",
            "slab caches with most objects and churn (like slabtop; needs root)",
        ),
        (
            Kind::Dirty,
            "dirty",
            "Dirty + Writeback against the writer-throttling threshold",
        ),
        (
            Kind::Psi,
            "psi",
            "pressure stall information: % of time stalled on cpu, memory, io",
        ),
        (
            Kind::Power,
            "power",
            "cpufreq governor and frequency, cpuidle residency per CPU",
        ),
    ];

    /// The view called `name` in [`Kind::ALL`].
    pub(crate) fn named(name: &str) -> Option<Kind> {
        Self::ALL
            .iter()
            .find(|(_, n, _)| *n == name)
            .map(|(k, _, _)| *k)
    }

    pub(crate) fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(k, _, _)| *k == self)
            .map_or("", |(_, name, _)| name)
    }
}

/// The view and its options, as the CLI parsed them.
pub(crate) struct Options {
    pub(crate) kind: Kind,
    /// iostat: only these devices (empty: every disk with I/O since boot).
    pub(crate) devices: Vec<String>,
    /// hogs/irq/slab: at most this many rows per sample.
    pub(crate) top: usize,
    /// hogs: only tasks using at least this % of one CPU.
    pub(crate) min_pct: f64,
    /// hogs: threads instead of processes.
    pub(crate) threads: bool,
    /// Where the rows are shown (irq and power fit their lines to it).
    pub(crate) term: crate::report::table::Terminal,
}

/// What one view produced for one interval.
#[derive(Default)]
pub(crate) struct Emitted {
    pub(crate) json: Value,
    pub(crate) table: String,
    /// (metric name, labels, value, help) for OpenMetrics.
    pub(crate) metrics: Vec<(String, String, f64)>,
    /// Printed on stderr (tunelab: warning: …).
    pub(crate) warnings: Vec<String>,
    /// Printed on stderr as hints (suppressed by --quiet).
    pub(crate) hints: Vec<String>,
}

impl Emitted {
    /// A view's rendered interval and its JSON object.
    fn shown(shown: text::Shown, json: Value) -> Emitted {
        Emitted {
            table: shown.table,
            metrics: shown.gauges,
            json,
            ..Default::default()
        }
    }
}

/// One view's state between samples: the counters read last.
pub(crate) trait ViewState {
    fn sample(&mut self, seconds: f64) -> Result<Emitted>;
    /// Printed once before the first table.
    fn preface(&self) -> Vec<String> {
        Vec::new()
    }
    /// Printed when the monitor stops: (table text, JSON).
    fn finish(&self) -> Option<(String, Value)> {
        None
    }
}

fn env_err(what: &str, e: std::io::Error) -> Error {
    match e.kind() {
        std::io::ErrorKind::PermissionDenied => {
            Error::privilege(format!("{what}: {e} (run as root to read it)"))
        }
        _ => Error::environment(format!("{what}: {e}")),
    }
}

/// What `monitor` was asked for, as parsed.
pub(crate) struct Request {
    pub(crate) options: Options,
    /// Seconds between samples.
    pub(crate) interval: f64,
    /// Stop after this many samples (None: until a signal).
    pub(crate) count: Option<u64>,
}

/// The view started (its first counters read) and the loop's bounds.
pub(crate) struct Planned {
    view: Box<dyn ViewState>,
    interval: f64,
    count: Option<u64>,
}

/// Start the view the request names: its first counters are read now, so
/// a source that cannot be read is refused before any sample.
pub(crate) fn plan(req: Request) -> Result<Planned> {
    Ok(Planned {
        view: make_view(&req.options)?,
        interval: req.interval,
        count: req.count,
    })
}

impl Planned {
    /// Printed once before the first table.
    pub(crate) fn preface(&self) -> Vec<String> {
        self.view.preface()
    }

    /// Sample every interval until the count, a signal or `sink` says stop
    /// (see [`watch`]).
    pub(crate) fn measure(
        &mut self,
        sink: &mut dyn FnMut(Sample) -> Result<bool>,
    ) -> Result<Watched> {
        watch(self.view.as_mut(), self.interval, self.count, sink)
    }

    /// The view's summary when the monitor stops: (table text, JSON).
    pub(crate) fn finish(&self) -> Option<(String, Value)> {
        self.view.finish()
    }
}

/// Start watching: the first counters are read now.
fn make_view(a: &Options) -> Result<Box<dyn ViewState>> {
    let term = a.term;
    Ok(match a.kind {
        Kind::Vmstat => Box::new(VmstatView {
            prev: vmstat::read().map_err(|e| env_err("cannot read /proc", e))?,
            window: Vec::new(),
            lines: 0,
        }),
        Kind::Iostat => {
            let mut v = IostatView {
                names: (!a.devices.is_empty()).then(|| a.devices.clone()),
                prev: Vec::new(),
            };
            v.prev = v.read()?;
            if let Some(names) = &v.names {
                for n in names {
                    if !v.prev.iter().any(|d| &d.name == n) {
                        return Err(Error::usage(format!(
                            "no block device '{n}' in /proc/diskstats (see lsblk)"
                        )));
                    }
                }
            } else if v.prev.is_empty() {
                return Err(Error::environment(
                    "no disk with any I/O in /proc/diskstats",
                ));
            }
            Box::new(v)
        }
        Kind::Hogs => {
            if a.min_pct.is_nan() || a.min_pct < 0.0 {
                return Err(Error::usage("--min-pct must be zero or more"));
            }
            let mut reader = HogsReader::new();
            let prev = reader.read(a.threads);
            Box::new(HogsView {
                reader,
                prev,
                threads: a.threads,
                filter: HogsFilter {
                    min_pct: a.min_pct,
                    limit: a.top.max(1),
                },
                ncpu: std::thread::available_parallelism().map_or(1, |n| n.get()),
                hz: hogs::ticks_per_second(),
            })
        }
        Kind::Irq => Box::new(IrqView {
            prev_hard: irq::read_interrupts()
                .map_err(|e| env_err("cannot read /proc/interrupts", e))?,
            prev_soft: irq::read_softirqs().unwrap_or_default(),
            top: a.top.max(1),
            term: a.term,
        }),
        Kind::Slab => Box::new(SlabView {
            prev: pressure::read_slabinfo()
                .map_err(|e| env_err("cannot read /proc/slabinfo", e))?,
            top: a.top.max(1),
        }),
        Kind::Dirty => {
            let (_, limits) = read_dirty_sample()?;
            Box::new(DirtyView {
                watch: DirtyWatch::new(limits),
                lines: 0,
            })
        }
        Kind::Psi => Box::new(DeltaView::start(
            "pressure stall information",
            pressure::read_psi,
            pressure::psi_delta,
            text::psi,
            "resources",
        )?),
        Kind::Power => Box::new(DeltaView::start(
            "CPU power information",
            pressure::read_power,
            pressure::power_delta,
            move |rows: &[_]| text::power(rows, term),
            "cpus",
        )?),
    })
}

/// One interval a view measured.
pub(crate) struct Sample {
    /// 1 for the first.
    pub(crate) n: u64,
    /// Seconds since the monitor started, at the read.
    pub(crate) t: f64,
    /// Seconds since the Unix epoch, at the read.
    pub(crate) unix: f64,
    /// The interval's measured length, in seconds.
    pub(crate) seconds: f64,
    pub(crate) emitted: Emitted,
}

/// How watching ended.
pub(crate) struct Watched {
    /// Samples taken.
    pub(crate) n: u64,
    /// The signal that stopped it (a monitor's normal end).
    pub(crate) stopped_by: Option<&'static str>,
    /// The sink refused more (a closed stdout): nothing more is shown.
    pub(crate) closed: bool,
}

/// Sample `view` every `interval` seconds (deadlines start + k × interval,
/// so the read time does not drift) until `count` samples, a signal, or
/// `sink` returning `false`; each interval goes to `sink` as it is read.
fn watch(
    view: &mut dyn ViewState,
    interval: f64,
    count: Option<u64>,
    sink: &mut dyn FnMut(Sample) -> Result<bool>,
) -> Result<Watched> {
    let interval = Duration::from_secs_f64(interval);
    let start = Instant::now();
    let mut last = start;
    let mut w = Watched {
        n: 0,
        stopped_by: None,
        closed: false,
    };
    while !matches!(count, Some(c) if w.n >= c) {
        if let Err(sig) = sleep_until(start + interval * (w.n as u32 + 1)) {
            w.stopped_by = Some(sig);
            break;
        }
        let now = Instant::now();
        let seconds = now.duration_since(last).as_secs_f64();
        last = now;
        let emitted = view.sample(seconds)?;
        w.n += 1;
        let unix = std::time::SystemTime::now()
            .duration_since(std::time::SystemTime::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        let sample = Sample {
            n: w.n,
            t: now.duration_since(start).as_secs_f64(),
            unix,
            seconds,
            emitted,
        };
        if !sink(sample)? {
            w.closed = true;
            break;
        }
    }
    Ok(w)
}

/// Sleep until `deadline` in short slices; `Err` with the signal's name
/// when a signal asked to stop.
fn sleep_until(deadline: Instant) -> std::result::Result<(), &'static str> {
    loop {
        if let Some(sig) = crate::safety::signals::caught() {
            return Err(sig);
        }
        let now = Instant::now();
        if now >= deadline {
            return Ok(());
        }
        std::thread::sleep((deadline - now).min(Duration::from_millis(100)));
    }
}
