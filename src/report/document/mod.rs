//! What `tunelab report` says about a run, independent of the output format:
//! sections of tables, charts, notes and warnings. `report::html` and
//! `report::md_report` turn a [`Document`] into HTML or Markdown.
//!
//! One file per section: compare (the comparison), system, study, experiment, monitor.
//! Which charts an experiment gets is decided in `report::pick_charts`.

mod compare;
mod experiment;
mod monitor;
mod study;
mod system;

use super::charts::Chart;
use crate::analysis::compare::{compare_runs, RunComparison};
use crate::model::run::{PointResult, Run};
use compare::comparison_section;
use experiment::experiment_section;
use monitor::monitor_section;
use study::study_section;
use system::system_section;

/// A table cell; `class` marks cells to colour ("pass", "fail", "warn").
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Cell {
    pub(crate) text: String,
    pub(crate) class: Option<&'static str>,
}

impl From<String> for Cell {
    fn from(text: String) -> Self {
        Cell { text, class: None }
    }
}

impl From<&str> for Cell {
    fn from(text: &str) -> Self {
        Cell {
            text: text.to_string(),
            class: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Table {
    pub(crate) header: Vec<String>,
    pub(crate) rows: Vec<Vec<Cell>>,
}

impl Table {
    fn new(header: &[&str]) -> Self {
        Table {
            header: header.iter().map(|s| s.to_string()).collect(),
            rows: Vec::new(),
        }
    }
}

/// A rendered chart: its title and the SVG, or why it could not be drawn.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Figure {
    pub(crate) title: String,
    pub(crate) svg: Result<String, String>,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Block {
    Heading(String),
    Text(String),
    Table(Table),
    Figure(Figure),
    Notes(Vec<String>),
    Warnings(Vec<String>),
    /// Blocks shown folded under a one-line summary (HTML `<details>`):
    /// reference material a reader opens when needed.
    Collapsed(String, Vec<Block>),
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Section {
    /// Anchor (letters, digits, '-').
    pub(crate) id: String,
    pub(crate) title: String,
    pub(crate) blocks: Vec<Block>,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Document {
    pub(crate) title: String,
    /// Run facts shown under the title (id, label, status, times…).
    pub(crate) facts: Vec<(String, String)>,
    pub(crate) sections: Vec<Section>,
}

impl Document {
    pub(crate) fn figures(&self) -> impl Iterator<Item = &Figure> {
        self.sections
            .iter()
            .flat_map(|s| &s.blocks)
            .flat_map(|b| match b {
                Block::Collapsed(_, inner) => inner.iter().collect(),
                b => vec![b],
            })
            .filter_map(|b| match b {
                Block::Figure(f) => Some(f),
                _ => None,
            })
    }
}

/// A chart, or one line saying why there is none (one point, or one value
/// throughout: the table shows it).
fn figure(chart: Chart) -> Block {
    if let Some(why) = chart.degenerate() {
        return Block::Text(format!(
            "No chart of {}: {why} (see the table).",
            chart.title()
        ));
    }
    Block::Figure(Figure {
        title: chart.title().to_string(),
        svg: chart.render(),
    })
}

/// An anchor from free text.
pub(crate) fn slug(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_matches('-').to_string()
}

/// Text from a run (a label, a host name) on one line: a newline would end a
/// Markdown heading or table row, other control characters act on terminals.
pub(crate) fn one_line(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// A comparison of two runs alone (`compare --export-markdown`).
pub(crate) fn comparison_document(c: &RunComparison) -> Document {
    Document {
        title: format!("tunelab comparison: {} → {}", c.base, c.new),
        facts: vec![
            ("base".into(), c.base.clone()),
            ("new".into(), c.new.clone()),
        ],
        sections: vec![comparison_section(c)],
    }
}

/// Build the report of `run`; with `base`, a comparison (ratios run/base)
/// comes first.
pub(crate) fn build(run: &Run, base: Option<&Run>, noise: f64) -> Document {
    let mut facts = vec![("run".to_string(), run.id.clone())];
    if !run.label.is_empty() {
        facts.push(("label".into(), one_line(&run.label)));
    }
    match (
        run.environment.get("fleet.host"),
        run.environment.get("host.name"),
    ) {
        (Some(f), Some(h)) if f != h => facts.push((
            "machine".into(),
            format!("{} (host name {})", one_line(f), one_line(h)),
        )),
        (Some(m), _) | (None, Some(m)) => facts.push(("machine".into(), one_line(m))),
        (None, None) => {}
    }
    facts.push(("status".into(), run.status.as_str().to_string()));
    facts.push(("time".into(), format!("{} → {}", run.started, run.finished)));
    facts.push(("tunelab".into(), run.tool_version.clone()));
    if !run.argv.is_empty() {
        facts.push(("command".into(), run.argv.join(" ")));
    }
    if let Some(b) = base {
        facts.push((
            "compared with".into(),
            format!(
                "{}{} (base){}",
                b.id,
                if b.label.is_empty() {
                    String::new()
                } else {
                    format!(" \"{}\"", one_line(&b.label))
                },
                b.environment
                    .get("host.name")
                    .map(|h| format!(" on {}", one_line(h)))
                    .unwrap_or_default()
            ),
        ));
    }
    // The answer first (verdicts of the comparison and of the study), then
    // each experiment, and the machine's facts last: they are reference.
    let mut sections = Vec::new();
    if let Some(b) = base {
        sections.push(comparison_section(&compare_runs(b, run, noise)));
    }
    if let Some(st) = &run.study {
        sections.push(study_section(st));
    }
    for exp in run.experiments() {
        let results: Vec<&PointResult> =
            run.results.iter().filter(|r| r.experiment == exp).collect();
        sections.push(experiment_section(&exp, &results));
    }
    if let Some(s) = monitor_section(run) {
        sections.push(s);
    }
    let mut warnings: Vec<String> = run.quietness.warnings.clone();
    warnings.extend(run.warnings.iter().cloned());
    warnings.dedup();
    if !warnings.is_empty() {
        sections.push(Section {
            id: "warnings".into(),
            title: "Warnings".into(),
            blocks: vec![Block::Warnings(warnings)],
        });
    }
    sections.push(system_section(run));
    Document {
        title: format!(
            "tunelab report: {}",
            if run.label.is_empty() {
                run.id.clone()
            } else {
                one_line(&run.label)
            }
        ),
        facts,
        sections,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs() {
        assert_eq!(slug("io.record-size"), "io-record-size");
    }
}
