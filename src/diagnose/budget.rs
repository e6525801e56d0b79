//! What diagnose may cost while it follows a workload: a CPU budget (a
//! share of one CPU) split between its readers, and the rates that keep
//! each within its share. Every reader measures its own CPU time per
//! reading and stretches its period (the /proc readers) or lowers its
//! sampling frequency (the profiler) until it fits, between a floor that
//! keeps its figures meaningful and the rate asked. A slow or one-CPU board
//! so samples less and reads less often than a fast machine; the report
//! states the budget beside what tunelab used.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The whole budget, % of one CPU, while the workload runs (symbolising
/// and the report come after the interval and are not in it).
pub(crate) const BUDGET_PERCENT: f64 = 1.0;

/// Shares of the budget, fractions of one CPU. The profiler gets most: its
/// samples are what the hot-spot findings rest on.
pub(crate) const PROFILE_SHARE: f64 = 0.004;
/// The cache-miss sampler: a quarter of the profiler's.
pub(crate) const CACHE_SHARE: f64 = 0.001;
/// Each periodic /proc reader (workload, run queue, slab, wake-ups,
/// blocking): five of them.
pub(crate) const READER_SHARE: f64 = 0.001;

/// Lowest sampling rate the profiler goes down to, Hz: a 2 s program still
/// gets ~40 samples (a hot spot holding most of them stands out).
pub(crate) const MIN_PROFILE_HZ: u64 = 19;

/// The period that keeps a reader costing `cost_s` CPU per reading within
/// `share` of one CPU: never shorter than `base` (the rate it was designed
/// for), never longer than `max` (its figures would lose their meaning).
pub(crate) fn period_for(cost_s: f64, share: f64, base: Duration, max: Duration) -> Duration {
    let max = max.max(base);
    if cost_s.is_nan() || cost_s <= 0.0 || share.is_nan() || share <= 0.0 {
        return base;
    }
    let want = cost_s / share;
    if !want.is_finite() || want >= max.as_secs_f64() {
        return max;
    }
    Duration::from_secs_f64(want).clamp(base, max)
}

/// The sampling rate that keeps a sampler costing `cost_per_sample_s` of
/// CPU (its reader's time per sample) within `share` of one CPU, between
/// `min_hz` and `max_hz`; rounded down to a rate ending in 9 (…99, 49, 19)
/// so the samples do not beat with the timer tick, as perf's defaults do.
pub(crate) fn rate_for(cost_per_sample_s: f64, share: f64, min_hz: u64, max_hz: u64) -> u64 {
    let max_hz = max_hz.max(min_hz).max(1);
    if cost_per_sample_s.is_nan() || cost_per_sample_s <= 0.0 || share.is_nan() || share <= 0.0 {
        return max_hz;
    }
    let fit = share / cost_per_sample_s;
    if !fit.is_finite() || fit >= max_hz as f64 {
        return max_hz;
    }
    tick_safe(fit.floor() as u64).clamp(min_hz, max_hz)
}

/// `hz` rounded down to a rate ending in 9 (…99, 49, 19).
fn tick_safe(hz: u64) -> u64 {
    if hz >= 100 {
        if (hz + 1).is_multiple_of(100) {
            hz
        } else {
            hz / 100 * 100 - 1
        }
    } else if hz >= 50 {
        49
    } else if hz >= 20 {
        19
    } else {
        hz
    }
}

/// The profiler reader's CPU per record, estimated as this fraction of
/// the CPU one small /proc read takes on the same machine (measured before
/// the interval, `read_cost_s`): a record is parsed and counted in user
/// space, a /proc read is three system calls and a file the kernel formats.
/// An estimate for the start only; the reader measures its real cost
/// whenever it wakes and refits the rate.
pub(crate) const RECORD_PER_READ: f64 = 0.25;

