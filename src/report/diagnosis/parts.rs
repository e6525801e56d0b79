//! Every section of a stored diagnosis in order: the target, the machine's
//! USE table, counters, locks, blocking, slab, wake-ups and start-up, with
//! the workload's own sections from `workload`.

use super::workload::{offcpu_part, profile_part, workload_part};
use super::{figures, present, who, Part, ROWS};
use crate::model::diagnosis::Diagnosis;
use crate::units::{seconds, si, sig};

/// Every section of a diagnosis, in the order.
pub(crate) fn parts(d: &Diagnosis) -> Vec<Part> {
    let mut out = Vec::new();

    let mut head = Part::new("diagnosis", "Diagnosis");
    let t = &d.target;
    head.text.push(match t.kind.as_str() {
        "command" => format!(
            "`{}` (pid {}) from exec to exit: {}{}",
            t.command.join(" "),
            t.pid.map(|p| p.to_string()).unwrap_or_default(),
            seconds(d.interval_s),
            t.exit
                .as_ref()
                .map(|e| format!(", ended with {e}"))
                .unwrap_or_default()
        ),
        "pid" => format!(
            "pid {} ({}) and its descendants for {}",
            t.pid.unwrap_or(0),
            t.name,
            seconds(d.interval_s)
        ),
        _ => format!(
            "the whole machine ({} CPUs) for {}",
            d.cpus,
            seconds(d.interval_s)
        ),
    });
    out.push(head);

    out.push(workload_part(d));
    out.push(offcpu_part(d));

    let mut p = Part::new(
        "diag-use",
        "Resources, machine-wide (USE: utilisation, saturation, errors)",
    );
    if let Some(u) = present(&mut p, &d.resources) {
        for s in &u.standouts {
            p.text.push(format!("stands out: {s}"));
        }
        p.table(
            &["resource", "utilisation", "saturation", "errors"],
            u.rows
                .iter()
                .map(|r| {
                    vec![
                        format!("{} {}", r.kind, r.name),
                        figures(&r.utilisation),
                        figures(&r.saturation),
                        if r.errors.is_empty() {
                            "not exposed".into()
                        } else {
                            figures(&r.errors)
                        },
                    ]
                })
                .collect(),
        );
        p.notes.push(format!("method: {}", u.method));
    }
    out.push(p);

    out.push(profile_part("diag-profile", "CPU profile", &d.profile));

    let mut p = Part::new("diag-counters", "Counters");
    if let Some(c) = present(&mut p, &d.counters) {
        p.table(
            &["counter", "value", "on PMU", "note"],
            c.counters
                .iter()
                .map(|k| {
                    vec![
                        k.name.clone(),
                        match (k.value, k.unit.as_str()) {
                            (None, _) => "–".into(),
                            // task-clock and cpu-clock count nanoseconds.
                            (Some(v), "ns") => seconds(v / 1e9),
                            (Some(v), _) => si(v),
                        },
                        format!("{:.0}%", k.running_fraction * 100.0),
                        k.unavailable.clone(),
                    ]
                })
                .collect(),
        );
        if let Some(ipc) = c.ipc {
            p.text.push(format!("IPC {}", sig(ipc)));
        }
    }
    out.push(p);

    out.push(profile_part(
        "diag-cache",
        "Cache-miss profile",
        &d.cache_profile,
    ));

    let mut p = Part::new("diag-locks", "Lock contention (lock_stat)");
    if let Some(l) = present(&mut p, &d.locks) {
        p.top_table(
            &[
                "lock class",
                "contentions",
                "acquisitions",
                "wait max",
                "wait total",
                "hold total",
                "where it waited",
            ],
            &l.locks,
            "no lock was contended",
            |r| {
                vec![
                    r.class.clone(),
                    r.contentions.to_string(),
                    r.acquisitions.to_string(),
                    seconds(r.wait_max_us * 1e-6),
                    seconds(r.wait_total_us * 1e-6),
                    seconds(r.hold_total_us * 1e-6),
                    r.contention_points
                        .iter()
                        .take(2)
                        .map(|(n, s)| format!("{s} ({n})"))
                        .collect::<Vec<_>>()
                        .join(", "),
                ]
            },
        );
        p.notes.push(format!("method: {}", l.method));
    }
    out.push(p);

    let mut p = Part::new("diag-blocking", "Why tasks block (off-CPU)");
    if let Some(b) = present(&mut p, &d.blocking) {
        p.top_table(
            &["process", "cause", "times", "max", "total"],
            &b.causes,
            "no task was seen blocked",
            |c| {
                vec![
                    who(c.pid, &c.comm, c.processes),
                    c.cause.clone(),
                    c.count.to_string(),
                    seconds(c.max_s),
                    seconds(c.total_s),
                ]
            },
        );
        p.table(
            &["process", "tasks", "on CPU", "waiting for a CPU"],
            b.sched
                .iter()
                .take(ROWS)
                .map(|s| {
                    vec![
                        who(s.pid, &s.comm, s.processes),
                        s.tasks.to_string(),
                        seconds(s.run_s),
                        seconds(s.runqueue_s),
                    ]
                })
                .collect(),
        );
        p.notes.push(format!("method: {}", b.method));
    }
    out.push(p);

    let mut p = Part::new("diag-slab", "Slab churn");
    if let Some(s) = present(&mut p, &d.slab) {
        p.top_table(
            &[
                "cache",
                "obj size",
                "objects",
                "allocs",
                "frees",
                "%fast alloc",
                "%fast free",
                "churn",
            ],
            &s.caches,
            "no slab cache changed",
            |c| {
                let f = |v: Option<f64>| v.map(|x| format!("{x:.0}")).unwrap_or("–".into());
                vec![
                    c.name.clone(),
                    c.obj_size.to_string(),
                    c.active_objs.to_string(),
                    c.allocs.to_string(),
                    c.frees.to_string(),
                    f(c.alloc_fast_pct),
                    f(c.free_fast_pct),
                    format!("{}/s", si(c.churn_per_s)),
                ]
            },
        );
        p.notes.push(format!("method: {}", s.method));
    }
    out.push(p);

    let mut p = Part::new("diag-wakeups", "Wake-ups and idle states");
    if let Some(w) = present(&mut p, &d.wakeups) {
        p.table(
            &["process", "wake-ups/s", "preempted/s"],
            w.processes
                .iter()
                .take(ROWS)
                .map(|k| {
                    vec![
                        who(k.pid, &k.comm, k.processes),
                        si(k.wakeups_per_s),
                        si(k.preempted_per_s),
                    ]
                })
                .collect(),
        );
        p.table(
            &["C-state", "residency", "entries/s"],
            w.cstates
                .iter()
                .map(|c| {
                    vec![
                        c.name.clone(),
                        format!("{}%", sig(c.residency_pct)),
                        si(c.entries_per_s),
                    ]
                })
                .collect(),
        );
        if !w.cstates_missing.is_empty() {
            p.text.push(w.cstates_missing.clone());
        }
        p.notes.push(format!("method: {}", w.method));
    }
    out.push(p);

    let mut p = Part::new("diag-startup", "Start-up anatomy");
    if let Some(s) = present(&mut p, &d.startup) {
        let row = |r: &crate::model::diagnosis::StartupRuns| {
            let l = r.linker.as_ref();
            let n = |f: &dyn Fn(&crate::model::diagnosis::LinkerStats) -> String| {
                l.map(f).unwrap_or_else(|| "–".into())
            };
            vec![
                r.mode.clone(),
                r.runs.to_string(),
                seconds(r.wall_s),
                r.minor_faults.to_string(),
                r.major_faults.to_string(),
                n(&|l| format!("{} {}", si(l.startup), l.unit)),
                n(&|l| format!("{} {}", si(l.relocation), l.unit)),
                // glibc prints the exit figure only on a normal exit through
                // its finalisers (not after _exit): "–" when it did not.
                n(&|l| match l.final_relocations {
                    0 => format!("{}/–", l.relocations),
                    f => format!("{}/{f}", l.relocations),
                }),
            ]
        };
        let mut rows = vec![row(&s.default)];
        if let Some(b) = &s.bind_now {
            rows.push(row(b));
        }
        p.table(
            &[
                "mode",
                "runs",
                "exec→exit",
                "minor faults",
                "major faults",
                "in ld.so",
                "relocating",
                "relocations start/exit",
            ],
            rows,
        );
        if !s.libraries.is_empty() {
            p.text
                .push(format!("libraries loaded: {}", s.libraries.join(", ")));
        }
        p.notes.push(format!("method: {}", s.method));
    }
    out.push(p);
    out
}
