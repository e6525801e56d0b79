//! `tunelab monitor`'s text: each view's rows for one interval (sampled and
//! turned into rates by `engine::verbs::monitor`) as a table and as
//! OpenMetrics gauges, and the views' notes and summaries. Rendering only.

use crate::report::table::Terminal;
use std::fmt::Write as _;

use crate::observe::dirty::DirtyLimits;
use crate::observe::dirtywatch::{DirtyLine, DirtySummary};
use crate::observe::hogs::HogRow;
use crate::observe::iostat::IostatRow;
use crate::observe::irq::IrqRate;
use crate::observe::pressure::{PowerRow, PsiRow, SlabRow};
use crate::observe::vmstat::VmstatRow;
use crate::units::human;

/// (metric name, labels, value) for OpenMetrics.
pub(crate) type Gauge = (String, String, f64);

/// One interval of a view: its table text and its gauges.
#[derive(Default)]
pub(crate) struct Shown {
    pub(crate) table: String,
    pub(crate) gauges: Vec<Gauge>,
}

impl Shown {
    fn gauge(&mut self, name: impl Into<String>, labels: String, value: f64) {
        self.gauges.push((name.into(), labels, value));
    }
}

/// Rows between two repeats of a scrolling view's header.
const HEADER_EVERY: usize = 20;

/// Whether the `line`th line of a scrolling view starts with its header.
pub(crate) fn header_due(line: usize) -> bool {
    line.is_multiple_of(HEADER_EVERY)
}

/// vmstat's two header lines, 80 columns like a row (swap in KiB/s).
const VMSTAT_HEADER: &str = "\
procs --------memory MiB-------- -swap-- -io KiB/s-- -system/s-- -----cpu %-----
 r  b  swpd   free   buff  cache  si  so    bi    bo    in    cs us sy  id wa st
";

/// `v` rounded, in at most `w` characters: past that with a k, M or G
/// suffix (102511 KiB/s in a 5-wide column is "103k"), so a busy machine's
/// row stays 80 columns and under its header.
fn narrow(v: f64, w: usize) -> String {
    let plain = format!("{v:.0}");
    if plain.len() <= w {
        return plain;
    }
    for (div, suffix) in [(1e3, "k"), (1e6, "M"), (1e9, "G"), (1e12, "T")] {
        let s = format!("{:.0}{suffix}", v / div);
        if s.len() <= w {
            return s;
        }
    }
    plain
}

pub(crate) fn vmstat(r: &VmstatRow, header: bool) -> Shown {
    let mut e = Shown::default();
    if header {
        e.table.push_str(VMSTAT_HEADER);
    }
    // Memory in MiB (vmstat -S M): KiB columns made the line 86 wide.
    let mib = |kb: u64| (kb + 512) / 1024;
    let n = |v: f64, w: usize| narrow(v, w);
    let m = |kb: u64, w: usize| narrow(mib(kb) as f64, w);
    let _ = writeln!(
        e.table,
        "{:>2} {:>2} {:>5} {:>6} {:>6} {:>6} {:>3} {:>3} {:>5} {:>5} {:>5} {:>5} {:>2} {:>2} {:>3} {:>2} {:>2}",
        n(r.r as f64, 2), n(r.b as f64, 2), m(r.swpd_kb, 5), m(r.free_kb, 6), m(r.buff_kb, 6),
        m(r.cache_kb, 6), n(r.si, 3), n(r.so, 3), n(r.bi, 5), n(r.bo, 5), n(r.in_s, 5),
        n(r.cs_s, 5), n(r.us, 2), n(r.sy, 2), n(r.id, 3), n(r.wa, 2), n(r.st, 2)
    );
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
        e.gauge(format!("tunelab_vmstat_{name}"), String::new(), v);
    }
    for (mode, v) in [
        ("user", r.us),
        ("system", r.sy),
        ("idle", r.id),
        ("iowait", r.wa),
        ("steal", r.st),
    ] {
        e.gauge("tunelab_vmstat_cpu_percent", format!("mode=\"{mode}\""), v);
    }
    e
}

