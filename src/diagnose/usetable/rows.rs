//! The USE table computed from two snapshots: one row per CPU set, memory,
//! disk and interface, and the rows that stand out in plain words.

use std::collections::BTreeMap;

use super::snapshot::Snapshot;
use crate::model::diagnosis::{Figure, UseRow, UseTable};
use crate::observe::iostat;
use crate::observe::pressure::{self, PsiCounters};
use crate::units::{human, sig};

fn psi_pct(before: &[PsiCounters], after: &[PsiCounters], res: &str, s: f64) -> Option<f64> {
    pressure::psi_delta(before, after, s)
        .into_iter()
        .find(|r| r.resource == res)
        .map(|r| r.some_pct)
}

/// Run-queue readings below which the run queue is shown but does not
/// judge saturation: a slow board's reader, stretched to its budget, reads
/// it two or three times in a short diagnosis, and one transient task then
/// reads as "1.3 runnable per CPU" on an idle machine.
const MIN_RUN_QUEUE_READINGS: u64 = 5;

/// The table from two snapshots `seconds` apart; `run_queue` is the mean
/// and largest runnable count over the interval and its readings.
pub(crate) fn build(
    b: &Snapshot,
    a: &Snapshot,
    seconds: f64,
    cpus: u32,
    run_queue: Option<(f64, u64, u64)>,
    whole_disks: &[String],
) -> UseTable {
    let mut rows = Vec::new();
    let per_s = |x: u64, y: u64| y.saturating_sub(x) as f64 / seconds.max(1e-9);
    let f = Figure::new;

    if let (Some(vb), Some(va)) = (&b.vm, &a.vm) {
        let d = |x: u64, y: u64| y.saturating_sub(x) as f64;
        let mut user = d(vb.cpu_user, va.cpu_user);
        let mut sys = d(vb.cpu_system, va.cpu_system);
        let mut idle = d(vb.cpu_idle, va.cpu_idle);
        // tunelab's own sampling is not the machine's load: its CPU time is
        // counted as idle (on a slow board it is most of the busy time).
        let own = match (b.own_ticks, a.own_ticks) {
            (Some((ub, sb)), Some((ua, sa))) => {
                let (ou, os) = (d(ub, ua).min(user), d(sb, sa).min(sys));
                user -= ou;
                sys -= os;
                idle += ou + os;
                Some(ou + os)
            }
            _ => None,
        };
        let wait = d(vb.cpu_iowait, va.cpu_iowait);
        let steal = d(vb.cpu_steal, va.cpu_steal);
        let total = (user + sys + idle + wait + steal).max(1.0);
        let busy = (user + sys) / total * 100.0;
        let mut row = UseRow {
            kind: "cpu".into(),
            name: format!("{cpus} CPUs"),
            utilisation: vec![
                f("busy", busy, "%"),
                f("user", user / total * 100.0, "%"),
                f("system", sys / total * 100.0, "%"),
                f("iowait", wait / total * 100.0, "%"),
                f("steal", steal / total * 100.0, "%"),
            ],
            ..Default::default()
        };
        let mut score = busy / 100.0;
        if let Some((mean, max, n)) = run_queue {
            row.saturation
                .push(f("runnable per CPU", mean / cpus.max(1) as f64, "tasks"));
            row.saturation.push(f("runnable max", max as f64, "tasks"));
            if n >= MIN_RUN_QUEUE_READINGS {
                score = score.max(mean / cpus.max(1) as f64 / 2.0);
            } else {
                row.notes.push(format!(
                    "the run queue was read {n} time(s): too few to judge saturation \
                     ({MIN_RUN_QUEUE_READINGS} needed)"
                ));
            }
        }
        if let Some(p) = psi_pct(&b.psi, &a.psi, "cpu", seconds) {
            row.saturation.push(f("PSI some", p, "%"));
            // PSI counts tunelab's own samplers waiting for each other (on
            // an idle one-CPU board: "saturated" at 0% busy); the run queue
            // leaves them out, so PSI judges only when it is missing.
            if run_queue.is_none() {
                score = score.max(p / 50.0);
            } else {
                row.notes.push(
                    "PSI some includes tunelab's own threads; the saturation is judged on the \
                     run queue, which leaves them out"
                        .into(),
                );
            }
        }
        row.saturation
            .push(f("context switches", per_s(vb.ctxt, va.ctxt), "/s"));
        row.saturation
            .push(f("interrupts", per_s(vb.intr, va.intr), "/s"));
        if steal / total > 0.1 {
            score = score.max(0.6);
        }
        row.notes
            .push("CPU errors (machine checks) are not counted here".into());
        if let Some(o) = own {
            row.utilisation
                .push(f("tunelab's own (left out)", o / total * 100.0, "%"));
            row.notes.push(
                "busy, user and system leave out tunelab's own CPU time (its samplers and \
                 profiler); it is shown on its own"
                    .into(),
            );
        }
        row.score = score;
        rows.push(row);
    }

    if !a.meminfo.is_empty() {
        let total = *a.meminfo.get("MemTotal").unwrap_or(&0) as f64;
        let avail = *a.meminfo.get("MemAvailable").unwrap_or(&0) as f64;
        let used = if total > 0.0 {
            (total - avail) / total * 100.0
        } else {
            0.0
        };
        let mut row = UseRow {
            kind: "memory".into(),
            name: "memory".into(),
            utilisation: vec![f("used", used, "%")],
            ..Default::default()
        };
        let swap_total = *a.meminfo.get("SwapTotal").unwrap_or(&0) as f64;
        let swap_free = *a.meminfo.get("SwapFree").unwrap_or(&0) as f64;
        if swap_total > 0.0 {
            row.utilisation.push(f(
                "swap used",
                (swap_total - swap_free) / swap_total * 100.0,
                "%",
            ));
        }
        let g = |m: &BTreeMap<String, u64>, k: &str| m.get(k).copied().unwrap_or(0);
        let page = vmstat_page(a);
        let swap = (per_s(g(&b.vmstat, "pswpin"), g(&a.vmstat, "pswpin"))
            + per_s(g(&b.vmstat, "pswpout"), g(&a.vmstat, "pswpout")))
            * page;
        row.saturation.push(f("swapping", swap, "B/s"));
        let majflt = per_s(g(&b.vmstat, "pgmajfault"), g(&a.vmstat, "pgmajfault"));
        row.saturation.push(f("major faults", majflt, "/s"));
        let scan = per_s(g(&b.vmstat, "pgscan_direct"), g(&a.vmstat, "pgscan_direct"));
        row.saturation.push(f("direct reclaim scans", scan, "/s"));
        let mut score = (used / 100.0 - 0.3).max(0.0);
        if let Some(p) = psi_pct(&b.psi, &a.psi, "memory", seconds) {
            row.saturation.push(f("PSI some", p, "%"));
            score = score.max(p / 20.0);
        }
        if swap > 64.0 * 1024.0 {
            score = score.max(0.8);
        }
        if majflt > 100.0 {
            score = score.max(0.6);
        }
        let oom = g(&a.vmstat, "oom_kill").saturating_sub(g(&b.vmstat, "oom_kill"));
        row.errors.push(f("OOM kills", oom as f64, "count"));
        if oom > 0 {
            score = score.max(1.0);
        }
        row.score = score;
        rows.push(row);
    }

    let io_psi = psi_pct(&b.psi, &a.psi, "io", seconds);
    for d in &a.disks {
        if !whole_disks.is_empty() && !whole_disks.contains(&d.name) {
            continue;
        }
        let Some(p) = b.disks.iter().find(|p| p.name == d.name) else {
            continue;
        };
        let r = iostat::delta(p, d, seconds);
        let moved = r.r_s + r.w_s > 0.0;
        if !moved && (d.name.starts_with("loop") || d.name.starts_with("ram")) {
            continue;
        }
        let mut row = UseRow {
            kind: "disk".into(),
            name: d.name.clone(),
            utilisation: vec![
                f("util", r.util_pct, "%"),
                f("read", r.rkb_s * 1024.0, "B/s"),
                f("write", r.wkb_s * 1024.0, "B/s"),
                f("IOPS", r.r_s + r.w_s, "/s"),
            ],
            saturation: vec![
                f("queue depth", r.aqu_sz, "requests"),
                f("read await", r.r_await_ms / 1000.0, "s"),
                f("write await", r.w_await_ms / 1000.0, "s"),
            ],
            notes: vec![
                "I/O errors are not exposed by /proc/diskstats (see the kernel log)".into(),
            ],
            ..Default::default()
        };
        if let Some(p) = io_psi {
            row.saturation.push(f("PSI io some", p, "%"));
        }
        row.score = (r.util_pct / 100.0).max(r.aqu_sz / 4.0).min(1.5);
        rows.push(row);
    }

    for n in &a.net {
        let Some(p) = b.net.iter().find(|p| p.name == n.name) else {
            continue;
        };
        let rx = per_s(p.rx_bytes, n.rx_bytes);
        let tx = per_s(p.tx_bytes, n.tx_bytes);
        let drops = n.rx_drop + n.tx_drop + n.rx_fifo + n.tx_fifo
            - (p.rx_drop + p.tx_drop + p.rx_fifo + p.tx_fifo)
                .min(n.rx_drop + n.tx_drop + n.rx_fifo + n.tx_fifo);
        let errs = (n.rx_errs + n.tx_errs).saturating_sub(p.rx_errs + p.tx_errs);
        if rx + tx == 0.0 && drops == 0 && errs == 0 {
            continue;
        }
        let colls = n.tx_colls.saturating_sub(p.tx_colls);
        let mut row = UseRow {
            kind: "net".into(),
            name: n.name.clone(),
            utilisation: vec![f("receive", rx, "B/s"), f("transmit", tx, "B/s")],
            saturation: vec![
                f("drops", drops as f64, "count"),
                f("collisions", colls as f64, "count"),
            ],
            errors: vec![f("errors", errs as f64, "count")],
            ..Default::default()
        };
        let mut score: f64 = 0.0;
        if let Some(mbit) = a.speeds.get(&n.name).copied() {
            let u = (rx.max(tx) * 8.0) / (mbit as f64 * 1e6) * 100.0;
            row.utilisation.push(f("of link speed", u, "%"));
            score = u / 100.0;
        }
        if drops > 0 || errs > 0 {
            score = score.max(0.7);
        }
        row.score = score;
        rows.push(row);
    }

    let standouts = standouts(&rows);
    UseTable {
        rows,
        standouts,
        method:
            "CPU and memory from /proc/stat, /proc/vmstat and /proc/meminfo (as vmstat), disks \
                 from /proc/diskstats (as iostat -x), interfaces from /proc/net/dev, pressure from \
                 /proc/pressure, each read before and after the interval; the run queue \
                 (/proc/loadavg running tasks, minus the reader)"
                .into(),
    }
}