/// The profiler's starting rate: the rate asked, divided by the CPUs the
/// workload would share with the reader below two (a one-CPU machine
/// samples at a quarter of it), and lowered to what fits the profiler's
/// share of the budget at the cost per record estimated from `read_s`, the
/// CPU of one /proc read here (an emulated board's is milliseconds: it
/// starts at the floor). The reader sleeps until a buffer is half full, so
/// this rate is what a short run keeps.
pub(crate) fn initial_rate(asked_hz: u64, cpus: u32, read_s: f64) -> u64 {
    let hz = if cpus <= 1 { asked_hz / 4 } else { asked_hz };
    let hz = tick_safe(hz).max(MIN_PROFILE_HZ);
    rate_for(
        read_s * RECORD_PER_READ,
        PROFILE_SHARE,
        START_MIN_HZ.min(hz),
        hz,
    )
}

/// Lowest starting rate: at 19 Hz a 2 s program on the emulated board got
/// 38 records, too few for its hot spot to stand out from the kernel's
/// exec and page faults (the lab's cpu-hotspot check failed); 49 Hz gives
/// ~100 samples, and the ring (half full after ~4 s at 49 Hz) still holds a
/// short run's samples until the end.
pub(crate) const START_MIN_HZ: u64 = 49;

/// CPU time of one small /proc read on this machine, s: the median of a
/// few reads of /proc/self/stat (the first one pages code in).
pub(crate) fn read_cost_s() -> f64 {
    let mut v: Vec<f64> = (0..5)
        .map(|_| {
            let c0 = super::thread_cpu_s();
            let _ = crate::system::proc::read_pid("self", "stat");
            super::thread_cpu_s() - c0
        })
        .collect();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The readers' CPU while the workload runs, held to the budget as a
/// whole: each reader adds its CPU time after every reading or pass; a
/// periodic reader skips a reading, and the off-CPU tracer pauses, while
/// the sum is over `BUDGET_PERCENT` of the time since the interval began.
/// Per-reader shares alone did not bound it: on an emulated board one
/// reading's cost varies tenfold with the host's load, and a program that
/// switches often gives the tracer a record per switch. Nothing is held
/// before the interval (first readings) or after it (last readings).
#[derive(Debug, Default)]
pub(crate) struct Pace {
    start: OnceLock<Instant>,
    spent_ns: AtomicU64,
}

impl Pace {
    /// The workload is released: from now on the readers' CPU counts.
    pub(crate) fn begin(&self) {
        let _ = self.start.set(Instant::now());
    }

    /// A reader spent `cpu_s` (counted only once the interval began).
    pub(crate) fn charge(&self, cpu_s: f64) {
        if self.start.get().is_some() && cpu_s.is_finite() && cpu_s > 0.0 {
            self.spent_ns
                .fetch_add((cpu_s * 1e9) as u64, Ordering::Relaxed);
        }
    }

    /// When the interval began (None: not yet).
    pub(crate) fn started(&self) -> Option<Instant> {
        self.start.get().copied()
    }

    /// CPU time the readers may still spend now, s (negative: over the
    /// budget by that much); None before the interval began.
    pub(crate) fn headroom_s(&self) -> Option<f64> {
        let t0 = self.start.get()?;
        let spent = self.spent_ns.load(Ordering::Relaxed) as f64 * 1e-9;
        Some(headroom(t0.elapsed().as_secs_f64(), spent))
    }

    /// How long a reader about to spend `cost_s` must hold off (at least
    /// `min`); None when the budget has room now or the interval has not
    /// begun.
    pub(crate) fn hold_for(&self, cost_s: f64, min: Duration) -> Option<Duration> {
        let h = self.headroom_s()?;
        (h < cost_s.max(0.0)).then(|| wait_for_room(h, cost_s, min))
    }
}

/// What the readers may still spend after `elapsed_s` of the interval
/// having spent `spent_s`: the budget's share of the time so far plus
/// `ALLOWANCE_S`, less what they spent (negative when over).
pub(crate) fn headroom(elapsed_s: f64, spent_s: f64) -> f64 {
    BUDGET_PERCENT / 100.0 * elapsed_s.max(0.0) + ALLOWANCE_S - spent_s
}

/// CPU the readers may spend ahead of the budget, s (its first second's
/// worth): 36 ms into a run the budget is 0.36 ms, and on the VM the
/// off-CPU tracer's first pass over a producer/consumer program's switches
/// (1,049 records, 1.1 ms) ended its trace after 0.9% of the interval.
pub(crate) const ALLOWANCE_S: f64 = 0.010;

/// How long a reader over the budget by `-headroom_s` (s of CPU) waits
/// before the budget has room for `cost_s` more: the budget grows by
/// `BUDGET_PERCENT` of each second. Never shorter than `min`.
pub(crate) fn wait_for_room(headroom_s: f64, cost_s: f64, min: Duration) -> Duration {
    let need = cost_s.max(0.0) - headroom_s;
    if !need.is_finite() || need <= 0.0 {
        return min;
    }
    let s = need / (BUDGET_PERCENT / 100.0);
    // Capped at an hour: a broken figure must not park a reader for ever.
    Duration::from_secs_f64(s.min(3600.0)).max(min)
}

/// A running mean of a reader's cost per reading, s: the first reading
/// (which opens files and fills caches) does not decide alone.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Cost {
    mean: f64,
    n: u64,
}

