//! Quietness check: is anything else using the machine before we measure?
//!
//! Samples /proc/stat, every /proc/<pid>/stat and (optionally) the target
//! disk's /proc/diskstats line at the start and end of a short window. Our own
//! process (all its threads) is excluded so the check measures the others.

use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::proc::{self, CurrentSI};

/// Result of a quietness check.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Quietness {
    /// Actual length of the window.
    pub(crate) seconds: f64,
    /// CPU % of the whole machine (all CPUs = 100) used by everything except
    /// this process: /proc/stat busy-jiffy delta minus our own utime+stime.
    pub(crate) machine_busy_pct: f64,
    /// iowait % of all CPU time during the window.
    pub(crate) iowait_pct: f64,
    /// Processes above 2% of one CPU, busiest first, at most 10.
    pub(crate) busy: Vec<BusyProcess>,
    /// %util of the given device during the window (as iostat's %util).
    pub(crate) disk_busy_pct: Option<f64>,
    pub(crate) warnings: Vec<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub(crate) struct BusyProcess {
    pub(crate) pid: i32,
    pub(crate) name: String,
    /// % of one CPU (a process spinning on two CPUs shows 200).
    pub(crate) cpu_pct: f64,
}

/// Listing threshold for a process, % of one CPU.
const LIST_PCT: f64 = 2.0;
const MAX_LISTED: usize = 10;
/// Warning thresholds.
const WARN_MACHINE_PCT: f64 = 5.0;
const WARN_PROCESS_PCT: f64 = 10.0;
const WARN_DISK_PCT: f64 = 10.0;
const WARN_IOWAIT_PCT: f64 = 5.0;

/// (utime+stime ticks, comm) keyed by (pid, starttime) so a recycled pid is
/// not mistaken for the same process.
type ProcTicks = HashMap<(i32, u64), (u64, String)>;

#[derive(Clone, Copy, Default)]
struct CpuTotals {
    total: u64,
    idle: u64,
    iowait: u64,
}

/// Sample the machine for `window` and report who else was busy.
/// `device` is a disk name such as "vda" whose utilisation is checked too.
/// Never fails: unreadable data gives zeros and a warning.
pub(crate) fn check(window: Duration, device: Option<&str>) -> Quietness {
    let me = std::process::id() as i32;
    let tps = proc::ticks_per_second().max(1) as f64;

    let cpu0 = cpu_totals();
    let own0 = own_ticks();
    let procs0 = proc_ticks(me);
    let disk0 = device.and_then(disk_io_ticks);
    let t0 = Instant::now();

    std::thread::sleep(window);

    let cpu1 = cpu_totals();
    let own1 = own_ticks();
    let procs1 = proc_ticks(me);
    let disk1 = device.and_then(disk_io_ticks);
    let seconds = t0.elapsed().as_secs_f64();

    let mut q = Quietness {
        seconds,
        ..Default::default()
    };

    match (cpu0, cpu1) {
        (Some(a), Some(b)) => {
            let total = b.total.saturating_sub(a.total);
            let idle = b.idle.saturating_sub(a.idle);
            let iowait = b.iowait.saturating_sub(a.iowait);
            let own = match (own0, own1) {
                (Some(x), Some(y)) => y.saturating_sub(x),
                _ => 0,
            };
            let (busy, io) = machine_pcts(total, idle, iowait, own);
            q.machine_busy_pct = busy;
            q.iowait_pct = io;
        }
        _ => q
            .warnings
            .push("could not read /proc/stat; machine load unknown".to_string()),
    }

    q.busy = busy_processes(&procs0, &procs1, tps, seconds);

    if let (Some(a), Some(b)) = (disk0, disk1) {
        let ms = seconds * 1000.0;
        if ms > 0.0 {
            q.disk_busy_pct = Some((b.saturating_sub(a) as f64 / ms * 100.0).min(100.0));
        }
    } else if let Some(d) = device {
        q.warnings.push(format!(
            "could not read /proc/diskstats for {d}; disk activity unknown"
        ));
    }

    q.warnings.extend(warnings(&q, device));
    q
}

/// Busy % of the machine excluding our own ticks, and iowait %, from jiffy deltas.
fn machine_pcts(total: u64, idle: u64, iowait: u64, own: u64) -> (f64, f64) {
    if total == 0 {
        return (0.0, 0.0);
    }
    let busy = total
        .saturating_sub(idle)
        .saturating_sub(iowait)
        .saturating_sub(own);
    (
        busy as f64 / total as f64 * 100.0,
        iowait as f64 / total as f64 * 100.0,
    )
}

/// Per-process CPU % of one CPU between two samples, filtered and sorted.
/// Processes missing from either sample (started or exited) are skipped.
fn busy_processes(a: &ProcTicks, b: &ProcTicks, tps: f64, seconds: f64) -> Vec<BusyProcess> {
    if seconds <= 0.0 {
        return Vec::new();
    }
    let mut out: Vec<BusyProcess> = b
        .iter()
        .filter_map(|(key, (t1, name))| {
            let (t0, _) = a.get(key)?;
            let pct = t1.saturating_sub(*t0) as f64 / tps / seconds * 100.0;
            (pct > LIST_PCT).then(|| BusyProcess {
                pid: key.0,
                name: name.clone(),
                cpu_pct: pct,
            })
        })
        .collect();
    out.sort_by(|x, y| y.cpu_pct.total_cmp(&x.cpu_pct).then(x.pid.cmp(&y.pid)));
    out.truncate(MAX_LISTED);
    out
}

