//! A workload's own kernel time: kernel-bound (syscalls, a sched_yield
//! spin) unless page-fault churn or small I/O calls explain it.

use super::super::{Evidence, Finding, Outcome, Severity, Workload};
use super::view::{cmd, own, profile_share, target_words, WorkView};
use super::{
    CPU_BOUND_PCT, FAULTS_PER_S, FAULT_PROFILE_PCT, OWN_SYSTEM_PCT, SMALL_IO_BYTES,
    SMALL_IO_CALLS_PER_S,
};
use crate::model::diagnosis::Diagnosis;
use crate::units::{human, seconds, si, sig};

/// The page-fault path, inclusive.
const FAULT_PATH: &[&str] = &[
    "asm_exc_page_fault",
    "exc_page_fault",
    "do_user_addr_fault",
    "handle_mm_fault",
    "clear_page_erms",
    "clear_page_rep",
    "clear_page_orig",
    "clear_page",
];

/// The kernel syscalls most of the profile's kernel time is under:
/// ("sched_yield", share %) sorted.
fn top_syscalls(d: &Diagnosis) -> Vec<(String, f64)> {
    let Some(p) = d.profile.data() else {
        return Vec::new();
    };
    let total: u64 = p.folded.iter().map(|f| f.samples).sum();
    let mut by: std::collections::HashMap<String, u64> = Default::default();
    for f in &p.folded {
        if let Some(sc) = f.stack.split(';').find_map(|fr| {
            [
                "__x64_sys_",
                "__arm64_sys_",
                "__se_sys_",
                "__riscv_sys_",
                "__do_sys_",
            ]
            .iter()
            .find_map(|p| fr.strip_prefix(p))
        }) {
            *by.entry(sc.to_string()).or_default() += f.samples;
        }
    }
    let mut v: Vec<(String, f64)> = by
        .into_iter()
        .map(|(k, n)| (k, n as f64 * 100.0 / total.max(1) as f64))
        .collect();
    v.sort_by(|a, b| b.1.total_cmp(&a.1));
    v
}

fn fault_churn(w: &WorkView) -> Option<(f64, f64)> {
    let rate = w.per_s(w.minflt);
    let share = profile_share(w.d, |f| FAULT_PATH.contains(&f));
    let sys_pct = w.sys_s / w.cpu_s.max(1e-9) * 100.0;
    (rate >= FAULTS_PER_S && (share >= FAULT_PROFILE_PCT || sys_pct >= 30.0))
        .then_some((rate, share))
}

fn small_io(w: &WorkView) -> Option<(f64, f64)> {
    let rate = w.per_s(w.calls);
    let per_call = w.bytes as f64 / w.calls.max(1) as f64;
    let sys_pct = w.sys_s / w.cpu_s.max(1e-9) * 100.0;
    (rate >= SMALL_IO_CALLS_PER_S
        && per_call < SMALL_IO_BYTES
        && sys_pct >= 30.0
        && w.pct_of_active(w.cpu_s + w.runq_s) >= 30.0)
        .then_some((rate, per_call))
}

pub(super) fn yield_share(d: &Diagnosis) -> f64 {
    profile_share(d, |f| {
        f == "do_sched_yield" || f.ends_with("sys_sched_yield")
    })
}

/// Samples in the profile before its kernel share replaces the tick-based
/// system time (user/system from /proc are counted in 10 ms ticks).
const PROFILE_MIN_SAMPLES: u64 = 50;
/// A sched_yield spin: this share of the samples under sched_yield.
const YIELD_PCT: f64 = 25.0;

