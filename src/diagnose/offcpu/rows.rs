//! The off-CPU report's rows: the traced wait stacks (or the sampled
//! fallback) classified and summed per process name, class and cause, with
//! each process's own blocked time by class.

use std::collections::HashMap;

use super::super::profile::{OffCpuTrace, WaitStack};
use super::classify::{caller, classify, generic, SYNC_WAIT};
use super::TOP;
use crate::model::diagnosis::{BlockingReport, CpuHolder, OffCpuCause, OffCpuReport, ProcessWaits};

fn split(w: &WaitStack) -> (Vec<&str>, Vec<(&str, &str)>) {
    let mut k = Vec::new();
    let mut u = Vec::new();
    for (image, sym) in &w.frames {
        if image.starts_with("[kernel") {
            k.push(sym.as_str());
        } else {
            u.push((image.as_str(), sym.as_str()));
        }
    }
    (k, u)
}

/// std's child side of `Command::spawn`: in a command's off-CPU flame
/// graph, the stacks of tunelab's own child before the exec.
const PRE_EXEC_FRAME: &str = "Command>::do_exec";

/// Classes whose user-space caller names the object waited for (which
/// lock, which thread): there the caller is part of the cause. Elsewhere
/// the kernel names the cause and the row shows its heaviest caller.
fn caller_names_the_object(class: &str) -> bool {
    matches!(class, "lock" | "condvar" | "join" | "futex")
}

