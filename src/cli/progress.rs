//! Progress of `run` and `study`: elapsed time and what is left, from the
//! pace measured so far, on a terminal (a bar) and off one (plain lines at
//! a modest rate, for logs and serial consoles). What is not known yet is
//! printed as unknown, never as 0 (docs/board.md, "Progress and ETA").
//!
//! The estimate: items (points of a run, key issues of a study) carry a
//! weight, their time budget. The measured pace is seconds spent per second
//! of budget on the items finished so far; what is left is that pace times
//! the budget of the items still to run, less what the current one has
//! already taken. Before the first item ends there is no pace: only the
//! budget bounds what is left, and the line says "≤ budget" or "unknown".

use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

use super::Out;
use crate::report::table::Terminal;

/// Off a terminal, a line at most this often while one item runs.
const LINE_EVERY: Duration = Duration::from_secs(30);
/// Cells of the progress bar: with its counts and a message it fits 80 columns.
const BAR: usize = 20;

/// The estimate of what is left, in seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Left {
    /// No pace measured yet and no budget to bound it.
    Unknown,
    /// No pace measured yet; at most this (what is left of the budget).
    AtMost(f64),
    /// From the measured pace (at most what is left of the budget, when the
    /// run keeps to one).
    About(f64),
}

/// The pace arithmetic, without clocks or output (unit-tested).
#[derive(Debug, Clone)]
pub(crate) struct Estimate {
    /// Budget (weight) of each item, seconds; 0 when unknown.
    weights: Vec<f64>,
    /// Seconds per second of weight before any weighed item has finished:
    /// Some(1.0) when the weights are expected durations (a study's timed
    /// key issues), None when they are only budgets (caps, not forecasts).
    prior_pace: Option<f64>,
    /// Seconds each finished item took.
    took: Vec<f64>,
    /// The whole run's budget, when it keeps to one (seconds).
    budget: Option<f64>,
}

impl Estimate {
    pub(crate) fn new(weights: Vec<f64>, budget: Option<f64>) -> Self {
        Estimate {
            weights,
            prior_pace: None,
            took: Vec::new(),
            budget,
        }
    }

    /// The weights are expected seconds, not budgets: they forecast an
    /// item's length before any item of their kind has run.
    pub(crate) fn expected(mut self) -> Self {
        self.prior_pace = Some(1.0);
        self
    }

    pub(crate) fn done(&mut self, seconds: f64) {
        self.took.push(seconds);
    }

    pub(crate) fn finished(&self) -> usize {
        self.took.len()
    }

    pub(crate) fn total(&self) -> usize {
        self.weights.len()
    }

    /// What is left at `elapsed` seconds since the start, `current` of them
    /// in the item now running.
    pub(crate) fn left(&self, elapsed: f64, current: f64) -> Left {
        let n = self.took.len();
        if n == 0 {
            // Past the budget before the first item ended: no bound either.
            return match self.budget.map(|b| b - elapsed) {
                Some(c) if c > 0.0 => Left::AtMost(c),
                _ => Left::Unknown,
            };
        }
        if n >= self.weights.len() {
            return Left::About(0.0);
        }
        match self.budget {
            Some(b) => Left::About(self.left_of_budget(b, elapsed, current)),
            None => Left::About(self.left_by_weight(current)),
        }
    }

