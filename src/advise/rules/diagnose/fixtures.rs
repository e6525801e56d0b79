//! Diagnoses the rule tests share: a messaging storm seen machine-wide, and
//! a command's own figures with its off-CPU causes.

use super::super::{Evidence, Finding, Outcome, Workload, ALL};
use crate::model::diagnosis::{
    BlockCause, BlockingReport, Diagnosis, Figure, OffCpuCause, OffCpuReport, Overhead,
    ProcessWaits, Section, SlabCache, SlabReport, TaskFigures, UseRow, UseTable, WorkloadReport,
};
use crate::model::profile::{Profile, SymbolRow};

fn present<T>(x: T) -> Section<T> {
    Section::Present {
        data: x,
        overhead: Overhead::default(),
    }
}

pub(super) fn messaging(fast: Option<f64>, profile: bool) -> Diagnosis {
    let mut d = Diagnosis {
        cpus: 2,
        interval_s: 4.0,
        ..Default::default()
    };
    // Machine-wide slab and CPU figures back findings about the machine.
    d.target.kind = "system".into();
    d.resources = present(UseTable {
        rows: vec![UseRow {
            kind: "cpu".into(),
            utilisation: vec![
                Figure::new("busy", 98.0, "%"),
                Figure::new("system", 80.0, "%"),
            ],
            saturation: vec![Figure::new("context switches", 400_000.0, "/s")],
            ..Default::default()
        }],
        ..Default::default()
    });
    d.slab = present(SlabReport {
        source: "x".into(),
        caches: vec![SlabCache {
            name: "kmalloc-512".into(),
            obj_size: 512,
            allocs: 900_000,
            frees: 899_000,
            alloc_fast_pct: fast,
            free_fast_pct: fast,
            churn_per_s: 449_750.0,
            ..Default::default()
        }],
        method: String::new(),
    });
    if profile {
        d.profile = present(Profile {
            symbols: vec![
                SymbolRow {
                    samples: 500,
                    percent: 30.0,
                    image: "[kernel]".into(),
                    symbol: "___slab_alloc".into(),
                },
                SymbolRow {
                    samples: 200,
                    percent: 12.0,
                    image: "[kernel]".into(),
                    symbol: "get_partial_node.part.0".into(),
                },
            ],
            ..Default::default()
        });
    }
    d.blocking = present(BlockingReport {
        causes: vec![
            BlockCause {
                pid: 7,
                comm: "tunelab".into(),
                processes: 1,
                cause: "unix_stream_read_generic".into(),
                total_s: 3.0,
                max_s: 0.05,
                count: 900,
            },
            BlockCause {
                pid: 7,
                comm: "tunelab".into(),
                cause: "sock_alloc_send_pskb".into(),
                total_s: 1.0,
                ..Default::default()
            },
        ],
        ..Default::default()
    });
    d
}

pub(super) fn ev(d: Diagnosis) -> Evidence {
    Evidence {
        diagnosis: Some(("RUN1".into(), d)),
        ..Default::default()
    }
}

pub(super) fn get(o: Outcome) -> Option<Finding> {
    match o {
        Outcome::Finding(f) => Some(*f),
        _ => None,
    }
}

/// A command's diagnosis from its own figures: `cpu` user+system s,
/// blocked causes (class, cause, caller, total s).
pub(super) fn workload(user: f64, sys: f64, causes: &[(&str, &str, &str, f64)]) -> Diagnosis {
    let mut d = messaging(None, false);
    d.target.kind = "command".into();
    d.target.command = vec!["./prog".into()];
    d.interval_s = 2.0;
    let total = TaskFigures {
        comm: "prog".into(),
        threads: 1,
        user_s: user,
        system_s: sys,
        ..Default::default()
    };
    d.workload = present(WorkloadReport {
        rows: vec![total.clone()],
        total,
        ..Default::default()
    });
    let blocked: f64 = causes.iter().map(|c| c.3).sum();
    d.offcpu = present(OffCpuReport {
        source: "sched switch events".into(),
        causes: causes
            .iter()
            .map(|(class, cause, caller, s)| OffCpuCause {
                class: class.to_string(),
                cause: cause.to_string(),
                caller: caller.to_string(),
                comm: "prog".into(),
                total_s: *s,
                waits: 100,
                max_s: 0.002,
                ..Default::default()
            })
            .collect(),
        blocked_s: blocked,
        by_process: vec![ProcessWaits {
            comm: "prog".into(),
            blocked_s: blocked,
            ..Default::default()
        }],
        ..Default::default()
    });
    d.profile = Section::skipped("none");
    d
}

pub(super) fn ids(d: Diagnosis) -> Vec<&'static str> {
    let e = ev(d);
    ALL.iter()
        .filter_map(|r| get(r(&e, Workload::General)))
        .map(|f| f.id)
        .collect()
}
