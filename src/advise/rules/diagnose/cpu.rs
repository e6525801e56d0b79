//! A workload's CPU use: a hot spot in its own code, or starvation (runnable
//! but waiting for a CPU others hold).

use super::super::{finding, Evidence, Finding, Outcome, Severity, Workload};
use super::kernel::yield_share;
use super::view::{cmd, cpu_figures, own, target_words};
use super::{CPU_BOUND_PCT, HOTSPOT_PCT, STARVED_ACTIVE_PCT, STARVED_PCT, USER_SHARE_PCT};
use crate::model::diagnosis::Diagnosis;
use crate::units::{seconds, sig};

fn user_share(d: &Diagnosis) -> f64 {
    d.profile
        .data()
        .filter(|p| p.samples > 0)
        .map_or(0.0, |p| p.user_samples as f64 * 100.0 / p.samples as f64)
}

/// The heaviest call path to `symbol` in the folded stacks, root first,
/// without the process name and the C runtime's start frames.
fn call_path(d: &Diagnosis, symbol: &str) -> String {
    let Some(p) = d.profile.data() else {
        return String::new();
    };
    p.folded
        .iter()
        .filter(|f| f.stack.rsplit(';').next() == Some(symbol))
        .max_by_key(|f| f.samples)
        .map(|f| {
            f.stack
                .split(';')
                .skip(1)
                .filter(|fr| {
                    !matches!(
                        *fr,
                        "_start"
                            | "__libc_start_main"
                            | "__libc_start_call_main"
                            | "start_thread"
                            | "clone3"
                            | "clone"
                    ) && !fr.contains("+0x")
                })
                .collect::<Vec<_>>()
                .join(" → ")
        })
        .unwrap_or_default()
}

pub(crate) fn cpu_hotspot(ev: &Evidence, _: Workload) -> Outcome {
    let Some((id, d, w)) = own(ev) else {
        return Outcome::Fine;
    };
    let Some(p) = d.profile.data() else {
        return Outcome::Fine;
    };
    // CPU-bound: on a CPU or waiting for one (a starved CPU-bound program
    // is still CPU-bound).
    let on_cpu = w.pct_of_active(w.cpu_s + w.runq_s);
    let user = user_share(d);
    let Some(top) = p
        .symbols
        .iter()
        .find(|s| !s.image.starts_with('[') && !s.symbol.starts_with('['))
    else {
        return Outcome::Fine;
    };
    if on_cpu < CPU_BOUND_PCT || user < USER_SHARE_PCT || top.percent < HOTSPOT_PCT {
        return Outcome::Fine;
    }
    let path = call_path(d, &top.symbol);
    let second = p
        .symbols
        .iter()
        .filter(|s| !s.image.starts_with('[') && s.symbol != top.symbol)
        .take(2)
        .map(|s| format!("{} {}%", s.symbol, sig(s.percent)))
        .collect::<Vec<_>>()
        .join(", ");
    finding(Finding {
        id: "diagnose.cpu-hotspot",
        severity: Severity::Info,
        title: format!(
            "{} spends {}% of its CPU samples in {} ({})",
            target_words(d),
            sig(top.percent),
            top.symbol,
            top.image
        ),
        evidence: vec![
            format!("diagnosis {id}: {}", w.words()),
            format!(
                "CPU profile ({} samples, {}% in user space): {} {}%{}{}",
                p.samples,
                sig(user),
                top.symbol,
                sig(top.percent),
                if second.is_empty() { String::new() } else { format!("; next {second}") },
                if path.is_empty() { String::new() } else { format!("; call path {path}") }
            ),
            format!(
                "thresholds: on or waiting for a CPU ≥ {CPU_BOUND_PCT}% of active time ({}%), user space ≥ {USER_SHARE_PCT}% of samples, one function ≥ {HOTSPOT_PCT}%",
                sig(on_cpu)
            ),
        ],
        why: "The workload is CPU-bound and one function of its own holds a large share of the \
              CPU: speeding it up (or calling it less) shortens the run in proportion; elsewhere \
              gains are bounded by the rest (Amdahl)."
            .into(),
        command: format!(
            "optimise or call less often {}{}; the flame graph in `tunelab report RUN -o diag.html` shows its callers",
            top.symbol,
            if path.is_empty() { String::new() } else { format!(" (reached by {path})") }
        ),
        risk: "Changes the program; measure before and after.".into(),
        verify: format!("tunelab diagnose {} (the function's share and the run time fall)", cmd(d)),
    })
}

pub(crate) fn cpu_starvation(ev: &Evidence, _: Workload) -> Outcome {
    let Some((id, d, w)) = own(ev) else {
        return Outcome::Fine;
    };
    let of_runnable = w.runq_s / (w.cpu_s + w.runq_s).max(1e-9) * 100.0;
    let of_active = w.pct_of_active(w.runq_s);
    // A sched_yield loop's run-queue time is its own yielding.
    if of_runnable < STARVED_PCT || of_active < STARVED_ACTIVE_PCT || yield_share(d) >= 10.0 {
        return Outcome::Fine;
    }
    let machine = cpu_figures(d).map(|c| c.0).unwrap_or(0.0);
    let others = (machine / 100.0 * d.cpus as f64 * d.interval_s - w.cpu_s).max(0.0);
    let own_threads_exceed = w.threads > d.cpus;
    finding(Finding {
        id: "diagnose.cpu-starvation",
        severity: Severity::Warning,
        title: format!(
            "{} waits for a CPU {}% of the time it could run ({} in run queues)",
            target_words(d),
            sig(of_runnable),
            seconds(w.runq_s)
        ),
        evidence: vec![
            format!("diagnosis {id}: {}", w.words()),
            format!(
                "over the interval other processes used about {} of CPU time on {} CPUs (machine busy {}%, tunelab's own left out); the workload has {} threads",
                seconds(others),
                d.cpus,
                sig(machine),
                w.threads
            ),
            format!(
                "thresholds: run-queue wait ≥ {STARVED_PCT}% of on-CPU + run-queue time and ≥ {STARVED_ACTIVE_PCT}% of active time"
            ),
        ],
        why: if own_threads_exceed {
            "It is runnable but not running: it has more runnable threads than CPUs, and other \
             processes compete too."
                .into()
        } else {
            "It is runnable but not running: other processes hold the CPUs."
                .into()
        },
        command: "give it priority (nice -n -5 CMD, or lower the others: renice +10 -p PID), \
                  a CPU of its own (taskset -c N CMD; cgroup cpuset), or fewer threads than CPUs"
            .into(),
        risk: "Priority for one process is latency for the others.".into(),
        verify: format!("tunelab diagnose {} (run-queue wait falls)", cmd(d)),
    })
}
