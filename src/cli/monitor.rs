//! `tunelab monitor VIEW`: watch the machine like vmstat, iostat -x, hogs,
//! sar -I, slabtop, a dirty-page watch, PSI and CPU power states.
//!
//! Every view reads cumulative counters, sleeps one interval (in 100 ms
//! slices, so Ctrl-C is noticed at once) and prints the rates of that
//! interval: a table on a terminal, one JSON object per line with `--json`
//! (flushed per sample), or a Prometheus/OpenMetrics text exposition per
//! sample with `--format openmetrics`. Unlike procps vmstat / sysstat iostat
//! there is no first "since boot" line: every line is one measured interval.
//!
//! Stopping: `--count N` stops after N samples; Ctrl-C (SIGINT/SIGTERM) stops
//! cleanly after printing the dirty view's summary, and the exit code is 0
//! — stopping a monitor is its normal end, not a failure. A closed stdout
//! (`| head`) also ends it with 0.

use std::fmt::Write as _;
use std::io::Write;
use std::time::{Duration, Instant, SystemTime};

use serde_json::{json, Value};

use super::Out;
use crate::engine::params::parse_duration;
use crate::observe::dirtywatch::{DirtySample, DirtyWatch};
use crate::observe::hogs::{self, HogsFilter, HogsReader, TaskTimes};
use crate::observe::{dirty, hints, iostat, irq, pressure, vmstat};
use crate::report::units::human;
use crate::safety::signals;
use crate::{Error, Result};

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum View {
    /// procs, memory, swap, io, system, cpu (like procps vmstat).
    Vmstat,
    /// per-device r/s, w/s, kB/s, await, aqu-sz, areq-sz, %util (like iostat -x).
    Iostat,
    /// processes (or threads) using the most CPU (like QNX hogs).
    Hogs,
    /// interrupt and softirq rates per source and CPU (like sar -I).
    Irq,
    /// slab caches with most objects and churn (like slabtop; needs root).
    Slab,
    /// Dirty + Writeback against the writer-throttling threshold.
    Dirty,
    /// pressure stall information: % of time stalled on cpu, memory, io.
    Psi,
    /// cpufreq governor and frequency, cpuidle residency per CPU.
    Power,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Table,
    Json,
    Openmetrics,
}

#[derive(clap::Args, Debug)]
pub struct Args {
    /// What to watch.
    #[arg(value_enum)]
    pub view: View,
    /// Seconds between samples (e.g. 1, 500ms, 2s).
    #[arg(long, short = 'i', default_value = "1", value_name = "DURATION", value_parser = parse_interval)]
    pub interval: f64,
    /// Stop after N samples [default: run until Ctrl-C].
    #[arg(long, short = 'c', value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub count: Option<u64>,
    /// Output format (--json is the same as --format json).
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// iostat: only these devices (repeatable) [default: every disk with I/O since boot].
    #[arg(long = "device", short = 'd', value_name = "NAME")]
    pub devices: Vec<String>,
    /// hogs/irq/slab: at most N rows per sample.
    #[arg(long, short = 'n', default_value = "10", value_name = "N")]
    pub top: usize,
    /// hogs: only tasks using at least this % of one CPU (like hogs -% 5).
    #[arg(long = "min-pct", default_value = "0", value_name = "PCT")]
    pub min_pct: f64,
    /// hogs: list threads instead of processes.
    #[arg(long)]
    pub threads: bool,
}

fn parse_interval(s: &str) -> std::result::Result<f64, String> {
    match parse_duration(s) {
        Some(v) if v > 0.0 && v.is_finite() => Ok(v),
        Some(_) => Err("the interval must be greater than zero".into()),
        None => Err(format!("'{s}' is not a duration (e.g. 1, 500ms, 2s)")),
    }
}

/// What one view produced for one interval.
#[derive(Default)]
struct Emitted {
    json: Value,
    table: String,
    /// (metric name, labels, value, help) for OpenMetrics.
    metrics: Vec<(String, String, f64)>,
    /// Printed on stderr (tunelab: warning: …).
    warnings: Vec<String>,
    /// Printed on stderr as hints (suppressed by --quiet).
    hints: Vec<String>,
}