impl Cost {
    pub(crate) fn add(&mut self, cost_s: f64) -> f64 {
        if cost_s.is_nan() || cost_s < 0.0 {
            return self.mean;
        }
        self.n += 1;
        // Equal weights for the first few, then an exponential mean that
        // follows the workload (a fork burst makes the tree larger).
        let w = (1.0 / self.n as f64).max(0.25);
        self.mean += (cost_s - self.mean) * w;
        self.mean
    }

    pub(crate) fn mean(&self) -> f64 {
        self.mean
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: fn(u64) -> Duration = Duration::from_millis;

    #[test]
    fn a_cheap_reader_keeps_its_base_period() {
        // 5 µs a reading at 0.1%: 5 ms would fit; the base 100 ms stays.
        assert_eq!(period_for(5e-6, 0.001, MS(100), MS(2000)), MS(100));
    }

    #[test]
    fn a_costly_reader_stretches_to_fit_its_share_up_to_the_cap() {
        // 400 µs a reading at 0.1% of a CPU: one reading per 400 ms.
        assert_eq!(period_for(400e-6, 0.001, MS(100), MS(2000)), MS(400));
        // 5 ms a reading would want 5 s: capped.
        assert_eq!(period_for(5e-3, 0.001, MS(100), MS(2000)), MS(2000));
        // Nothing measured yet, or a broken figure: the base.
        assert_eq!(period_for(0.0, 0.001, MS(100), MS(2000)), MS(100));
        assert_eq!(period_for(f64::NAN, 0.001, MS(100), MS(2000)), MS(100));
        assert_eq!(period_for(1e-3, 0.0, MS(100), MS(2000)), MS(100));
        // A cap below the base is the base.
        assert_eq!(period_for(1.0, 0.001, MS(500), MS(100)), MS(500));
    }

    #[test]
    fn the_rate_fits_the_share_and_avoids_the_tick() {
        // 2 µs of reader per sample at 0.4%: 2000 Hz would fit; 999 asked.
        assert_eq!(rate_for(2e-6, 0.004, 19, 999), 999);
        // 10 µs: 400 Hz fits → 399.
        assert_eq!(rate_for(10e-6, 0.004, 19, 999), 399);
        // 50 µs: 80 Hz → 49; 150 µs: 26 Hz → 19.
        assert_eq!(rate_for(50e-6, 0.004, 19, 999), 49);
        assert_eq!(rate_for(150e-6, 0.004, 19, 999), 19);
        // 1 ms a sample: 4 Hz would fit, but never below the floor.
        assert_eq!(rate_for(1e-3, 0.004, 19, 999), 19);
        // Unknown cost: the rate asked.
        assert_eq!(rate_for(0.0, 0.004, 19, 999), 999);
        assert_eq!(rate_for(f64::INFINITY, 0.004, 19, 999), 19);
        // A ceiling below the floor is the floor.
        assert_eq!(rate_for(1e-6, 0.004, 19, 10), 19);
    }

    #[test]
    fn one_cpu_starts_at_a_quarter_of_the_rate() {
        // A fast machine: 10 µs a /proc read, 2.5 µs a record estimated.
        assert_eq!(initial_rate(999, 2, 10e-6), 999);
        assert_eq!(initial_rate(999, 1, 10e-6), 199);
        assert_eq!(initial_rate(49, 1, 10e-6), 19);
        assert_eq!(initial_rate(10, 4, 10e-6), 19);
        // Not measured: the rate asked.
        assert_eq!(initial_rate(999, 2, 0.0), 999);
    }

    #[test]
    fn a_slow_machine_starts_lower() {
        // 100 µs a read: 25 µs a record, 160 Hz fits 0.4% → 99.
        assert_eq!(initial_rate(999, 2, 100e-6), 99);
        // An emulated board's 2 ms a read: the starting floor.
        assert_eq!(initial_rate(999, 2, 2e-3), START_MIN_HZ);
        assert_eq!(initial_rate(999, 1, 2e-3), START_MIN_HZ);
    }

    #[test]
    fn a_read_costs_something_here() {
        let c = read_cost_s();
        assert!(c.is_finite() && c >= 0.0, "{c}");
    }

    #[test]
    fn the_mean_cost_follows_but_does_not_jump() {
        let mut c = Cost::default();
        assert_eq!(c.add(4.0), 4.0);
        assert_eq!(c.add(2.0), 3.0);
        c.add(f64::NAN);
        assert_eq!(c.mean(), 3.0);
        for _ in 0..50 {
            c.add(1.0);
        }
        assert!((c.mean() - 1.0).abs() < 1e-3, "{}", c.mean());
        // One costly reading moves the mean a quarter of the way.
        assert!((c.add(5.0) - 2.0).abs() < 1e-2);
    }

    #[test]
    fn the_pace_holds_the_readers_to_the_budget_over_the_interval() {
        // 1% of one CPU: 10 ms of reading per second of interval, and
        // 10 ms ahead.
        assert!((headroom(2.0, 0.005) - 0.025).abs() < 1e-12);
        assert!((headroom(1.0, 0.030) + 0.010).abs() < 1e-12);
        assert_eq!(headroom(-1.0, 0.0), ALLOWANCE_S);
        // 20 ms over, a 5 ms reading to come: 2.5 s until there is room.
        assert_eq!(
            wait_for_room(-0.020, 0.005, MS(100)),
            Duration::from_secs_f64(2.5)
        );
        // Room already: the shortest wait.
        assert_eq!(wait_for_room(0.010, 0.005, MS(100)), MS(100));
        assert_eq!(wait_for_room(f64::NAN, 0.005, MS(100)), MS(100));
        assert_eq!(wait_for_room(-1e9, 0.0, MS(100)), Duration::from_secs(3600));
    }

    #[test]
    fn the_pace_counts_only_inside_the_interval() {
        let p = Pace::default();
        assert_eq!(p.headroom_s(), None);
        p.charge(1.0);
        p.begin();
        let h = p.headroom_s().unwrap();
        assert!((ALLOWANCE_S..ALLOWANCE_S + 0.01).contains(&h), "{h}");
        p.charge(0.5);
        p.charge(f64::NAN);
        p.charge(-1.0);
        let h = p.headroom_s().unwrap();
        assert!((-0.5 + ALLOWANCE_S..-0.48).contains(&h), "{h}");
    }

    #[test]
    fn the_shares_add_up_to_the_budget() {
        let sum = PROFILE_SHARE + CACHE_SHARE + 5.0 * READER_SHARE;
        assert!((sum * 100.0 - BUDGET_PERCENT).abs() < 1e-9, "{sum}");
    }
}