pub(crate) fn iostat_preface(non_rotational: &[&str]) -> Vec<String> {
    let mut v = vec![
        "note: %util is the share of time with at least one request in flight; on devices that \
         serve requests in parallel (SSD, NVMe, RAID, virtual disks) 100% does not mean saturated — \
         watch aqu-sz and await instead"
            .to_string(),
    ];
    if !non_rotational.is_empty() {
        v.push(format!(
            "non-rotational devices here: {}",
            non_rotational.join(", ")
        ));
    }
    v
}

pub(crate) fn iostat(rows: &[IostatRow]) -> Shown {
    let mut e = Shown::default();
    e.table.push_str(&format!(
        "{:<9} {:>7} {:>7} {:>8} {:>8} {:>7} {:>7} {:>6} {:>7} {:>5}\n",
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
    for r in rows {
        let _ = writeln!(
            e.table,
            "{:<9} {:>7.1} {:>7.1} {:>8.1} {:>8.1} {:>7.2} {:>7.2} {:>6.2} {:>7.1} {:>5.1}",
            r.device,
            r.r_s,
            r.w_s,
            r.rkb_s,
            r.wkb_s,
            r.r_await_ms,
            r.w_await_ms,
            r.aqu_sz,
            r.areq_sz_kb,
            r.util_pct
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
            e.gauge(format!("tunelab_iostat_{n}"), l.clone(), v);
        }
    }
    e.table.push('\n');
    e
}

pub(crate) fn hogs(rows: &[HogRow], threads: bool) -> Shown {
    let mut e = Shown::default();
    let _ = writeln!(
        e.table,
        "{:>8} {:<16} {:>9} {:>8} {:>8}",
        if threads { "TID" } else { "PID" },
        "NAME",
        "CPU s",
        "% 1 CPU",
        "% all"
    );
    for r in rows {
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
        e.gauge("tunelab_hogs_cpu_percent", l, r.pct_cpu);
    }
    e.table.push('\n');
    e
}

/// The `top` busiest sources in the table; every source as a gauge. A
/// column per CPU while they fit the width, else the busiest CPU of each
/// source; the description is cut to the width (whole in the gauges' names
/// and with --json).
pub(crate) fn irq(rows: &[IrqRate], top: usize, term: Terminal) -> Shown {
    let ncpu = rows.first().map_or(0, |r| r.per_cpu_per_s.len());
    let width = term.width();
    // kind, source, total/s: 6 + 1 + 10 + 1 + 9; each CPU 1 + 8; a
    // description gets at least 12.
    let per_cpu = 27 + 9 * ncpu + 2 + 12 <= width;
    let mut e = Shown::default();
    let mut head = format!("{:<6} {:<10} {:>9}", "kind", "source", "total/s");
    if per_cpu {
        for c in 0..ncpu {
            let _ = write!(head, " {:>8}", format!("CPU{c}/s"));
        }
    } else {
        let _ = write!(head, " {:>14}", "busiest CPU/s");
    }
    head.push_str("  description");
    e.table.push_str(&cut(&head, width));
    e.table.push('\n');
    for r in rows.iter().take(top) {
        let mut line = format!("{:<6} {:<10} {:>9.1}", r.kind, r.source, r.total_per_s);
        if per_cpu {
            for v in &r.per_cpu_per_s {
                let _ = write!(line, " {v:>8.1}");
            }
        } else {
            let (c, v) = r
                .per_cpu_per_s
                .iter()
                .enumerate()
                .fold((0, 0.0), |m, (c, &v)| if v > m.1 { (c, v) } else { m });
            let _ = write!(line, " {:>14}", format!("CPU{c} {v:.1}"));
        }
        let _ = write!(line, "  {}", r.desc);
        e.table.push_str(&cut(&line, width));
        e.table.push('\n');
    }
    for r in rows {
        let what = if r.kind == "irq" {
            "interrupts"
        } else {
            "softirqs"
        };
        for (c, v) in r.per_cpu_per_s.iter().enumerate() {
            e.gauge(
                format!("tunelab_{what}_per_second"),
                format!("source=\"{}\",cpu=\"{c}\"", r.source),
                *v,
            );
        }
    }
    e.table.push('\n');
    e
}

/// `line` cut to `width` columns, ending in "…" when cut.
fn cut(line: &str, width: usize) -> String {
    let line = line.trim_end();
    if line.chars().count() <= width {
        return line.trim_end().to_string();
    }
    let mut s: String = line.chars().take(width.saturating_sub(1)).collect();
    s.push('…');
    s
}

pub(crate) const SLAB_PREFACE: &str = "note: churn is the net change of active objects per second (/proc/slabinfo has no allocation counter)";

pub(crate) fn slab(shown: &[&SlabRow]) -> Shown {
    let mut e = Shown::default();
    let _ = writeln!(
        e.table,
        "{:<28} {:>12} {:>8} {:>12} {:>12}",
        "cache", "active objs", "obj size", "memory", "net churn/s"
    );
    for r in shown {
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
        e.gauge(
            "tunelab_slab_active_objects",
            l.clone(),
            r.active_objs as f64,
        );
        e.gauge("tunelab_slab_churn_per_second", l, r.churn_per_s);
    }
    e.table.push('\n');
    e
}

pub(crate) fn psi(rows: &[PsiRow]) -> Shown {
    let mut e = Shown::default();
    let _ = writeln!(
        e.table,
        "{:<8} {:>8} {:>8} {:>11}",
        "resource", "some %", "full %", "some avg10"
    );
    for r in rows {
        let _ = writeln!(
            e.table,
            "{:<8} {:>8.1} {:>8} {:>11.2}",
            r.resource,
            r.some_pct,
            r.full_pct.map_or("-".into(), |f| format!("{f:.1}")),
            r.some_avg10
        );
        e.gauge(
            "tunelab_pressure_stalled_percent",
            format!("resource=\"{}\",kind=\"some\"", r.resource),
            r.some_pct,
        );
        if let Some(f) = r.full_pct {
            e.gauge(
                "tunelab_pressure_stalled_percent",
                format!("resource=\"{}\",kind=\"full\"", r.resource),
                f,
            );
        }
    }
    e.table.push('\n');
    e
}

pub(crate) fn power(rows: &[PowerRow], term: Terminal) -> Shown {
    let mut e = Shown::default();
    for r in rows {
        let idle: Vec<String> = r
            .idle
            .iter()
            .map(|(n, pct, rate)| format!("{n} {pct:.1}% ({rate:.0}/s),"))
            .collect();
        let head = format!(
            "cpu{:<3} governor {:<12} freq {:>8}  idle:",
            r.cpu,
            r.governor.as_deref().unwrap_or("-"),
            r.freq_mhz.map_or("-".into(), |f| format!("{f:.0} MHz")),
        );
        let mut idle = idle;
        if let Some(last) = idle.last_mut() {
            last.pop();
        }
        let idle = if idle.is_empty() {
            vec!["-".to_string()]
        } else {
            idle
        };
        // Idle states wrap under the line, whole, on a narrow screen (the
        // aligned head is kept when the line fits).
        let line = format!("{head} {}", idle.join(" "));
        if line.chars().count() <= term.width() {
            let _ = writeln!(e.table, "{line}");
        } else {
            e.table.push_str(&term.run_on(&head, &idle, 8));
        }
        if let Some(f) = r.freq_mhz {
            e.gauge("tunelab_cpu_frequency_mhz", format!("cpu=\"{}\"", r.cpu), f);
        }
        for (n, pct, _) in &r.idle {
            e.gauge(
                "tunelab_cpu_idle_residency_percent",
                format!("cpu=\"{}\",state=\"{n}\"", r.cpu),
                *pct,
            );
        }
    }
    e.table.push('\n');
    e
}

/// Where the kernel starts throttling writers, from the sysctls.
pub(crate) fn dirty_preface(l: &DirtyLimits) -> String {
    format!(
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
    )
}

pub(crate) fn dirty(line: &DirtyLine, header: bool) -> Shown {
    let mut e = Shown::default();
    if header {
        let _ = writeln!(
            e.table,
            "{:>10} {:>10} {:>10} {:>10} {:>11} {:>7}",
            "dirty", "writeback", "available", "cache", "throttle at", "% of it"
        );
    }
    let _ = writeln!(
        e.table,
        "{:>10} {:>10} {:>10} {:>10} {:>11} {:>6.0}%{}",
        human(line.dirty_bytes as f64, "B"),
        human(line.writeback_bytes as f64, "B"),
        human(line.available_bytes as f64, "B"),
        human(line.cache_bytes as f64, "B"),
        human(line.throttle_bytes as f64, "B"),
        line.pct_of_throttle,
        if line.exceeded { "  THROTTLING" } else { "" }
    );
    for (n, v) in [
        ("dirty_bytes", line.dirty_bytes),
        ("writeback_bytes", line.writeback_bytes),
        ("available_bytes", line.available_bytes),
        ("cache_bytes", line.cache_bytes),
        ("throttle_threshold_bytes", line.throttle_bytes),
    ] {
        e.gauge(format!("tunelab_dirty_{n}"), String::new(), v as f64);
    }
    e
}

/// The warning when writers are being throttled.
pub(crate) fn dirty_warning(line: &DirtyLine) -> Option<String> {
    line.exceeded.then(|| {
        format!(
            "Dirty + Writeback = {} exceeds the throttling threshold {}: writers are being slowed down",
            human((line.dirty_bytes + line.writeback_bytes) as f64, "B"),
            human(line.throttle_bytes as f64, "B")
        )
    })
}

pub(crate) fn dirty_summary(s: &DirtySummary) -> String {
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
    // One clause a line, so it fits 80 columns: "A ≥ B = value (now …)".
    let pad = "\n             ";
    let folded = s
        .inequality
        .replacen(" ≥ ", &format!("{pad}≥ "), 1)
        .replacen(") = ", &format!("){pad}= "), 1);
    let _ = writeln!(t, "  must hold: {folded}");
    // Advice wrapped at word boundaries to fit 80 columns.
    for a in &s.advice {
        let mut line = String::from(" ");
        for w in a.split(' ') {
            if line.chars().count() + 1 + w.chars().count() > 78 && !line.trim().is_empty() {
                let _ = writeln!(t, "{line}");
                line = String::from("   ");
            }
            line.push(' ');
            line.push_str(w);
        }
        let _ = writeln!(t, "{line}");
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vmstat_rows_line_up_under_their_header_in_80_columns() {
        let r = VmstatRow {
            r: 12,
            b: 3,
            swpd_kb: 2_000_000,
            free_kb: 20_000_000,
            buff_kb: 900_000,
            cache_kb: 9_000_000,
            si: 120.0,
            so: 0.0,
            bi: 51_200.0,
            bo: 99_000.0,
            in_s: 12_345.0,
            cs_s: 54_321.0,
            us: 55.0,
            sy: 20.0,
            id: 100.0,
            wa: 5.0,
            st: 0.0,
        };
        let t = vmstat(&r, true).table;
        let widths: Vec<usize> = t.lines().map(|l| l.chars().count()).collect();
        assert_eq!(widths, vec![80, 80, 80], "{t}");
        // A busy machine's six-digit rates take a suffix, not a column more.
        let busy = VmstatRow {
            bi: 102_511.0,
            bo: 1_066_608.0,
            in_s: 203_650.0,
            cs_s: 99_999.0,
            ..r
        };
        let t = vmstat(&busy, false).table;
        assert_eq!(t.trim_end().chars().count(), 80, "{t}");
        assert!(
            t.contains(" 103k ") && t.contains(" 1067k ") && t.contains(" 204k "),
            "{t}"
        );
        assert!(t.contains(" 99999 "), "{t}");
    }

    #[test]
    fn cut_marks_what_it_left_out() {
        assert_eq!(cut("abcdef", 4), "abc…");
        assert_eq!(cut("abc  ", 4), "abc");
    }
}
