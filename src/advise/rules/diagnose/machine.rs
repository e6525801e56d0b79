//! Findings about the whole machine from its USE table, slab caches and
//! lock_stat: kernel-bound CPU time, SLUB slow paths, a hot kernel lock.

use super::super::{Evidence, Finding, Outcome, Severity, Workload};
use super::kernel::workload_kernel_bound;
use super::view::{cpu_figures, diag, profile_share, WorkView};
use crate::model::diagnosis::{Diagnosis, SlabCache};
use crate::units::{seconds, si, sig};

/// System time above this share of busy CPU time makes a run kernel-bound.
const KERNEL_BOUND_PCT: f64 = 50.0;
/// The CPUs must be at least this busy for time in the kernel to matter.
const BUSY_PCT: f64 = 50.0;
/// A cache's allocations take the slow path too often below this fast share.
const LOW_FAST_PCT: f64 = 70.0;
/// Profile share in SLUB's slow paths worth a finding.
const SLAB_PROFILE_PCT: f64 = 10.0;
/// Allocations + frees per second that make a cache busy.
const BUSY_CACHE_PER_S: f64 = 10_000.0;

/// SLUB's slow-path functions, as they appear in a kernel profile.
const SLUB_SLOW: &[&str] = &[
    "___slab_alloc",
    "__slab_alloc",
    "__slab_free",
    "get_partial_node",
    "add_partial",
    "remove_partial",
    "put_cpu_partial",
    "deactivate_slab",
    "new_slab",
    "allocate_slab",
    "discard_slab",
    "__put_partials",
    "get_partial_node.part.0",
];
/// The kernel's lock slow paths, as they appear in a profile.
const KERNEL_LOCK_SLOW: &[&str] = &[
    "native_queued_spin_lock_slowpath",
    "queued_spin_lock_slowpath",
    "__mutex_lock",
    "rwsem_down_",
    "osq_lock",
];

/// Share of profile samples in SLUB's slow paths, and the top such symbol.
fn slub_share(d: &Diagnosis) -> Option<(f64, String)> {
    let p = d.profile.data()?;
    let mut share = 0.0;
    let mut top: Option<(f64, String)> = None;
    for s in &p.symbols {
        let name = s.symbol.split('+').next().unwrap_or(&s.symbol);
        if SLUB_SLOW.contains(&name) {
            share += s.percent;
            if top.as_ref().is_none_or(|t| s.percent > t.0) {
                top = Some((s.percent, name.to_string()));
            }
        }
    }
    Some((share, top?.1))
}

fn busiest_cache(d: &Diagnosis) -> Option<&SlabCache> {
    d.slab.data()?.caches.first()
}

fn slub_min_objects(d: &Diagnosis) -> u32 {
    (2 * d.cpus.max(1)).next_power_of_two().max(4)
}

pub(crate) fn kernel_bound(ev: &Evidence, _: Workload) -> Outcome {
    let Some((id, d)) = diag(ev) else {
        return Outcome::Fine;
    };
    if let Some(w) = WorkView::of(d) {
        return workload_kernel_bound(id, d, &w);
    }
    // The whole machine: the USE table (tunelab's own CPU time left out).
    let Some((busy, sys, cs)) = cpu_figures(d) else {
        return Outcome::Fine;
    };
    let cs_per_cpu = cs / d.cpus.max(1) as f64;
    if d.target.kind != "system" || busy < BUSY_PCT || sys / busy * 100.0 < KERNEL_BOUND_PCT {
        return Outcome::Fine;
    }
    Finding::new("diagnose.kernel-bound", Severity::Warning, format!(
            "the machine spends its CPU in the kernel: {}% system of {}% busy, {} context switches/s",
            sig(sys),
            sig(busy),
            si(cs)
        ))
        .evidence(vec![format!(
            "diagnosis {id}: USE table over {} ({} CPUs, tunelab's own CPU time left out): CPU busy {}%, system {}%, {}/s \
             context switches ({}/s per CPU)",
            seconds(d.interval_s),
            d.cpus,
            sig(busy),
            sig(sys),
            si(cs),
            si(cs_per_cpu)
        )])
        .why("When most busy CPU time is system time, the work is syscalls, wake-ups and kernel allocations rather than \
              the programs' own code: the kernel paths in the profile and the slab table say \
              which, and `tunelab diagnose --pid PID` on the busiest process says whose.")
        .fix(
            "diagnose the busiest process on its own: tunelab diagnose --pid PID --for 10s",
            "None (a reading).",
        )
        .verify("tunelab diagnose --for 10s")
        .into()
}

