//! The recording of `cpu.sustained`: a [`Row`] per interval (throughput,
//! probe and scaling clocks, temperatures, cooling, throttling, steal,
//! other processes, cgroup quota) built by the [`Recorder`] from
//! consecutive samples of the machine.

use std::path::{Path, PathBuf};

use crate::system::cpu::{sample, Sample};

/// One interval of the recording.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Row {
    /// Seconds since the load started, at the end of the interval.
    pub(crate) t: f64,
    pub(crate) dt: f64,
    /// Passes per second of all threads.
    pub(crate) throughput: f64,
    /// Probe clock per core (Hz; None: no probe finished this interval).
    pub(crate) clock: Vec<(usize, Option<f64>)>,
    /// scaling_cur_freq per CPU, Hz.
    pub(crate) cur_hz: Vec<(usize, Option<f64>)>,
    pub(crate) temps: Vec<(String, f64)>,
    pub(crate) cooling: Vec<(String, u64, u64)>,
    /// Throttle counter increments this interval.
    pub(crate) throttle_events: u64,
    /// Share of the machine's time stolen by the hypervisor / used by other processes.
    pub(crate) steal: f64,
    pub(crate) other: f64,
    /// CPUs' worth of quota (None: unlimited or no cgroup), periods throttled this interval.
    pub(crate) quota_cpus: Option<f64>,
    pub(crate) nr_throttled: u64,
}

impl Row {
    pub(super) fn mean_clock(&self) -> Option<f64> {
        mean(self.clock.iter().filter_map(|c| c.1))
    }
    pub(super) fn mean_cur(&self) -> Option<f64> {
        mean(self.cur_hz.iter().filter_map(|c| c.1))
    }
    pub(super) fn max_temp(&self) -> Option<f64> {
        self.temps.iter().map(|t| t.1).reduce(f64::max)
    }
    pub(super) fn cooling_sum(&self) -> u64 {
        self.cooling.iter().map(|c| c.1).sum()
    }
}

pub(super) fn mean(it: impl Iterator<Item = f64>) -> Option<f64> {
    let (s, n) = it.fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    (n > 0).then(|| s / n as f64)
}

pub(super) fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(v[v.len() / 2])
}

/// Ticks of CPU time this process has used (utime + stime of /proc/<root>/self/stat).
pub(super) fn own_ticks(root: &Path) -> u64 {
    let s = crate::system::proc::Root::under(root)
        .read_pid("self", "stat")
        .unwrap_or_default();
    crate::system::proc::Stat::parse(&s)
        .map_or(0, |st| st.utime().unwrap_or(0) + st.stime().unwrap_or(0))
}

/// Builds rows from consecutive sysfs samples and the workers' counters.
pub(crate) struct Recorder {
    root: PathBuf,
    cpus: Vec<usize>,
    prev: Sample,
    prev_own: u64,
}

impl Recorder {
    pub(crate) fn new(root: &Path, cpus: &[usize]) -> Recorder {
        Recorder {
            root: root.to_path_buf(),
            cpus: cpus.to_vec(),
            prev: sample(root, cpus),
            prev_own: own_ticks(root),
        }
    }

    /// Read the machine now and make the row of the interval that just ended.
    pub(crate) fn row(
        &mut self,
        t: f64,
        dt: f64,
        throughput: f64,
        clock: Vec<(usize, Option<f64>)>,
    ) -> Row {
        let s = sample(&self.root, &self.cpus);
        let own = own_ticks(&self.root);
        let total = s.total_ticks.saturating_sub(self.prev.total_ticks).max(1) as f64;
        let busy = s.busy_ticks.saturating_sub(self.prev.busy_ticks);
        let mine = own.saturating_sub(self.prev_own);
        let count = |x: &Sample| x.throttle.iter().map(|c| c.1).sum::<u64>();
        let row = Row {
            t,
            dt,
            throughput,
            clock,
            cur_hz: s
                .cur_khz
                .iter()
                .map(|(c, k)| (*c, k.map(|k| k as f64 * 1e3)))
                .collect(),
            temps: s.temps.clone(),
            cooling: s.cooling.clone(),
            throttle_events: count(&s).saturating_sub(count(&self.prev)),
            steal: s.steal_ticks.saturating_sub(self.prev.steal_ticks) as f64 / total,
            other: busy.saturating_sub(mine) as f64 / total,
            quota_cpus: s.quota.as_ref().and_then(|q| q.cpus()),
            nr_throttled: match (&s.quota, &self.prev.quota) {
                (Some(a), Some(b)) => a.nr_throttled.saturating_sub(b.nr_throttled),
                _ => 0,
            },
        };
        self.prev = s;
        self.prev_own = own;
        row
    }
}
