//! `perf stat`-style counting: each event opened on its own (not as a
//! group, so one unsupported event does not take the others down), per
//! thread × inherit for a process or per CPU for the system, summed, and
//! scaled by enabled/running when the PMU multiplexed it.

use rustix::io::Errno;
use std::io;
use std::time::Instant;

use perf_event::events::{Hardware, Software};
use perf_event::{Builder, Counter as PerfCounter};

use super::common::{self, explain};
use super::Scope;
use crate::model::profile::{Counter, Counters};

#[derive(Clone, Copy)]
enum Ev {
    Hw(Hardware),
    Sw(Software),
}

/// (name, event, unit) in `perf stat`'s order.
fn events(scope: &Scope) -> Vec<(&'static str, Ev, &'static str)> {
    let clock = match scope {
        Scope::Process { .. } => ("task-clock", Ev::Sw(Software::TASK_CLOCK), "ns"),
        // task-clock of "any task" is meaningless per CPU: perf stat -a
        // shows cpu-clock.
        Scope::System => ("cpu-clock", Ev::Sw(Software::CPU_CLOCK), "ns"),
    };
    vec![
        clock,
        ("context-switches", Ev::Sw(Software::CONTEXT_SWITCHES), ""),
        ("cpu-migrations", Ev::Sw(Software::CPU_MIGRATIONS), ""),
        ("page-faults", Ev::Sw(Software::PAGE_FAULTS), ""),
        ("cycles", Ev::Hw(Hardware::CPU_CYCLES), ""),
        ("instructions", Ev::Hw(Hardware::INSTRUCTIONS), ""),
        ("cache-references", Ev::Hw(Hardware::CACHE_REFERENCES), ""),
        ("cache-misses", Ev::Hw(Hardware::CACHE_MISSES), ""),
        ("branch-misses", Ev::Hw(Hardware::BRANCH_MISSES), ""),
    ]
}

struct Slot {
    name: &'static str,
    unit: &'static str,
    counters: Vec<PerfCounter>,
    unavailable: String,
}

pub(crate) struct LiveCounters {
    slots: Vec<Slot>,
    started: Instant,
    scope_words: String,
}

fn open(
    ev: Ev,
    scope: &Scope,
    tids: &[i32],
    cpus: &[usize],
    kernel: bool,
) -> io::Result<Vec<PerfCounter>> {
    let mut b = match ev {
        Ev::Hw(h) => Builder::new(h),
        Ev::Sw(s) => Builder::new(s),
    };
    b.exclude_kernel(!kernel).exclude_hv(true).enabled(true);
    let mut out = Vec::new();
    match scope {
        Scope::Process { pid } => {
            b.inherit(true).any_cpu();
            for &tid in tids {
                b.observe_pid(tid);
                match b.build() {
                    Ok(c) => out.push(c),
                    Err(e) if Errno::from_io_error(&e) == Some(Errno::SRCH) && tid != *pid => {}
                    Err(e) => return Err(e),
                }
            }
        }
        Scope::System => {
            b.any_pid();
            for &cpu in cpus {
                b.one_cpu(cpu);
                out.push(b.build()?);
            }
        }
    }
    Ok(out)
}

impl LiveCounters {
    pub(crate) fn start(scope: &Scope) -> Result<LiveCounters, String> {
        let started = Instant::now();
        let tids = match scope {
            Scope::Process { pid } => common::threads_of(*pid)?,
            Scope::System => Vec::new(),
        };
        let cpus = common::online_cpus();
        let mut slots = Vec::new();
        for (name, ev, unit) in events(scope) {
            let mut slot = Slot {
                name,
                unit,
                counters: Vec::new(),
                unavailable: String::new(),
            };
            match open(ev, scope, &tids, &cpus, true) {
                Ok(c) => slot.counters = c,
                Err(e) if matches!(Errno::from_io_error(&e), Some(Errno::ACCESS | Errno::PERM)) => {
                    // paranoid=2: user-space counts of one's own process.
                    match open(ev, scope, &tids, &cpus, false) {
                        Ok(c) => {
                            slot.counters = c;
                            slot.unavailable =
                                "user space only (kernel excluded by perf_event_paranoid)".into();
                        }
                        Err(e) => slot.unavailable = explain(&e, name, scope),
                    }
                }
                Err(e) => slot.unavailable = explain(&e, name, scope),
            }
            slots.push(slot);
        }
        if slots.iter().all(|s| s.counters.is_empty()) {
            let first = slots
                .first()
                .map(|s| s.unavailable.clone())
                .unwrap_or_default();
            return Err(format!("no counter could be opened: {first}"));
        }
        Ok(LiveCounters {
            slots,
            started,
            scope_words: common::scope_words(scope, cpus.len()),
        })
    }

    pub(crate) fn finish(mut self) -> Counters {
        for s in &mut self.slots {
            for c in &mut s.counters {
                let _ = c.disable();
            }
        }
        let interval_ms = self.started.elapsed().as_secs_f64() * 1e3;
        let mut out = Counters {
            counters: Vec::new(),
            ipc: None,
            scope: self.scope_words.clone(),
            interval_ms,
        };
        for s in &mut self.slots {
            let mut value = 0f64;
            let (mut enabled, mut running) = (0u64, 0u64);
            let mut read_err = None;
            for c in &mut s.counters {
                match c.read_count_and_time() {
                    Ok(ct) => {
                        let scaled = if ct.time_running == 0 {
                            0.0
                        } else {
                            ct.count as f64 * ct.time_enabled as f64 / ct.time_running as f64
                        };
                        value += scaled;
                        enabled += ct.time_enabled;
                        running += ct.time_running;
                    }
                    Err(e) => read_err = Some(e.to_string()),
                }
            }
            let mut unavailable = s.unavailable.clone();
            let counted = !s.counters.is_empty() && read_err.is_none();
            if let Some(e) = read_err {
                unavailable = format!("{}: read failed: {e}", s.name);
            } else if counted && running == 0 && enabled > 0 {
                unavailable = format!(
                    "{}: never scheduled on the PMU (too many events for its counters)",
                    s.name
                );
            }
            let has_value = counted && !(running == 0 && enabled > 0);
            out.counters.push(Counter {
                name: s.name.to_string(),
                value: has_value.then_some(value),
                running_fraction: if enabled == 0 {
                    if has_value {
                        1.0
                    } else {
                        0.0
                    }
                } else {
                    running as f64 / enabled as f64
                },
                unit: s.unit.to_string(),
                unavailable,
            });
        }
        out.ipc = ipc(&out.counters);
        out
    }
}

fn ipc(counters: &[Counter]) -> Option<f64> {
    let get = |n: &str| counters.iter().find(|c| c.name == n).and_then(|c| c.value);
    match (get("instructions"), get("cycles")) {
        (Some(i), Some(c)) if c > 0.0 => Some(i / c),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipc_needs_both_counts() {
        let c = |n: &str, v: Option<f64>| Counter {
            name: n.into(),
            value: v,
            ..Counter::default()
        };
        assert_eq!(
            ipc(&[c("instructions", Some(300.0)), c("cycles", Some(100.0))]),
            Some(3.0)
        );
        assert_eq!(
            ipc(&[c("instructions", Some(300.0)), c("cycles", None)]),
            None
        );
        assert_eq!(
            ipc(&[c("instructions", Some(3.0)), c("cycles", Some(0.0))]),
            None
        );
    }
}
