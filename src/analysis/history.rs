//! `tunelab history`: stored medians of one experiment (or every experiment
//! of a study profile) over time, change points found by E-divisive means,
//! and what changed in the environment at each of them.
//!
//! A series is one (experiment, parameters, metric) across runs, oldest
//! first. Each change point reports the medians of the segments on both
//! sides (the median of the runs' medians: one odd run does not move it),
//! their ratio, the permutation p-value, and the environment facts that
//! differ between the last run before and the first run after the change.
//!
//! `report::history` renders the result.

use serde::Serialize;

use super::compare::{env_diff, EnvDiff};
use crate::model::run::Run;
use crate::model::Better;
use crate::stats::changepoint::{e_divisive, Options};
use crate::stats::summary::median;

/// Which runs and series to look at.
#[derive(Debug, Clone, Default)]
pub(crate) struct Query {
    /// An experiment name (`io.record-size`) or a study profile (`quick`).
    pub(crate) subject: String,
    pub(crate) metric: Option<String>,
    /// Only runs of this machine (`fleet.host`, else `host.name`).
    pub(crate) machine: Option<String>,
    /// Fewest runs on each side of a change point.
    pub(crate) min_segment: usize,
}

/// One stored median.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Entry {
    pub(crate) run: String,
    pub(crate) started: String,
    pub(crate) machine: String,
    pub(crate) median: f64,
    pub(crate) ci95_low: f64,
    pub(crate) ci95_high: f64,
    /// The validity guard flagged trials of this run's point, in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) suspect: Option<String>,
}

/// A change between `entries[index - 1]` and `entries[index]`.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Change {
    pub(crate) index: usize,
    /// The first run of the new segment.
    pub(crate) run: String,
    pub(crate) before: f64,
    pub(crate) after: f64,
    /// after / before.
    pub(crate) ratio: f64,
    pub(crate) p_value: f64,
    /// Worse by the metric's direction.
    pub(crate) regression: bool,
    pub(crate) environment_diff: Vec<EnvDiff>,
    /// Runs on either side of the change whose trials the validity guard
    /// flagged: the change may be theirs, not the system's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) suspect_runs: Vec<String>,
}

impl Change {
    pub(crate) fn suspect(&self) -> bool {
        !self.suspect_runs.is_empty()
    }
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct Series {
    pub(crate) experiment: String,
    pub(crate) params: String,
    pub(crate) metric: String,
    pub(crate) unit: String,
    pub(crate) better: Better,
    pub(crate) entries: Vec<Entry>,
    pub(crate) changes: Vec<Change>,
    /// The newest run belongs to a segment worse than the one before it.
    pub(crate) newest_regressed: bool,
}

impl Series {
    /// The change that makes the newest run regressed rests on suspect runs.
    pub(crate) fn regression_suspect(&self) -> bool {
        self.newest_regressed && self.changes.last().is_some_and(Change::suspect)
    }
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct History {
    pub(crate) schema: &'static str,
    pub(crate) subject: String,
    pub(crate) method: String,
    pub(crate) runs: usize,
    pub(crate) series: Vec<Series>,
}

impl History {
    pub(crate) fn regressions(&self) -> Vec<&Series> {
        self.series.iter().filter(|s| s.newest_regressed).collect()
    }

