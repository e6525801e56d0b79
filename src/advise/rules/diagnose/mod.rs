//! Rules on a stored diagnosis (`tunelab diagnose`), one file per family of
//! findings: the whole machine's kernel time, slab and locks (`machine`), a
//! workload's kernel time and what explains it (`kernel`), its CPU use
//! (`cpu`) and its off-CPU waits (`waits`); `view` holds the figures every
//! rule starts from.

mod cpu;
#[cfg(test)]
mod fixtures;
mod kernel;
mod machine;
mod view;
mod waits;

pub(crate) use cpu::{cpu_hotspot, cpu_starvation};
pub(crate) use kernel::{fault_churn_rule, small_io_rule};
pub(crate) use machine::{hot_lock, kernel_bound, slab_slow_path};
pub(crate) use waits::{blocking_cause, memory_pressure, sleep_bound, storage_sync, user_lock};

// The workload's own findings (`kernel`, `cpu`, `waits`) read the diagnosed
// workload's own figures (its process tree: `Diagnosis::workload`, its
// off-CPU causes, its profile), never the machine-wide tables alone, and fire
// only past a stated share of the workload's time. Thresholds and their
// reasons: docs/diagnose-findings.md.

/// CPU-bound: on-CPU time at least this share of the workload's active thread time.
pub(crate) const CPU_BOUND_PCT: f64 = 50.0;
/// A hot spot: one user-space function holds at least this share of the samples.
pub(crate) const HOTSPOT_PCT: f64 = 20.0;
/// User-space code must hold at least this share of the samples for a hot spot.
pub(crate) const USER_SHARE_PCT: f64 = 50.0;
/// Lock waits worth a finding, share of active thread time.
pub(crate) const LOCK_PCT: f64 = 10.0;
/// Synchronous storage waits worth a finding, share of active thread time.
pub(crate) const STORAGE_PCT: f64 = 20.0;
/// Timer sleeps that set the pace, share of active thread time.
pub(crate) const SLEEP_PCT: f64 = 50.0;
/// Minor faults per second that make page-fault churn.
pub(crate) const FAULTS_PER_S: f64 = 10_000.0;
/// Profile share in the page-fault path (inclusive) that makes it the cost.
pub(crate) const FAULT_PROFILE_PCT: f64 = 20.0;
/// Read/write calls per second, and bytes per call below which they are small.
pub(crate) const SMALL_IO_CALLS_PER_S: f64 = 5_000.0;
pub(crate) const SMALL_IO_BYTES: f64 = 4096.0;
/// Own system time share of own CPU time that makes a workload kernel-bound.
pub(crate) const OWN_SYSTEM_PCT: f64 = 50.0;
/// Run-queue wait worth a finding: share of (on-CPU + run-queue) time, and of active time.
pub(crate) const STARVED_PCT: f64 = 25.0;
pub(crate) const STARVED_ACTIVE_PCT: f64 = 10.0;
/// Memory-pressure waits (reclaim, major faults), share of active thread time.
pub(crate) const MEMORY_WAIT_PCT: f64 = 10.0;
pub(crate) const MAJOR_FAULTS_PER_S: f64 = 50.0;
/// One other cause of blocking that dominates, share of active thread time.
pub(crate) const DOMINANT_WAIT_PCT: f64 = 50.0;
/// One process of several with the same name is judged on its own time
/// when it holds at least this share of the workload's active time.
pub(crate) const SIGNIFICANT_PROCESS_PCT: f64 = 10.0;

#[cfg(test)]
mod tests {
    use super::fixtures::{ids, workload};

    #[test]
    fn machine_wide_figures_do_not_make_findings_about_a_workload() {
        // The machine is 98% busy, 80% system, with slab churn: none of it
        // is the sleeping program's.
        let d = workload(
            0.01,
            0.01,
            &[("sleep", "timer sleep (nanosleep)", "main", 1.9)],
        );
        assert_eq!(ids(d), vec!["diagnose.sleep-bound"]);
    }
}
