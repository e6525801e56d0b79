//! A workload's CPU use: a hot spot in its own code, or starvation (runnable
//! but waiting for a CPU others hold).

use super::super::{Evidence, Finding, Outcome, Severity, Workload};
use super::kernel::yield_share;
use super::view::{cmd, cpu_figures, own, target_words};
use super::{CPU_BOUND_PCT, HOTSPOT_PCT, STARVED_ACTIVE_PCT, STARVED_PCT, USER_SHARE_PCT};
use crate::diagnose::offcpu::{c_library_image, c_library_internal};
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

/// A C library function (by its file, or by glibc's internal names where
/// libc is linked into the program): not the program's own to optimise.
fn in_c_library(p: &crate::model::profile::Profile, symbol: &str) -> bool {
    p.symbols
        .iter()
        .find(|s| s.symbol == symbol)
        .is_some_and(|s| c_library_image(&s.image))
        || c_library_internal(symbol)
}

/// The program's own function that calls `symbol` most: the first frame
/// outside the C library on the heaviest stacks ending in it.
fn own_caller(p: &crate::model::profile::Profile, symbol: &str) -> Option<String> {
    let mut by: std::collections::HashMap<&str, u64> = std::collections::HashMap::new();
    for f in p
        .folded
        .iter()
        .filter(|f| f.stack.rsplit(';').next() == Some(symbol))
    {
        if let Some(c) = f
            .stack
            .rsplit(';')
            .skip(1)
            .find(|fr| !fr.starts_with("0x") && !fr.contains("+0x") && !in_c_library(p, fr))
        {
            *by.entry(c).or_default() += f.samples;
        }
    }
    by.into_iter()
        .max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(a.0)))
        .map(|x| x.0.to_string())
}

/// A line when the top user frames are bare addresses: why there are no
/// names, and how to get them.
fn unsymbolised_note(p: &crate::model::profile::Profile) -> Option<String> {
    let user: Vec<_> = p
        .symbols
        .iter()
        .filter(|s| !s.image.starts_with('['))
        .collect();
    let bare: f64 = user
        .iter()
        .filter(|s| s.symbol.starts_with("0x") || s.symbol.contains("+0x"))
        .map(|s| s.percent)
        .sum();
    if bare < HOTSPOT_PCT {
        return None;
    }
    let image = user
        .iter()
        .find(|s| s.symbol.starts_with("0x") || s.symbol.contains("+0x"))
        .map_or("the program", |s| s.image.as_str());
    Some(format!(
        "{}% of the samples are bare addresses in {image}: it has no symbol table (stripped) and \
         no debug file was found for it; for names, profile an unstripped build (cc -g, no \
         strip/-s), or install its debug symbols (its -dbg/-debuginfo package, or \
         /usr/lib/debug/.build-id/)",
        sig(bare)
    ))
}

pub(crate) fn cpu_hotspot(ev: &Evidence, _: Workload) -> Outcome {
    let Some((id, d, w)) = own(ev) else {
        return Outcome::Fine;
    };
    let Some(p) = d.profile.data() else {
        return Outcome::Fine;
    };
    // CPU-bound: on a CPU or waiting for one (a starved CPU-bound program
    // is still CPU-bound), as a whole or in one busy thread beside blocked
    // ones (a producer feeding waiting consumers): half a CPU over the
    // interval is a thread's worth of work, whatever the others do.
    let on_cpu = w.pct_of_active(w.cpu_s + w.runq_s);
    let of_one_cpu = (w.cpu_s + w.runq_s) / d.interval_s.max(1e-9) * 100.0;
    let user = user_share(d);
    let Some(top) = p
        .symbols
        .iter()
        .find(|s| !s.image.starts_with('[') && !s.symbol.starts_with('['))
    else {
        return Outcome::Fine;
    };
    if (on_cpu < CPU_BOUND_PCT && of_one_cpu < CPU_BOUND_PCT)
        || user < USER_SHARE_PCT
        || top.percent < HOTSPOT_PCT
    {
        return Outcome::Fine;
    }
    let path = call_path(d, &top.symbol);
    // A C library function is not the program's to optimise: its caller is.
    let caller = in_c_library(p, &top.symbol)
        .then(|| own_caller(p, &top.symbol))
        .flatten();
    let second = p
        .symbols
        .iter()
        .filter(|s| !s.image.starts_with('[') && s.symbol != top.symbol)
        .take(2)
        .map(|s| format!("{} {}%", s.symbol, sig(s.percent)))
        .collect::<Vec<_>>()
        .join(", ");
    let mut evidence = vec![
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
            "thresholds: on or waiting for a CPU ≥ {CPU_BOUND_PCT}% of active time ({}%) or of one CPU over the interval ({}%), user space ≥ {USER_SHARE_PCT}% of samples, one function ≥ {HOTSPOT_PCT}%",
            sig(on_cpu),
            sig(of_one_cpu)
        ),
    ];
    evidence.extend(unsymbolised_note(p));
    let (title_fn, command) = match &caller {
        Some(c) => (
            format!("{} ({}, a C library function) called from {c}", top.symbol, top.image),
            format!(
                "make {c} call {} less often or on less data (a C library function: its own \
                 code is not yours to change); the flame graph in `tunelab report RUN -o diag.html` \
                 shows the callers",
                top.symbol
            ),
        ),
        None => (
            format!("{} ({})", top.symbol, top.image),
            format!(
                "optimise or call less often {}{}; the flame graph in `tunelab report RUN -o diag.html` shows its callers",
                top.symbol,
                if path.is_empty() { String::new() } else { format!(" (reached by {path})") }
            ),
        ),
    };
    Finding::new(
        "diagnose.cpu-hotspot",
        Severity::Info,
        format!(
            "{} spends {}% of its CPU samples in {title_fn}",
            target_words(d),
            sig(top.percent),
        ),
    )
    .evidence(evidence)
    .why(
        "The workload is CPU-bound and one function of its own holds a large share of the \
              CPU: speeding it up (or calling it less) shortens the run in proportion; elsewhere \
              gains are bounded by the rest (Amdahl).",
    )
    .fix(command, "Changes the program; measure before and after.")
    .verify(format!(
        "tunelab diagnose {} (the function's share and the run time fall)",
        cmd(d)
    ))
    .into()
}