trait ViewState {
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

// ------------------------------------------------------------------ vmstat

struct VmstatView {
    prev: vmstat::VmstatCounters,
    window: Vec<vmstat::VmstatRow>,
    lines: usize,
}

impl ViewState for VmstatView {
    fn sample(&mut self, secs: f64) -> Result<Emitted> {
        let cur = vmstat::read().map_err(|e| env_err("cannot read /proc", e))?;
        let r = vmstat::delta(&self.prev, &cur, secs);
        self.prev = cur;
        self.window.push(r.clone());
        if self.window.len() > hints::IOWAIT_INTERVALS {
            self.window.remove(0);
        }
        let signs = hints::vmstat_signs(&self.window);
        let mut e = Emitted::default();
        if self.lines % 20 == 0 {
            e.table.push_str(
                "procs -----------memory---------- ---swap-- -----io---- -system-- -------cpu-------\n \
                 r  b   swpd     free     buff    cache   si   so    bi    bo   in   cs us sy id wa st\n",
            );
        }
        self.lines += 1;
        let _ = writeln!(
            e.table,
            "{:>2} {:>2} {:>6} {:>8} {:>8} {:>8} {:>4.0} {:>4.0} {:>5.0} {:>5.0} {:>4.0} {:>4.0} {:>2.0} {:>2.0} {:>2.0} {:>2.0} {:>2.0}",
            r.r, r.b, r.swpd_kb, r.free_kb, r.buff_kb, r.cache_kb, r.si, r.so, r.bi, r.bo,
            r.in_s, r.cs_s, r.us, r.sy, r.id, r.wa, r.st
        );
        let mut j = serde_json::to_value(&r)?;
        j["hints"] = json!(signs.iter().map(|s| &s.1).collect::<Vec<_>>());
        e.json = j;
        for (name, v) in [
            ("procs_running", r.r as f64),
            ("procs_blocked", r.b as f64),
            ("swap_used_kib", r.swpd_kb as f64),
            ("free_kib", r.free_kb as f64),
            ("buffers_kib", r.buff_kb as f64),
            ("cache_kib", r.cache_kb as f64),
            ("swap_in_kib_per_second", r.si),
            ("swap_out_kib_per_second", r.so),
            ("blocks_in_kib_per_second", r.bi),
            ("blocks_out_kib_per_second", r.bo),
            ("interrupts_per_second", r.in_s),
            ("context_switches_per_second", r.cs_s),
        ] {
            e.metrics
                .push((format!("tunelab_vmstat_{name}"), String::new(), v));
        }
        for (mode, v) in [
            ("user", r.us),
            ("system", r.sy),
            ("idle", r.id),
            ("iowait", r.wa),
            ("steal", r.st),
        ] {
            e.metrics.push((
                "tunelab_vmstat_cpu_percent".into(),
                format!("mode=\"{mode}\""),
                v,
            ));
        }
        e.hints = signs.into_iter().map(|s| s.1).collect();
        Ok(e)
    }
}

// ------------------------------------------------------------------ iostat

struct IostatView {
    names: Option<Vec<String>>,
    prev: Vec<iostat::DiskCounters>,
}

/// Whole disks (those with /sys/block/NAME) that did I/O since boot — what
/// sysstat iostat lists by default.
fn default_disk(d: &iostat::DiskCounters) -> bool {
    std::path::Path::new("/sys/block").join(&d.name).exists() && (d.reads + d.writes) > 0
}

fn rotational(name: &str) -> Option<bool> {
    std::fs::read_to_string(format!("/sys/block/{name}/queue/rotational"))
        .ok()
        .map(|s| s.trim() == "1")
}

impl IostatView {
    fn read(&self) -> Result<Vec<iostat::DiskCounters>> {
        let all = iostat::read_all().map_err(|e| env_err("cannot read /proc/diskstats", e))?;
        Ok(all
            .into_iter()
            .filter(|d| match &self.names {
                Some(n) => n.contains(&d.name),
                None => default_disk(d),
            })
            .collect())
    }
}

impl ViewState for IostatView {
    fn preface(&self) -> Vec<String> {
        let ssd: Vec<&str> = self
            .prev
            .iter()
            .filter(|d| rotational(&d.name) == Some(false))
            .map(|d| d.name.as_str())
            .collect();
        let mut v = vec![
            "note: %util is the share of time with at least one request in flight; on devices that \
             serve requests in parallel (SSD, NVMe, RAID, virtual disks) 100% does not mean saturated — \
             watch aqu-sz and await instead"
                .to_string(),
        ];
        if !ssd.is_empty() {
            v.push(format!("non-rotational devices here: {}", ssd.join(", ")));
        }
        v
    }

