//! The terminal view of one run: context, one table per experiment, notes,
//! warnings and a summary of the background monitor.

use super::table::Terminal;
use crate::model::run::{PointResult, Run};
use crate::stats::summary::relative_half_width;
use crate::units::{human, human_range, pct};

pub(crate) fn render_header(run: &Run, term: Terminal) -> String {
    let env = &run.environment;
    let get = |k: &str| env.get(k).map(String::as_str).unwrap_or("?");
    let mut s = term.para(
        "run",
        &format!(
            "{}{}  ({}, {} → {})",
            run.id,
            if run.label.is_empty() {
                String::new()
            } else {
                format!(" \"{}\"", run.label)
            },
            run.status.as_str(),
            run.started,
            run.finished
        ),
        4,
    );
    s.push_str(&term.para(
        "machine:",
        &format!(
            "{} · {} CPUs · {} · kernel {}",
            get("cpu.model"),
            get("cpu.count"),
            env.get("mem.total_bytes")
                .and_then(|v| v.parse::<f64>().ok())
                .map(|b| human(b, "B"))
                .unwrap_or_default(),
            get("kernel.release")
        ),
        4,
    ));
    if let Some(t) = env.get("target.path") {
        s.push_str(&term.para(
            "target:",
            &format!(
                "{t} · {} on {} ({}) · scheduler {} · read_ahead {} KiB",
                get("target.fs"),
                get("target.device"),
                get("target.mount_options"),
                get("block.scheduler"),
                get("block.read_ahead_kb"),
            ),
            4,
        ));
    }
    s
}

/// Rows of metric summaries for a set of point results.
/// The columns of a run's metric table, in the terminal and in the report.
pub(crate) const METRIC_COLUMNS: &[&str] = &[
    "params",
    "metric",
    "median",
    "95% CI of median",
    "±CI",
    "n",
    "CV",
    "stopped by",
    "outliers",
];

fn metric_rows(results: &[&PointResult]) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    for r in results {
        for m in &r.metrics {
            let s = &m.summary;
            rows.push(vec![
                r.params_label(),
                m.name.clone(),
                human(s.median, &m.unit),
                human_range(s.ci95_low, s.ci95_high, &m.unit),
                format!("±{}", pct(relative_half_width(s)).trim_start_matches('±')),
                s.n.to_string(),
                pct(s.cv),
                s.stop_reason_str().to_string(),
                if s.outliers.is_empty() {
                    String::new()
                } else {
                    s.outliers.len().to_string()
                },
            ]);
        }
    }
    rows
}

pub(crate) fn render(run: &Run, term: Terminal) -> String {
    let mut s = render_header(run, term);
    for exp in run.experiments() {
        let results: Vec<&PointResult> =
            run.results.iter().filter(|r| r.experiment == exp).collect();
        s.push_str(&format!("\n{exp}\n"));
        s.push_str(&term.render(METRIC_COLUMNS, metric_rows(&results)));
        // A note every point repeats is said once.
        let mut notes: Vec<&String> = Vec::new();
        for n in results.iter().flat_map(|r| &r.notes) {
            if !notes.contains(&n) {
                notes.push(n);
            }
        }
        for n in notes {
            s.push_str(&term.para("  note:", n, 8));
        }
        for r in &results {
            if let Some(x) = r.suspect_summary() {
                s.push_str(&term.para(&format!("  suspect: {}:", r.params_label()), &x, 4));
            }
        }
        for h in results.iter().flat_map(|r| &r.histograms) {
            let ps: Vec<String> = h
                .percentiles
                .iter()
                .map(|p| format!("p{}={}", p.p, human(p.value, &h.unit)))
                .collect();
            s.push_str(&term.run_on(&format!("  {} ({} samples):", h.name, h.count), &ps, 4));
        }
    }
    s.push_str(&guard_summary(run, term));
    s.push_str(&monitor_summary(run, term));
    if !run.warnings.is_empty() {
        s.push('\n');
        for w in &run.warnings {
            s.push_str(&term.para("warning:", w, 2));
        }
    }
    s
}

/// What the validity guard could not watch on this machine (once per run).
fn guard_summary(run: &Run, term: Terminal) -> String {
    let mut skipped: Vec<&String> = Vec::new();
    for x in run.results.iter().flat_map(|r| &r.validity.skipped) {
        if !skipped.contains(&x) {
            skipped.push(x);
        }
    }
    if skipped.is_empty() {
        return String::new();
    }
    let mut s = String::from("\nvalidity guard could not watch:\n");
    for x in skipped {
        s.push_str(&term.para("  ", x, 4));
    }
    s
}