/// Who held the CPUs while the workload waited preempted, from the
/// CPU-wide switch records: (observer s, own threads s, others named, the
/// evidence line); None when they were not traced.
struct Held {
    observer_s: f64,
    own_s: f64,
    others_s: f64,
    named: String,
    line: String,
}

fn held(d: &Diagnosis, runq_s: f64) -> Option<Held> {
    let o = d.offcpu.data()?;
    let total: f64 = o.holders.iter().map(|h| h.s).sum();
    if o.holders.is_empty() || total <= 0.0 {
        return None;
    }
    // Attributed time is scaled to the run-queue figure (waits still open
    // at the stop have no holder yet).
    let scale = runq_s / total;
    let sum = |role: &str| {
        o.holders
            .iter()
            .filter(|h| h.role == role)
            .map(|h| h.s)
            .sum::<f64>()
            * scale
    };
    let words = |h: &crate::model::diagnosis::CpuHolder| match h.role.as_str() {
        "tunelab" => format!("tunelab itself (pid {}, this diagnosis)", h.pid),
        "workload" => format!("its own {} (pid {})", h.comm, h.pid),
        "idle" => "no one (the CPU was idle: wake-up or migration delay)".to_string(),
        _ => format!("{} (pid {})", h.comm, h.pid),
    };
    let top: Vec<String> = o
        .holders
        .iter()
        .take(4)
        .map(|h| format!("{} {}%", words(h), sig(h.s / total * 100.0)))
        .collect();
    let named = o
        .holders
        .iter()
        .filter(|h| h.role == "other")
        .take(3)
        .map(|h| format!("{} (pid {})", h.comm, h.pid))
        .collect::<Vec<_>>()
        .join(", ");
    Some(Held {
        observer_s: sum("tunelab"),
        own_s: sum("workload"),
        others_s: sum("other"),
        named,
        line: format!(
            "who ran before each switch back in after a preemption (CPU-wide switch records, {} attributed): {}",
            seconds(total),
            top.join(", ")
        ),
    })
}

fn starved(w: &super::view::WorkView<'_>, runq_s: f64) -> (bool, f64) {
    let of_runnable = runq_s / (w.cpu_s + runq_s).max(1e-9) * 100.0;
    let of_active = w.pct_of_active(runq_s);
    (
        of_runnable >= STARVED_PCT && of_active >= STARVED_ACTIVE_PCT,
        of_runnable,
    )
}

