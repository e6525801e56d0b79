//! Steal time and other processes' CPU: the `cpu ` line of /proc/stat
//! against our own process tree's ticks (ourselves, reaped children via
//! cutime/cstime, live descendants via `/proc/PID/task/TID/children`).

use crate::system::proc::Root;

use super::{
    flag, Guard, Reading, Roots, TrialCheck, OTHER_CPU_MIN_TICKS, OTHER_CPU_PCT, STEAL_PCT,
};

/// Whether our children can be found (`/proc/PID/task/TID/children`).
pub(super) fn discover(roots: &Roots, skipped: &mut Vec<String>) -> bool {
    let children = roots
        .proc_
        .task_file(roots.pid, roots.pid, "children")
        .exists();
    if !children {
        skipped.push(
            "other processes' CPU: no /proc/PID/task/TID/children (kernel without \
             CONFIG_PROC_CHILDREN), our children's CPU cannot be told from others'"
                .to_string(),
        );
    }
    children
}

impl Guard {
    /// CPU ticks of our process tree: ourselves (all threads), children we
    /// reaped (cutime/cstime), and every live descendant with what it
    /// reaped. A descendant reaped during a trial moves from "live" to our
    /// cutime, so deltas stay right.
    pub(super) fn own_ticks(&self) -> Option<u64> {
        tree_sum(&self.roots.proc_, self.roots.pid, true, proc_ticks)
    }

    /// Flag steal time and other processes' CPU use.
    pub(super) fn check_cpu_time(
        &self,
        before: &Reading,
        after: &Reading,
        seconds: f64,
        c: &mut TrialCheck,
    ) {
        if let (Some(b), Some(a)) = (before.cpu, after.cpu) {
            let total = a.2.saturating_sub(b.2);
            let steal = a.1.saturating_sub(b.1);
            if total > 0 {
                let pct = steal as f64 * 100.0 / total as f64;
                c.steal_pct = Some(pct);
                if pct > STEAL_PCT && steal >= 2 {
                    flag(
                        c,
                        "steal",
                        format!("the hypervisor took {pct:.1}% of the CPU time (steal)"),
                    );
                }
            }
            if let (Some(ob), Some(oa)) = (before.own, after.own) {
                let busy = a.0.saturating_sub(b.0);
                let others = busy.saturating_sub(oa.saturating_sub(ob));
                if seconds > 0.0 {
                    let pct =
                        others as f64 * 100.0 / (seconds * self.roots.ticks_per_second as f64);
                    c.other_cpu_pct = Some(pct);
                    if pct > OTHER_CPU_PCT && others >= OTHER_CPU_MIN_TICKS {
                        flag(
                            c,
                            "load",
                            format!("other processes used {pct:.0}% of a CPU"),
                        );
                    }
                }
            }
        }
    }
}

/// (user+nice+system, steal, sum of all columns) of the `cpu ` line.
pub(super) fn parse_cpu_line(stat: &str) -> Option<(u64, u64, u64)> {
    let t = crate::system::proc::cpu::total(stat).filter(|t| t.n >= 4)?;
    Some((t.busy_user_system(), t.steal(), t.total()))
}

/// utime + stime + cutime + cstime of one process.
pub(super) fn proc_ticks(proc_: &Root, pid: u32) -> Option<u64> {
    proc_.stat(pid, |s| s.ticks_with_children())
}

/// `read` of `pid`, plus (with `children`) of every live descendant, at
/// most 4096 of them; None when `pid` itself cannot be read.
pub(super) fn tree_sum(
    proc_: &Root,
    pid: u32,
    children: bool,
    read: fn(&Root, u32) -> Option<u64>,
) -> Option<u64> {
    let mut total = read(proc_, pid)?;
    if !children {
        return Some(total);
    }
    let mut todo = proc_.children(pid);
    let mut seen = 0;
    while let Some(p) = todo.pop() {
        seen += 1;
        if seen > 4096 {
            break;
        }
        total += read(proc_, p).unwrap_or(0);
        todo.extend(proc_.children(p));
    }
    Some(total)
}
