//! A workload's off-CPU waits: user-space locks, synchronous storage, its own
//! timer sleeps, memory pressure, and any other cause that dominates.

use super::super::{Evidence, Finding, Outcome, Severity, Workload};
use super::view::{cmd, from_caller, of_comm, own, target_words, wait_evidence, Waits};
use super::{
    DOMINANT_WAIT_PCT, LOCK_PCT, MAJOR_FAULTS_PER_S, MEMORY_WAIT_PCT, SLEEP_PCT, STORAGE_PCT,
};
use crate::units::{human, seconds, si, sig};

pub(crate) fn user_lock(ev: &Evidence, _: Workload) -> Outcome {
    let Some((id, d, w)) = own(ev) else {
        return Outcome::Fine;
    };
    let Waits {
        pct: process_pct,
        wait,
        rows: locks,
        ..
    } = w.waits(&["lock"]);
    let Some(top) = locks.first().copied() else {
        return Outcome::Fine;
    };
    // The share of the waiting threads' own time when the tracer knows it
    // (what `perf sched timehist` shows per thread); else of the process's.
    let pct = if top.thread_time_s > 0.0 {
        top.total_s / top.thread_time_s * 100.0
    } else {
        process_pct
    };
    if pct < LOCK_PCT {
        return Outcome::Fine;
    }
    Finding::new("diagnose.user-lock", Severity::Warning, format!(
            "{} threads of {} wait for a user-space lock {}% of their time: {}{}",
            top.threads.max(1),
            target_words(d),
            sig(pct),
            top.cause.split(" (").next().unwrap_or(&top.cause).trim_start_matches("futex: "),
            from_caller(&top.caller)
        ))
        .evidence(wait_evidence(
            id,
            &w,
            &locks,
            format!(
                "{} waited by {} threads over their {} of lifetime (a wait runs from the switch out asleep to back on a CPU, wake-up delay in, preemptions out: perf sched timehist's wait after an S-state switch out); the process as a whole: {}% of its active thread time; threshold: ≥ {LOCK_PCT}%",
                seconds(wait),
                top.threads,
                seconds(top.thread_time_s),
                sig(process_pct)
            ),
        ))
        .why("Threads sleep in the kernel (futex) until the lock's holder releases it: while \
              they wait they do nothing, so adding threads adds waiting, not throughput.")
        .fix(
            format!(
            "hold the lock for less (move work out of the critical section in {}), split it \
             (one lock per shard or per object), or give each thread its own data and merge at \
             the end",
            // Never a C library function (a run stored before the caller
            // skipped static glibc's lock frames).
            top.caller
                .split(" ← ")
                .find(|f| !f.is_empty() && !crate::diagnose::offcpu::c_library_internal(f))
                .unwrap_or("the caller")
        ),
            "Finer locking changes the program's correctness argument; test under load.",
        )
        .verify(format!("tunelab diagnose {} (the lock's share of thread time falls)", cmd(d)))
        .into()
}

pub(crate) fn storage_sync(ev: &Evidence, _: Workload) -> Outcome {
    let Some((id, d, w)) = own(ev) else {
        return Outcome::Fine;
    };
    let Waits {
        pct, wait, rows, ..
    } = w.waits(&["storage"]);
    if pct < STORAGE_PCT {
        return Outcome::Fine;
    }
    let waits: u64 = rows.iter().map(|c| c.waits).sum();
    let mut evidence = wait_evidence(
        id,
        &w,
        &rows,
        format!(
            "threshold: storage waits ≥ {STORAGE_PCT}% of the process's active thread time ({} waited)",
            seconds(wait)
        ),
    );
    // The disks are machine-wide: shown with the workload's own share.
    if let Some(u) = d.resources.data() {
        let disk_w: f64 = u
            .rows
            .iter()
            .filter(|r| r.kind == "disk")
            .map(|r| r.figure("write").unwrap_or(0.0) * d.interval_s)
            .sum();
        if disk_w > 0.0 {
            evidence.push(format!(
                "the workload wrote {} to storage, {}% of all disk writes in the interval",
                human(w.write_bytes as f64, "B"),
                sig((w.write_bytes as f64 / disk_w * 100.0).min(100.0))
            ));
        }
    }
    let sync = rows
        .iter()
        .any(|c| c.cause.contains("waits for the storage"));
    Finding::new("diagnose.storage-sync", Severity::Warning, format!(
            "{} waits for storage {}% of its time: {} synchronous waits{}",
            target_words(d),
            sig(pct),
            waits,
            rows.first().map(|c| from_caller(&c.caller)).unwrap_or_default()
        ))
        .evidence(evidence)
        .why(if sync {
            "Each fsync/fdatasync waits until the device has the data (and the journal its \
             commit): the program runs at the device's flush latency, not at memory speed."
        } else {
            "The program waits for the device to read or write pages: the storage is on its \
             critical path."
        })
        .fix(
            "sync less often: batch several records per fsync (group commit), fdatasync \
                  when metadata need not be durable, or write through a log that is synced \
                  once per batch; if durability is not needed, drop the sync",
            "Fewer syncs widen the window of data a power cut can lose: only what the \
               application can afford.",
        )
        .verify(format!(
            "tunelab diagnose {} (storage waits' share falls); tunelab run io.record-size --target DIR compares buffered and O_SYNC writes on the device",
            cmd(d)
        ))
        .into()
}