    fn sample(&mut self, secs: f64) -> Result<Emitted> {
        let cur = self.read()?;
        let mut e = Emitted::default();
        let mut rows = Vec::new();
        for c in &cur {
            if let Some(p) = self.prev.iter().find(|p| p.name == c.name) {
                rows.push(iostat::delta(p, c, secs));
            }
        }
        self.prev = cur;
        e.table.push_str(&format!(
            "{:<10} {:>8} {:>8} {:>10} {:>10} {:>8} {:>8} {:>7} {:>8} {:>6}\n",
            "Device",
            "r/s",
            "w/s",
            "rkB/s",
            "wkB/s",
            "r_await",
            "w_await",
            "aqu-sz",
            "areq-sz",
            "%util"
        ));
        for r in &rows {
            let _ =
                writeln!(
                e.table,
                "{:<10} {:>8.2} {:>8.2} {:>10.2} {:>10.2} {:>8.2} {:>8.2} {:>7.2} {:>8.2} {:>6.1}",
                r.device, r.r_s, r.w_s, r.rkb_s, r.wkb_s, r.r_await_ms, r.w_await_ms, r.aqu_sz,
                r.areq_sz_kb, r.util_pct
            );
            let l = format!("device=\"{}\"", r.device);
            for (n, v) in [
                ("reads_per_second", r.r_s),
                ("writes_per_second", r.w_s),
                ("read_kib_per_second", r.rkb_s),
                ("write_kib_per_second", r.wkb_s),
                ("read_await_milliseconds", r.r_await_ms),
                ("write_await_milliseconds", r.w_await_ms),
                ("queue_size", r.aqu_sz),
                ("request_size_kib", r.areq_sz_kb),
                ("util_percent", r.util_pct),
            ] {
                e.metrics
                    .push((format!("tunelab_iostat_{n}"), l.clone(), v));
            }
        }
        e.table.push('\n');
        e.json = json!({ "devices": rows });
        Ok(e)
    }
}

// ------------------------------------------------------------------ hogs

struct HogsView {
    reader: HogsReader,
    prev: Vec<TaskTimes>,
    threads: bool,
    filter: HogsFilter,
    ncpu: usize,
    hz: u64,
}

impl ViewState for HogsView {
    fn sample(&mut self, secs: f64) -> Result<Emitted> {
        let cur = self.reader.read(self.threads);
        let rows = hogs::delta(&self.prev, &cur, secs, self.ncpu, self.hz, self.filter);
        self.prev = cur;
        let mut e = Emitted::default();
        let _ = writeln!(
            e.table,
            "{:>8} {:<16} {:>9} {:>8} {:>8}",
            if self.threads { "TID" } else { "PID" },
            "NAME",
            "CPU s",
            "% 1 CPU",
            "% all"
        );
        for r in &rows {
            let _ = writeln!(
                e.table,
                "{:>8} {:<16} {:>9.3} {:>7.1}% {:>7.1}%",
                r.tid.unwrap_or(r.pid),
                r.name,
                r.cpu_s,
                r.pct_cpu,
                r.pct_machine
            );
            let l = format!(
                "pid=\"{}\",{}name=\"{}\"",
                r.pid,
                r.tid.map(|t| format!("tid=\"{t}\",")).unwrap_or_default(),
                r.name.replace('\\', "\\\\").replace('"', "\\\"")
            );
            e.metrics
                .push(("tunelab_hogs_cpu_percent".into(), l, r.pct_cpu));
        }
        e.table.push('\n');
        e.json = json!({ "tasks": rows });
        Ok(e)
    }
}

// ------------------------------------------------------------------ irq

struct IrqView {
    prev_hard: Vec<irq::IrqCounts>,
    prev_soft: Vec<irq::IrqCounts>,
    top: usize,
}

impl ViewState for IrqView {
    fn sample(&mut self, secs: f64) -> Result<Emitted> {
        let hard =
            irq::read_interrupts().map_err(|e| env_err("cannot read /proc/interrupts", e))?;
        let soft = irq::read_softirqs().unwrap_or_default();
        let mut rows = irq::delta(&self.prev_hard, &hard, secs, "irq");
        rows.extend(irq::delta(&self.prev_soft, &soft, secs, "softirq"));
        rows.sort_by(|a, b| b.total_per_s.total_cmp(&a.total_per_s));
        self.prev_hard = hard;
        self.prev_soft = soft;
        let ncpu = rows.first().map_or(0, |r| r.per_cpu_per_s.len());
        let mut e = Emitted::default();
        let _ = write!(e.table, "{:<8} {:<10} {:>10}", "kind", "source", "total/s");
        for c in 0..ncpu {
            let _ = write!(e.table, " {:>9}", format!("CPU{c}/s"));
        }
        e.table.push_str("  description\n");
        for r in rows.iter().take(self.top) {
            let _ = write!(
                e.table,
                "{:<8} {:<10} {:>10.1}",
                r.kind, r.source, r.total_per_s
            );
            for v in &r.per_cpu_per_s {
                let _ = write!(e.table, " {v:>9.1}");
            }
            let _ = writeln!(e.table, "  {}", r.desc);
        }
        for r in &rows {
            for (c, v) in r.per_cpu_per_s.iter().enumerate() {
                e.metrics.push((
                    format!(
                        "tunelab_{}_per_second",
                        if r.kind == "irq" {
                            "interrupts"
                        } else {
                            "softirqs"
                        }
                    ),
                    format!("source=\"{}\",cpu=\"{c}\"", r.source),
                    *v,
                ));
            }
        }
        e.table.push('\n');
        e.json = json!({ "sources": rows });
        Ok(e)
    }
}

// ------------------------------------------------------------------ slab

struct SlabView {
    prev: Vec<pressure::SlabCounts>,
    top: usize,
}

impl ViewState for SlabView {
    fn sample(&mut self, secs: f64) -> Result<Emitted> {
        let cur =
            pressure::read_slabinfo().map_err(|e| env_err("cannot read /proc/slabinfo", e))?;
        let rows = pressure::slab_delta(&self.prev, &cur, secs);
        self.prev = cur;
        let mut by_objs = rows.clone();
        by_objs.sort_by_key(|r| std::cmp::Reverse(r.active_objs));
        let mut e = Emitted::default();
        let mut shown: Vec<&pressure::SlabRow> = rows.iter().take(self.top).collect();
        for r in by_objs.iter().take(self.top) {
            if !shown.iter().any(|s| s.name == r.name) {
                shown.push(r);
            }
        }
        let _ = writeln!(
            e.table,
            "{:<28} {:>12} {:>8} {:>12} {:>12}",
            "cache", "active objs", "obj size", "memory", "net churn/s"
        );
        for r in &shown {
            let _ = writeln!(
                e.table,
                "{:<28} {:>12} {:>8} {:>12} {:>12.0}",
                r.name,
                r.active_objs,
                r.obj_size,
                human(r.bytes as f64, "B"),
                r.churn_per_s
            );
            let l = format!("cache=\"{}\"", r.name);
            e.metrics.push((
                "tunelab_slab_active_objects".into(),
                l.clone(),
                r.active_objs as f64,
            ));
            e.metrics
                .push(("tunelab_slab_churn_per_second".into(), l, r.churn_per_s));
        }
        e.table.push('\n');
        e.json = json!({ "caches": shown });
        Ok(e)
    }

