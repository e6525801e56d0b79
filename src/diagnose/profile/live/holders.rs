//! Who held a CPU while a preempted thread of the workload waited, from the
//! CPU-wide switch records: each CPU's ring buffer is in time order, so when
//! a workload thread's switch in is read, every task switched in on that CPU
//! before it has been read too. Its wait (since its preempted switch out) is
//! charged to the tasks that ran on that CPU over it, each for the part of
//! the wait it ran: a task that runs a moment before the switch in (a
//! sampler waking every 100 ms) is not charged for the whole wait.

use std::collections::{HashMap, VecDeque};

/// Switch-ins kept per CPU: a wait longer than this many switches is
/// charged for its latest part only (the rule scales to the run-queue total).
const HISTORY: usize = 64;

#[derive(Default)]
pub(super) struct Holders {
    /// Per CPU: (time switched in, pid), oldest first.
    cpus: HashMap<u32, VecDeque<(u64, u32)>>,
    /// Workload threads preempted: tid → time switched out.
    preempted: HashMap<u32, u64>,
}

impl Holders {
    /// A workload thread switched out while runnable.
    pub(super) fn preempted(&mut self, tid: u32, time: u64) {
        self.preempted.insert(tid, time);
    }

    /// A workload thread switched out asleep: no wait for a CPU.
    pub(super) fn blocked(&mut self, tid: u32) {
        self.preempted.remove(&tid);
    }

    /// Any task switched in on `cpu`. For a workload thread back from a
    /// preemption (`follow`), returns the tasks that ran on that CPU during
    /// its wait with the ns of the wait each covered: (pid, ns).
    pub(super) fn switched_in(
        &mut self,
        cpu: u32,
        pid: u32,
        tid: u32,
        time: u64,
        follow: bool,
    ) -> Vec<(u32, u64)> {
        let h = self.cpus.entry(cpu).or_default();
        let mut out: Vec<(u32, u64)> = Vec::new();
        if let (true, Some(t0)) = (follow, self.preempted.remove(&tid)) {
            let mut end = time;
            for &(start, p) in h.iter().rev() {
                let from = start.max(t0);
                // Its own process's other threads count: they held it too.
                if from < end {
                    match out.iter_mut().find(|x| x.0 == p) {
                        Some(x) => x.1 += end - from,
                        None => out.push((p, end - from)),
                    }
                }
                if start <= t0 {
                    break;
                }
                end = start;
            }
        }
        if h.len() == HISTORY {
            h.pop_front();
        }
        h.push_back((time, pid));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_is_shared_by_what_ran_on_the_cpu_during_it() {
        let mut h = Holders::default();
        // CPU 0: the workload (pid 5) runs from 0, is preempted at 100 by
        // a build (pid 42), which runs until the sampler (pid 99) wakes at
        // 390 for 10 ns; then the workload is back at 400.
        assert!(h.switched_in(0, 5, 5, 0, true).is_empty());
        h.preempted(5, 100);
        assert!(h.switched_in(0, 42, 42, 100, false).is_empty());
        assert!(h.switched_in(0, 99, 99, 390, false).is_empty());
        let got = h.switched_in(0, 5, 5, 400, true);
        assert_eq!(got, vec![(99, 10), (42, 290)]);
        // Another thread of its own process (tid 6) holds the CPU: charged
        // to its own pid.
        h.preempted(5, 700);
        assert!(h.switched_in(0, 5, 6, 700, true).is_empty());
        assert_eq!(h.switched_in(0, 5, 5, 750, true), vec![(5, 50)]);
        // A wait after a sleep is not a wait for a CPU.
        h.preempted(5, 500);
        h.blocked(5);
        assert!(h.switched_in(0, 5, 5, 600, true).is_empty());
    }
}
