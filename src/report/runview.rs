//! The terminal view of one run: context, one table per experiment, notes,
//! warnings and a summary of the background monitor.

use super::table::render as table;
use super::units::{human, pct};
use crate::engine::model::{PointResult, Run};
use crate::stats::summary::relative_half_width;

pub fn render_header(run: &Run) -> String {
    let env = &run.environment;
    let get = |k: &str| env.get(k).map(String::as_str).unwrap_or("?");
    let mut s = format!(
        "run {}{}  ({}, {} → {})\n",
        run.id,
        if run.label.is_empty() {
            String::new()
        } else {
            format!(" \"{}\"", run.label)
        },
        run.status.as_str(),
        run.started,
        run.finished
    );
    s.push_str(&format!(
        "machine: {} · {} CPUs · {} · kernel {}\n",
        get("cpu.model"),
        get("cpu.count"),
        env.get("mem.total_bytes")
            .and_then(|v| v.parse::<f64>().ok())
            .map(|b| human(b, "B"))
            .unwrap_or_default(),
        get("kernel.release")
    ));
    if let Some(t) = env.get("target.path") {
        s.push_str(&format!(
            "target: {t} · {} on {} ({}) · scheduler {} · read_ahead {} KiB\n",
            get("target.fs"),
            get("target.device"),
            get("target.mount_options"),
            get("block.scheduler"),
            get("block.read_ahead_kb"),
        ));
    }
    s
}

/// Rows of metric summaries for a set of point results.
fn metric_rows(results: &[&PointResult]) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    for r in results {
        for m in &r.metrics {
            let s = &m.summary;
            rows.push(vec![
                r.params_label(),
                m.name.clone(),
                human(s.median, &m.unit),
                format!(
                    "{} … {}",
                    human(s.ci95_low, &m.unit),
                    human(s.ci95_high, &m.unit)
                ),
                format!("±{}", pct(relative_half_width(s)).trim_start_matches('±')),
                s.n.to_string(),
                pct(s.cv),
                s.stop_reason.clone(),
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

pub fn render(run: &Run) -> String {
    let mut s = render_header(run);
    for exp in run.experiments() {
        let results: Vec<&PointResult> =
            run.results.iter().filter(|r| r.experiment == exp).collect();
        s.push_str(&format!("\n{exp}\n"));
        s.push_str(&table(
            &[
                "params",
                "metric",
                "median",
                "95% CI of median",
                "±CI",
                "n",
                "CV",
                "stopped by",
                "outliers",
            ],
            metric_rows(&results),
        ));
        let mut notes: Vec<&String> = results.iter().flat_map(|r| &r.notes).collect();
        notes.dedup();
        for n in notes {
            s.push_str(&format!("  note: {n}\n"));
        }
        for h in results.iter().flat_map(|r| &r.histograms) {
            let ps: Vec<String> = h
                .percentiles
                .iter()
                .map(|p| format!("p{}={}", p.p, human(p.value, &h.unit)))
                .collect();
            s.push_str(&format!(
                "  {} ({} samples): {}\n",
                h.name,
                h.count,
                ps.join(" ")
            ));
        }
    }
    s.push_str(&monitor_summary(run));
    if !run.warnings.is_empty() {
        s.push('\n');
        for w in &run.warnings {
            s.push_str(&format!("warning: {w}\n"));
        }
    }
    s
}

/// Mean and max of the sampled activity during the run.
pub fn monitor_summary(run: &Run) -> String {
    let n = run.samples.len();
    if n == 0 {
        return String::new();
    }
    let col = |f: &dyn Fn(&crate::observe::sampler::MonitorSample) -> f64| {
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
    add("cpu user %", "%", col(&|s| s.vmstat.us));
    add("cpu system %", "%", col(&|s| s.vmstat.sy));
    add("cpu iowait %", "%", col(&|s| s.vmstat.wa));
    add("context switches", "/s", col(&|s| s.vmstat.cs_s));
    add("dirty", "B", col(&|s| s.dirty.dirty_bytes as f64));
    add("writeback", "B", col(&|s| s.dirty.writeback_bytes as f64));
    if run.samples.iter().any(|s| s.disk.is_some()) {
        let dev = run
            .samples
            .iter()
            .find_map(|s| s.disk.as_ref().map(|d| d.device.clone()))
            .unwrap_or_default();
        add(
            &format!("{dev} read"),
            "B/s",
            col(&|s| s.disk.as_ref().map_or(0.0, |d| d.rkb_s * 1024.0)),
        );
        add(
            &format!("{dev} write"),
            "B/s",
            col(&|s| s.disk.as_ref().map_or(0.0, |d| d.wkb_s * 1024.0)),
        );
        add(
            &format!("{dev} util %"),
            "%",
            col(&|s| s.disk.as_ref().map_or(0.0, |d| d.util_pct)),
        );
    }
    format!(
        "\nmonitor ({n} samples)\n{}",
        table(&["", "mean", "max"], rows)
    )
}
