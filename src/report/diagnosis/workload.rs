//! The workload's own sections of a diagnosis: its figures beside the
//! machine's, where it waits off-CPU, and a CPU profile with its flame graph.

use super::{present, who, Part, ROWS};
use crate::model::diagnosis::{Diagnosis, Section};
use crate::model::profile::Profile;
use crate::units::{human, seconds, si, sig};

pub(super) fn profile_part(id: &'static str, title: &str, s: &Section<Profile>) -> Part {
    let mut p = Part::new(id, title);
    if let Some(pr) = present(&mut p, s) {
        p.text.push(format!(
            "event {}{}: {} samples ({} user, {} kernel) at {} Hz{}",
            pr.event,
            if pr.event_reason.is_empty() {
                String::new()
            } else {
                format!(" ({})", pr.event_reason)
            },
            pr.samples,
            pr.user_samples,
            pr.kernel_samples,
            pr.frequency_hz,
            if pr.lost > 0 {
                format!(", {} lost (bursts under-counted)", pr.lost)
            } else {
                String::new()
            }
        ));
        p.table(
            &["samples", "%", "image", "symbol"],
            pr.symbols
                .iter()
                .take(ROWS * 2)
                .map(|r| {
                    vec![
                        r.samples.to_string(),
                        format!("{:.1}", r.percent),
                        r.image.clone(),
                        r.symbol.clone(),
                    ]
                })
                .collect(),
        );
        p.table(
            &["symbol", "self", "total", "callers", "callees"],
            pr.callgraph
                .iter()
                .take(ROWS)
                .map(|c| {
                    let edges = |v: &[crate::model::profile::CallEdge]| {
                        v.iter()
                            .take(3)
                            .map(|e| format!("{} ({})", e.symbol, e.samples))
                            .collect::<Vec<_>>()
                            .join(", ")
                    };
                    vec![
                        c.symbol.clone(),
                        c.self_samples.to_string(),
                        c.total_samples.to_string(),
                        edges(&c.callers),
                        edges(&c.callees),
                    ]
                })
                .collect(),
        );
        if !pr.folded.is_empty() {
            p.flame = Some((pr.folded.clone(), format!("{title}: flame graph")));
        }
    }
    p
}

/// The workload's own figures, beside the machine-wide USE table.
pub(super) fn workload_part(d: &Diagnosis) -> Part {
    let mut p = Part::new("diag-workload", "The workload's own figures");
    if let Some(w) = present(&mut p, &d.workload) {
        let i = d.interval_s.max(1e-9);
        let row = |f: &crate::model::diagnosis::TaskFigures, name: String| {
            let calls = f.syscr + f.syscw;
            vec![
                name,
                f.threads.to_string(),
                seconds(f.user_s),
                seconds(f.system_s),
                seconds(f.runqueue_s),
                format!(
                    "{}/s / {}/s",
                    si(f.voluntary_switches as f64 / i),
                    si(f.involuntary_switches as f64 / i)
                ),
                format!(
                    "{}/s / {}/s",
                    si(f.minor_faults as f64 / i),
                    si(f.major_faults as f64 / i)
                ),
                format!(
                    "{}/s, {} per call",
                    si(calls as f64 / i),
                    human((f.rchar + f.wchar) as f64 / calls.max(1) as f64, "B")
                ),
                format!(
                    "{} / {}",
                    human(f.read_bytes as f64, "B"),
                    human(f.write_bytes as f64, "B")
                ),
            ]
        };
        let mut rows: Vec<Vec<String>> = w
            .rows
            .iter()
            .take(ROWS)
            .map(|f| row(f, who(f.pid, &f.comm, f.processes)))
            .collect();
        if w.rows.len() > 1 || rows.is_empty() {
            rows.push(row(&w.total, "all of it".into()));
        }
        let cpu = w.total.cpu_s();
        p.text.push(format!(
            "{} of CPU over {} ({}% of one CPU), {}% of it in the kernel; {} waiting for a CPU",
            seconds(cpu),
            seconds(d.interval_s),
            sig(cpu / i * 100.0),
            sig(w.total.system_s / cpu.max(1e-9) * 100.0),
            seconds(w.total.runqueue_s)
        ));
        p.table(
            &[
                "process",
                "threads",
                "user",
                "system",
                "run-queue wait",
                "switches vol/invol",
                "faults minor/major",
                "read/write calls",
                "storage read/written",
            ],
            rows,
        );
        let own_pct = w.tunelab_cpu_s / i * 100.0;
        p.text.push(format!(
            "tunelab's own CPU time over the interval (samplers, profiler, tracer; not in any figure): {} ({}% of one CPU){}",
            seconds(w.tunelab_cpu_s),
            sig(own_pct),
            budget_words(own_pct, w.tunelab_budget_pct)
        ));
        p.notes.push(format!("method: {}", w.method));
    }
    p
}

/// The budget beside what tunelab used ("" for a run made before budgets).
fn budget_words(used_pct: f64, budget_pct: f64) -> String {
    if budget_pct <= 0.0 {
        return String::new();
    }
    let verdict = if used_pct <= budget_pct {
        "within it".to_string()
    } else {
        format!("over it by {}×", sig(used_pct / budget_pct))
    };
    format!("; budget {}% of one CPU, {verdict}", sig(budget_pct))
}

/// Time blocked by cause, with the off-CPU flame graph.
pub(super) fn offcpu_part(d: &Diagnosis) -> Part {
    let mut p = Part::new("diag-offcpu", "Off-CPU: where the workload waits");
    if let Some(o) = present(&mut p, &d.offcpu) {
        p.text.push(format!(
            "{} blocked, {} preempted while runnable (source: {})",
            seconds(o.blocked_s),
            seconds(o.runqueue_s),
            o.source
        ));
        p.top_table(
            &[
                "process",
                "cause",
                "called from",
                "waits",
                "mean",
                "longest",
                "total",
                "%",
            ],
            &o.causes,
            "no task of the workload blocked",
            |c| {
                vec![
                    c.comm.clone(),
                    c.cause.clone(),
                    c.caller.clone(),
                    c.waits.to_string(),
                    seconds(c.total_s / c.waits.max(1) as f64),
                    seconds(c.max_s),
                    seconds(c.total_s),
                    format!("{:.1}", c.total_s / o.blocked_s.max(1e-12) * 100.0),
                ]
            },
        );
        p.table(
            &["cause", "heaviest kernel path"],
            o.causes
                .iter()
                .take(ROWS)
                .filter(|c| !c.kernel_path.is_empty())
                .map(|c| vec![c.cause.clone(), c.kernel_path.clone()])
                .collect(),
        );
        if !o.folded.is_empty() {
            p.flame = Some((
                o.folded.clone(),
                "Off-CPU flame graph (width: µs blocked)".into(),
            ));
        }
        p.notes.push(format!("method: {}", o.method));
    }
    p
}