    fn preface(&self) -> Vec<String> {
        vec!["note: churn is the net change of active objects per second (/proc/slabinfo has no allocation counter)".into()]
    }
}

// ------------------------------------------------------------------ dirty

struct DirtyView {
    watch: DirtyWatch,
    lines: usize,
}

fn read_dirty_sample() -> Result<(DirtySample, dirty::DirtyLimits)> {
    let t = std::fs::read_to_string("/proc/meminfo")
        .map_err(|e| env_err("cannot read /proc/meminfo", e))?;
    let m = crate::observe::procmem::parse_meminfo(&t);
    let kb = |k: &str| {
        t.lines()
            .find_map(|l| {
                l.strip_prefix(k)?
                    .strip_prefix(':')?
                    .split_whitespace()
                    .next()?
                    .parse::<u64>()
                    .ok()
            })
            .unwrap_or(0)
            * 1024
    };
    let limits = dirty::read_limits().map_err(|e| env_err("cannot read vm.dirty_* sysctls", e))?;
    Ok((
        DirtySample {
            dirty: kb("Dirty"),
            writeback: kb("Writeback"),
            available: m.available,
            cache: kb("Cached") + kb("Buffers"),
        },
        limits,
    ))
}

impl ViewState for DirtyView {
    fn preface(&self) -> Vec<String> {
        let l = &self.watch.limits;
        vec![format!(
            "throttling starts when Dirty + Writeback exceeds {} (vm.dirty_ratio {} / bytes {}, \
             vm.dirty_background_ratio {} / bytes {}; kernel: balance_dirty_pages freerun point)",
            if l.bytes > 0 {
                "(dirty_bytes + dirty_background_bytes) / 2"
            } else {
                "(dirty_ratio + dirty_background_ratio) / 2 % of MemAvailable"
            },
            l.ratio,
            l.bytes,
            l.background_ratio,
            l.background_bytes
        )]
    }

