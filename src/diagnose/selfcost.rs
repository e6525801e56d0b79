//! Where tunelab's own CPU goes while it follows a workload: each of its
//! threads' CPU time over the interval (/proc/self/task/TID/schedstat, ns;
//! stat's clock ticks where schedstat is missing), summed by thread name.
//! The report states it beside the total, so a slow board shows which
//! reader costs what, not only that the budget was exceeded.

use std::collections::BTreeMap;
use std::path::Path;

use crate::units::seconds;

/// TUNELAB_DIAGNOSE_COST set: each reader prints its readings and their
/// cost on stderr when it stops (to find where a slow board's CPU goes).
pub(crate) fn debug() -> bool {
    std::env::var_os("TUNELAB_DIAGNOSE_COST").is_some_and(|v| !v.is_empty())
}

/// Each live thread of tunelab: (name, CPU time s), by thread id.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Threads(pub BTreeMap<i32, (String, f64)>);

/// The first field of a schedstat line: time on a CPU, ns → s.
fn schedstat_s(text: &str) -> Option<f64> {
    let ns: u64 = text.split_whitespace().next()?.parse().ok()?;
    Some(ns as f64 * 1e-9)
}

/// utime + stime of a stat line, s (clock ticks: coarse, a fallback).
fn stat_s(text: &str) -> Option<f64> {
    let s = crate::system::proc::Stat::parse(text)?;
    let tick = rustix::param::clock_ticks_per_second().max(1) as f64;
    Some((s.utime()? + s.stime()?) as f64 / tick)
}

/// tunelab's threads now, read below `task` (normally /proc/self/task).
pub(crate) fn snapshot_in(task: &Path) -> Threads {
    let mut out = BTreeMap::new();
    for tid in super::procs::numeric_dirs(task) {
        let dir = task.join(tid.to_string());
        let read = |f: &str| std::fs::read_to_string(dir.join(f)).ok();
        let cpu = read("schedstat")
            .as_deref()
            .and_then(schedstat_s)
            .or_else(|| read("stat").as_deref().and_then(stat_s));
        if let Some(cpu) = cpu {
            let name = read("comm")
                .map(|c| c.trim().to_string())
                .unwrap_or_default();
            out.insert(tid, (name, cpu));
        }
    }
    Threads(out)
}

/// tunelab's own threads now.
pub(crate) fn snapshot() -> Threads {
    snapshot_in(&crate::system::proc::Root::live().pid_file("self", "task"))
}

/// CPU time per thread name between two snapshots, most first; threads
/// born in between count from zero. `total_s` (the process's own clock)
/// also holds threads that ended in between: shown as the rest.
pub(crate) fn spent(before: &Threads, after: &Threads, total_s: f64) -> Vec<(String, f64)> {
    let mut by: BTreeMap<String, f64> = BTreeMap::new();
    for (tid, (name, cpu)) in &after.0 {
        let base = before.0.get(tid).map_or(0.0, |b| b.1);
        *by.entry(name.clone()).or_default() += (cpu - base).max(0.0);
    }
    let seen: f64 = by.values().sum();
    let rest = total_s - seen;
    // Below a millisecond the difference is the two clocks' rounding.
    if rest > 1e-3 {
        by.insert("(threads that ended)".into(), rest);
    }
    let mut v: Vec<(String, f64)> = by.into_iter().filter(|(_, s)| *s > 0.0).collect();
    v.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    v
}

/// "diag-workload 12.0 ms, tunelab-profile 3.10 ms, …" (the top `n`).
pub(crate) fn words(spent: &[(String, f64)], n: usize) -> String {
    let mut parts: Vec<String> = spent
        .iter()
        .take(n)
        .map(|(name, s)| {
            let name = if name.is_empty() { "(unnamed)" } else { name };
            format!("{name} {}", seconds(*s))
        })
        .collect();
    let others: f64 = spent.iter().skip(n).map(|x| x.1).sum();
    if spent.len() > n {
        parts.push(format!("{} others {}", spent.len() - n, seconds(others)));
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn threads(v: &[(i32, &str, f64)]) -> Threads {
        Threads(
            v.iter()
                .map(|(t, n, s)| (*t, (n.to_string(), *s)))
                .collect(),
        )
    }

    #[test]
    fn time_per_name_with_newborn_threads_and_ended_ones() {
        let a = threads(&[(1, "tunelab", 0.5), (2, "diag-slab", 0.1)]);
        let b = threads(&[
            (1, "tunelab", 0.52),
            (2, "diag-slab", 0.4),
            (3, "diag-workload", 0.05),
            (4, "diag-workload", 0.01),
        ]);
        // 0.02 + 0.3 + 0.06 = 0.38 seen; 0.5 in all: 0.12 in ended threads.
        let v = spent(&a, &b, 0.5);
        let names: Vec<&str> = v.iter().map(|x| x.0.as_str()).collect();
        assert_eq!(
            names,
            [
                "diag-slab",
                "(threads that ended)",
                "diag-workload",
                "tunelab"
            ]
        );
        assert!((v[0].1 - 0.3).abs() < 1e-9);
        assert!((v[1].1 - 0.12).abs() < 1e-9);
        assert!((v[2].1 - 0.06).abs() < 1e-9);
        assert_eq!(
            words(&v, 2),
            "diag-slab 300 ms, (threads that ended) 120 ms, 2 others 80.0 ms"
        );
    }

    #[test]
    fn from_a_task_tree_schedstat_first_stat_as_fallback() {
        let d = tempfile::tempdir().unwrap();
        let t = d.path();
        std::fs::create_dir_all(t.join("10")).unwrap();
        std::fs::write(t.join("10/comm"), "diag-slab\n").unwrap();
        std::fs::write(t.join("10/schedstat"), "250000000 7 3\n").unwrap();
        std::fs::create_dir_all(t.join("11")).unwrap();
        std::fs::write(t.join("11/comm"), "old\n").unwrap();
        let tick = rustix::param::clock_ticks_per_second().max(1);
        std::fs::write(
            t.join("11/stat"),
            format!("11 (old) S 1 1 1 0 -1 0 0 0 0 0 {tick} {tick} 0 0 20 0 1 0"),
        )
        .unwrap();
        std::fs::create_dir_all(t.join("12")).unwrap();
        let s = snapshot_in(t);
        assert_eq!(s.0.len(), 2, "{s:?}");
        assert_eq!(s.0[&10], ("diag-slab".to_string(), 0.25));
        assert_eq!(s.0[&11], ("old".to_string(), 2.0));
    }

    #[test]
    fn our_own_threads_are_read() {
        let s = snapshot();
        assert!(s.0.contains_key(&(std::process::id() as i32)), "{s:?}");
    }
}
