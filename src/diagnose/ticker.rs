//! A section's periodic reader: its own thread, its own CPU time measured
//! per reading, and a period that stretches to fit its share of the
//! diagnosis budget (`budget`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::{budget, thread_cpu_s};
use crate::units::sig;

/// A section's state sampled periodically on its own thread, which also
/// measures its own CPU time (the section's overhead).
pub(crate) trait Sampled: Send + 'static {
    fn sample(&mut self);
}

pub(crate) struct Ticker<S> {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<(S, f64, u64)>,
}

impl<S: Sampled> Ticker<S> {
    /// Sample every `base`, stretched up to `max` so the thread's own CPU
    /// time per reading stays within `share` of one CPU (the diagnosis
    /// budget: a slow board reads less often; see `budget`).
    /// With a `pace`, a reading is also held back while the readers
    /// together are over the budget (`budget::Pace`), until there is room.
    pub(crate) fn adaptive(
        name: &str,
        mut state: S,
        base: Duration,
        max: Duration,
        share: f64,
        pace: Option<Arc<budget::Pace>>,
    ) -> Ticker<S> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let (ready_tx, ready) = std::sync::mpsc::channel::<()>();
        let label = name.to_string();
        let handle = std::thread::Builder::new()
            .name(format!("diag-{name}"))
            .spawn(move || {
                let cpu0 = thread_cpu_s();
                let mut n = 0u64;
                let mut cost = budget::Cost::default();
                let mut first = 0.0;
                let mut held = 0u64;
                let mut next = Instant::now();
                loop {
                    // The first reading (files opened, code paged in and, on
                    // an emulated board, translated) says little of the
                    // next ones: the period follows from those.
                    let per = if n <= 1 { first } else { cost.mean() };
                    let hold = pace.as_ref().and_then(|p| p.hold_for(per, base));
                    match hold {
                        // Over the budget (never the first or the last
                        // reading): wait until the budget has room for one.
                        Some(wait) if n > 0 && !flag.load(Ordering::Relaxed) => {
                            held += 1;
                            next = Instant::now() + wait;
                        }
                        _ => {
                            let c0 = thread_cpu_s();
                            state.sample();
                            let c = thread_cpu_s() - c0;
                            if let Some(p) = &pace {
                                p.charge(c);
                            }
                            if n == 0 {
                                first = c;
                                let _ = ready_tx.send(());
                            } else {
                                cost.add(c);
                            }
                            n += 1;
                            if flag.load(Ordering::Relaxed) {
                                break;
                            }
                            let per = if n == 1 { first } else { cost.mean() };
                            next += budget::period_for(per, share, base, max);
                            let now = Instant::now();
                            if next <= now {
                                // Fell behind (loaded machine): do not burst to catch up.
                                next = now;
                            }
                        }
                    }
                    // Parked, not slept: `stop` unparks it, so stopping never
                    // waits out a period (an hour-long one hung a test).
                    loop {
                        let now = Instant::now();
                        if flag.load(Ordering::Relaxed) || next <= now {
                            break;
                        }
                        std::thread::park_timeout(next - now);
                    }
                }
                let total = thread_cpu_s() - cpu0;
                if super::selfcost::debug() {
                    eprintln!(
                        "tunelab cost: diag-{label}: {n} readings, first {:.2} ms, then {:.2} ms \
                         each on average, {:.1} ms in all; {held} held back (over the budget)",
                        first * 1e3,
                        cost.mean() * 1e3,
                        total * 1e3
                    );
                }
                (state, total, n)
            })
            .expect("spawning a sampling thread");
        // The first reading happens before the caller goes on: started
        // before a command is released, its fixed cost (opening files,
        // paging code in) is not in the interval. Bounded: a reader stuck
        // on a slow file does not hold the diagnosis.
        let _ = ready.recv_timeout(Duration::from_secs(10));
        Ticker { stop, handle }
    }

    /// Stop after one last sample; the state, its CPU time (s) and readings.
    pub(crate) fn stop(self) -> (S, f64, u64) {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.thread().unpark();
        match self.handle.join() {
            Ok(r) => r,
            Err(p) => std::panic::resume_unwind(p),
        }
    }
}

/// The mean period of an adaptive reader in words: "every 120 ms on
/// average (adaptive, within 0.1% of one CPU)".
pub(crate) fn every(interval_s: f64, readings: u64, share: f64) -> String {
    let ms = interval_s * 1e3 / readings.max(1) as f64;
    format!(
        "every {} ms on average (the period stretches to keep the reader within {}% of one CPU, \
         and a reading waits while tunelab's readers together are over {}% of one CPU)",
        sig(ms),
        sig(share * 100.0),
        sig(budget::BUDGET_PERCENT)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Count(u64);

    impl Sampled for Count {
        fn sample(&mut self) {
            self.0 += 1;
        }
    }

    #[test]
    fn over_the_budget_only_the_first_and_last_readings_are_made() {
        let pace = Arc::new(budget::Pace::default());
        pace.begin();
        // 10 s of CPU spent at once: 1000 s before there is room again.
        pace.charge(10.0);
        let ms = Duration::from_millis(1);
        let t = Ticker::adaptive("t", Count(0), ms, ms, 1.0, Some(pace));
        std::thread::sleep(Duration::from_millis(50));
        let (c, _, n) = t.stop();
        assert_eq!((c.0, n), (2, 2));
    }

    #[test]
    fn within_the_budget_it_keeps_reading() {
        let pace = Arc::new(budget::Pace::default());
        pace.begin();
        let ms = Duration::from_millis(1);
        let t = Ticker::adaptive("t", Count(0), ms, ms, 1.0, Some(pace));
        // Readings that cost nothing measurable always fit (200 ms: a
        // reader thread on a busy machine still gets its few turns).
        std::thread::sleep(Duration::from_millis(200));
        let (c, _, n) = t.stop();
        assert_eq!(c.0, n);
        assert!(n > 2, "{n}");
    }
}