fn warnings(q: &Quietness, device: Option<&str>) -> Vec<String> {
    let mut w = Vec::new();
    let hot: Vec<&BusyProcess> = q
        .busy
        .iter()
        .filter(|p| p.cpu_pct > WARN_PROCESS_PCT)
        .collect();
    if q.machine_busy_pct > WARN_MACHINE_PCT || !hot.is_empty() {
        let mut msg = format!(
            "other processes used {:.0}% of the machine's CPU during the {:.1} s quietness check",
            q.machine_busy_pct, q.seconds
        );
        let list = if hot.is_empty() {
            q.busy.iter().collect()
        } else {
            hot
        };
        if !list.is_empty() {
            let names: Vec<String> = list
                .iter()
                .map(|p| format!("{} (pid {}) {:.0}% of a CPU", p.name, p.pid, p.cpu_pct))
                .collect();
            msg.push_str(": ");
            msg.push_str(&names.join(", "));
        }
        w.push(msg);
    }
    if q.iowait_pct > WARN_IOWAIT_PCT {
        w.push(format!(
            "CPUs spent {:.0}% of the quietness check waiting for I/O: another process is using the disks",
            q.iowait_pct
        ));
    }
    if let (Some(util), Some(dev)) = (q.disk_busy_pct, device) {
        if util > WARN_DISK_PCT {
            w.push(format!("the disk {dev} was {util:.0}% busy before the run"));
        }
    }
    w
}

fn cpu_totals() -> Option<CpuTotals> {
    let ks = proc::KernelStats::current().ok()?;
    let c = &ks.total;
    // guest/guest_nice are already included in user/nice, so not added again.
    let iowait = c.iowait.unwrap_or(0);
    let total = c.user
        + c.nice
        + c.system
        + c.idle
        + iowait
        + c.irq.unwrap_or(0)
        + c.softirq.unwrap_or(0)
        + c.steal.unwrap_or(0);
    Some(CpuTotals {
        total,
        idle: c.idle,
        iowait,
    })
}

/// utime+stime of this whole process (all threads), in clock ticks.
fn own_ticks() -> Option<u64> {
    let text = proc::read_pid("self", "stat").ok()?;
    let st = proc::Stat::parse(&text)?;
    Some(st.utime()? + st.stime()?)
}

fn proc_ticks(exclude: i32) -> ProcTicks {
    let mut map = ProcTicks::new();
    // Any process can exit between listing and reading: skip it silently.
    for pid in proc::pids() {
        if pid == exclude {
            continue;
        }
        let Ok(text) = proc::read_pid(pid, "stat") else {
            continue;
        };
        if let Some(st) = proc::Stat::parse(&text) {
            if let (Some(u), Some(s), Some(start)) = (st.utime(), st.stime(), st.starttime()) {
                map.insert((pid, start), (u + s, st.comm.to_string()));
            }
        }
    }
    map
}

/// Cumulative ms the device had I/O in flight (io_ticks).
fn disk_io_ticks(device: &str) -> Option<u64> {
    proc::diskstats()
        .ok()?
        .into_iter()
        .find(|d| d.name == device)
        .map(|d| d.time_in_progress)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn machine_percentages() {
        // 200 jiffies over 2 CPUs, 150 idle, 10 iowait, 20 ours -> 20 others.
        let (busy, io) = machine_pcts(200, 150, 10, 20);
        assert!((busy - 10.0).abs() < 1e-9);
        assert!((io - 5.0).abs() < 1e-9);
        assert_eq!(machine_pcts(0, 0, 0, 0), (0.0, 0.0));
        // Our own ticks can exceed the busy delta because of tick sampling.
        assert_eq!(machine_pcts(100, 90, 0, 50).0, 0.0);
    }

    #[test]
    fn process_deltas() {
        let mut a = ProcTicks::new();
        let mut b = ProcTicks::new();
        a.insert((1, 5), (100, "idle".into()));
        b.insert((1, 5), (101, "idle".into()));
        a.insert((2, 5), (0, "hog".into()));
        b.insert((2, 5), (95, "hog".into()));
        a.insert((3, 5), (0, "gone".into())); // exited
        b.insert((4, 9), (50, "new".into())); // started during the window
        a.insert((5, 1), (0, "reused".into()));
        b.insert((5, 2), (80, "reused".into())); // pid reused: different starttime
        a.insert((6, 5), (0, "medium".into()));
        b.insert((6, 5), (30, "medium".into()));
        let busy = busy_processes(&a, &b, 100.0, 1.0);
        assert_eq!(busy.len(), 2);
        assert_eq!(busy[0].name, "hog");
        assert!((busy[0].cpu_pct - 95.0).abs() < 1e-9);
        assert_eq!(busy[1].pid, 6);
    }

    #[test]
    fn warning_text() {
        let q = Quietness {
            seconds: 1.0,
            machine_busy_pct: 37.0,
            busy: vec![BusyProcess {
                pid: 123,
                name: "stress-ng".into(),
                cpu_pct: 95.0,
            }],
            disk_busy_pct: Some(80.0),
            ..Default::default()
        };
        let w = warnings(&q, Some("vda"));
        assert_eq!(
            w[0],
            "other processes used 37% of the machine's CPU during the 1.0 s quietness check: stress-ng (pid 123) 95% of a CPU"
        );
        assert_eq!(w[1], "the disk vda was 80% busy before the run");
        assert!(warnings(&Quietness::default(), None).is_empty());
    }

    #[test]
    fn real_check_runs() {
        let q = check(Duration::from_millis(200), Some("vda"));
        assert!(q.seconds >= 0.2);
        assert!((0.0..=100.0).contains(&q.machine_busy_pct));
        assert!(q.busy.len() <= MAX_LISTED);
        assert!(q.busy.iter().all(|p| p.pid != std::process::id() as i32));
    }
}
