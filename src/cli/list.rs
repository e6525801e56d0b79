//! `tunelab list [EXP]`: experiments, their parameters and metrics.

use serde::Serialize;

use super::Out;
use crate::engine::catalog::Catalog;
use crate::engine::{Better, Experiment, Spec};
use crate::Result;

#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// Show one experiment in detail.
    pub(crate) experiment: Option<String>,
}

#[derive(Serialize)]
struct ParamJson {
    name: &'static str,
    unit: String,
    default: &'static str,
    min: Option<f64>,
    max: Option<f64>,
    help: &'static str,
}

#[derive(Serialize)]
struct MetricJson {
    name: &'static str,
    unit: &'static str,
    better: Better,
    help: &'static str,
}

#[derive(Serialize)]
struct ExperimentJson {
    name: &'static str,
    summary: &'static str,
    method: &'static str,
    needs_root: bool,
    needs_scratch: bool,
    params: Vec<ParamJson>,
    metrics: Vec<MetricJson>,
}

fn to_json(e: &Spec) -> ExperimentJson {
    ExperimentJson {
        name: e.name,
        summary: e.summary,
        method: e.method,
        needs_root: e.needs.root,
        needs_scratch: e.needs.scratch,
        params: e
            .params
            .iter()
            .map(|p| ParamJson {
                name: p.name,
                unit: p.unit_text(),
                default: p.default,
                min: p.min,
                max: p.max,
                help: p.help,
            })
            .collect(),
        metrics: e
            .metrics
            .iter()
            .map(|m| MetricJson {
                name: m.name,
                unit: m.unit,
                better: m.better,
                help: m.help,
            })
            .collect(),
    }
}

pub(crate) fn exec(args: &Args, out: &Out, experiments: &Catalog) -> Result<i32> {
    let exps: Vec<Box<dyn Experiment>> = match &args.experiment {
        Some(name) => vec![experiments.find(name)?],
        None => experiments.all(),
    };
    if out.json {
        let v: Vec<ExperimentJson> = exps.iter().map(|e| to_json(e.spec())).collect();
        out.json_data(&v)?;
    } else if args.experiment.is_some() {
        out.data(&experiment_help(exps[0].as_ref()))?;
    } else {
        let rows = exps
            .iter()
            .map(|e| {
                let e = e.spec();
                let n = e.needs;
                let needs = [(n.root, "root"), (n.scratch, "scratch")]
                    .iter()
                    .filter(|(b, _)| *b)
                    .map(|(_, s)| *s)
                    .collect::<Vec<_>>()
                    .join(",");
                vec![e.name.to_string(), e.summary.to_string(), needs]
            })
            .collect();
        out.data(&out.table(&["experiment", "what it measures", "needs"], rows))?;
        out.info("Details: tunelab list EXP  or  tunelab run EXP --help");
    }
    Ok(0)
}

/// Full description of one experiment: method, parameters, metrics.
pub(crate) fn experiment_help(e: &dyn Experiment) -> String {
    let e = e.spec();
    let mut s = format!(
        "{} — {}\n\n{}\n\nParameters (-p name=value; a comma list sweeps):\n",
        e.name,
        e.summary,
        wrap(e.method, 78)
    );
    let params = e.params;
    if params.is_empty() {
        s.push_str("  (none)\n");
    }
    for p in params {
        s.push_str(&format!(
            "  {:<12} {}\n  {:<12}   default {}; {}\n",
            p.name,
            p.help,
            "",
            p.default,
            p.unit_text()
        ));
    }
    s.push_str("\nMetrics:\n");
    for m in e.metrics {
        let dir = if m.better == Better::Higher {
            "higher is better"
        } else {
            "lower is better"
        };
        s.push_str(&format!(
            "  {:<22} {:<7} {dir}; {}\n",
            m.name, m.unit, m.help
        ));
    }
    let n = e.needs;
    if n.root || n.scratch {
        s.push_str(&format!(
            "\nNeeds: {}{}\n",
            if n.root { "root " } else { "" },
            if n.scratch {
                "a scratch directory under --target (created and removed by tunelab)"
            } else {
                ""
            }
        ));
    }
    s
}

/// The experiment list appended to `run --help` and the man page.
#[cfg(feature = "completions")]
pub(crate) fn experiments_help(experiments: &Catalog) -> String {
    let mut s = String::from("Experiments (tunelab list EXP for details):\n");
    for e in experiments.all() {
        let e = e.spec();
        s.push_str(&format!("  {:<20} {}\n", e.name, e.summary));
        for p in e.params {
            s.push_str(&format!(
                "      {}={}  ({}; {})\n",
                p.name,
                p.default,
                p.help,
                p.unit_text()
            ));
        }
    }
    s.push('\n');
    s.push_str(super::EXIT_CODES);
    s
}

fn wrap(text: &str, width: usize) -> String {
    let mut out = String::new();
    let mut line = 0;
    for word in text.split_whitespace() {
        if line > 0 && line + 1 + word.len() > width {
            out.push('\n');
            line = 0;
        } else if line > 0 {
            out.push(' ');
            line += 1;
        }
        out.push_str(word);
        line += word.len();
    }
    out
}
