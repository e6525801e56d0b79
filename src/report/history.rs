//! A history (`analysis::history`) as terminal text and as a report
//! document: per series the stored medians with their CIs, the change
//! points marked, and what changed in the environment at each.

use super::table::Terminal;
use crate::analysis::history::History;
use crate::units::{human, human_range, sig};

pub(crate) fn render(h: &History, term: Terminal) -> String {
    let mut s = format!(
        "history of {} over {} run(s)\nmethod: {}\n",
        h.subject, h.runs, h.method
    );
    for se in &h.series {
        s.push_str(&format!(
            "\n{} {} {} ({} runs)\n",
            se.experiment,
            se.params,
            se.metric,
            se.entries.len()
        ));
        let rows = se
            .entries
            .iter()
            .enumerate()
            .map(|(i, e)| {
                let mark = se
                    .changes
                    .iter()
                    .find(|c| c.index == i)
                    .map(|c| {
                        format!(
                            "{} {}× (p={})",
                            match (c.regression, c.suspect()) {
                                (true, false) => "▼ regression",
                                (true, true) => "▼ regression (suspect)",
                                (false, false) => "▲ change",
                                (false, true) => "▲ change (suspect)",
                            },
                            sig(c.ratio),
                            sig(c.p_value)
                        )
                    })
                    .unwrap_or_default();
                vec![
                    e.started.clone(),
                    e.run.clone(),
                    e.machine.clone(),
                    human(e.median, &se.unit),
                    human_range(e.ci95_low, e.ci95_high, &se.unit),
                    mark,
                ]
            })
            .collect();
        s.push_str(&term.render(
            &["started", "run", "machine", "median", "95% CI", "change"],
            rows,
        ));
        for c in &se.changes {
            s.push_str(&format!(
                "change at run {}: {} → {} ({}×, p={}){}\n",
                c.run,
                human(c.before, &se.unit),
                human(c.after, &se.unit),
                sig(c.ratio),
                sig(c.p_value),
                if c.regression { ", a regression" } else { "" }
            ));
            if c.suspect() {
                s.push_str(&format!(
                    "  suspect: the validity guard flagged trials of {}\n",
                    c.suspect_runs.join(", ")
                ));
            }
            if c.environment_diff.is_empty() {
                s.push_str("  environment: identical on both sides\n");
            }
            for d in &c.environment_diff {
                s.push_str(&format!(
                    "  {}: {} → {}\n",
                    d.key,
                    d.base.as_deref().unwrap_or("–"),
                    d.new.as_deref().unwrap_or("–")
                ));
            }
        }
    }
    if h.series.is_empty() {
        s.push_str("\nno stored run measured it (yet)\n");
    }
    s
}

/// The history as a report document: per series a trend chart (medians with
/// their CIs over the runs, change points as vertical lines) and its table.
pub(crate) fn document(h: &History) -> super::document::Document {
    use super::charts::{Axis, Chart, Line, LineChart};
    use super::document::{Block, Cell, Document, Figure, Section, Table};
    let sections = h
        .series
        .iter()
        .enumerate()
        .map(|(i, se)| {
            let chart = Chart::Line(LineChart {
                title: format!("{} {} {}", se.experiment, se.params, se.metric),
                x: Axis::new("run (oldest first)", "count"),
                y: Axis::new(se.metric.clone(), se.unit.clone()),
                lines: vec![Line {
                    name: se.metric.clone(),
                    points: se
                        .entries
                        .iter()
                        .enumerate()
                        .map(|(k, e)| ((k + 1) as f64, e.median))
                        .collect(),
                    ci: se
                        .entries
                        .iter()
                        .map(|e| (e.ci95_low, e.ci95_high))
                        .collect(),
                    dashed: false,
                }],
                // Between the last run before and the first run after.
                vlines: se
                    .changes
                    .iter()
                    .map(|c| {
                        let what = if c.regression { "regression" } else { "change" };
                        (c.index as f64 + 0.5, format!("{what} {}×", sig(c.ratio)))
                    })
                    .collect(),
                hlines: Vec::new(),
            });
            let mut blocks = vec![Block::Figure(Figure {
                title: chart.title().to_string(),
                svg: chart.render(),
            })];
            let rows = se
                .entries
                .iter()
                .enumerate()
                .map(|(k, e)| {
                    let change = se.changes.iter().find(|c| c.index == k);
                    let cell = Cell {
                        text: change
                            .map(|c| {
                                let mark = if c.suspect() { " (suspect)" } else { "" };
                                format!("{}× (p={}){mark}", sig(c.ratio), sig(c.p_value))
                            })
                            .unwrap_or_default(),
                        class: change.map(|c| match (c.suspect(), c.regression) {
                            (true, _) => "warn",
                            (false, true) => "fail",
                            (false, false) => "pass",
                        }),
                    };
                    vec![
                        Cell::from((k + 1).to_string()),
                        Cell::from(e.started.clone()),
                        Cell::from(e.run.clone()),
                        Cell::from(e.machine.clone()),
                        Cell::from(human(e.median, &se.unit)),
                        Cell::from(human_range(e.ci95_low, e.ci95_high, &se.unit)),
                        cell,
                    ]
                })
                .collect();
            blocks.push(Block::Table(Table {
                header: [
                    "#", "started", "run", "machine", "median", "95% CI", "change",
                ]
                .map(String::from)
                .to_vec(),
                rows,
            }));
            let notes: Vec<String> = se
                .changes
                .iter()
                .map(|c| {
                    let env: Vec<String> = c
                        .environment_diff
                        .iter()
                        .map(|d| {
                            format!(
                                "{}: {} → {}",
                                d.key,
                                d.base.as_deref().unwrap_or("–"),
                                d.new.as_deref().unwrap_or("–")
                            )
                        })
                        .collect();
                    let suspect = if c.suspect() {
                        format!(
                            " (suspect: the validity guard flagged trials of {})",
                            c.suspect_runs.join(", ")
                        )
                    } else {
                        String::new()
                    };
                    format!(
                        "change at run {}: {} → {}; environment: {}{suspect}",
                        c.run,
                        human(c.before, &se.unit),
                        human(c.after, &se.unit),
                        if env.is_empty() {
                            "identical".to_string()
                        } else {
                            env.join(", ")
                        }
                    )
                })
                .collect();
            if !notes.is_empty() {
                blocks.push(Block::Notes(notes));
            }
            Section {
                id: format!("series-{i}"),
                title: format!("{} {} {}", se.experiment, se.params, se.metric),
                blocks,
            }
        })
        .collect();
    Document {
        title: format!("tunelab history: {}", h.subject),
        facts: vec![
            ("runs".into(), h.runs.to_string()),
            ("method".into(), h.method.clone()),
        ],
        sections,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::history::testing::step_down;

    #[test]
    fn a_change_is_marked_in_the_text_and_the_trend_chart() {
        let h = step_down();
        assert!(render(&h, Terminal::PIPE).contains("regression"));
        let html = crate::report::html::render(&document(&h));
        let doc = document(&h);
        if let crate::report::document::Block::Figure(f) = &doc.sections[0].blocks[0] {
            assert!(f.svg.is_ok(), "{:?}", f.svg.as_ref().err());
        }
        assert!(html.contains("<svg"), "trend chart");
        assert!(html.contains(" regression 0."), "change marked");
    }
}
