//! The profiler's readers held to diagnose's budget. A reader drains its
//! ring buffers only while tunelab's readers together are within the
//! budget (`budget::Pace`); over it, a pass is held and the records wait
//! in the ring. For the on-CPU samplers a full ring only loses samples
//! (counted, and each sample stands alone). The off-CPU tracer pairs each
//! switch out with its switch back in, so a gap would make false waits:
//! instead, the first time it is over the budget it stops for good (its
//! events off, its records read after the interval) and its totals are
//! scaled from the traced part of the interval to the whole — stated in
//! the report. On an emulated board one record cost the reader ~50 µs, so
//! following every switch of a producer/consumer pair took 40% of a CPU.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::open::Opened;
use crate::diagnose::budget::{self, Pace};

/// Shortest wait before a held pass is tried again.
const MIN_HOLD: Duration = Duration::from_millis(100);
/// CPU a pass may always take, s: a few records' worth on the board.
const MIN_PASS_S: f64 = 0.002;

pub(super) struct Held {
    pace: Option<Arc<Pace>>,
    started: Instant,
    /// The last pass's CPU, s: what the next one is expected to cost.
    last_pass_s: f64,
    /// A pass is owed (the kernel's wake-up was taken), tried at this time.
    owed: Option<Instant>,
    /// The off-CPU tracer stopped early: when (and monotonic ns).
    pub(super) ended: Option<(Instant, u64)>,
    pub(super) held: u64,
}

/// What the reader does now.
#[derive(Debug, PartialEq)]
pub(super) enum Turn {
    /// Read the buffers.
    Read,
    /// Wait (the budget has no room yet).
    Hold,
    /// Stop tracing for good (off-CPU).
    End,
}

impl Held {
    pub(super) fn new(pace: Option<Arc<Pace>>) -> Held {
        Held {
            pace,
            started: Instant::now(),
            last_pass_s: 0.0,
            owed: None,
            ended: None,
            held: 0,
        }
    }

    /// How long the reader may sleep: until an owed pass is due, or until
    /// a buffer fills (None).
    pub(super) fn timeout(&self) -> Option<Duration> {
        self.owed
            .map(|at| at.saturating_duration_since(Instant::now()))
    }

    /// A pass is wanted (a buffer filled, or an owed pass is due): read,
    /// hold it (`off` false), or end tracing (`off` true).
    pub(super) fn turn(&mut self, off: bool) -> Turn {
        let hold = self
            .pace
            .as_ref()
            .and_then(|p| p.hold_for(self.last_pass_s, MIN_HOLD));
        match hold {
            Some(_) if off => {
                self.owed = None;
                Turn::End
            }
            Some(wait) => {
                self.held += 1;
                self.owed = Some(Instant::now() + wait);
                Turn::Hold
            }
            None => {
                self.owed = None;
                Turn::Read
            }
        }
    }

    /// Whether an owed pass is due now.
    pub(super) fn due(&self) -> bool {
        self.owed.is_some_and(|at| at <= Instant::now())
    }

    /// The thread CPU clock (ns) at which a pass starting at `now_ns`
    /// stops: the budget's room now, at least `MIN_PASS`; none outside the
    /// interval (before it, or without a pace).
    pub(super) fn pass_deadline_ns(&self, now_ns: u64) -> u64 {
        match self.pace.as_ref().and_then(|p| p.headroom_s()) {
            Some(h) => now_ns.saturating_add((h.max(MIN_PASS_S) * 1e9) as u64),
            None => u64::MAX,
        }
    }

    /// A pass was cut short: another is owed once the budget has room.
    pub(super) fn owe(&mut self) {
        self.held += 1;
        let h = self
            .pace
            .as_ref()
            .and_then(|p| p.headroom_s())
            .unwrap_or(0.0);
        self.owed = Some(Instant::now() + budget::wait_for_room(h, self.last_pass_s, MIN_HOLD));
    }

