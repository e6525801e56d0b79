//! `test.scripted`: returns the trial values it is given, in order, like
//! hyperfine's MockExecutor, so a CLI test of a comparison, a verdict or an
//! exit code does not depend on a real timing gap on a noisy machine. It is
//! also the worked example of docs/writing-an-experiment.md (the block
//! between the `doc:` markers is copied there; `tests/spec_docs.rs` keeps
//! the two equal).

use crate::engine::{Ctx, Point, PointRun, TrialValues};
use crate::{Error, Result};

// doc:begin
use crate::engine::{
    Experiment, Metric, MetricSpec, Needs, ParamKind, ParamSpec, RunDefaults, Spec,
};

/// What `test.scripted` is: plain data, read by the registry, `list`,
/// `run --help`, parameter parsing and the kinds stored with a result.
pub(crate) static SPEC: Spec = Spec {
    name: "test.scripted",
    summary: "returns the trial values it is given (a test fixture)",
    method: "Trial n returns the n-th of `values` (warm-up trials included), starting again \
             from the first when the list runs out; trial `fail` (1 = the first) fails with a \
             measurement error instead. Nothing is measured: it exists so tests of \
             comparisons, verdicts and exit codes are deterministic.",
    params: &[
        ParamSpec::new(
            "values",
            ParamKind::Text,
            "1",
            "the values of the trials, in order, separated by ':' (a comma still sweeps)",
        ),
        ParamSpec::new("fail", ParamKind::Count, "0", "trial that fails (0: none)").range(0.0, 1e6),
    ],
    metrics: &[MetricSpec::lower(
        "value",
        "s",
        "the scripted value of the trial",
    )],
    needs: Needs::NOTHING,
    defaults: RunDefaults::new(0, 5, 5, 10.0),
    hidden: true,
};

/// The metric a trial emits: a name missing from `SPEC.metrics` fails the build.
const VALUE: Metric = SPEC.emits("value");

/// A point's parameters, read by name once, here.
struct Params {
    values: Vec<f64>,
    fail: u64,
}

impl Params {
    fn parse(p: &Point) -> Result<Params> {
        Ok(Params {
            values: values(p.text("values")?)?,
            fail: p.u64("fail")?,
        })
    }
}

pub(crate) struct Scripted;

impl Experiment for Scripted {
    fn spec(&self) -> &'static Spec {
        &SPEC
    }
    /// A bad list is a usage error before anything runs.
    fn validate(&self, p: &Point) -> Result<()> {
        Params::parse(p).map(|_| ())
    }
    fn prepare(&self, _ctx: &Ctx, p: &Point) -> Result<Box<dyn PointRun>> {
        let Params { values, fail } = Params::parse(p)?;
        Ok(Box::new(Script {
            values,
            fail,
            done: 0,
        }))
    }
}
// doc:end

fn values(raw: &str) -> Result<Vec<f64>> {
    raw.split(':')
        .map(|v| {
            v.trim()
                .parse::<f64>()
                .ok()
                .filter(|x| x.is_finite() && *x >= 0.0)
                .ok_or_else(|| {
                    Error::usage(format!(
                        "parameter values: '{v}' in '{raw}' is not a number >= 0 \
                         (expected values like 1:2.5:3)"
                    ))
                })
        })
        .collect()
}

/// One point's script: the values and how many trials ran.
struct Script {
    values: Vec<f64>,
    fail: u64,
    done: u64,
}

impl PointRun for Script {
    fn trial(&mut self, _ctx: &Ctx) -> Result<TrialValues> {
        self.done += 1;
        if self.done == self.fail {
            return Err(Error::measurement(format!(
                "test.scripted: trial {} fails as scripted (fail={})",
                self.done, self.fail
            )));
        }
        let v = self.values[(self.done as usize - 1) % self.values.len()];
        Ok(TrialValues::new().with(VALUE, v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::params::expand_points;

    #[test]
    fn trials_return_the_script_in_order_then_cycle() {
        let o = [("values".to_string(), "3:1.5".to_string())];
        let p = &expand_points(SPEC.params, &o).unwrap()[0];
        let ctx = Ctx::new(None, crate::safety::scratch::target_or_temp(None), None);
        let mut run = Scripted.prepare(&ctx, p).unwrap();
        let got: Vec<f64> = (0..3).map(|_| run.trial(&ctx).unwrap().0[0].1).collect();
        assert_eq!(got, [3.0, 1.5, 3.0]);
    }

    #[test]
    fn a_bad_value_is_a_usage_error_and_fail_fails() {
        let o = [("values".to_string(), "1:x".to_string())];
        let p = &expand_points(SPEC.params, &o).unwrap()[0];
        assert_eq!(Scripted.validate(p).unwrap_err().exit_code(), 2);
        let o = [("fail".to_string(), "2".to_string())];
        let p = &expand_points(SPEC.params, &o).unwrap()[0];
        let ctx = Ctx::new(None, crate::safety::scratch::target_or_temp(None), None);
        let mut run = Scripted.prepare(&ctx, p).unwrap();
        assert!(run.trial(&ctx).is_ok());
        assert_eq!(run.trial(&ctx).unwrap_err().exit_code(), 1);
    }
}
