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
//!
//! libc: getrusage, RUSAGE_THREAD, rusage (rustix has no getrusage)

use std::sync::Arc;
use std::time::{Duration, Instant};

/// The calling thread's wake-ups so far (its voluntary context switches).
fn own_wakeups() -> u64 {
    // SAFETY: rusage is plain data, filled by the kernel.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_THREAD reads the calling thread's counters.
    if unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) } == 0 {
        ru.ru_nvcsw as u64
    } else {
        0
    }
}

use super::open::Opened;
use crate::diagnose::budget::{self, Pace};

/// Shortest wait before a held pass is tried again.
const MIN_HOLD: Duration = Duration::from_millis(100);
/// CPU a pass may always take, s: a few records' worth on the board.
const MIN_PASS_S: f64 = 0.002;
/// The reader's period once it reads on a timer ([`Held::returned`]).
const TIMED: Duration = Duration::from_millis(100);
/// Wake-ups a second beyond poll's returns that switch to the timer.
const KICKS_PER_S: u64 = 200;

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
    /// Reading on a timer, the samplers no longer polled.
    timed: bool,
    /// Since `mark.0`: the thread's wake-ups then (`mark.1`) and poll's
    /// returns since (`mark.2`).
    mark: (Instant, u64, u64),
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
            timed: false,
            mark: (Instant::now(), own_wakeups(), 0),
        }
    }

    /// How long until an owed pass is due (None: none is owed).
    pub(super) fn timeout(&self) -> Option<Duration> {
        self.owed
            .map(|at| at.saturating_duration_since(Instant::now()))
    }

    /// How long poll may sleep: until an owed pass is due or, watching, the
    /// next judgement of the kicks (poll does not return for them), or, on
    /// the timer, its next pass.
    pub(super) fn poll_timeout(&self) -> Duration {
        let period = if self.timed {
            TIMED
        } else {
            Duration::from_secs(1).saturating_sub(self.mark.0.elapsed())
        };
        self.timeout().map_or(period, |d| d.min(period))
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

    /// Whether the samplers are polled (else the reader reads on a timer).
    pub(super) fn watch(&self) -> bool {
        !self.timed
    }

    /// Poll returned: whether a pass is due without a buffer's wake-up.
    /// The kernel wakes the poller of an inherited event at every exit of
    /// a child task (for POLLHUP); poll checks its fds and sleeps again
    /// without returning, so a fork loop's thousands of exits a second
    /// cost the reader more than its records (4% of a CPU on the VM, in
    /// 17,000 wake-ups for 20 returns). Where the thread's wake-ups
    /// outrun poll's returns by [`KICKS_PER_S`], the reader stops polling
    /// the samplers and reads every [`TIMED`] instead (a buffer's
    /// watermark is half the ring: the other half holds the wait).
    pub(super) fn returned(&mut self) -> bool {
        self.mark.2 += 1;
        let secs = self.mark.0.elapsed().as_secs_f64();
        if !self.timed && secs >= 1.0 {
            let now = own_wakeups();
            let beyond = now
                .saturating_sub(self.mark.1)
                .saturating_sub(2 * self.mark.2);
            self.timed = beyond as f64 > KICKS_PER_S as f64 * secs;
            self.mark = (Instant::now(), now, 0);
        }
        // An off-CPU tracer that ended waits for the stop alone.
        self.ended.is_none() && (self.timed || self.due())
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
    fn a_reader_woken_far_more_than_poll_returns_reads_on_a_timer() {
        let mut h = Held::new(None);
        assert!(h.watch());
        assert!(h.poll_timeout() <= Duration::from_secs(1));
        // A second in which the thread was woken once per return: watching.
        h.mark.0 -= Duration::from_millis(1100);
        assert!(!h.returned());
        assert!(h.watch());
        // A second with hundreds of wake-ups (each sleep is one) for one
        // return: the kernel's kicks; from now on, a pass every TIMED.
        h.mark.0 -= Duration::from_millis(1100);
        for _ in 0..3 * KICKS_PER_S {
            std::thread::sleep(Duration::from_micros(1));
        }
        assert!(h.returned());
        assert!(!h.watch());
        assert!(h.poll_timeout() <= TIMED);
        // A tracer that ended is not read again before the stop (its end
        // time stands).
        h.end(7);
        assert!(!h.returned());
        assert_eq!(h.ended.map(|e| e.1), Some(7));
    }

    #[test]
    fn totals_scale_to_the_span() {
        assert_eq!(scale(1, 4), 4.0);
        assert_eq!(scale(4, 4), 1.0);
        assert_eq!(scale(0, 4), 1.0);
        assert_eq!(scale(5, 4), 1.0);
    }
}