pub(crate) fn sleep_bound(ev: &Evidence, _: Workload) -> Outcome {
    let Some((id, d, w)) = own(ev) else {
        return Outcome::Fine;
    };
    let Waits {
        pct,
        comm,
        wait,
        rows,
    } = w.waits(&["sleep"]);
    if pct < SLEEP_PCT {
        return Outcome::Fine;
    }
    let n: u64 = rows.iter().map(|c| c.waits).sum();
    Finding::new(
        "diagnose.sleep-bound",
        Severity::Info,
        format!(
            "{}{} is paced by its own timer sleeps: {}% of its time, {} sleeps of {} on average",
            target_words(d),
            of_comm(&comm),
            sig(pct),
            n,
            seconds(wait / n.max(1) as f64)
        ),
    )
    .evidence(wait_evidence(
        id,
        &w,
        &rows,
        format!("threshold: sleeps ≥ {SLEEP_PCT}% of active thread time"),
    ))
    .why(
        "The program is not waiting for a resource: it asked to sleep. Its speed is the \
              sleep length plus the timer's overshoot (timer slack, the wake-up latency), times \
              the number of sleeps.",
    )
    .fix(
        "if the sleep polls for work, block on the event instead (poll/epoll, a \
                  condition variable, a pipe); if it paces output, sleep until an absolute \
                  deadline (clock_nanosleep TIMER_ABSTIME) so overshoot does not accumulate; \
                  prctl(PR_SET_TIMERSLACK, 1) lowers the overshoot",
        "Shorter or fewer sleeps use more CPU and power.",
    )
    .verify(format!(
        "tunelab diagnose {} (mean sleep vs the asked length)",
        cmd(d)
    ))
    .into()
}

pub(crate) fn memory_pressure(ev: &Evidence, _: Workload) -> Outcome {
    let Some((id, d, w)) = own(ev) else {
        return Outcome::Fine;
    };
    let Waits { pct, rows, .. } = w.waits(&["reclaim", "page-fault"]);
    let majors = w.per_s(w.majflt);
    if pct < MEMORY_WAIT_PCT || (majors < MAJOR_FAULTS_PER_S && w.causes("reclaim").is_empty()) {
        return Outcome::Fine;
    }
    Finding::new("diagnose.memory-pressure", Severity::Warning, format!(
            "{} waits for memory {}% of its time: reclaim and major faults ({}/s)",
            target_words(d),
            sig(pct),
            si(majors)
        ))
        .evidence(wait_evidence(
            id,
            &w,
            &rows,
            format!(
                "thresholds: memory waits ≥ {MEMORY_WAIT_PCT}% of active time, with ≥ {MAJOR_FAULTS_PER_S} major faults/s or direct reclaim"
            ),
        ))
        .why("The working set does not fit: pages are evicted and read back (major faults) or \
              allocations wait while the kernel reclaims.")
        .fix(
            "shrink the working set (smaller caches or buffers), stop other memory users, \
                  add memory, or on a board add zram swap",
            "Smaller caches can cost speed elsewhere.",
        )
        .verify(format!("tunelab diagnose {} (major faults and reclaim waits fall)", cmd(d)))
        .into()
}

