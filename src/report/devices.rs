//! Several runs side by side (`analysis::devices`) as terminal text and as
//! a report document: each device's ratio to the baseline with its 95% CI,
//! the key issues' verdicts per device, and the environment facts that
//! differ between them.

use super::table::Terminal;
use crate::analysis::devices::DeviceComparison;
use crate::stats::{Comparison, Verdict};
use crate::units::{human, sig};

fn ratio_cell(c: &Comparison) -> String {
    format!(
        "{}× [{}–{}] {}",
        sig(c.ratio),
        sig(c.ci95_low),
        sig(c.ci95_high),
        c.verdict.as_str()
    )
}

pub(crate) fn render(c: &DeviceComparison, term: Terminal) -> String {
    let names: Vec<String> = c
        .devices
        .iter()
        .enumerate()
        .map(|(i, d)| {
            if i == c.baseline {
                format!("{} — baseline", d.name)
            } else {
                d.name.clone()
            }
        })
        .collect();
    let mut s = format!(
        "{} devices, ratios to {} with 95% CIs, noise threshold ±{}%\n",
        c.devices.len(),
        c.devices[c.baseline].name,
        sig(c.noise * 100.0)
    );
    let header = |first: &str| -> Vec<String> {
        std::iter::once(first.to_string())
            .chain(names.iter().cloned())
            .collect()
    };
    let mut t = |h: Vec<String>, rows: Vec<Vec<String>>| {
        let h: Vec<&str> = h.iter().map(String::as_str).collect();
        s.push_str(&term.render(&h, rows));
    };
    if !c.environment_diff.is_empty() {
        let rows = c
            .environment_diff
            .iter()
            .map(|f| {
                std::iter::once(f.key.clone())
                    .chain(
                        f.values
                            .iter()
                            .map(|v| v.clone().unwrap_or_else(|| "–".into())),
                    )
                    .collect()
            })
            .collect();
        t(header("environment (differs)"), rows);
    }
    if !c.issues.is_empty() {
        let rows = c
            .issues
            .iter()
            .map(|i| {
                std::iter::once(i.issue.clone())
                    .chain(
                        i.verdicts
                            .iter()
                            .map(|v| v.as_deref().unwrap_or("–").to_uppercase()),
                    )
                    .collect()
            })
            .collect();
        t(header("key issue"), rows);
    }
    let rows =
        c.metrics
            .iter()
            .map(|m| {
                let first = format!("{} {} {}", m.experiment, m.params, m.metric);
                std::iter::once(first)
                    .chain(m.medians.iter().zip(&m.vs_baseline).map(|(med, cmp)| {
                        match (med, cmp) {
                            (None, _) => "–".to_string(),
                            (Some(v), None) => human(*v, &m.unit),
                            (Some(v), Some(c)) => {
                                format!("{} {}", human(*v, &m.unit), ratio_cell(c))
                            }
                        }
                    }))
                    .collect()
            })
            .collect();
    t(header("metric"), rows);
    s
}

