//! Off-CPU tracing: switch events of every CPU queued and paired in time
//! order into waits (blocked, charged to the stack of the switch out) and
//! run-queue time (preempted).

use std::collections::{HashMap, HashSet};

use super::super::collected::{Collected, FrameKey};

/// Switch records (PERF_RECORD_SWITCH, _CPU_WIDE) and their misc bits.
pub(super) const PERF_RECORD_SWITCH: u32 = 14;
pub(super) const PERF_RECORD_SWITCH_CPU_WIDE: u32 = 15;
pub(super) const MISC_SWITCH_OUT: u16 = 1 << 13;
pub(super) const MISC_SWITCH_OUT_PREEMPT: u16 = 1 << 14;

/// The sample_id trailer of a SWITCH record (TID, TIME, CPU asked):
/// pid, tid, time.
pub(super) fn switch_ids(body: &[u8]) -> Option<(u32, u32, u64)> {
    let u32_at = |i: usize| Some(u32::from_ne_bytes(body.get(i..i + 4)?.try_into().ok()?));
    let time = u64::from_ne_bytes(body.get(8..16)?.try_into().ok()?);
    Some((u32_at(0)?, u32_at(4)?, time))
}

pub(super) fn monotonic_ns() -> u64 {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[derive(Debug, Clone, PartialEq)]
pub(super) enum OffKind {
    /// The call chain at a switch out (the context-switches sample).
    Stack(u32, Vec<FrameKey>),
    /// The switch out: preempted (still runnable) or blocked.
    Out {
        preempt: bool,
    },
    /// Back on a CPU.
    In,
    Exit,
}

#[derive(Debug, Clone, PartialEq)]
pub(super) struct OffEvent {
    pub(crate) time: u64,
    pub(crate) pid: u32,
    pub(crate) tid: u32,
    pub(crate) kind: OffKind,
}

#[derive(Default)]
struct TidState {
    pid: u32,
    /// First and last event seen: the thread's traced lifetime.
    first: u64,
    last: u64,
    stack: Vec<FrameKey>,
    /// Switched out at, and whether preempted.
    out: Option<(u64, bool)>,
}

#[derive(Default)]
pub(super) struct OffState {
    queue: Vec<OffEvent>,
    pub(super) newest: u64,
    tids: HashMap<u32, TidState>,
    /// Processes with per-task events: the workload's.
    pids: HashSet<u32>,
}

impl OffState {
    pub(super) fn push(&mut self, e: OffEvent) {
        self.newest = self.newest.max(e.time);
        self.pids.insert(e.pid);
        self.queue.push(e);
    }

    /// A process of the workload (CPU-wide records of others are dropped).
    pub(super) fn follows(&self, pid: u32) -> bool {
        self.pids.contains(&pid)
    }

    /// Pair the queued events older than `upto` (all with u64::MAX), in
    /// time order: a switch in closes the task's open switch out, its
    /// length is one wait charged to the stack of that switch out (or to
    /// the run queue when it was a preemption).
    pub(super) fn pair(
        &mut self,
        upto: u64,
        out: &mut Collected,
        comm: &mut dyn FnMut(u32) -> u32,
    ) {
        self.queue.sort_by_key(|e| e.time);
        let n = self.queue.partition_point(|e| e.time < upto);
        let ready: Vec<OffEvent> = self.queue.drain(..n).collect();
        for e in ready {
            let t = self.tids.entry(e.tid).or_default();
            t.pid = e.pid;
            out.tid_pid.insert(e.tid, e.pid);
            out.pid_comm.entry(e.pid).or_insert_with(|| comm(e.pid));
            if t.first == 0 {
                t.first = e.time;
            }
            t.last = t.last.max(e.time);
            match e.kind {
                OffKind::Stack(_, frames) => t.stack = frames,
                OffKind::Out { preempt } => t.out = Some((e.time, preempt)),
                OffKind::Exit => {
                    if let Some(t) = self.tids.remove(&e.tid) {
                        *out.lifetimes_ns.entry(e.tid).or_default() += t.last - t.first;
                    }
                }
                OffKind::In => {
                    let Some((t0, preempt)) = t.out.take() else {
                        // Blocked since before tracing began (the command's
                        // pre-exec handshake): no known start, not charged.
                        continue;
                    };
                    let ns = e.time.saturating_sub(t0);
                    let c = comm(e.pid);
                    if preempt {
                        *out.runqueue_ns.entry(c).or_default() += ns;
                        *out.runqueue_pid_ns.entry(e.pid).or_default() += ns;
                        continue;
                    }
                    charge(
                        out,
                        c,
                        (e.pid, e.tid),
                        std::mem::take(&mut t.stack),
                        ns,
                        true,
                    );
                }
            }
        }
    }

    /// Waits still open at `now` (monotonic ns) are charged up to it.
    pub(super) fn close_open(
        &mut self,
        now: u64,
        out: &mut Collected,
        comm: &mut dyn FnMut(u32) -> u32,
    ) {
        for (tid, t) in self.tids.iter_mut() {
            let mut end = t.last;
            if let Some((t0, preempt)) = t.out.take() {
                let ns = now.saturating_sub(t0);
                end = now.max(t0);
                let c = comm(t.pid);
                if preempt {
                    *out.runqueue_ns.entry(c).or_default() += ns;
                    *out.runqueue_pid_ns.entry(t.pid).or_default() += ns;
                } else {
                    charge(
                        out,
                        c,
                        (t.pid, *tid),
                        std::mem::take(&mut t.stack),
                        ns,
                        false,
                    );
                    out.open_at_end += 1;
                }
            }
            *out.lifetimes_ns.entry(*tid).or_default() += end.saturating_sub(t.first);
        }
    }
}

/// One wait of `ns` on a stack: µs as the stack's weight, plus its count
/// and extremes (`ended`: false for a wait cut short by the stop).
fn charge(
    out: &mut Collected,
    comm: u32,
    (pid, tid): (u32, u32),
    frames: Vec<FrameKey>,
    ns: u64,
    ended: bool,
) {
    let us = ns / 1000;
    let key = (comm, frames);
    *out.wait_pid_ns
        .entry(key.clone())
        .or_default()
        .entry(pid)
        .or_default() += ns;
    let tids = out.wait_tids.entry(key.clone()).or_default();
    if !tids.contains(&tid) {
        tids.push(tid);
    }
    out.waits.entry(key.clone()).or_default().add(ns, ended);
    let e = out.stacks.entry(key).or_default();
    e.0 += us;
    e.1 += us;
}
