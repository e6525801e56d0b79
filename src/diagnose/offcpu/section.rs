//! The off-CPU section of a diagnosis: from the switch-event trace when
//! it ran, else from the sampled blocking table, with its method in words
//! (and, when the tracer was held to the budget, how much it traced).

use super::{from_blocking, from_trace};
use crate::diagnose::{budget, overhead, profile};
use crate::model::diagnosis::{BlockingReport, OffCpuReport, Section};
use crate::units::{seconds, sig};

/// The section from the stopped tracer `off` (its kernel addresses named by
/// `names`), falling back on `blocking`; `command`: tunelab forked the
/// workload (its own image's frames before the exec are tunelab's).
pub(crate) fn section(
    off: Result<profile::Running, String>,
    names: &profile::KernelNames,
    blocking: &Section<BlockingReport>,
    program: &str,
    command: bool,
    interval: f64,
) -> Section<OffCpuReport> {
    let run = match off {
        Ok(run) => run,
        Err(e) => return fallback(blocking, e),
    };
    let t = match run.finish_offcpu_named(Some(names)) {
        Ok(t) => t,
        Err(e) => return fallback(blocking, e),
    };
    let own_image = if command {
        std::env::current_exe()
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_default()
    } else {
        String::new()
    };
    let o = from_trace(
        &t,
        program,
        &own_image,
        format!(
            "every switch of the workload's tasks off a CPU with its user and kernel \
             call chain (perf_event_open: the context-switches software event, fired \
             where the sched:sched_switch tracepoint is, like `perf record -e \
             context-switches -g`), paired with its switch back in (SWITCH records): \
             each wait's real length, summed by cause; preemptions (still runnable) \
             are run-queue time, not blocking; {} waits still open at the end charged \
             up to it{}. {}",
            t.open_at_end,
            windows(&t),
            t.profile.overhead.summary
        ),
    );
    Section::Present {
        data: o,
        overhead: overhead(
            t.profile.overhead.reader_cpu_ms * 1e-3 + t.profile.overhead.symbolise_cpu_ms * 1e-3,
            interval,
            0,
            "the off-CPU reader thread and symbolising",
        ),
    }
}

/// The trace's coverage when it was held to the budget, in words.
fn windows(t: &profile::OffCpuTrace) -> String {
    if !t.ended_early || t.span_s <= 0.0 {
        return String::new();
    }
    format!(
        "; PARTIAL, not every switch: tracing stopped early when tunelab's readers went \
         over {}% of one CPU, so the first {} of the {} interval was traced ({}%) and the \
         blocked and run-queue times and thread lifetimes are the traced ones scaled by {} \
         (wait counts and longest waits are those seen)",
        sig(budget::BUDGET_PERCENT),
        seconds(t.traced_s),
        seconds(t.span_s),
        sig(t.traced_s * 100.0 / t.span_s),
        sig(t.span_s / t.traced_s.max(1e-9))
    )
}

/// The off-CPU section from the sampled blocking table when switch events
/// are not available.
fn fallback(blocking: &Section<BlockingReport>, why: String) -> Section<OffCpuReport> {
    match blocking.data() {
        Some(b) if b.source != "latencytop" || !b.causes.is_empty() => {
            let mut o = from_blocking(b);
            o.method = format!("no scheduler switch events ({why}); {}", o.method);
            Section::Present {
                data: o,
                overhead: Default::default(),
            }
        }
        _ => Section::skipped(format!("no scheduler switch events: {why}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trace_held_to_the_budget_says_how_much_it_covered() {
        let mut t = profile::OffCpuTrace::default();
        assert_eq!(windows(&t), "");
        t.ended_early = true;
        t.traced_s = 1.0;
        t.span_s = 4.0;
        let w = windows(&t);
        assert!(w.contains("PARTIAL"), "{w}");
        assert!(w.contains("the first 1.00 s of the 4.00 s interval"), "{w}");
        assert!(w.contains("(25.0%)"), "{w}");
        assert!(w.contains("scaled by 4.00"), "{w}");
    }
}