/// The comparison as a report document: a grouped bar chart of ratios to
/// the baseline per key metric, then the tables.
pub(crate) fn document(c: &DeviceComparison) -> super::document::Document {
    use super::charts::{Chart, ForestPlot, ForestRow};
    use super::document::{Block, Cell, Document, Figure, Section, Table};
    let header = |first: &str| -> Vec<String> {
        std::iter::once(first.to_string())
            .chain(c.devices.iter().map(|d| d.name.clone()))
            .collect()
    };
    let mut blocks = Vec::new();
    // One row per device and metric, named in full (a bar chart's x labels
    // would all be cut to "io.record-size…"), ratios on a log-capable axis
    // around 1 with the direction of each metric.
    let mut rows = Vec::new();
    for (i, d) in c.devices.iter().enumerate() {
        if i == c.baseline {
            continue;
        }
        for m in &c.metrics {
            if let Some(x) = &m.vs_baseline[i] {
                let params = if m.params.is_empty() {
                    String::new()
                } else {
                    format!(" {}", m.params)
                };
                rows.push(ForestRow {
                    label: format!("{}: {}{params} · {}", d.machine, m.experiment, m.metric),
                    ratio: x.ratio,
                    low: x.ci95_low,
                    high: x.ci95_high,
                    verdict: x.verdict,
                    better: Some(m.better),
                });
            }
        }
    }
    let chart = Chart::Forest(ForestPlot {
        title: format!(
            "ratio to {} (median / baseline median, 95% CI)",
            c.devices[c.baseline].name
        ),
        rows,
        noise: c.noise,
    });
    blocks.push(Block::Figure(Figure {
        title: chart.title().to_string(),
        svg: chart.render(),
    }));
    if !c.issues.is_empty() {
        blocks.push(Block::Table(Table {
            header: header("key issue"),
            rows: c
                .issues
                .iter()
                .map(|i| {
                    std::iter::once(Cell::from(i.issue.clone()))
                        .chain(i.verdicts.iter().map(|v| {
                            let v = v.as_deref().unwrap_or("–");
                            let class = match v {
                                "pass" => Some("pass"),
                                "fail" => Some("fail"),
                                "marginal" | "unknown" => Some("warn"),
                                _ => None,
                            };
                            Cell {
                                text: v.to_uppercase(),
                                class,
                            }
                        }))
                        .collect()
                })
                .collect(),
        }));
    }
    // The chart's numbers: each device's median and its ratio to the
    // baseline with the 95% CI and the verdict.
    blocks.push(Block::Table(Table {
        header: header("metric"),
        rows: c
            .metrics
            .iter()
            .map(|m| {
                let first = format!("{} {} {}", m.experiment, m.params, m.metric);
                std::iter::once(Cell::from(first))
                    .chain(m.medians.iter().zip(&m.vs_baseline).map(|(med, cmp)| {
                        match (med, cmp) {
                            (None, _) => Cell::from("–".to_string()),
                            (Some(v), None) => Cell::from(human(*v, &m.unit)),
                            (Some(v), Some(x)) => Cell {
                                text: format!("{} {}", human(*v, &m.unit), ratio_cell(x)),
                                class: match x.verdict {
                                    Verdict::Regressed => Some("fail"),
                                    Verdict::Improved => Some("pass"),
                                    _ => None,
                                },
                            },
                        }
                    }))
                    .collect()
            })
            .collect(),
    }));
    if !c.environment_diff.is_empty() {
        blocks.push(Block::Heading("environment facts that differ".into()));
        blocks.push(Block::Table(Table {
            header: header("fact"),
            rows: c
                .environment_diff
                .iter()
                .map(|f| {
                    std::iter::once(Cell::from(f.key.clone()))
                        .chain(
                            f.values
                                .iter()
                                .map(|v| Cell::from(v.clone().unwrap_or_else(|| "–".into()))),
                        )
                        .collect()
                })
                .collect(),
        }));
    }
    Document {
        title: format!("tunelab: {} devices compared", c.devices.len()),
        facts: vec![
            ("baseline".into(), c.devices[c.baseline].name.clone()),
            (
                "noise threshold".into(),
                format!("±{}%", sig(c.noise * 100.0)),
            ),
        ],
        sections: vec![Section {
            id: "devices".into(),
            title: "Devices".into(),
            blocks,
        }],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::devices::testing::three_devices;

    #[test]
    fn devices_show_the_baseline_the_verdicts_and_the_ratio_table() {
        let c = three_devices();
        let text = render(&c, Terminal::PIPE);
        assert!(
            text.contains("stb-a (run-stb-a) — baseline") && text.contains("regressed"),
            "{text}"
        );
        let html = super::super::html::render(&document(&c));
        assert!(html.contains("<svg") && html.contains("FAIL"));
        // The ratios with their CIs are in the document too, not only drawn.
        assert!(
            html.contains("× [") && html.contains("regressed"),
            "the ratio table is missing"
        );
    }
}