    /// The runs a change point needs with segments of at least
    /// `min_segment` runs (the detector's floor is 2), and whether any
    /// series has that many: with none, no regression can be found at all.
    pub(crate) fn can_detect(&self, min_segment: usize) -> (usize, bool) {
        let needed = 2 * min_segment.max(2);
        let judged = self.series.iter().any(|s| s.entries.len() >= needed);
        (needed, judged)
    }
}

/// The inventory name of a `remote` run, else its host name (as devices).
fn machine_of(run: &Run) -> String {
    super::machine::machine_of(run)
        .cloned()
        .unwrap_or_else(|| "?".into())
}

/// Whether a run speaks about the subject: it measured the experiment, or it
/// is a study of that profile.
fn relevant(run: &Run, q: &Query) -> bool {
    let about = run.results.iter().any(|r| r.experiment == q.subject)
        || run.study.as_ref().is_some_and(|s| s.profile == q.subject);
    let machine = q.machine.as_ref().is_none_or(|m| &machine_of(run) == m);
    about && machine
}

/// Build the history from runs in any order (they are sorted oldest first).
pub(crate) fn history(runs: &[Run], q: &Query) -> History {
    let mut chosen: Vec<&Run> = runs.iter().filter(|r| relevant(r, q)).collect();
    chosen.sort_by(|a, b| a.started.cmp(&b.started));
    let study = chosen
        .iter()
        .any(|r| r.study.as_ref().is_some_and(|s| s.profile == q.subject));
    let mut series: Vec<(Series, Vec<usize>)> = Vec::new();
    for (ri, run) in chosen.iter().enumerate() {
        for r in &run.results {
            if !study && r.experiment != q.subject {
                continue;
            }
            let params = r.params_label();
            for m in &r.metrics {
                if q.metric.as_ref().is_some_and(|want| want != &m.name) || m.samples.is_empty() {
                    continue;
                }
                let entry = Entry {
                    run: run.id.clone(),
                    started: run.started.clone(),
                    machine: machine_of(run),
                    median: m.summary.median,
                    ci95_low: m.summary.ci95_low,
                    ci95_high: m.summary.ci95_high,
                    suspect: r.suspect_summary(),
                };
                let at = series.iter().position(|(s, _)| {
                    s.experiment == r.experiment && s.params == params && s.metric == m.name
                });
                match at {
                    Some(i) => {
                        // One entry per run: a run that measured the same
                        // point twice contributes its first measurement.
                        if series[i].1.last() != Some(&ri) {
                            series[i].0.entries.push(entry);
                            series[i].1.push(ri);
                        }
                    }
                    None => series.push((
                        Series {
                            experiment: r.experiment.clone(),
                            params: params.clone(),
                            metric: m.name.clone(),
                            unit: m.unit.clone(),
                            better: m.better,
                            entries: vec![entry],
                            changes: Vec::new(),
                            newest_regressed: false,
                        },
                        vec![ri],
                    )),
                }
            }
        }
    }
    let opt = Options {
        min_size: q.min_segment.max(2),
        ..Options::default()
    };
    let series = series
        .into_iter()
        .map(|(mut s, run_idx)| {
            let xs: Vec<f64> = s.entries.iter().map(|e| e.median).collect();
            let cps = e_divisive(&xs, &opt);
            let mut bounds: Vec<usize> = vec![0];
            bounds.extend(cps.iter().map(|c| c.index));
            bounds.push(xs.len());
            for (k, cp) in cps.iter().enumerate() {
                let before = median(&xs[bounds[k]..bounds[k + 1]]);
                let after = median(&xs[bounds[k + 1]..bounds[k + 2]]);
                // The runs nearest the change decide where it falls.
                let suspect_runs = s.entries[cp.index - 1..=cp.index]
                    .iter()
                    .filter(|e| e.suspect.is_some())
                    .map(|e| e.run.clone())
                    .collect();
                let worse = match s.better {
                    Better::Higher => after < before,
                    Better::Lower => after > before,
                };
                s.changes.push(Change {
                    index: cp.index,
                    run: s.entries[cp.index].run.clone(),
                    before,
                    after,
                    ratio: after / before,
                    p_value: cp.p_value,
                    regression: worse,
                    environment_diff: env_diff(
                        chosen[run_idx[cp.index - 1]],
                        chosen[run_idx[cp.index]],
                    ),
                    suspect_runs,
                });
            }
            // Only a series the newest run is part of can gate a pipeline.
            let newest_in = run_idx.last() == Some(&(chosen.len() - 1));
            s.newest_regressed = newest_in && s.changes.last().is_some_and(|c| c.regression);
            s
        })
        .collect();
    History {
        schema: "tunelab.history/1",
        subject: q.subject.clone(),
        method: format!(
            "E-divisive means (Matteson & James 2014), permutation test: {} permutations, \
             alpha {}, at least {} runs per segment",
            opt.permutations, opt.alpha, opt.min_size
        ),
        runs: chosen.len(),
        series,
    }
}

/// Stored runs of one board for the tests here and of the renderers.
#[cfg(test)]
pub(crate) mod testing {
    use super::*;

