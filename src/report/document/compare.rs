//! The comparison section of a report: ratios run/base per metric, with a
//! forest plot of the ratios and their confidence intervals.

use super::{figure, Block, Cell, Section, Table};
use crate::analysis::compare::RunComparison;
use crate::report::charts::{Chart, ForestPlot, ForestRow};
use crate::stats::Verdict;
use crate::units::{human, sig};

fn verdict_class(v: Verdict) -> Option<&'static str> {
    match v {
        Verdict::Improved => Some("pass"),
        Verdict::Regressed => Some("fail"),
        Verdict::Inconclusive => Some("warn"),
        Verdict::NoChange => None,
    }
}

/// `key=value` words of a params label ("chunk=64 KiB open=once" → two).
fn param_words(label: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for w in label.split_whitespace() {
        match out.last_mut() {
            Some(last) if !w.contains('=') => {
                last.push(' ');
                last.push_str(w);
            }
            _ => out.push(w.to_string()),
        }
    }
    out
}

/// The parameters of `params` that are not the same for every pair of
/// `experiment`: what tells the rows of a forest plot apart.
fn distinct_params(c: &RunComparison, experiment: &str, params: &str) -> String {
    let all: Vec<Vec<String>> = c
        .pairs
        .iter()
        .filter(|p| p.experiment == experiment)
        .map(|p| param_words(&p.new_params))
        .collect();
    param_words(params)
        .into_iter()
        .filter(|w| all.len() < 2 || !all.iter().all(|ws| ws.contains(w)))
        .collect::<Vec<_>>()
        .join(" ")
}

pub(super) fn comparison_section(c: &RunComparison) -> Section {
    let mut blocks = vec![Block::Text(format!(
        "new = {} (this run), base = {}; noise threshold ±{}%. Method: {}.",
        c.new,
        c.base,
        sig(c.noise * 100.0),
        c.method
    ))];
    let mut rows = Vec::new();
    let mut t = Table::new(&[
        "result", "metric", "better", "base", "new", "new/base", "95% CI", "verdict", "rests on",
    ]);
    for p in &c.pairs {
        let distinct = distinct_params(c, &p.experiment, &p.new_params);
        let params = p.params();
        for m in &p.metrics {
            let x = m.comparison();
            rows.push(ForestRow {
                label: if distinct.is_empty() {
                    format!("{} · {}", p.experiment, m.name)
                } else {
                    format!("{} {distinct} · {}", p.experiment, m.name)
                },
                ratio: x.ratio,
                low: x.ci95_low,
                high: x.ci95_high,
                verdict: x.verdict,
                better: Some(m.better),
            });
            t.rows.push(vec![
                format!("{} {params}", p.experiment).into(),
                m.name.as_str().into(),
                match m.better {
                    crate::model::Better::Higher => "higher",
                    crate::model::Better::Lower => "lower",
                }
                .into(),
                human(m.base_median, &m.unit).into(),
                human(m.new_median, &m.unit).into(),
                format!("{}×", sig(x.ratio)).into(),
                format!("{}× … {}×", sig(x.ci95_low), sig(x.ci95_high)).into(),
                Cell {
                    text: m.verdict_label(),
                    class: if m.suspect {
                        Some("warn")
                    } else {
                        verdict_class(x.verdict)
                    },
                },
                m.calibrated.basis.as_str().into(),
            ]);
        }
    }
    blocks.push(Block::Heading("Ratios".into()));
    if rows.is_empty() {
        blocks.push(Block::Text(
            "The two runs have no experiment in common: nothing was compared.".into(),
        ));
    } else {
        blocks.push(figure(Chart::Forest(ForestPlot {
            title: "new / base: ratio of medians with 95% CI".into(),
            rows,
            noise: c.noise,
        })));
        blocks.push(Block::Text(
            "Solid line: no change (1×); dashed lines: the noise threshold. \
             Green improved, red regressed, grey no change, amber inconclusive; \
             which way is better is on the axis or on each row."
                .into(),
        ));
        blocks.push(Block::Heading("Verdicts".into()));
        blocks.push(Block::Table(t));
        blocks.push(Block::Text(format!("{} regression(s).", c.regressions)));
        let suspect: Vec<String> = c
            .pairs
            .iter()
            .filter(|p| !p.suspect.is_empty())
            .map(|p| {
                format!(
                    "Suspect: {} {}: {}",
                    p.experiment,
                    p.params(),
                    p.suspect.join("; ")
                )
            })
            .collect();
        if c.suspect_regressions > 0 {
            blocks.push(Block::Text(format!(
                "{} more regression(s) rest on trials the validity guard flagged (suspect).",
                c.suspect_regressions
            )));
        }
        if !suspect.is_empty() {
            blocks.push(Block::Notes(suspect));
        }
    }
    blocks.push(Block::Heading("Environment differences".into()));
    if c.environment_diff.is_empty() {
        blocks.push(Block::Text("The environments are identical.".into()));
    } else {
        blocks.push(Block::Text(
            "Check these before trusting the numbers.".into(),
        ));
        let mut t = Table::new(&["fact", "base", "new"]);
        for d in &c.environment_diff {
            t.rows.push(vec![
                d.key.as_str().into(),
                d.base.clone().unwrap_or_else(|| "–".into()).into(),
                d.new.clone().unwrap_or_else(|| "–".into()).into(),
            ]);
        }
        blocks.push(Block::Table(t));
    }
    if !c.unpaired.is_empty() {
        blocks.push(Block::Notes(c.unpaired.clone()));
    }
    Section {
        id: "comparison".into(),
        title: "Comparison".into(),
        blocks,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn param_words_keep_units() {
        assert_eq!(
            param_words("chunk=64 KiB open=once size=2 MiB"),
            vec!["chunk=64 KiB", "open=once", "size=2 MiB"]
        );
    }
}
