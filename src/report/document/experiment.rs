//! One experiment's section of a report: its results table, histograms
//! and charts (which charts is decided in `report::pick_charts`).

use super::{figure, slug, Block, Section, Table};
use crate::model::run::PointResult;
use crate::report::pick_charts::experiment_charts;
use crate::stats::summary::relative_half_width;
use crate::stats::HistogramData;
use crate::units::{human, human_range, pct};

pub(super) fn experiment_section(exp: &str, results: &[&PointResult]) -> Section {
    let mut t = Table::new(crate::report::runview::METRIC_COLUMNS);
    for r in results {
        for m in &r.metrics {
            let s = &m.summary;
            t.rows.push(vec![
                r.params_label().into(),
                m.name.as_str().into(),
                human(s.median, &m.unit).into(),
                human_range(s.ci95_low, s.ci95_high, &m.unit).into(),
                format!("±{}", pct(relative_half_width(s))).into(),
                s.n.to_string().into(),
                pct(s.cv).into(),
                s.stop_reason_str().into(),
                if s.outliers.is_empty() {
                    String::new()
                } else {
                    s.outliers.len().to_string()
                }
                .into(),
            ]);
        }
    }
    let mut blocks = vec![Block::Table(t)];
    let hists: Vec<(&PointResult, &HistogramData)> = results
        .iter()
        .flat_map(|r| r.histograms.iter().map(move |h| (*r, h)))
        .collect();
    if !hists.is_empty() {
        let mut ht = Table::new(&[
            "params",
            "distribution",
            "count",
            "min",
            "p50",
            "p90",
            "p99",
            "p99.9",
            "max",
        ]);
        for (r, h) in &hists {
            let p = |q: f64| h.percentile(q).map_or("–".into(), |v| human(v, &h.unit));
            ht.rows.push(vec![
                r.params_label().into(),
                h.name.as_str().into(),
                h.count.to_string().into(),
                human(h.min, &h.unit).into(),
                p(50.0).into(),
                p(90.0).into(),
                p(99.0).into(),
                p(99.9).into(),
                human(h.max, &h.unit).into(),
            ]);
        }
        blocks.push(Block::Table(ht));
    }
    let mut notes: Vec<String> = Vec::new();
    for n in results.iter().flat_map(|r| &r.notes) {
        if !notes.contains(n) {
            notes.push(n.clone());
        }
    }
    for c in experiment_charts(results, &notes) {
        blocks.push(figure(c));
    }
    if !notes.is_empty() {
        blocks.push(Block::Notes(notes));
    }
    // The validity guard's findings: points measured on suspect trials.
    let suspect: Vec<String> = results
        .iter()
        .filter_map(|r| Some(format!("{}: {}", r.params_label(), r.suspect_summary()?)))
        .collect();
    if !suspect.is_empty() {
        blocks.push(Block::Warnings(suspect));
    }
    Section {
        id: format!("exp-{}", slug(exp)),
        title: exp.to_string(),
        blocks,
    }
}
