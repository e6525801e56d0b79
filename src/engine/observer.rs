//! The one way measurement reaches output: every session (the runner's
//! points, a study's key issues, a tune's rounds, the verbs) reports to an
//! [`Observer`], and the terminal, the JSON output and the tests each
//! implement it — as criterion's `Report` and hyperfine's exporters keep
//! measuring apart from printing. Every hook but `info` and `warn` has a
//! default, so an observer implements only what it shows.

use crate::model::run::Run;

/// Where a measurement is, for a progress display.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Event<'a> {
    /// A series of items of `what` ("points", "key issues") begins: each
    /// item's time budget in seconds (0: unknown), the whole series'
    /// `budget` when it keeps to one, and whether the weights are
    /// `expected` durations (a study's timed key issues) or only caps.
    Begin {
        what: &'static str,
        weights: &'a [f64],
        budget: Option<f64>,
        expected: bool,
    },
    /// An item begins: a point of a run (`label` its parameters) or a key
    /// issue of a study (`label` its name); `of` says what was started
    /// (the experiment for a point, empty for a key issue).
    Started {
        index: usize,
        total: usize,
        of: &'a str,
        label: &'a str,
    },
    /// A kept trial of the current item begins (at most `max`).
    Trial { n: usize, max: usize },
    /// The current item is done (`stop_reason`: why its trials stopped,
    /// empty when it has none, e.g. a key issue).
    Done { index: usize, stop_reason: &'a str },
    /// The series is over (or stopped).
    End,
    /// A knob sweep finished its `n`th measured round.
    Round(usize),
}

/// What a session says while it measures. `&self` throughout: a session
/// hands one observer to every step, and one that keeps state (a progress
/// bar) keeps it in a cell.
pub trait Observer {
    /// Progress and facts ("stored run …").
    fn info(&self, msg: &str);
    /// Something the user should know about the measurement.
    fn warn(&self, msg: &str);
    /// A warning the run keeps and its printed output shows again at the
    /// end: said now too, unless the user asked for each thing once (-q).
    fn run_warning(&self, msg: &str) {
        self.warn(msg)
    }
    /// An error said beside another one (the store's failure when the
    /// measurement failed too), so that neither is lost.
    fn error(&self, msg: &str) {
        self.warn(msg)
    }
    /// Where the measurement is (ignored unless the observer shows progress).
    fn progress(&self, _event: Event) {}
    /// `run` was stored in the store at `location`.
    fn stored(&self, run: &Run, location: &str) {
        self.info(&format!(
            "stored run {} ({}) in {location}",
            run.id,
            run.status.as_str()
        ))
    }
}

/// An observer that says nothing (a measurement nobody watches).
pub struct Silent;

impl Observer for Silent {
    fn info(&self, _msg: &str) {}
    fn warn(&self, _msg: &str) {}
}

/// Forwards everything to `inner` except the progress of the items inside
/// a larger one (a study's key issue shows its trials, not its points).
pub(crate) struct TrialsOnly<'a>(pub(crate) &'a dyn Observer);

impl Observer for TrialsOnly<'_> {
    fn info(&self, msg: &str) {
        self.0.info(msg)
    }
    fn warn(&self, msg: &str) {
        self.0.warn(msg)
    }
    fn run_warning(&self, msg: &str) {
        self.0.run_warning(msg)
    }
    fn error(&self, msg: &str) {
        self.0.error(msg)
    }
    fn progress(&self, event: Event) {
        if let Event::Trial { .. } = event {
            self.0.progress(event)
        }
    }
    fn stored(&self, run: &Run, location: &str) {
        self.0.stored(run, location)
    }
}