pub(crate) fn slab_slow_path(ev: &Evidence, _: Workload) -> Outcome {
    let Some((id, d)) = diag(ev) else {
        return Outcome::Fine;
    };
    let Some(cache) = busiest_cache(d) else {
        return Outcome::Fine;
    };
    let profile = slub_share(d);
    let stats_slow = cache.alloc_fast_pct.is_some_and(|f| f < LOW_FAST_PCT);
    let profile_slow = profile
        .as_ref()
        .is_some_and(|(s, _)| *s >= SLAB_PROFILE_PCT);
    let sys = cpu_figures(d).map(|c| c.1).unwrap_or(0.0);
    let busy_cache = cache.churn_per_s >= BUSY_CACHE_PER_S;
    let churn_in_kernel = busy_cache && sys >= KERNEL_BOUND_PCT / 2.0;
    // Slab counters are machine-wide: for a process or command only its own
    // profile (its samples in SLUB's slow paths) shows it causes the churn.
    let scoped = d.target.kind != "system";
    if scoped && !profile_slow {
        return Outcome::Fine;
    }
    if !(stats_slow || profile_slow || churn_in_kernel) {
        return Outcome::Fine;
    }
    let n = slub_min_objects(d);
    let mut evidence = vec![format!(
        "diagnosis {id}: busiest slab cache {} ({} B objects): {} allocations and {} frees in {} \
         ({}/s){}",
        cache.name,
        cache.obj_size,
        cache.allocs,
        cache.frees,
        seconds(d.interval_s),
        si(cache.churn_per_s),
        match (cache.alloc_fast_pct, cache.free_fast_pct) {
            (Some(a), Some(f)) => format!(
                ", {a:.0}% of allocations and {f:.0}% of frees on the fast path (SLUB_STATS)"
            ),
            _ => " (net object changes from /proc/slabinfo: a lower bound)".into(),
        }
    )];
    if let Some((share, top)) = &profile {
        evidence.push(format!(
            "CPU profile: {}% of samples in SLUB slow paths (top: {top})",
            sig(*share)
        ));
    }
    if sys > 0.0 {
        evidence.push(format!("CPU system time {}%", sig(sys)));
    }
    let confirmed = stats_slow || profile_slow;
    let cache_dir = cache.name.split(',').next().unwrap_or(&cache.name);
    Finding::new(
        "diagnose.slab-slow-path",
        if confirmed {
            Severity::Warning
        } else {
            Severity::Info
        },
        if confirmed {
            format!(
                "SLUB slow paths for {}: allocations miss the per-CPU slabs",
                cache.name
            )
        } else {
            format!(
                "heavy slab churn in {} alongside kernel time; the slow-path share is not \
                 measured here",
                cache.name
            )
        },
    )
    .evidence(evidence)
    .why(
        "SLUB serves allocations from a per-CPU slab; when it runs dry the slow path takes \
              the node's list_lock to find a partial slab, which under a storm of small \
              allocations (sockets, messages) becomes the bottleneck. Larger slabs \
              (slub_min_objects) and more per-CPU partial slabs (cpu_partial) keep more \
              allocations on the fast path.",
    )
    .fix(
        format!(
            "boot parameter slub_min_objects={n} (2×CPUs, power of two); live, per cache: echo \
             <N> > /sys/kernel/slab/{cache_dir}/cpu_partial (tune cannot sweep this file yet)"
        ),
        "Larger and more partial slabs hold more memory per CPU (a few hundred KiB per \
               busy cache); on a 64 MiB board check MemAvailable after the change.",
    )
    .verify(format!(
        "tunelab diagnose -- {}  (after the change: compare time and the slab table){}",
        if d.target.command.is_empty() {
            "CMD".to_string()
        } else {
            d.target.command.join(" ")
        },
        if confirmed {
            ""
        } else {
            "; a kernel with CONFIG_SLUB_STATS, or the CPU profile, shows the fast-path share"
        }
    ))
    .into()
}