pub(crate) fn cpu_starvation(ev: &Evidence, _: Workload) -> Outcome {
    let Some((id, d, w)) = own(ev) else {
        return Outcome::Fine;
    };
    // A sched_yield loop's run-queue time is its own yielding.
    let (any, _) = starved(&w, w.runq_s);
    if !any || yield_share(d) >= 10.0 {
        return Outcome::Fine;
    }
    let machine = cpu_figures(d).map(|c| c.0).unwrap_or(0.0);
    let others_cpu = (machine / 100.0 * d.cpus as f64 * d.interval_s - w.cpu_s).max(0.0);
    let tunelab_cpu = d.workload.data().map_or(0.0, |x| x.tunelab_cpu_s);
    let held = held(d, w.runq_s);
    // Other processes cannot have held a CPU longer than the CPU time they
    // used (measured machine-wide): beyond it, a lost switch record
    // stretched the segment before it (a kernel thread's few µs) over a
    // stretch tunelab ran.
    let others_held = held.as_ref().map_or(0.0, |h| {
        if cpu_figures(d).is_some() {
            h.others_s.min(others_cpu)
        } else {
            h.others_s
        }
    });
    // tunelab's share of the wait: traced, or (untraced) inferred when the
    // workload has no more threads than CPUs and other processes used too
    // little CPU to explain it.
    let observer_s = match &held {
        // tunelab cannot have held a CPU longer than the CPU time it used
        // (lost switch records stretch the segment before them).
        Some(h) => (h.observer_s + h.others_s - others_held).min(tunelab_cpu),
        None if w.threads <= d.cpus
            && others_cpu < 0.5 * w.runq_s
            && tunelab_cpu >= 0.5 * w.runq_s =>
        {
            w.runq_s
        }
        None => 0.0,
    };
    let (still, of_runnable) = starved(&w, w.runq_s - observer_s);
    let mut evidence = vec![
        format!("diagnosis {id}: {}", w.words()),
        format!(
            "over the interval other processes used about {} of CPU time on {} CPUs (machine busy {}%, tunelab's own left out); tunelab's own threads used {}; the workload has {} threads",
            seconds(others_cpu),
            d.cpus,
            sig(machine),
            seconds(tunelab_cpu),
            w.threads
        ),
    ];
    match &held {
        Some(h) => evidence.push(h.line.clone()),
        None => evidence.push(format!(
            "who held the CPUs is not traced ({}): judged from the CPU time of the others",
            d.offcpu
                .data()
                .map(|o| o.holders_missing.as_str())
                .filter(|m| !m.is_empty())
                .unwrap_or("no switch records")
        )),
    }
    evidence.push(format!(
        "thresholds: run-queue wait ≥ {STARVED_PCT}% of on-CPU + run-queue time and ≥ {STARVED_ACTIVE_PCT}% of active time, tunelab's own share left out"
    ));
    if !still {
        return Finding::new("diagnose.observer-cost", Severity::Info, format!(
                "tunelab itself held the CPU for {} of the {} {} waited for one: an observer cost of this diagnosis, not a finding about the workload",
                seconds(observer_s),
                seconds(w.runq_s),
                target_words(d)
            ))
            .evidence(evidence)
            .why("diagnose's samplers and tracer run on the same CPUs as the workload; on a \
                  machine with few, slow CPUs following a busy workload costs CPU time the \
                  workload then waits for. Left out, the workload's wait is below the threshold.")
            .fix(
                "read the workload's CPU figures with this in mind; on a board, run the \
                      workload on a CPU of its own (taskset -c 1 CMD) so diagnose's threads \
                      run beside it",
                "None: nothing is changed.",
            )
            .verify(format!("tunelab diagnose {} (tunelab's own CPU line in the workload section)", cmd(d)))
            .into();
    }
    let runq = w.runq_s - observer_s;
    let (own_s, others_s, named) = held.as_ref().map_or((0.0, 0.0, String::new()), |h| {
        (h.own_s, others_held, h.named.clone())
    });
    let own_threads = if held.is_some() {
        own_s >= others_s
    } else {
        w.threads > d.cpus
    };
    let by = if held.is_none() {
        String::new()
    } else if own_threads {
        ", mostly behind its own threads".to_string()
    } else if !named.is_empty() && others_s > 0.0 {
        format!(", behind {named}")
    } else {
        String::new()
    };
    Finding::new(
        "diagnose.cpu-starvation",
        Severity::Warning,
        format!(
            "{} waits for a CPU {}% of the time it could run ({} in run queues{}){}",
            target_words(d),
            sig(of_runnable),
            seconds(runq),
            if observer_s > 0.0 {
                format!(", tunelab's own {} left out", seconds(observer_s))
            } else {
                String::new()
            },
            by
        ),
    )
    .evidence(evidence)
    .why(if own_threads {
        format!(
            "It is runnable but not running: it has {} threads on {} CPUs and they take \
                 turns; the CPUs are its own work.",
            w.threads, d.cpus
        )
    } else if held.is_some() {
        format!("It is runnable but not running: other processes hold the CPUs ({named}).")
    } else {
        "It is runnable but not running: other processes hold the CPUs.".into()
    })
    .fix(
        if own_threads {
            "fewer runnable threads than CPUs (size the pool to the CPUs), or more CPUs; \
             or give it priority over the rest (nice -n -5 CMD)"
        } else {
            "give it priority (nice -n -5 CMD, or lower the others: renice +10 -p PID), \
             a CPU of its own (taskset -c N CMD; cgroup cpuset), or fewer threads than CPUs"
        },
        "Priority for one process is latency for the others.",
    )
    .verify(format!(
        "tunelab diagnose {} (run-queue wait falls)",
        cmd(d)
    ))
    .into()
}

#[cfg(test)]
mod tests;
