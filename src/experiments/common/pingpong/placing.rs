//! Where the two sides of a ping-pong run: the `cpu` parameter (same,
//! split, any), the CPUs it picks, the [`Placement`] seen in each trial
//! (samples, migrations) and the notes, warnings and metrics made of it.

use super::child;
use crate::engine::{MetricSpec, ParamKind, ParamSpec};
use crate::{Error, Result};

/// The placement parameter every ping-pong experiment shares.
pub(crate) const CPU_PARAM: ParamSpec = ParamSpec::new(
    "cpu",
    ParamKind::Choice(&["same", "split", "any"]),
    "same",
    "placement: same (default: both pinned to the first CPU tunelab may use: pure context \
     switches, reproducible, works on one-CPU boards), split (tunelab and the child on two \
     different CPUs: cross-CPU wake-ups), any (the scheduler decides, like perf bench; the \
     notes say where it put them and flag a bimodal run)",
);

/// CPUs for tunelab and the child under placement `mode`.
pub(crate) fn placement(mode: &str) -> Result<(Option<usize>, Option<usize>)> {
    let cpus = child::usable_cpus();
    Ok(match mode {
        "same" => (Some(cpus[0]), Some(cpus[0])),
        "split" => {
            if cpus.len() < 2 {
                return Err(Error::usage(
                    "cpu=split needs two usable CPUs but this process may use only one; \
                     use cpu=same or cpu=any",
                ));
            }
            (Some(cpus[0]), Some(cpus[1]))
        }
        _ => (None, None),
    })
}

/// Where tunelab and a child ran during one trial: CPUs seen in samples
/// (tunelab: sched_getcpu; the child: the CPU it last reported in the shared
/// [`CpuReports`] page), how often both were on the same CPU, and
/// migrations of both (se.nr_migrations in /proc/…/sched, read between
/// trials; None when the kernel has no CONFIG_SCHED_DEBUG).
#[derive(Debug, Clone, Default)]
pub(crate) struct Placement {
    pub(crate) samples: u32,
    pub(crate) same: u32,
    pub(crate) mine: std::collections::BTreeSet<usize>,
    pub(crate) theirs: std::collections::BTreeSet<usize>,
    pub(crate) migrations: Option<u64>,
}

impl Placement {
    pub(crate) fn same_share(&self) -> f64 {
        if self.samples == 0 {
            0.0
        } else {
            self.same as f64 / self.samples as f64
        }
    }

    pub(super) fn sample(&mut self, child: Option<usize>) {
        let me = rustix::thread::sched_getcpu();
        if let Some(c) = child {
            self.samples += 1;
            self.mine.insert(me);
            self.theirs.insert(c);
            if c == me {
                self.same += 1;
            }
        }
    }
}

/// se.nr_migrations of a process (or "thread-self"), when the kernel shows it.
fn migrations(who: &str) -> Option<u64> {
    let s = crate::system::proc::read_pid(who, "sched").ok()?;
    crate::system::proc::keyed::number(&s, "se.nr_migrations")
}

pub(super) fn migrations_of(pids: &[i32]) -> Option<u64> {
    let mut n = migrations("thread-self")?;
    for p in pids {
        n += migrations(&p.to_string())?;
    }
    Some(n)
}

/// "placement: …" notes for one measurement over the trials of a point,
/// and a warning when the trials split between same-CPU and cross-CPU.
pub(crate) fn placement_notes(
    mode: &str,
    what: &str,
    child: &str,
    trials: &[Placement],
) -> Vec<String> {
    if trials.is_empty() {
        return vec![];
    }
    let cpus = |f: fn(&Placement) -> &std::collections::BTreeSet<usize>| {
        let all: std::collections::BTreeSet<usize> =
            trials.iter().flat_map(|p| f(p).iter().copied()).collect();
        all.iter()
            .map(|c| c.to_string())
            .collect::<Vec<_>>()
            .join(",")
    };
    let shares: Vec<String> = trials
        .iter()
        .map(|p| format!("{:.0}%", 100.0 * p.same_share()))
        .collect();
    let migr = if trials.iter().all(|p| p.migrations.is_some()) {
        let m: Vec<String> = trials
            .iter()
            .map(|p| p.migrations.unwrap_or(0).to_string())
            .collect();
        format!("; migrations per trial (both sides): {}", m.join(" "))
    } else {
        "; migrations not available (no /proc/PID/sched: kernel without CONFIG_SCHED_DEBUG)"
            .to_string()
    };
    let mut out = vec![format!(
        "placement ({what}, cpu={mode}): tunelab ran on CPU {}, the {child} on CPU {}; both on the \
         same CPU in {} of samples per trial{migr}",
        cpus(|p| &p.mine),
        cpus(|p| &p.theirs),
        shares.join(" "),
    )];
    if bimodal(trials) {
        out.push(format!(
            "warning: BIMODAL placement ({what}): some trials ran with both processes on one CPU \
             (context switches), others on two CPUs (cross-CPU wake-ups); the two cost very \
             different times and the summary mixes them. Use cpu=same or cpu=split to measure one \
             of them."
        ));
    }
    out
}

/// Trials split between mostly-same-CPU (>= 80% of samples) and
/// mostly-different-CPU (<= 20%).
pub(crate) fn bimodal(trials: &[Placement]) -> bool {
    let sampled = || trials.iter().filter(|p| p.samples > 0);
    sampled().any(|p| p.same_share() >= 0.8) && sampled().any(|p| p.same_share() <= 0.2)
}

/// Per-trial placement metrics of the round trips: share of samples with
/// both sides on one CPU, and migrations.
pub(crate) const RT_SAME_CPU: MetricSpec = MetricSpec::higher(
    "rt_same_cpu",
    "ratio",
    "round trips: share of placement samples with tunelab and the echo child on the same \
     CPU (1 = context switches, 0 = cross-CPU wake-ups)",
);
pub(crate) const RT_MIGRATIONS: MetricSpec = MetricSpec::lower(
    "rt_migrations",
    "count",
    "round trips: CPU migrations of tunelab and the echo child during the trial",
);
/// The same for the stream (experiments that measure bandwidth).
pub(crate) const BW_SAME_CPU: MetricSpec = MetricSpec::higher(
    "bw_same_cpu",
    "ratio",
    "stream: share of placement samples with tunelab and the writer on the same CPU",
);
pub(crate) const BW_MIGRATIONS: MetricSpec = MetricSpec::lower(
    "bw_migrations",
    "count",
    "stream: CPU migrations of tunelab and the writer during the trial",
);

#[cfg(test)]
mod tests {
    use super::*;

    fn place(samples: u32, same: u32) -> Placement {
        Placement {
            samples,
            same,
            ..Default::default()
        }
    }

    #[test]
    fn bimodal_placement_is_flagged() {
        let mixed = [place(20, 20), place(20, 0), place(20, 19)];
        assert!(bimodal(&mixed));
        let notes = placement_notes("any", "round trips", "echo child", &mixed);
        assert!(notes.iter().any(|n| n.contains("BIMODAL")), "{notes:?}");
        assert!(notes[0].contains("100% 0% 95%"), "{notes:?}");
        assert!(!bimodal(&[place(20, 20), place(20, 18)]));
        assert!(!bimodal(&[place(20, 0), place(20, 1)]));
    }
}