    fn sample(&mut self, _secs: f64) -> Result<Emitted> {
        let (s, limits) = read_dirty_sample()?;
        if limits != self.watch.limits {
            // Sysctls changed while watching: restart the accounting.
            self.watch = DirtyWatch::new(limits);
        }
        let line = self.watch.observe(&s);
        let mut e = Emitted::default();
        if self.lines % 20 == 0 {
            let _ = writeln!(
                e.table,
                "{:>12} {:>12} {:>12} {:>12} {:>12} {:>8}",
                "dirty", "writeback", "available", "cache", "throttle at", "% of it"
            );
        }
        self.lines += 1;
        let _ = writeln!(
            e.table,
            "{:>12} {:>12} {:>12} {:>12} {:>12} {:>7.0}%{}",
            human(line.dirty_bytes as f64, "B"),
            human(line.writeback_bytes as f64, "B"),
            human(line.available_bytes as f64, "B"),
            human(line.cache_bytes as f64, "B"),
            human(line.throttle_bytes as f64, "B"),
            line.pct_of_throttle,
            if line.exceeded { "  THROTTLING" } else { "" }
        );
        if line.exceeded {
            e.warnings.push(format!(
                "Dirty + Writeback = {} exceeds the throttling threshold {}: writers are being slowed down",
                human((line.dirty_bytes + line.writeback_bytes) as f64, "B"),
                human(line.throttle_bytes as f64, "B")
            ));
        }
        for (n, v) in [
            ("dirty_bytes", line.dirty_bytes),
            ("writeback_bytes", line.writeback_bytes),
            ("available_bytes", line.available_bytes),
            ("cache_bytes", line.cache_bytes),
            ("throttle_threshold_bytes", line.throttle_bytes),
        ] {
            e.metrics
                .push((format!("tunelab_dirty_{n}"), String::new(), v as f64));
        }
        e.json = serde_json::to_value(&line)?;
        Ok(e)
    }