pub(crate) fn blocking_cause(ev: &Evidence, _: Workload) -> Outcome {
    let Some((id, d, w)) = own(ev) else {
        return Outcome::Fine;
    };
    let Some(off) = d.offcpu.data() else {
        return Outcome::Fine;
    };
    // Classes with their own finding, and waiting for one's own threads.
    let covered = ["lock", "storage", "sleep", "join", "reclaim", "page-fault"];
    let Some(top) = off
        .causes
        .iter()
        .find(|c| !covered.contains(&c.class.as_str()))
    else {
        return Outcome::Fine;
    };
    let Waits {
        pct,
        comm,
        rows: same,
        ..
    } = w.waits(&[top.class.as_str()]);
    if pct < DOMINANT_WAIT_PCT {
        return Outcome::Fine;
    }
    let top = same.first().copied().unwrap_or(top);
    let (why, command) = match top.class.as_str() {
        "pipe" | "socket" => (
            "It waits for the process at the other end: that process, not this one, sets the pace.",
            "diagnose the other end (tunelab diagnose --pid PID of the writer/peer); a larger \
             pipe (fcntl F_SETPIPE_SZ) only helps with bursts",
        ),
        "poll" => (
            "It waits for events (an event loop): it is idle, not slow, unless the events come late.",
            "if it should be busy, diagnose what produces its events",
        ),
        "condvar" => (
            "Threads wait on a condition variable: they are idle waiting for work to be handed to them.",
            "if they should be busy, look at the producer; too many workers for the work is harmless but idle",
        ),
        _ => (
            "The tasks wait here more than anywhere else: that wait, not CPU, is on the critical path.",
            "see the off-CPU table and flame graph for the callers",
        ),
    };
    Finding::new(
        "diagnose.blocking",
        Severity::Info,
        format!(
            "{}{} is blocked {}% of its time in {}{}",
            target_words(d),
            of_comm(&comm),
            sig(pct),
            top.cause,
            from_caller(&top.caller)
        ),
    )
    .evidence(wait_evidence(
        id,
        &w,
        &same,
        format!("threshold: one cause ≥ {DOMINANT_WAIT_PCT}% of the process's active thread time"),
    ))
    .why(why)
    .fix(command, "None (a reading).")
    .verify(format!("tunelab diagnose {}", cmd(d)))
    .into()
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{ev, get, ids, workload};
    use super::*;
    use crate::model::diagnosis::{OffCpuCause, ProcessWaits, Section};

    #[test]
    fn one_storage_cause_one_finding_and_lock_share_per_thread() {
        let d = workload(
            0.2,
            0.3,
            &[(
                "storage",
                "fsync: waits for the storage to write",
                "append ← main",
                1.4,
            )],
        );
        assert_eq!(ids(d), vec!["diagnose.storage-sync"]);
        let mut d = workload(
            0.5,
            0.0,
            &[
                (
                    "lock",
                    "futex: pthread_mutex_lock (a user-space lock)",
                    "contended_update ← worker",
                    3.0,
                ),
                (
                    "join",
                    "futex: waits for threads to finish (pthread_join)",
                    "main",
                    2.0,
                ),
            ],
        );
        if let Section::Present { data, .. } = &mut d.offcpu {
            data.causes[0].threads = 4;
            data.causes[0].thread_time_s = 8.0;
        }
        let e = ev(d);
        let f = get(user_lock(&e, Workload::General)).unwrap();
        assert!(f.title.starts_with("4 threads"), "{}", f.title);
        assert!(f.title.contains("37.5% of their time"), "{}", f.title);
        assert!(f.title.contains("contended_update"), "{}", f.title);
        // pthread_join is not a finding.
        assert!(get(blocking_cause(&e, Workload::General)).is_none());
    }

    #[test]
    fn a_reader_and_its_same_named_writer_are_judged_apart() {
        // Together each cause is half of the name's time; each process
        // spends nearly all of its own time in one of them.
        let mut d = workload(
            0.01,
            0.03,
            &[
                (
                    "pipe",
                    "pipe read (waits for its writer)",
                    "consume ← main",
                    1.98,
                ),
                ("sleep", "timer sleep (nanosleep)", "produce ← main", 1.97),
            ],
        );
        if let Section::Present { data, .. } = &mut d.offcpu {
            let p = |pid, class: &str, s| ProcessWaits {
                comm: "prog".into(),
                pid,
                blocked_s: s,
                thread_time_s: 2.0,
                classes: vec![(class.to_string(), s)],
                ..Default::default()
            };
            data.by_process = vec![p(10, "pipe", 1.98), p(11, "sleep", 1.97)];
        }
        let e = ev(d);
        let f = get(blocking_cause(&e, Workload::General)).unwrap();
        assert!(
            f.title.contains("99.0% of its time in pipe read"),
            "{}",
            f.title
        );
        assert!(get(sleep_bound(&e, Workload::General)).is_some());
        // A small process of the name is not judged on its own.
        let mut d = workload(
            0.01,
            0.03,
            &[("pipe", "pipe read (waits for its writer)", "consume", 0.1)],
        );
        if let Section::Present { data, .. } = &mut d.offcpu {
            let p = |pid, class: &str, s, life| ProcessWaits {
                comm: "prog".into(),
                pid,
                blocked_s: s,
                thread_time_s: life,
                classes: vec![(class.to_string(), s)],
                ..Default::default()
            };
            data.by_process = vec![p(10, "pipe", 0.1, 0.1), p(11, "sleep", 1.9, 2.0)];
            data.causes.push(OffCpuCause {
                class: "sleep".into(),
                comm: "prog".into(),
                total_s: 1.9,
                ..Default::default()
            });
            data.blocked_s = 2.0;
        }
        assert!(get(blocking_cause(&ev(d), Workload::General)).is_none());
    }
}