    /// Without a budget: items with a weight go at the pace measured on the
    /// weighed items finished so far (seconds per second of weight); items
    /// without one (0) take as long as the average unweighed item finished,
    /// else the average item. A study mixes both: key issues with a fixed
    /// duration forecast themselves, the others (sized to the machine) do
    /// not, and one pace for all made a 20 s stream look like 2 s.
    fn left_by_weight(&self, current: f64) -> f64 {
        let n = self.took.len();
        let done = || self.weights.iter().zip(&self.took);
        let mean = |v: Vec<f64>| (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64);
        let (mut spent_w, mut w_done) = (0.0, 0.0);
        for (&w, &t) in done().filter(|(&w, _)| w > 0.0) {
            spent_w += t;
            w_done += w;
        }
        let per_item = mean(self.took.clone()).unwrap_or(0.0);
        let unweighed =
            mean(done().filter(|(&w, _)| w <= 0.0).map(|(_, &t)| t).collect()).unwrap_or(per_item);
        let pace = if w_done > 0.0 {
            Some(spent_w / w_done)
        } else {
            self.prior_pace
        };
        let est: f64 = self.weights[n..]
            .iter()
            .map(|&w| match pace {
                Some(p) if w > 0.0 => p * w,
                _ if w > 0.0 => per_item,
                _ => unweighed,
            })
            .sum();
        (est - current).max(0.0)
    }

    /// A run that keeps to `budget` follows the runner's rule: each item
    /// gets what is left of the budget over the items left, so an item that
    /// finishes early gives the later ones more, and one that overruns
    /// leaves them less. The items finished so far give the pace (seconds
    /// taken per second of share) and the least an item takes whatever its
    /// share (the quickest one: set-up and the minimum of trials); the items
    /// left are played forward with those, from when the current one began.
    fn left_of_budget(&self, budget: f64, elapsed: f64, current: f64) -> f64 {
        let total = self.weights.len();
        let n = self.took.len();
        let share = |at: f64, i: usize| (budget - at).max(0.0) / (total - i) as f64;
        let (mut at, mut took_sum, mut share_sum) = (0.0, 0.0, 0.0);
        for (i, &t) in self.took.iter().enumerate() {
            let s = share(at, i);
            if s > 0.0 {
                took_sum += t;
                share_sum += s;
            }
            at += t;
        }
        let quickest = self.took.iter().copied().fold(f64::INFINITY, f64::min);
        let pace = if share_sum > 0.0 {
            took_sum / share_sum
        } else {
            1.0
        };
        let item = |at: f64, i: usize| (pace * share(at, i)).max(quickest);
        // The current item: its expected length, or what it has taken.
        let begun = elapsed - current;
        let mut at = begun + item(begun, n).max(current);
        for i in n + 1..total {
            at += item(at, i);
        }
        // Never more than the budget left, unless even the quickest item
        // for every item left is more.
        let items_left = (total - n) as f64;
        let cap = (budget - elapsed).max(quickest * items_left - current);
        (at - elapsed).clamp(0.0, cap.max(0.0))
    }
}

/// "1m05s", "45s", "2h03m".
pub(crate) fn clock(seconds: f64) -> String {
    let s = seconds.max(0.0).round() as u64;
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
    }
}

impl Left {
    pub(crate) fn describe(self) -> String {
        match self {
            Left::Unknown => "time left unknown until a step ends".into(),
            Left::AtMost(s) => format!("at most {} left (budget)", clock(s)),
            Left::About(s) => format!("about {} left", clock(s)),
        }
    }
}

/// A progress display for `total` items of `what` ("points", "key issues").
pub(crate) struct Progress {
    /// Off a terminal, lines only without --quiet.
    quiet: bool,
    what: &'static str,
    bar: Option<ProgressBar>,
    est: Estimate,
    start: Instant,
    item_start: Instant,
    last_line: Instant,
    name: String,
    term: Terminal,
}

impl Progress {
    /// `weights`: each item's time budget in seconds (0: unknown);
    /// `budget`: the whole run's, when it keeps to one.
    pub(crate) fn new(
        out: &Out,
        what: &'static str,
        weights: Vec<f64>,
        budget: Option<f64>,
    ) -> Self {
        let total = weights.len();
        let bar = out.interactive.then(|| {
            let b = ProgressBar::new(total as u64);
            let style = ProgressStyle::with_template(&out.term.plain(&format!(
                "{{spinner}} [{{bar:{BAR}}}] {{pos}}/{{len}} {what} · {{msg}}"
            )))
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
            // The default spinner is Braille: a non-UTF-8 locale gets ASCII.
            b.set_style(if out.term.ascii() {
                style.tick_chars("|/-\\ ")
            } else {
                style
            });
            b.enable_steady_tick(Duration::from_millis(200));
            b
        });
        let now = Instant::now();
        Progress {
            quiet: out.quiet,
            what,
            bar,
            est: Estimate::new(weights, budget),
            start: now,
            item_start: now,
            last_line: now,
            name: String::new(),
            term: out.term,
        }
    }