    /// A pass cost `pass_s` of CPU: charged to the pace.
    pub(super) fn read(&mut self, pass_s: f64) {
        self.last_pass_s = pass_s;
        if let Some(p) = &self.pace {
            p.charge(pass_s);
        }
    }

    /// The tracer stops now (`mono_ns`: the monotonic clock of its records).
    pub(super) fn end(&mut self, mono_ns: u64) {
        self.ended = Some((Instant::now(), mono_ns));
    }

    /// (traced, span) ns: from the start of the interval (the pace's; the
    /// reader's own start without one: before it the command is held before
    /// its exec) to the early end or now, and to now.
    pub(super) fn traced_ns(&self) -> (u64, u64) {
        let now = Instant::now();
        let from = self
            .pace
            .as_ref()
            .and_then(|p| p.started())
            .unwrap_or(self.started);
        let end = self.ended.map_or(now, |(at, _)| at);
        (
            end.saturating_duration_since(from).as_nanos() as u64,
            now.saturating_duration_since(from).as_nanos() as u64,
        )
    }
}

/// Every event on or off (inherited events follow their parent).
pub(super) fn switch_all(opened: &mut Opened, on: bool) {
    for s in &mut opened.samplers {
        let _ = if on { s.enable() } else { s.disable() };
    }
    for c in &mut opened.redirected {
        let _ = if on { c.enable() } else { c.disable() };
    }
}

/// The factor that scales totals traced over `traced_ns` of `span_ns` to
/// the whole span (1 when traced throughout or nothing was traced).
pub(crate) fn scale(traced_ns: u64, span_ns: u64) -> f64 {
    if traced_ns == 0 || span_ns <= traced_ns {
        1.0
    } else {
        span_ns as f64 / traced_ns as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_pace_or_before_the_interval_every_pass_reads() {
        let mut h = Held::new(None);
        assert_eq!(h.turn(true), Turn::Read);
        let p = Arc::new(Pace::default());
        let mut h = Held::new(Some(p.clone()));
        p.charge(1.0);
        h.read(1.0);
        assert_eq!(h.turn(false), Turn::Read);
        assert_eq!(h.timeout(), None);
    }

    #[test]
    fn over_the_budget_a_sampler_holds_and_the_tracer_ends() {
        let p = Arc::new(Pace::default());
        p.begin();
        let mut h = Held::new(Some(p.clone()));
        h.read(0.020);
        // 20 ms spent at once, 10 ms over the allowance: room for another
        // such pass after 3 s at 1% of one CPU.
        assert_eq!(h.turn(false), Turn::Hold);
        assert_eq!(h.held, 1);
        let t = h.timeout().unwrap();
        assert!(
            t > Duration::from_millis(2900) && t <= Duration::from_secs(3),
            "{t:?}"
        );
        assert!(!h.due());
        assert_eq!(h.turn(true), Turn::End);
        assert_eq!(h.timeout(), None);
        h.end(7);
        std::thread::sleep(Duration::from_millis(20));
        let (traced, span) = h.traced_ns();
        assert!(
            traced < span && span - traced >= 20_000_000,
            "{traced} {span}"
        );
    }

    #[test]
    fn a_pass_is_bounded_by_the_room_in_the_budget() {
        let mut h = Held::new(None);
        assert_eq!(h.pass_deadline_ns(5), u64::MAX);
        let p = Arc::new(Pace::default());
        h = Held::new(Some(p.clone()));
        assert_eq!(h.pass_deadline_ns(5), u64::MAX);
        p.begin();
        // No room yet: the least a pass may take.
        p.charge(1.0);
        assert_eq!(h.pass_deadline_ns(1_000), 1_000 + 2_000_000);
        h.owe();
        assert_eq!(h.held, 1);
        assert!(h.timeout().unwrap() > Duration::from_secs(60));
    }

    #[test]
    fn totals_scale_to_the_span() {
        assert_eq!(scale(1, 4), 4.0);
        assert_eq!(scale(4, 4), 1.0);
        assert_eq!(scale(0, 4), 1.0);
        assert_eq!(scale(5, 4), 1.0);
    }
}
