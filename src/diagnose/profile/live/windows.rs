//! Off-CPU tracing held to diagnose's budget: a program that switches
//! often gives the tracer a record (with its call chain and a copy of the
//! user stack) per switch, and on an emulated board each costs the reader
//! ~50 µs, so following every switch of a producer/consumer pair took 40%
//! of a CPU. While the readers together are over the budget
//! (`budget::Pace`) the events are switched off, and back on once there is
//! room: the trace is then a set of windows, and its totals are scaled to
//! the whole span (the report says so, with the share traced).

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::open::Opened;
use crate::diagnose::budget::{self, Pace};

/// Shortest pause: a pause costs two passes over every event (off, on).
const MIN_PAUSE: Duration = Duration::from_millis(100);

pub(super) struct Windows {
    pace: Option<Arc<Pace>>,
    started: Instant,
    /// Paused since, and until when.
    paused: Option<(Instant, Instant)>,
    paused_total: Duration,
    pub(super) pauses: u32,
}

/// What the reader does after a pass.
#[derive(Debug, PartialEq)]
pub(super) enum Turn {
    Go,
    Pause,
    Resume,
}

impl Windows {
    pub(super) fn new(pace: Option<Arc<Pace>>) -> Windows {
        Windows {
            pace,
            started: Instant::now(),
            paused: None,
            paused_total: Duration::ZERO,
            pauses: 0,
        }
    }

    /// How long the reader may sleep: until the end of a pause, or until
    /// a buffer fills (None).
    pub(super) fn timeout(&self) -> Option<Duration> {
        self.paused
            .map(|(_, until)| until.saturating_duration_since(Instant::now()))
    }

    /// After a pass that cost `pass_s` of CPU: pause when the readers are
    /// over the budget, resume when a pause is over.
    pub(super) fn after_pass(&mut self, pass_s: f64) -> Turn {
        let now = Instant::now();
        if let Some((from, until)) = self.paused {
            if now < until {
                return Turn::Go;
            }
            self.paused_total += now - from;
            self.paused = None;
            return Turn::Resume;
        }
        let Some(h) = self.pace.as_ref().and_then(|p| p.headroom_s()) else {
            return Turn::Go;
        };
        if h >= 0.0 {
            return Turn::Go;
        }
        // Off until the budget has room for another pass like this one.
        let wait = budget::wait_for_room(h, pass_s, MIN_PAUSE);
        self.paused = Some((now, now + wait));
        self.pauses += 1;
        Turn::Pause
    }

    /// (traced, span) so far, ns; the span starts with the interval (the
    /// pace's start) when there is one: before it the command is held
    /// before its exec, and that time traced would dilute the windows.
    pub(super) fn traced_ns(&self) -> (u64, u64) {
        let now = Instant::now();
        let from = self
            .pace
            .as_ref()
            .and_then(|p| p.started())
            .unwrap_or(self.started);
        let span = now.saturating_duration_since(from);
        let paused = self.paused_total + self.paused.map_or(Duration::ZERO, |(from, _)| now - from);
        (
            span.saturating_sub(paused).as_nanos() as u64,
            span.as_nanos() as u64,
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
    fn without_a_pace_or_within_the_budget_tracing_goes_on() {
        let mut w = Windows::new(None);
        assert_eq!(w.after_pass(1.0), Turn::Go);
        assert_eq!(w.timeout(), None);
        let p = Arc::new(Pace::default());
        let mut w = Windows::new(Some(p.clone()));
        // Before the interval nothing is held.
        p.charge(1.0);
        assert_eq!(w.after_pass(1.0), Turn::Go);
        p.begin();
        assert_eq!(w.after_pass(0.0), Turn::Go);
    }

    #[test]
    fn over_the_budget_it_pauses_then_resumes_and_counts_the_gap() {
        let p = Arc::new(Pace::default());
        p.begin();
        let mut w = Windows::new(Some(p.clone()));
        // 1 ms over at 1% of one CPU: 100 ms (the shortest pause) plus
        // the next pass's room.
        p.charge(0.001);
        assert_eq!(w.after_pass(0.0), Turn::Pause);
        assert_eq!(w.pauses, 1);
        let t = w.timeout().unwrap();
        assert!(t <= Duration::from_millis(100), "{t:?}");
        // Still paused: nothing changes.
        assert_eq!(w.after_pass(0.0), Turn::Go);
        std::thread::sleep(Duration::from_millis(110));
        assert_eq!(w.after_pass(0.0), Turn::Resume);
        assert_eq!(w.timeout(), None);
        let (traced, span) = w.traced_ns();
        assert!(
            span >= 110_000_000 && traced + 100_000_000 <= span,
            "{traced} {span}"
        );
    }

    #[test]
    fn totals_scale_to_the_span() {
        assert_eq!(scale(1, 4), 4.0);
        assert_eq!(scale(4, 4), 1.0);
        assert_eq!(scale(0, 4), 1.0);
        assert_eq!(scale(5, 4), 1.0);
    }
}