    /// The weights are expected seconds (see `Estimate::expected`).
    pub(crate) fn expected(mut self) -> Self {
        self.est = self.est.expected();
        self
    }

    fn info(&self, msg: &str) {
        if !self.quiet {
            // A dumb terminal gets lines, not a bar: they fit its width too.
            let msg = self.term.plain(msg);
            if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
                eprintln!("{}", self.term.wrap_lines(&msg, 4));
            } else {
                eprintln!("{msg}");
            }
        }
    }

    /// The bar's message cut to what is left of the terminal's width: a
    /// bar line that wrapped scrolled a serial console on every redraw.
    fn set_message(&self, msg: String) {
        if let Some(b) = &self.bar {
            let total = self.est.total().to_string().len();
            let fixed = 2 + BAR + 3 + 2 * total + 1 + self.what.chars().count() + 3;
            let room = self.term.width().saturating_sub(fixed + 1);
            let msg = self.term.plain(&msg).into_owned();
            b.set_message(if msg.chars().count() > room {
                let cut: String = msg.chars().take(room.saturating_sub(3)).collect();
                format!("{}{}", cut.trim_end(), self.term.plain("…"))
            } else {
                msg
            });
        }
    }

    fn times(&self) -> String {
        let elapsed = self.start.elapsed().as_secs_f64();
        let left = self
            .est
            .left(elapsed, self.item_start.elapsed().as_secs_f64());
        format!("{} elapsed, {}", clock(elapsed), left.describe())
    }

    /// Item `name` starts.
    pub(crate) fn start(&mut self, name: &str) {
        self.name = name.to_string();
        self.item_start = Instant::now();
        let times = self.times();
        match &self.bar {
            // The times first: they are what a cut message must keep.
            Some(_) => self.set_message(format!("{times} · {name}")),
            None => {
                self.info(&format!(
                    "[{}/{}] {name} · {times}",
                    self.est.finished() + 1,
                    self.est.total()
                ));
                self.last_line = Instant::now();
            }
        }
    }

    /// Something happened inside the item (a trial): the bar's message
    /// follows; off a terminal a line when the last is old enough.
    pub(crate) fn tick(&mut self, detail: &str) {
        let times = self.times();
        match &self.bar {
            Some(_) => self.set_message(format!("{times} · {} · {detail}", self.name)),
            None if self.last_line.elapsed() >= LINE_EVERY => {
                self.info(&format!("    {} · {detail} · {times}", self.name));
                self.last_line = Instant::now();
            }
            None => {}
        }
    }

    /// The current item finished.
    pub(crate) fn done(&mut self) {
        self.est.done(self.item_start.elapsed().as_secs_f64());
        if let Some(b) = &self.bar {
            b.inc(1);
        }
    }

    /// All done (or stopped): clear the bar; off a terminal one closing line.
    pub(crate) fn finish(self) {
        match self.bar {
            Some(b) => b.finish_and_clear(),
            None => self.info(&format!(
                "{} of {} {} done in {}",
                self.est.finished(),
                self.est.total(),
                self.what,
                clock(self.start.elapsed().as_secs_f64())
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_until_the_first_item_ends() {
        let e = Estimate::new(vec![10.0, 10.0, 10.0], None);
        assert_eq!(e.left(5.0, 5.0), Left::Unknown);
        let e = Estimate::new(vec![10.0, 10.0, 10.0], Some(30.0));
        assert_eq!(e.left(5.0, 5.0), Left::AtMost(25.0));
        assert_eq!(
            e.left(31.0, 31.0),
            Left::Unknown,
            "past the budget: no bound"
        );
        assert!(Left::Unknown.describe().contains("unknown"));
    }

    #[test]
    fn the_measured_pace_scales_the_budgets_left() {
        // Items budgeted 10, 20, 30 s; the first took 5 s: half pace.
        let mut e = Estimate::new(vec![10.0, 20.0, 30.0], None);
        e.done(5.0);
        assert_eq!(e.left(5.0, 0.0), Left::About(25.0));
        // 4 s into the second: 21 s left.
        assert_eq!(e.left(9.0, 4.0), Left::About(21.0));
        e.done(10.0);
        assert_eq!(e.left(15.0, 0.0), Left::About(15.0));
        e.done(15.0);
        assert_eq!(e.left(30.0, 0.0), Left::About(0.0));
    }

    #[test]
    fn never_more_than_the_budget_left() {
        // 40 s for 4 items: 2 s (of a 10 s share), then 30 s (of 12.7 s).
        let mut e = Estimate::new(vec![1.0; 4], Some(40.0));
        e.done(2.0);
        e.done(30.0);
        // Played forward at that pace the last two take 9 s; 8 s are left.
        assert_eq!(e.left(32.0, 0.0), Left::About(8.0));
        // The first item took 50 s of a 20 s share: past the budget, the
        // items left still take at least the quickest item's time each.
        let mut e = Estimate::new(vec![1.0, 1.0, 1.0], Some(60.0));
        e.done(50.0);
        assert_eq!(e.left(70.0, 5.0), Left::About(95.0));
    }

    #[test]
    fn a_run_that_keeps_to_its_budget_is_played_forward_share_by_share() {
        // The runner gives each item what is left over the items left; items
        // that take 60% of their share leave more to the later ones, which
        // then take longer: the estimate follows, item by item.
        let (budget, total, pace) = (90.0, 9, 0.6);
        let mut took = Vec::new();
        let mut at = 0.0;
        for i in 0..total {
            let t = pace * (budget - at) / (total - i) as f64;
            took.push(t);
            at += t;
        }
        let mut e = Estimate::new(vec![budget / total as f64; total], Some(budget));
        let mut elapsed = 0.0;
        for (i, t) in took.iter().enumerate() {
            e.done(*t);
            elapsed += t;
            let real: f64 = took[i + 1..].iter().sum();
            match e.left(elapsed, 0.0) {
                Left::About(s) => assert!((s - real).abs() < 1e-6, "item {i}: {s} vs {real}"),
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn items_without_budgets_use_the_average_item() {
        let mut e = Estimate::new(vec![0.0; 4], None);
        e.done(6.0);
        e.done(4.0);
        assert_eq!(e.left(10.0, 1.0), Left::About(9.0));
    }

    #[test]
    fn timed_items_forecast_themselves_and_the_others_take_the_average() {
        // A study: 2 s (unweighed), then a 20 s and a 10 s timed issue, then
        // two unweighed ones. After the first: 20 + 10 + 2 + 2 = 34 s left.
        let mut e = Estimate::new(vec![0.0, 20.0, 10.0, 0.0, 0.0], None).expected();
        e.done(2.0);
        assert_eq!(e.left(2.0, 0.0), Left::About(34.0));
        // The 20 s issue took 22 s: the 10 s one is forecast at 11 s.
        e.done(22.0);
        assert_eq!(e.left(24.0, 0.0), Left::About(11.0 + 2.0 + 2.0));
        // Budgets (no .expected()) are not forecasts: before a weighed
        // item finishes, one takes the average item's time.
        let mut b = Estimate::new(vec![0.0, 600.0, 600.0], None);
        b.done(4.0);
        assert_eq!(b.left(4.0, 0.0), Left::About(8.0));
    }

    #[test]
    fn clock_format() {
        assert_eq!(clock(0.2), "0s");
        assert_eq!(clock(65.0), "1m05s");
        assert_eq!(clock(7380.0), "2h03m");
    }
}