fn vmstat_page(_a: &Snapshot) -> f64 {
    // pswpin/pswpout count pages.
    let p = rustix::param::page_size();
    if p > 0 {
        p as f64
    } else {
        4096.0
    }
}

fn get(row: &UseRow, name: &str) -> f64 {
    row.figure(name).unwrap_or(0.0)
}

/// The one or two rows that stand out (score ≥ 0.5), in plain words.
pub(crate) fn standouts(rows: &[UseRow]) -> Vec<String> {
    let mut sorted: Vec<&UseRow> = rows.iter().filter(|r| r.score >= 0.5).collect();
    sorted.sort_by(|a, b| b.score.total_cmp(&a.score));
    let words: Vec<String> = sorted
        .iter()
        .take(2)
        .map(|r| match r.kind.as_str() {
            "cpu" => {
                let sys = get(r, "system");
                let user = get(r, "user");
                let mut s = format!(
                    "CPU is {}: {}% busy ({}% system, {}% user)",
                    if r.score >= 0.9 { "saturated" } else { "busy" },
                    sig(get(r, "busy")),
                    sig(sys),
                    sig(user)
                );
                if let Some(q) = r.figure("runnable per CPU") {
                    s.push_str(&format!(", {} runnable tasks per CPU", sig(q)));
                }
                s.push_str(&format!(
                    ", {}",
                    human(get(r, "context switches"), "context switches/s")
                ));
                if sys > user && sys > 30.0 {
                    s.push_str(" — most of it in the kernel");
                }
                s
            }
            "memory" => format!(
                "memory is under pressure: {}% used, swapping {}, {} major faults/s{}",
                sig(get(r, "used")),
                human(get(r, "swapping"), "B/s"),
                sig(get(r, "major faults")),
                r.figure("PSI some")
                    .map(|p| format!(", tasks stalled on memory {}% of the time", sig(p)))
                    .unwrap_or_default()
            ),
            "disk" => format!(
                "disk {} is {}: {}% utilised, queue depth {}, write await {}",
                r.name,
                if r.score >= 0.9 { "saturated" } else { "busy" },
                sig(get(r, "util")),
                sig(get(r, "queue depth")),
                human(get(r, "write await"), "s")
            ),
            _ => format!(
                "interface {}: {} drops, {} errors over the interval",
                r.name,
                get(r, "drops"),
                get(r, "errors")
            ),
        })
        .collect();
    if words.is_empty() {
        let cpu = rows
            .iter()
            .find(|r| r.kind == "cpu")
            .map(|r| format!(" (CPU {}% busy)", sig(get(r, "busy"))))
            .unwrap_or_default();
        return vec![format!(
            "nothing stands out: no resource is near saturation{cpu}"
        )];
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::vmstat::VmstatCounters;

    fn vm(user: u64, sys: u64, idle: u64, ctxt: u64) -> VmstatCounters {
        VmstatCounters {
            cpu_user: user,
            cpu_system: sys,
            cpu_idle: idle,
            ctxt,
            ..Default::default()
        }
    }

    #[test]
    fn busy_kernel_cpu_stands_out() {
        let b = Snapshot {
            vm: Some(vm(100, 100, 1000, 0)),
            ..Default::default()
        };
        let a = Snapshot {
            vm: Some(vm(120, 270, 1010, 2_000_000)),
            ..Default::default()
        };
        let t = build(&b, &a, 2.0, 2, Some((6.0, 9, 50)), &[]);
        let cpu = t.row("cpu").unwrap();
        assert!((get(cpu, "busy") - 95.0).abs() < 1e-9);
        assert!((get(cpu, "system") - 85.0).abs() < 1e-9);
        assert_eq!(get(cpu, "context switches"), 1_000_000.0);
        assert_eq!(t.standouts.len(), 1);
        assert!(
            t.standouts[0].starts_with("CPU is saturated: 95.0% busy (85.0% system")
                && t.standouts[0].contains("most of it in the kernel"),
            "{:?}",
            t.standouts
        );
    }

    #[test]
    fn tunelab_own_sampling_is_not_load() {
        // 5 s on 2 CPUs = 1000 ticks; 300 busy ticks of which 290 were tunelab's.
        let b = Snapshot {
            vm: Some(vm(100, 100, 1000, 0)),
            own_ticks: Some((10, 10)),
            ..Default::default()
        };
        let a = Snapshot {
            vm: Some(vm(200, 300, 1700, 0)),
            own_ticks: Some((100, 210)),
            ..Default::default()
        };
        let t = build(&b, &a, 5.0, 2, Some((0.0, 1, 50)), &[]);
        let cpu = t.row("cpu").unwrap();
        assert!((get(cpu, "busy") - 1.0).abs() < 1e-9, "{cpu:?}");
        assert!((get(cpu, "tunelab's own (left out)") - 29.0).abs() < 1e-9);
        assert!(t.standouts[0].starts_with("nothing stands out"));
    }

    /// Two snapshots of a machine that did almost nothing between them.
    fn quiet_two_seconds() -> (Snapshot, Snapshot) {
        let b = Snapshot {
            vm: Some(vm(100, 100, 1000, 0)),
            ..Default::default()
        };
        let a = Snapshot {
            vm: Some(vm(101, 101, 1198, 10)),
            ..Default::default()
        };
        (b, a)
    }

    #[test]
    fn a_run_queue_read_twice_does_not_judge() {
        let (b, a) = quiet_two_seconds();
        let t = build(&b, &a, 5.0, 1, Some((1.33, 2, 2)), &[]);
        assert!(
            t.standouts[0].starts_with("nothing stands out"),
            "{:?}",
            t.standouts
        );
        let cpu = t.row("cpu").unwrap();
        assert!(
            cpu.notes.iter().any(|n| n.contains("read 2 time(s)")),
            "{cpu:?}"
        );
        let t = build(&b, &a, 5.0, 1, Some((1.33, 2, 50)), &[]);
        assert!(
            !t.standouts[0].starts_with("nothing stands out"),
            "{:?}",
            t.standouts
        );
    }

    #[test]
    fn a_quiet_machine_says_so() {
        let (b, a) = quiet_two_seconds();
        let t = build(&b, &a, 2.0, 2, Some((0.0, 1, 50)), &[]);
        assert_eq!(t.standouts.len(), 1);
        assert!(t.standouts[0].starts_with("nothing stands out"));
    }
}