    fn finish(&self) -> Option<(String, Value)> {
        let s = self.watch.summary();
        let mut t = String::new();
        let _ = writeln!(t, "\ndirty watch summary ({} samples)", s.samples);
        let _ = writeln!(
            t,
            "  intervals over the throttling threshold: {}",
            s.intervals_over_threshold
        );
        let _ = writeln!(
            t,
            "  least available memory: {}",
            human(s.min_available_bytes as f64, "B")
        );
        let _ = writeln!(
            t,
            "  largest page cache:     {}",
            human(s.max_cache_bytes as f64, "B")
        );
        let _ = writeln!(
            t,
            "  largest Dirty+Writeback: {}",
            human(s.max_dirty_writeback_bytes as f64, "B")
        );
        let _ = writeln!(t, "  must hold: {}", s.inequality);
        for a in &s.advice {
            let _ = writeln!(t, "  {a}");
        }
        Some((t, json!({ "summary": s })))
    }
}

// ------------------------------------------------------------------ psi

struct PsiView {
    prev: Vec<pressure::PsiCounters>,
}

impl ViewState for PsiView {
    fn sample(&mut self, secs: f64) -> Result<Emitted> {
        let cur = pressure::read_psi().map_err(|e| env_err("pressure stall information", e))?;
        let rows = pressure::psi_delta(&self.prev, &cur, secs);
        self.prev = cur;
        let mut e = Emitted::default();
        let _ = writeln!(
            e.table,
            "{:<8} {:>8} {:>8} {:>11}",
            "resource", "some %", "full %", "some avg10"
        );
        for r in &rows {
            let _ = writeln!(
                e.table,
                "{:<8} {:>8.1} {:>8} {:>11.2}",
                r.resource,
                r.some_pct,
                r.full_pct.map_or("-".into(), |f| format!("{f:.1}")),
                r.some_avg10
            );
            e.metrics.push((
                "tunelab_pressure_stalled_percent".into(),
                format!("resource=\"{}\",kind=\"some\"", r.resource),
                r.some_pct,
            ));
            if let Some(f) = r.full_pct {
                e.metrics.push((
                    "tunelab_pressure_stalled_percent".into(),
                    format!("resource=\"{}\",kind=\"full\"", r.resource),
                    f,
                ));
            }
        }
        e.table.push('\n');
        e.json = json!({ "resources": rows });
        Ok(e)
    }
}

// ------------------------------------------------------------------ power

struct PowerView {
    prev: Vec<pressure::CpuPower>,
}

impl ViewState for PowerView {
    fn sample(&mut self, secs: f64) -> Result<Emitted> {
        let cur = pressure::read_power().map_err(|e| env_err("CPU power information", e))?;
        let rows = pressure::power_delta(&self.prev, &cur, secs);
        self.prev = cur;
        let mut e = Emitted::default();
        for r in &rows {
            let idle: Vec<String> = r
                .idle
                .iter()
                .map(|(n, pct, rate)| format!("{n} {pct:.1}% ({rate:.0}/s)"))
                .collect();
            let _ = writeln!(
                e.table,
                "cpu{:<3} governor {:<12} freq {:>8}  idle: {}",
                r.cpu,
                r.governor.as_deref().unwrap_or("-"),
                r.freq_mhz.map_or("-".into(), |f| format!("{f:.0} MHz")),
                if idle.is_empty() {
                    "-".into()
                } else {
                    idle.join(", ")
                }
            );
            if let Some(f) = r.freq_mhz {
                e.metrics.push((
                    "tunelab_cpu_frequency_mhz".into(),
                    format!("cpu=\"{}\"", r.cpu),
                    f,
                ));
            }
            for (n, pct, _) in &r.idle {
                e.metrics.push((
                    "tunelab_cpu_idle_residency_percent".into(),
                    format!("cpu=\"{}\",state=\"{n}\"", r.cpu),
                    *pct,
                ));
            }
        }
        e.table.push('\n');
        e.json = json!({ "cpus": rows });
        Ok(e)
    }
}

// ------------------------------------------------------------------ loop

fn make_view(a: &Args) -> Result<Box<dyn ViewState>> {
    Ok(match a.view {
        View::Vmstat => Box::new(VmstatView {
            prev: vmstat::read().map_err(|e| env_err("cannot read /proc", e))?,
            window: Vec::new(),
            lines: 0,
        }),
        View::Iostat => {
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
        View::Hogs => {
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
        View::Irq => Box::new(IrqView {
            prev_hard: irq::read_interrupts()
                .map_err(|e| env_err("cannot read /proc/interrupts", e))?,
            prev_soft: irq::read_softirqs().unwrap_or_default(),
            top: a.top.max(1),
        }),
        View::Slab => Box::new(SlabView {
            prev: pressure::read_slabinfo()
                .map_err(|e| env_err("cannot read /proc/slabinfo", e))?,
            top: a.top.max(1),
        }),
        View::Dirty => {
            let (_, limits) = read_dirty_sample()?;
            Box::new(DirtyView {
                watch: DirtyWatch::new(limits),
                lines: 0,
            })
        }
        View::Psi => Box::new(PsiView {
            prev: pressure::read_psi().map_err(|e| env_err("pressure stall information", e))?,
        }),
        View::Power => Box::new(PowerView {
            prev: pressure::read_power().map_err(|e| env_err("CPU power information", e))?,
        }),
    })
}

/// Sleep until `deadline` in short slices; false when a signal asked to stop.
fn sleep_until(deadline: Instant) -> bool {
    loop {
        if signals::caught().is_some() {
            return false;
        }
        let now = Instant::now();
        if now >= deadline {
            return true;
        }
        std::thread::sleep((deadline - now).min(Duration::from_millis(100)));
    }
}

/// Write to stdout and flush; Ok(false) when stdout was closed.
fn emit(text: &str) -> Result<bool> {
    let mut so = std::io::stdout().lock();
    match so.write_all(text.as_bytes()).and_then(|_| so.flush()) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(false),
        Err(e) => Err(Error::environment(format!("cannot write to stdout: {e}"))),
    }
}

fn view_name(v: View) -> &'static str {
    match v {
        View::Vmstat => "vmstat",
        View::Iostat => "iostat",
        View::Hogs => "hogs",
        View::Irq => "irq",
        View::Slab => "slab",
        View::Dirty => "dirty",
        View::Psi => "psi",
        View::Power => "power",
    }
}

/// OpenMetrics text: one family per metric name, gauges, ending in # EOF.
fn openmetrics(metrics: &[(String, String, f64)], unix_ms: i64) -> String {
    let mut s = String::new();
    let mut seen: Vec<&str> = Vec::new();
    for (name, _, _) in metrics {
        if seen.contains(&name.as_str()) {
            continue;
        }
        seen.push(name);
        let _ = writeln!(s, "# TYPE {name} gauge");
        for (n, labels, v) in metrics.iter().filter(|m| &m.0 == name) {
            let l = if labels.is_empty() {
                String::new()
            } else {
                format!("{{{labels}}}")
            };
            let _ = writeln!(s, "{n}{l} {v} {:.3}", unix_ms as f64 / 1000.0);
        }
    }
    s.push_str("# EOF\n");
    s
}

pub fn exec(a: &Args, out: &Out, json_flag: bool) -> Result<i32> {
    let format = if json_flag { Format::Json } else { a.format };
    let mut view = make_view(a)?;
    let name = view_name(a.view);
    if format == Format::Table {
        for p in view.preface() {
            out.info(&p);
        }
    }
    let interval = Duration::from_secs_f64(a.interval);
    let start = Instant::now();
    let mut last = start;
    let mut n: u64 = 0;
    let mut open = true;
    while !matches!(a.count, Some(c) if n >= c) {
        // Deadlines are start + k × interval: no drift from the read time.
        if !sleep_until(start + interval * (n as u32 + 1)) {
            break;
        }
        let now = Instant::now();
        let secs = now.duration_since(last).as_secs_f64();
        last = now;
        let e = view.sample(secs)?;
        n += 1;
        let unix = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        let text = match format {
            Format::Table => e.table.clone(),
            Format::Json => {
                let mut j = json!({ "view": name, "sample": n, "t": now.duration_since(start).as_secs_f64(),
                                    "unix": unix, "interval_s": secs });
                if let (Value::Object(dst), Value::Object(src)) = (&mut j, e.json.clone()) {
                    dst.extend(src);
                }
                format!("{}\n", serde_json::to_string(&j)?)
            }
            Format::Openmetrics => openmetrics(&e.metrics, (unix * 1000.0) as i64),
        };
        for w in &e.warnings {
            out.warn(w);
        }
        if format == Format::Table {
            for h in &e.hints {
                out.info(&format!("hint: {h}"));
            }
        }
        if !emit(&text)? {
            open = false;
            break;
        }
    }
    if open {
        if let Some((table, j)) = view.finish() {
            match format {
                Format::Table => {
                    emit(&table)?;
                }
                Format::Json => {
                    let mut o = json!({ "view": name, "final": true, "samples": n });
                    if let (Value::Object(dst), Value::Object(src)) = (&mut o, j) {
                        dst.extend(src);
                    }
                    emit(&format!("{}\n", serde_json::to_string(&o)?))?;
                }
                // Metrics expositions carry no summary; say it on stderr.
                Format::Openmetrics => out.info(table.trim_start()),
            }
        }
    }
    if let Some(sig) = signals::caught() {
        out.info(&format!("monitor stopped by {sig} after {n} sample(s)"));
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interval_must_be_positive() {
        assert!(parse_interval("0").is_err());
        assert!(parse_interval("-1").is_err());
        assert!(parse_interval("abc").is_err());
        assert_eq!(parse_interval("500ms"), Ok(0.5));
    }

    #[test]
    fn openmetrics_groups_families() {
        let m = vec![
            ("a".to_string(), "x=\"1\"".to_string(), 1.0),
            ("b".to_string(), String::new(), 2.0),
            ("a".to_string(), "x=\"2\"".to_string(), 3.0),
        ];
        let s = openmetrics(&m, 1000);
        assert_eq!(
            s,
            "# TYPE a gauge\na{x=\"1\"} 1 1.000\na{x=\"2\"} 3 1.000\n# TYPE b gauge\nb 2 1.000\n# EOF\n"
        );
    }
}