type RowKey = (String, &'static str, String, String);

#[derive(Default)]
struct Row {
    cause: OffCpuCause,
    /// The heaviest stack's weight (its kernel path is shown).
    heaviest: f64,
    tids: Vec<u32>,
    callers: HashMap<String, f64>,
    /// Syscalls of a synchronous storage wait, with their time.
    syscalls: HashMap<String, f64>,
}

/// A poll/epoll/select loop whose waits all end by the timeout: at least
/// `TIMED_OUT_WAITS` waits and none shorter than `TIMED_OUT_MIN_OF_MEAN` of
/// their mean. Waits ended by events vary down to microseconds; waits
/// ended by a timeout never end before it, and wake-up latency only adds to
/// them, so the shortest stays near the mean even on a loaded machine. Such
/// a loop is paced by its timeout as a sleep loop by its sleep (a periodic
/// event source looks the same, and paces it the same way).
const TIMED_OUT_WAITS: u64 = 20;
const TIMED_OUT_MIN_OF_MEAN: f64 = 0.5;

fn times_out(w: &WaitStack) -> bool {
    let mean = w.total_s / w.count.max(1) as f64;
    w.count >= TIMED_OUT_WAITS && w.min_s > 0.0 && w.min_s >= TIMED_OUT_MIN_OF_MEAN * mean
}

fn heaviest(m: &HashMap<String, f64>) -> Option<&String> {
    m.iter()
        .max_by(|a, b| a.1.total_cmp(b.1).then_with(|| b.0.cmp(a.0)))
        .map(|x| x.0)
}

/// One row per (process name, class, cause — and for futex waits the
/// caller), summed over every kernel path and caller; per process (pid)
/// the blocked time by class, for shares of each process's own time.
///
/// `own_image`: tunelab's executable when it forked the command: its child
/// runs tunelab's code until the exec completes (the handshake, the exec
/// reading the program), so waits with tunelab's frames are left out,
/// their time stated in the method.
pub(crate) fn from_trace(
    t: &OffCpuTrace,
    program: &str,
    own_image: &str,
    method: String,
) -> OffCpuReport {
    let mut rows: HashMap<RowKey, Row> = HashMap::new();
    let mut blocked = 0.0;
    let mut by: HashMap<u32, ProcessWaits> = HashMap::new();
    let mut comm_of: HashMap<u32, String> = t.pid_comm.clone();
    for w in &t.waits {
        for (pid, _) in &w.by_pid {
            comm_of.entry(*pid).or_insert_with(|| w.comm.clone());
        }
    }
    for (pid, rq) in &t.runqueue_by_pid {
        by.entry(*pid).or_default().runqueue_s += rq;
    }
    for (tid, life) in &t.lifetimes {
        if let Some(pid) = t.tid_pid.get(tid) {
            by.entry(*pid).or_default().thread_time_s += life;
        }
    }
    let mut own_s = 0.0;
    for w in &t.waits {
        let (k, u) = split(w);
        if !own_image.is_empty() && u.iter().any(|(image, _)| *image == own_image) {
            own_s += w.total_s;
            continue;
        }
        let user_names: Vec<&str> = u.iter().map(|x| x.1).collect();
        let (mut class, mut cause) = classify(&k, &user_names);
        if class == "poll" && times_out(w) {
            class = "sleep";
            cause = format!(
                "poll/epoll/select that no event ends early (every wait ≥ {:.2} ms: its timeout)",
                w.min_s * 1e3
            );
        }
        let mut syscall = None;
        if let Some(sc) = cause.strip_suffix(SYNC_WAIT) {
            syscall = Some(sc.to_string());
            cause = SYNC_WAIT.trim_start_matches(": ").to_string();
        }
        let call = caller(&u, program);
        blocked += w.total_s;
        for (pid, s) in &w.by_pid {
            let p = by.entry(*pid).or_default();
            p.blocked_s += s;
            match p.classes.iter_mut().find(|c| c.0 == class) {
                Some(c) => c.1 += s,
                None => p.classes.push((class.to_string(), *s)),
            }
        }
        let key_caller = if caller_names_the_object(class) {
            call.clone()
        } else {
            String::new()
        };
        let r = rows
            .entry((w.comm.clone(), class, cause.clone(), key_caller))
            .or_insert_with(|| Row {
                cause: OffCpuCause {
                    class: class.into(),
                    cause,
                    comm: w.comm.clone(),
                    ..Default::default()
                },
                heaviest: -1.0,
                ..Default::default()
            });
        for tid in &w.tids {
            if !r.tids.contains(tid) {
                r.tids.push(*tid);
            }
        }
        *r.callers.entry(call).or_default() += w.total_s;
        if let Some(sc) = syscall {
            *r.syscalls.entry(sc).or_default() += w.total_s;
        }
        let e = &mut r.cause;
        e.total_s += w.total_s;
        e.waits += w.count;
        e.max_s = e.max_s.max(w.max_s);
        if w.total_s > r.heaviest {
            r.heaviest = w.total_s;
            e.kernel_path = k
                .iter()
                .filter(|f| !generic(f))
                .take(4)
                .copied()
                .collect::<Vec<_>>()
                .join(" ← ");
        }
    }
    let mut causes: Vec<OffCpuCause> = rows
        .into_values()
        .map(|r| {
            let mut c = r.cause;
            c.caller = heaviest(&r.callers).cloned().unwrap_or_default();
            if !r.syscalls.is_empty() {
                let mut sc: Vec<(&String, &f64)> = r.syscalls.iter().collect();
                sc.sort_by(|a, b| b.1.total_cmp(a.1).then_with(|| a.0.cmp(b.0)));
                let names: Vec<&str> = sc.iter().map(|x| x.0.as_str()).collect();
                c.cause = format!("{}{SYNC_WAIT}", names.join(", "));
            }
            c.threads = r.tids.len() as u32;
            c.thread_time_s = r.tids.iter().filter_map(|tid| t.lifetimes.get(tid)).sum();
            c
        })
        .collect();
    causes.sort_by(|a, b| b.total_s.total_cmp(&a.total_s));
    causes.truncate(TOP);
    let mut procs: Vec<ProcessWaits> = by
        .into_iter()
        .map(|(pid, mut p)| {
            p.pid = pid;
            p.comm = comm_of
                .get(&pid)
                .cloned()
                .unwrap_or_else(|| format!("[pid {pid}]"));
            p
        })
        .collect();
    procs.sort_by(|a, b| b.blocked_s.total_cmp(&a.blocked_s));
    let (holders, holders_missing) = holders(t);
    OffCpuReport {
        holders,
        holders_missing,
        source: "sched switch events".into(),
        causes,
        blocked_s: blocked,
        runqueue_s: t.runqueue.iter().map(|r| r.1).sum(),
        by_process: procs,
        folded: t
            .profile
            .folded
            .iter()
            .filter(|f| own_image.is_empty() || !f.stack.contains(PRE_EXEC_FRAME))
            .cloned()
            .collect(),
        method: if own_s > 0.0 {
            format!(
                "{method} tunelab's own child before the exec (the handshake, the exec \
                 reading the program: {:.1} ms blocked) is left out.",
                own_s * 1e3
            )
        } else {
            method
        },
    }
}

/// Who held the CPU while the workload waited preempted, summed per
/// holder process: tunelab itself (the observer), the workload's own
/// processes, the idle task, or another process.
fn holders(t: &OffCpuTrace) -> (Vec<CpuHolder>, String) {
    if let Err(why) = &t.holders_open {
        return (Vec::new(), why.clone());
    }
    let own: std::collections::HashSet<u32> = t.tid_pid.values().copied().collect();
    let mut by: HashMap<u32, CpuHolder> = HashMap::new();
    for (waiter, h, comm, s) in &t.holders {
        if !own.contains(waiter) {
            continue;
        }
        let role = if *h == t.observer_pid && *h != 0 {
            "tunelab"
        } else if *h == 0 {
            "idle"
        } else if own.contains(h) {
            "workload"
        } else {
            "other"
        };
        let e = by.entry(*h).or_insert_with(|| CpuHolder {
            comm: comm.clone(),
            pid: *h,
            s: 0.0,
            role: role.into(),
        });
        e.s += s;
    }
    let mut v: Vec<CpuHolder> = by.into_values().collect();
    v.sort_by(|a, b| b.s.total_cmp(&a.s).then_with(|| a.pid.cmp(&b.pid)));
    v.truncate(TOP);
    (v, String::new())
}

/// The fallback: the sampled wchan/stack table, classified the same way
/// (kernel frames only: user callers are not seen by sampling).
pub(crate) fn from_blocking(b: &BlockingReport) -> OffCpuReport {
    let mut rows: HashMap<(String, &'static str, String), OffCpuCause> = HashMap::new();
    let mut blocked = 0.0;
    let mut by: HashMap<String, ProcessWaits> = HashMap::new();
    for s in &b.sched {
        by.entry(s.comm.clone())
            .or_insert_with(|| ProcessWaits {
                comm: s.comm.clone(),
                ..Default::default()
            })
            .runqueue_s += s.runqueue_s;
    }
    for c in &b.causes {
        by.entry(c.comm.clone())
            .or_insert_with(|| ProcessWaits {
                comm: c.comm.clone(),
                ..Default::default()
            })
            .blocked_s += c.total_s;
        let frames: Vec<&str> = c
            .cause
            .trim_end_matches(" [D]")
            .split(" ← ")
            .map(str::trim)
            .collect();
        let (class, cause) = classify(&frames, &[]);
        blocked += c.total_s;
        let e = rows
            .entry((c.comm.clone(), class, cause.clone()))
            .or_insert_with(|| OffCpuCause {
                class: class.into(),
                cause,
                comm: c.comm.clone(),
                kernel_path: c.cause.clone(),
                ..Default::default()
            });
        e.total_s += c.total_s;
        e.waits += c.count;
        e.max_s = e.max_s.max(c.max_s);
    }
    let mut causes: Vec<OffCpuCause> = rows.into_values().collect();
    causes.sort_by(|a, b| b.total_s.total_cmp(&a.total_s));
    OffCpuReport {
        source: "sampled wchan/stack".into(),
        causes,
        blocked_s: blocked,
        runqueue_s: b.sched.iter().map(|s| s.runqueue_s).sum(),
        by_process: sorted_procs(by),
        folded: Vec::new(),
        method: format!(
            "fallback: no scheduler switch events here, so the blocking table's samples \
             classified by their kernel function (no user-space callers; a sampled estimate). {}",
            b.method
        ),
        holders: Vec::new(),
        holders_missing: "sampled fallback: no switch records".into(),
    }
}

fn sorted_procs(by: HashMap<String, ProcessWaits>) -> Vec<ProcessWaits> {
    let mut v: Vec<ProcessWaits> = by.into_values().collect();
    v.sort_by(|a, b| b.blocked_s.total_cmp(&a.blocked_s));
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(frames: &[(&str, &str)], total: f64, count: u64, max: f64) -> WaitStack {
        WaitStack {
            comm: "prog".into(),
            frames: frames
                .iter()
                .map(|(i, s)| (i.to_string(), s.to_string()))
                .collect(),
            total_s: total,
            count,
            max_s: max,
            min_s: 0.0,
            tids: vec![1],
            by_pid: vec![(1, total)],
        }
    }

    const K: &str = "[kernel]";

    #[test]
    fn fsync_paths_are_one_row_and_futex_callers_are_told_apart() {
        let fsync_tail = [
            ("libc.so.6", "fsync"),
            ("prog", "write_loop"),
            ("prog", "main"),
        ];
        let mut a = vec![
            (K, "__schedule"),
            (K, "folio_wait_bit"),
            (K, "folio_wait_writeback"),
            (K, "__filemap_fdatawait_range"),
            (K, "file_write_and_wait_range"),
            (K, "ext4_sync_file"),
            (K, "__x64_sys_fsync"),
        ];
        a.extend(fsync_tail);
        let mut b = vec![
            (K, "__schedule"),
            (K, "jbd2_log_wait_commit"),
            (K, "ext4_sync_file"),
            (K, "__x64_sys_fsync"),
        ];
        b.extend(fsync_tail);
        let mutex = [
            (K, "__schedule"),
            (K, "futex_do_wait"),
            (K, "__futex_wait"),
            (K, "__x64_sys_futex"),
            ("libc.so.6", "__lll_lock_wait"),
            ("libc.so.6", "pthread_mutex_lock"),
            ("prog", "contended_update"),
            ("prog", "worker"),
            ("libc.so.6", "start_thread"),
        ];
        let join = [
            (K, "__schedule"),
            (K, "futex_do_wait"),
            (K, "__x64_sys_futex"),
            ("libc.so.6", "__futex_abstimed_wait_common"),
            ("libc.so.6", "__pthread_clockjoin_ex"),
            ("prog", "main"),
        ];
        let t = OffCpuTrace {
            waits: vec![
                w(&a, 1.0, 400, 0.01),
                w(&b, 0.5, 100, 0.02),
                w(&mutex, 2.0, 9000, 0.003),
                w(&join, 3.0, 1, 3.0),
            ],
            ..Default::default()
        };
        let r = from_trace(&t, "prog", "", String::new());
        assert_eq!(r.causes.len(), 3, "{:#?}", r.causes);
        let st = r.causes.iter().find(|c| c.class == "storage").unwrap();
        assert!((st.total_s - 1.5).abs() < 1e-9);
        assert_eq!(st.waits, 500);
        assert_eq!(st.max_s, 0.02);
        assert_eq!(st.caller, "write_loop ← main");
        assert!(st.cause.starts_with("fsync"), "{}", st.cause);
        let l = r.causes.iter().find(|c| c.class == "lock").unwrap();
        assert_eq!(l.caller, "contended_update ← worker");
        assert!(l.cause.contains("pthread_mutex_lock"));
        let j = r.causes.iter().find(|c| c.class == "join").unwrap();
        assert_eq!(j.caller, "main");
        assert!((r.blocked_s - 6.5).abs() < 1e-9);
    }

    #[test]
    fn a_sync_from_another_call_or_caller_is_the_same_storage_row() {
        let fsync = [
            (K, "__schedule"),
            (K, "submit_bio_wait"),
            (K, "blkdev_issue_flush"),
            (K, "ext4_sync_file"),
            (K, "__x64_sys_fsync"),
            ("prog", "main"),
        ];
        let unlink = [
            (K, "__schedule"),
            (K, "submit_bio_wait"),
            (K, "blkdev_issue_discard"),
            (K, "ext4_free_blocks"),
            (K, "__x64_sys_unlinkat"),
            ("libc.so.6", "unlink"),
            ("prog", "main"),
        ];
        let throttled = [
            (K, "__schedule"),
            (K, "balance_dirty_pages"),
            (K, "balance_dirty_pages_ratelimited"),
            (K, "generic_perform_write"),
            (K, "__x64_sys_write"),
            ("libc.so.6", "write"),
            ("prog", "append_record"),
            ("prog", "main"),
        ];
        let t = OffCpuTrace {
            waits: vec![
                w(&fsync, 2.0, 270, 0.06),
                w(&unlink, 0.04, 3, 0.03),
                w(&throttled, 0.1, 5, 0.05),
            ],
            ..Default::default()
        };
        let r = from_trace(&t, "prog", "", String::new());
        assert_eq!(r.causes.len(), 1, "{:#?}", r.causes);
        let c = &r.causes[0];
        assert_eq!(c.caller, "main", "the heaviest caller");
        assert_eq!(c.waits, 278);
        assert!(
            c.cause
                .starts_with("fsync, write (dirty-page throttling), unlinkat:"),
            "{}",
            c.cause
        );
    }

    #[test]
    fn same_named_processes_keep_their_own_time() {
        let read = [
            (K, "__schedule"),
            (K, "anon_pipe_read"),
            (K, "__x64_sys_read"),
            ("prog", "consume"),
        ];
        let sleep = [
            (K, "__schedule"),
            (K, "do_nanosleep"),
            (K, "__x64_sys_clock_nanosleep"),
            ("prog", "produce"),
        ];
        let mut r1 = w(&read, 1.9, 300, 0.01);
        r1.by_pid = vec![(10, 1.9)];
        r1.tids = vec![10];
        let mut s1 = w(&sleep, 1.95, 300, 0.01);
        s1.by_pid = vec![(11, 1.95)];
        s1.tids = vec![11];
        let t = OffCpuTrace {
            waits: vec![r1, s1],
            lifetimes: [(10, 2.0), (11, 2.0)].into_iter().collect(),
            tid_pid: [(10, 10), (11, 11)].into_iter().collect(),
            ..Default::default()
        };
        let r = from_trace(&t, "prog", "", String::new());
        assert_eq!(r.by_process.len(), 2, "{:#?}", r.by_process);
        let reader = r.by_process.iter().find(|p| p.pid == 10).unwrap();
        assert_eq!(reader.comm, "prog");
        assert_eq!(reader.classes, vec![("pipe".to_string(), 1.9)]);
        assert!((reader.thread_time_s - 2.0).abs() < 1e-9);
    }

    #[test]
    fn the_sampled_fallback_is_classified_too() {
        let b = BlockingReport {
            source: "sampled wchan/stack".into(),
            causes: vec![
                crate::model::diagnosis::BlockCause {
                    comm: "p".into(),
                    cause: "folio_wait_bit ← folio_wait_writeback [D]".into(),
                    total_s: 1.0,
                    count: 3,
                    max_s: 0.1,
                    ..Default::default()
                },
                crate::model::diagnosis::BlockCause {
                    comm: "p".into(),
                    cause: "jbd2_log_wait_commit ← ext4_sync_file".into(),
                    total_s: 0.5,
                    count: 2,
                    max_s: 0.2,
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        let r = from_blocking(&b);
        // folio_wait_writeback (sync) and jbd2 (sync) are one storage row.
        assert_eq!(r.causes.len(), 1, "{:#?}", r.causes);
        assert!((r.causes[0].total_s - 1.5).abs() < 1e-9);
    }

    #[test]
    fn a_poll_that_only_times_out_is_a_sleep_and_one_woken_by_events_is_not() {
        let poll = [(K, "do_sys_poll"), (K, "__x64_sys_poll"), ("prog", "main")];
        let mut timed = w(&poll, 2.0, 900, 0.007);
        timed.min_s = 0.0021; // mean 2.2 ms
        let mut woken = w(&poll, 2.0, 900, 0.007);
        woken.min_s = 0.000_004;
        let mut few = w(&poll, 2.0, 5, 0.5);
        few.min_s = 0.39;
        let class = |x: WaitStack| {
            let t = OffCpuTrace {
                waits: vec![x],
                ..Default::default()
            };
            from_trace(&t, "prog", "", String::new()).causes[0]
                .class
                .clone()
        };
        assert_eq!(class(timed), "sleep");
        assert_eq!(class(woken), "poll");
        assert_eq!(class(few), "poll");
    }

    #[test]
    fn holders_are_summed_per_process_with_their_role() {
        let mut t = OffCpuTrace {
            holders_open: Ok(2),
            observer_pid: 99,
            holders: vec![
                (5, 99, "tunelab".into(), 0.3),
                (5, 6, "prog".into(), 0.1),
                (6, 99, "tunelab".into(), 0.2),
                (5, 42, "make".into(), 0.05),
                // A process outside the workload: not its wait.
                (7, 42, "make".into(), 9.0),
            ],
            ..Default::default()
        };
        t.tid_pid.insert(5, 5);
        t.tid_pid.insert(60, 6);
        let (h, missing) = holders(&t);
        assert!(missing.is_empty());
        let roles: Vec<(&str, u32, f64)> =
            h.iter().map(|x| (x.role.as_str(), x.pid, x.s)).collect();
        assert_eq!(roles.len(), 3, "{roles:?}");
        assert_eq!((roles[0].0, roles[0].1), ("tunelab", 99));
        assert!((roles[0].2 - 0.5).abs() < 1e-9);
        assert_eq!((roles[1].0, roles[1].1), ("workload", 6));
        assert_eq!((roles[2].0, roles[2].1), ("other", 42));
        assert!((roles[2].2 - 0.05).abs() < 1e-9);
        t.holders_open = Err("denied".into());
        assert_eq!(holders(&t), (Vec::new(), "denied".to_string()));
    }
}