pub(super) fn workload_kernel_bound(id: &str, d: &Diagnosis, w: &WorkView) -> Outcome {
    let mut sys_pct = w.sys_s / w.cpu_s.max(1e-9) * 100.0;
    if let Some(p) = d
        .profile
        .data()
        .filter(|p| p.samples >= PROFILE_MIN_SAMPLES)
    {
        sys_pct = p.kernel_samples as f64 * 100.0 / p.samples as f64;
    }
    let yielding = yield_share(d) >= YIELD_PCT;
    if w.pct_of_active(w.cpu_s + w.runq_s) < CPU_BOUND_PCT
        || (sys_pct < OWN_SYSTEM_PCT && !yielding)
    {
        return Outcome::Fine;
    }
    // A more specific finding explains the kernel time.
    if fault_churn(w).is_some() || small_io(w).is_some() {
        return Outcome::Fine;
    }
    let calls = top_syscalls(d);
    let top = calls.first().cloned();
    let target = target_words(d);
    Finding::new("diagnose.kernel-bound", Severity::Warning, match &top {
            Some((sc, pct)) => format!(
                "{target} spends {}% of its own CPU time in the kernel, most in {sc} ({}% of its samples)",
                sig(sys_pct),
                sig(*pct)
            ),
            None => format!("{target} spends {}% of its own CPU time in the kernel", sig(sys_pct)),
        })
        .evidence(vec![
            format!("diagnosis {id}: {}", w.words()),
            format!(
                "system calls under the kernel samples of its profile: {}",
                calls
                    .iter()
                    .take(3)
                    .map(|(s, p)| format!("{s} {}%", sig(*p)))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            format!(
                "thresholds: on or waiting for a CPU ≥ {CPU_BOUND_PCT}% of its active time ({}%), own system time ≥ {OWN_SYSTEM_PCT}% of its CPU ({}%)",
                sig(w.pct_of_active(w.cpu_s + w.runq_s)),
                sig(sys_pct)
            ),
        ])
        .why(if yielding {
            "A loop around sched_yield() spins: each call enters the kernel, finds little or \
             nothing else to run and returns, so the CPU is busy while no work is done."
        } else {
            "The program's own CPU time is mostly system calls: the kernel work per call, not \
             the program's code, sets its speed."
        })
        .fix(
            if yielding {
            "wait for the condition instead of polling it: a futex, pthread_cond_wait, a pipe or \
             eventfd the producer signals; if spinning is wanted, bound it and then block"
                .into()
        } else {
            format!(
                "make fewer, larger calls of {} (batch work per call); the profile's kernel paths \
                 below that call show what each costs",
                top.as_ref().map_or("the top system call", |t| t.0.as_str())
            )
        },
            "Changes the program; measure before and after.",
        )
        .verify(format!(
            "tunelab diagnose {} (its own system time and the syscall's share fall)",
            cmd(d)
        ))
        .into()
}

pub(crate) fn fault_churn_rule(ev: &Evidence, _: Workload) -> Outcome {
    let Some((id, d, w)) = own(ev) else {
        return Outcome::Fine;
    };
    let Some((rate, share)) = fault_churn(&w) else {
        return Outcome::Fine;
    };
    let zeroing = profile_share(d, |f| f.starts_with("clear_page"));
    Finding::new("diagnose.page-fault-churn", Severity::Warning, format!(
            "{} takes {} minor page faults/s; {}% of its CPU samples are in the fault path ({}% zeroing pages)",
            target_words(d),
            si(rate),
            sig(share),
            sig(zeroing)
        ))
        .evidence(vec![
            format!("diagnosis {id}: {}", w.words()),
            format!(
                "its own faults: {} minor, {} major in {} ({}/s); profile: {}% under exc_page_fault/handle_mm_fault, {}% in clear_page*",
                w.minflt,
                w.majflt,
                seconds(d.interval_s),
                si(rate),
                sig(share),
                sig(zeroing)
            ),
            format!(
                "thresholds: ≥ {} minor faults/s and ≥ {FAULT_PROFILE_PCT}% of samples in the fault path (or system ≥ 30% of its CPU)",
                si(FAULTS_PER_S)
            ),
        ])
        .why("Every first touch of a fresh anonymous page traps into the kernel, which allocates \
              and zeroes a 4 KiB page; memory mapped and unmapped (or malloc'd and freed past \
              the mmap threshold) again and again pays this on every round.")
        .fix(
            "reuse the buffer instead of mapping it per round; if it must be fresh, \
                  mmap(…, MAP_POPULATE) faults it in one call; madvise(MADV_HUGEPAGE) (with THP \
                  in madvise or always mode: /sys/kernel/mm/transparent_hugepage/enabled) makes \
                  one fault per 2 MiB; for glibc malloc, mallopt(M_MMAP_THRESHOLD)/M_TRIM_THRESHOLD \
                  keep large blocks in the heap",
            "Keeping or pre-faulting buffers holds memory; huge pages can raise memory use on a \
               small board.",
        )
        .verify(format!("tunelab diagnose {} (minor faults/s and the fault path's share fall)", cmd(d)))
        .into()
}

pub(crate) fn small_io_rule(ev: &Evidence, _: Workload) -> Outcome {
    let Some((id, d, w)) = own(ev) else {
        return Outcome::Fine;
    };
    let Some((rate, per_call)) = small_io(&w) else {
        return Outcome::Fine;
    };
    Finding::new(
        "diagnose.small-io",
        Severity::Warning,
        format!(
            "{} makes {} read/write calls/s of {} each on average: the calls, not the data, cost",
            target_words(d),
            si(rate),
            human(per_call, "B")
        ),
    )
    .evidence(vec![
        format!("diagnosis {id}: {}", w.words()),
        format!(
            "its /proc/PID/io: {} calls moving {} ({} per call)",
            w.calls,
            human(w.bytes as f64, "B"),
            human(per_call, "B")
        ),
        format!(
            "thresholds: ≥ {} calls/s, < {} per call, system ≥ 30% of its CPU",
            si(SMALL_IO_CALLS_PER_S),
            human(SMALL_IO_BYTES, "B")
        ),
    ])
    .why(
        "Each read()/write() costs a kernel entry and exit and the file system's per-call \
              work whatever its size: at a few bytes per call that overhead is nearly all of it.",
    )
    .fix(
        "buffer in user space and write 64 KiB or more per call: stdio with a buffer \
                  (setvbuf), BufWriter/BufReader in Rust, or collect records and writev() them",
        "Buffered data is lost if the process dies before it flushes; flush where it must be \
               durable.",
    )
    .verify(format!(
        "tunelab run io.api (raw vs buffered calls per MiB on this machine); tunelab diagnose {}",
        cmd(d)
    ))
    .into()
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{ids, workload};
    use crate::model::diagnosis::{Overhead, Section};
    use crate::model::profile::{FoldedStack, Profile, SymbolRow};

    #[test]
    fn faults_explain_kernel_time_and_a_hot_spot_needs_user_samples() {
        let mut d = workload(0.4, 1.5, &[]);
        if let Section::Present { data, .. } = &mut d.workload {
            data.total.minor_faults = 200_000;
        }
        d.profile = Section::Present {
            data: Profile {
                samples: 100,
                user_samples: 10,
                kernel_samples: 90,
                folded: vec![
                    FoldedStack {
                        stack: "prog;main;asm_exc_page_fault;exc_page_fault;handle_mm_fault;clear_page_erms".into(),
                        samples: 70,
                    },
                    FoldedStack {
                        stack: "prog;main;entry_SYSCALL_64;__x64_sys_munmap".into(),
                        samples: 20,
                    },
                    FoldedStack {
                        stack: "prog;main".into(),
                        samples: 10,
                    },
                ],
                symbols: vec![SymbolRow {
                    samples: 10,
                    percent: 10.0,
                    image: "prog".into(),
                    symbol: "main".into(),
                }],
                ..Default::default()
            },
            overhead: Overhead::default(),
        };
        assert_eq!(ids(d), vec!["diagnose.page-fault-churn"]);
    }
}