/// Mean and max of the sampled activity during the run (vmstat columns, the
/// target device's iostat -x columns, dirty page cache), then the classic
/// warning signs seen (see `observe::hints`) and intervals where Dirty +
/// Writeback was above the writer-throttling point.
pub(crate) fn monitor_summary(run: &Run, term: Terminal) -> String {
    use crate::observe::sampler::MonitorSample;
    let n = run.samples.len();
    if n == 0 {
        return String::new();
    }
    let col = |f: &dyn Fn(&MonitorSample) -> f64| {
        let v: Vec<f64> = run.samples.iter().map(f).collect();
        (
            v.iter().sum::<f64>() / n as f64,
            v.iter().cloned().fold(f64::MIN, f64::max),
        )
    };
    let mut rows = Vec::new();
    let mut add = |name: &str, unit: &str, (mean, max): (f64, f64)| {
        rows.push(vec![name.to_string(), human(mean, unit), human(max, unit)]);
    };
    add("runnable (r)", "", col(&|s| s.vmstat.r as f64));
    add("blocked (b)", "", col(&|s| s.vmstat.b as f64));
    add("cpu user %", "%", col(&|s| s.vmstat.us));
    add("cpu system %", "%", col(&|s| s.vmstat.sy));
    add("cpu idle %", "%", col(&|s| s.vmstat.id));
    add("cpu iowait %", "%", col(&|s| s.vmstat.wa));
    add("cpu steal %", "%", col(&|s| s.vmstat.st));
    add("interrupts", "/s", col(&|s| s.vmstat.in_s));
    add("context switches", "/s", col(&|s| s.vmstat.cs_s));
    add(
        "free memory",
        "B",
        col(&|s| s.vmstat.free_kb as f64 * 1024.0),
    );
    add(
        "page cache",
        "B",
        col(&|s| s.vmstat.cache_kb as f64 * 1024.0),
    );
    add(
        "swap in+out",
        "B/s",
        col(&|s| (s.vmstat.si + s.vmstat.so) * 1024.0),
    );
    add("block in (bi)", "B/s", col(&|s| s.vmstat.bi * 1024.0));
    add("block out (bo)", "B/s", col(&|s| s.vmstat.bo * 1024.0));
    add("dirty", "B", col(&|s| s.dirty.dirty_bytes as f64));
    add("writeback", "B", col(&|s| s.dirty.writeback_bytes as f64));
    if run.samples.iter().any(|s| s.disk.is_some()) {
        let dev = run
            .samples
            .iter()
            .find_map(|s| s.disk.as_ref().map(|d| d.device.clone()))
            .unwrap_or_default();
        let d = |f: fn(&crate::observe::IostatRow) -> f64| {
            move |s: &MonitorSample| s.disk.as_ref().map_or(0.0, f)
        };
        add(&format!("{dev} reads"), "/s", col(&d(|d| d.r_s)));
        add(&format!("{dev} writes"), "/s", col(&d(|d| d.w_s)));
        add(&format!("{dev} read"), "B/s", col(&d(|d| d.rkb_s * 1024.0)));
        add(
            &format!("{dev} write"),
            "B/s",
            col(&d(|d| d.wkb_s * 1024.0)),
        );
        add(
            &format!("{dev} r_await"),
            "s",
            col(&d(|d| d.r_await_ms / 1e3)),
        );
        add(
            &format!("{dev} w_await"),
            "s",
            col(&d(|d| d.w_await_ms / 1e3)),
        );
        add(&format!("{dev} aqu-sz"), "", col(&d(|d| d.aqu_sz)));
        add(
            &format!("{dev} areq-sz"),
            "B",
            col(&d(|d| d.areq_sz_kb * 1024.0)),
        );
        add(&format!("{dev} util %"), "%", col(&d(|d| d.util_pct)));
    }
    let mut s = format!(
        "\nmonitor ({n} samples)\n{}",
        term.render(&["", "mean", "max"], rows)
    );
    let vm: Vec<crate::observe::VmstatRow> = run.samples.iter().map(|s| s.vmstat.clone()).collect();
    for (sign, count) in crate::observe::hints::count_signs(&vm) {
        s.push_str(&term.para(
            "  sign:",
            &format!("{} in {count} of {n} intervals", sign.describe()),
            4,
        ));
    }
    let throttled = run
        .samples
        .iter()
        .filter(|s| s.dirty.dirty_bytes + s.dirty.writeback_bytes > s.dirty.throttle_point())
        .count();
    if throttled > 0 {
        s.push_str(&term.para(
            "  sign:",
            &format!(
                "Dirty + Writeback above the writer-throttling point in {throttled} of {n} intervals \
                 (writes were slowed down by the kernel; see `tunelab monitor dirty`)"
            ),
            4,
        ));
    }
    s
}