pub(crate) fn hot_lock(ev: &Evidence, _: Workload) -> Outcome {
    let Some((id, d)) = diag(ev) else {
        return Outcome::Fine;
    };
    let Some(top) = d.locks.data().and_then(|l| l.locks.first()) else {
        return Outcome::Fine;
    };
    let wait_s = top.wait_total_us * 1e-6;
    let cpu_s = d.interval_s * d.cpus.max(1) as f64;
    if top.contentions < 1000 || wait_s < 0.01 * cpu_s {
        return Outcome::Fine;
    }
    // lock_stat is machine-wide: a process's finding needs its own samples
    // in the kernel's lock slow paths.
    if d.target.kind != "system"
        && profile_share(d, |f| KERNEL_LOCK_SLOW.iter().any(|k| f.starts_with(k))) < 5.0
    {
        return Outcome::Fine;
    }
    Finding::new(
        "diagnose.hot-lock",
        Severity::Warning,
        format!(
            "kernel lock {} is contended: {} waits totalling {}",
            top.class,
            top.contentions,
            seconds(wait_s)
        ),
    )
    .evidence(vec![format!(
        "diagnosis {id}: /proc/lock_stat over {}: {} contentions of {} acquisitions, wait max \
             {}, total {} ({}% of all CPU time); waited at {}",
        seconds(d.interval_s),
        top.contentions,
        top.acquisitions,
        seconds(top.wait_max_us * 1e-6),
        seconds(wait_s),
        sig(wait_s / cpu_s * 100.0),
        top.contention_points
            .iter()
            .take(2)
            .map(|(n, s)| format!("{s} ({n})"))
            .collect::<Vec<_>>()
            .join(", ")
    )])
    .why(
        "Time waiting for a kernel lock is CPU time (spinlocks) or latency (mutexes) the \
              workload does not get; the call sites say which subsystem serialises it.",
    )
    .fix(
        "spread the work over independent objects (files, sockets, processes) so they \
                  stop sharing the lock; if the call sites are SLUB's (get_partial_node, \
                  __slab_free), see the slab finding",
        "Restructuring changes the application; measure before and after.",
    )
    .verify("tunelab diagnose -- CMD (compare the lock table)")
    .into()
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{ev, get, messaging};
    use super::*;
    use crate::model::diagnosis::Section;

    #[test]
    fn slow_paths_from_slub_stats_or_profile_are_warnings() {
        let f = get(slab_slow_path(
            &ev(messaging(Some(20.0), false)),
            Workload::General,
        ))
        .unwrap();
        assert_eq!(f.severity, Severity::Warning);
        assert!(f.title.contains("kmalloc-512"));
        assert!(f.command.contains("slub_min_objects=4"), "{}", f.command);
        assert!(f
            .command
            .contains("/sys/kernel/slab/kmalloc-512/cpu_partial"));
        let f = get(slab_slow_path(
            &ev(messaging(None, true)),
            Workload::General,
        ))
        .unwrap();
        assert_eq!(f.severity, Severity::Warning);
        assert!(
            f.evidence[1].contains("42.0% of samples"),
            "{:?}",
            f.evidence
        );
        // Churn and kernel time without a slow-path measurement: info only.
        let f = get(slab_slow_path(
            &ev(messaging(None, false)),
            Workload::General,
        ))
        .unwrap();
        assert_eq!(f.severity, Severity::Info);
        // Fast paths and no profile: nothing to say if the cache is quiet.
        let mut d = messaging(Some(99.0), false);
        if let Section::Present { data, .. } = &mut d.slab {
            data.caches[0].churn_per_s = 10.0;
        }
        assert!(get(slab_slow_path(&ev(d), Workload::General)).is_none());
    }

    #[test]
    fn kernel_bound_and_blocking() {
        let f = get(kernel_bound(&ev(messaging(None, false)), Workload::General)).unwrap();
        assert!(
            f.title.contains("80.0% system of 98.0% busy"),
            "{}",
            f.title
        );
        assert!(get(hot_lock(&ev(messaging(None, false)), Workload::General)).is_none());
        assert!(get(kernel_bound(&Evidence::default(), Workload::General)).is_none());
    }
}