    pub(crate) fn run(i: usize, value: f64, kernel: &str) -> Run {
        super::super::testing::run(
            format!("r{i:03}"),
            format!("2026-11-{:02}T{:02}:00:00Z", 1 + i / 24, i % 24),
            &[("host.name", "board1"), ("kernel.release", kernel)],
            vec![value * 0.99, value, value * 1.01],
        )
    }

    pub(crate) fn wobble(i: usize) -> f64 {
        1.0 + 0.01 * ((i as f64) * 2.3).sin()
    }

    /// 12 runs at 100 MB/s on kernel 6.1, then 8 at 80 MB/s on 6.6.
    pub(crate) fn step_down() -> History {
        let mut runs: Vec<Run> = (0..12).map(|i| run(i, 100e6 * wobble(i), "6.1")).collect();
        runs.extend((12..20).map(|i| run(i, 80e6 * wobble(i), "6.6")));
        history(
            &runs,
            &Query {
                subject: "io.fake".into(),
                min_segment: 3,
                ..Default::default()
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::testing::{run, step_down, wobble};
    use super::*;

    #[test]
    fn a_step_down_is_a_regression_with_its_environment_change() {
        let h = step_down();
        assert_eq!(h.series.len(), 1);
        let s = &h.series[0];
        assert_eq!(s.changes.len(), 1, "{:?}", s.changes);
        let c = &s.changes[0];
        assert_eq!(c.index, 12);
        assert!(c.regression && (c.ratio - 0.8).abs() < 0.02, "{c:?}");
        assert!(c.environment_diff.iter().any(|d| d.key == "kernel.release"));
        assert!(s.newest_regressed);
        assert_eq!(h.regressions().len(), 1);
    }

    #[test]
    fn a_change_next_to_flagged_runs_is_suspect() {
        use crate::model::run::{Flag, TrialCheck, Validity};
        let mut runs: Vec<Run> = (0..12).map(|i| run(i, 100e6 * wobble(i), "6.1")).collect();
        runs.extend((12..20).map(|i| run(i, 80e6 * wobble(i), "6.6")));
        let load = TrialCheck {
            flags: vec![Flag {
                kind: "load".into(),
                detail: "other processes used 90% of a CPU".into(),
            }],
            ..Default::default()
        };
        runs[12].results[0].validity = Validity {
            trials: vec![load; 3],
            ..Default::default()
        };
        let q = Query {
            subject: "io.fake".into(),
            min_segment: 3,
            ..Default::default()
        };
        let h = history(&runs, &q);
        let s = &h.series[0];
        assert_eq!(s.changes[0].suspect_runs, vec!["r012".to_string()]);
        assert!(s.newest_regressed && s.regression_suspect());
        assert!(s.entries[12].suspect.is_some() && s.entries[11].suspect.is_none());
        // Flagged runs away from the change leave it trusted.
        runs[12].results[0].validity = Validity::default();
        runs[3].results[0].validity = Validity {
            trials: vec![TrialCheck::default(); 3],
            ..Default::default()
        };
        assert!(!history(&runs, &q).series[0].regression_suspect());
    }

    #[test]
    fn noise_alone_has_no_change_and_no_regression() {
        let runs: Vec<Run> = (0..25)
            .map(|i| run(i, 100e6 * wobble(i * 7), "6.1"))
            .collect();
        let h = history(
            &runs,
            &Query {
                subject: "io.fake".into(),
                min_segment: 3,
                ..Default::default()
            },
        );
        assert!(h.series[0].changes.is_empty());
        assert!(h.regressions().is_empty());
    }

    #[test]
    fn other_machines_and_experiments_are_left_out() {
        let mut runs: Vec<Run> = (0..6).map(|i| run(i, 1.0, "6.1")).collect();
        runs[2]
            .environment
            .insert("host.name".into(), "board2".into());
        runs[3].results[0].experiment = "io.other".into();
        // A remote run of board2 from a clone that calls itself board1.
        runs[4]
            .environment
            .insert("fleet.host".into(), "board2".into());
        let h = history(
            &runs,
            &Query {
                subject: "io.fake".into(),
                machine: Some("board1".into()),
                ..Default::default()
            },
        );
        assert_eq!(h.runs, 3);
        assert_eq!(h.series[0].entries.len(), 3);
    }
}
