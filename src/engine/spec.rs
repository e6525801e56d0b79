//! What an experiment is, declared as data: its name, texts, parameters,
//! metrics, needs and run defaults, in one `static` per experiment. The
//! registry, `tunelab list`, `run <exp> --help`, parameter parsing, the kinds
//! stored with a result and the docs all read this one declaration; the
//! `Experiment` trait keeps only what the experiment does.

use super::params::ParamSpec;
use crate::model::Better;

/// The declaration of one experiment.
#[derive(Debug)]
pub struct Spec {
    /// `family.name`, e.g. `io.record-size`.
    pub name: &'static str,
    /// One line for `tunelab list`.
    pub summary: &'static str,
    /// What exactly is measured and how (units, timing, cache handling).
    pub method: &'static str,
    /// In the order `--help` shows them; the first varies slowest in a sweep.
    pub params: &'static [ParamSpec],
    pub metrics: &'static [MetricSpec],
    pub needs: Needs,
    pub defaults: RunDefaults,
    /// Not shown by `list` or completions (test fixtures such as
    /// `test.scripted`); `run` still finds it by name.
    pub hidden: bool,
}

impl Spec {
    /// The declaration of the parameter `name`.
    pub(crate) fn param(&self, name: &str) -> Option<&'static ParamSpec> {
        self.params.iter().find(|p| p.name == name)
    }

    /// The handle a trial emits `name` with. Call it only in a `const`
    /// item (`const READ: Metric = SPEC.emits("read");`): the compiler
    /// then evaluates it, and a name not in `metrics` fails the build.
    pub const fn emits(&self, name: &str) -> Metric {
        metric_in(self.metrics, name)
    }
}

/// A metric a trial may emit, made only by `Spec::emits` or `metric_in`
/// from a declared list, so the values a trial returns name only declared
/// metrics (`TrialValues::set` takes no string).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Metric(&'static str);

impl Metric {
    pub(crate) const fn name(self) -> &'static str {
        self.0
    }
}

/// The handle of the metric `name` of `list` (a list several experiments
/// share); as `Spec::emits`, for `const` items only: an undeclared name
/// stops the build.
pub const fn metric_in(list: &[MetricSpec], name: &str) -> Metric {
    let mut i = 0;
    while i < list.len() {
        if same(list[i].name, name) {
            return Metric(list[i].name);
        }
        i += 1;
    }
    panic!("metric not declared in the Spec's metrics")
}

/// `a == b`, usable in a `const fn`.
const fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// Declaration of one metric an experiment produces.
#[derive(Debug, Clone)]
pub struct MetricSpec {
    pub(crate) name: &'static str,
    /// Base unit: `B/s`, `s`, `ops/s`, `B`, `count`, `ratio`.
    pub(crate) unit: &'static str,
    pub(crate) better: Better,
    pub(crate) help: &'static str,
}

impl MetricSpec {
    pub(crate) const fn higher(name: &'static str, unit: &'static str, help: &'static str) -> Self {
        MetricSpec {
            name,
            unit,
            better: Better::Higher,
            help,
        }
    }
    pub const fn lower(name: &'static str, unit: &'static str, help: &'static str) -> Self {
        MetricSpec {
            name,
            unit,
            better: Better::Lower,
            help,
        }
    }
}

/// What an experiment needs before it may run; checked before anything runs.
#[derive(Debug, Clone, Copy, Default)]
pub struct Needs {
    pub(crate) root: bool,
    pub(crate) scratch: bool,
}

impl Needs {
    /// Nothing beyond an ordinary user.
    pub const NOTHING: Needs = Needs {
        root: false,
        scratch: false,
    };
    /// A private scratch directory under --target (most storage experiments).
    pub(crate) const SCRATCH: Needs = Needs {
        root: false,
        scratch: true,
    };
}

/// Repetition defaults an experiment may tune (a 3-second hdparm-style read
/// wants fewer trials than a 1 ms syscall loop). CLI flags override them.
#[derive(Debug, Clone, Copy)]
pub struct RunDefaults {
    pub(crate) warmup: usize,
    pub(crate) min_trials: usize,
    pub(crate) max_trials: usize,
    /// Seconds for the whole run, shared among its points.
    pub(crate) budget: f64,
}

impl RunDefaults {
    /// One warm-up, 5 to 30 trials, a minute for the run.
    pub const STANDARD: RunDefaults = RunDefaults {
        warmup: 1,
        min_trials: 5,
        max_trials: 30,
        budget: 60.0,
    };

    /// One trial that is a whole recording (a stream or a burst of many
    /// frames, each with its own latency): no warm-up, up to 10 minutes.
    pub(crate) const ONE_RECORDING: RunDefaults = RunDefaults {
        warmup: 0,
        min_trials: 1,
        max_trials: 1,
        budget: 600.0,
    };

    /// `warmup` warm-up trials, `min..=max` measured ones, `budget` seconds.
    pub(crate) const fn new(
        warmup: usize,
        min_trials: usize,
        max_trials: usize,
        budget: f64,
    ) -> Self {
        RunDefaults {
            warmup,
            min_trials,
            max_trials,
            budget,
        }
    }
}

impl Default for RunDefaults {
    fn default() -> Self {
        RunDefaults::STANDARD
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static TWO: [MetricSpec; 2] = [
        MetricSpec::higher("read", "B/s", "r"),
        MetricSpec::lower("lat", "s", "l"),
    ];

    // Evaluated by the compiler: a name not in TWO would fail the build.
    const LAT: Metric = metric_in(&TWO, "lat");

    #[test]
    fn a_handle_names_its_declared_metric() {
        assert_eq!(LAT.name(), "lat");
        assert_eq!(metric_in(&TWO, "read").name(), "read");
        assert!(!same("read", "rea") && !same("lat", "Lat") && same("", ""));
    }

    /// What the compiler reports for `const X: Metric = SPEC.emits("nope")`
    /// (here at run time, where it can be caught).
    #[test]
    #[should_panic(expected = "metric not declared")]
    fn an_undeclared_name_is_refused() {
        let _ = metric_in(&TWO, "write");
    }
}
