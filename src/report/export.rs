//! Exports of a run: the JSON document, CSV (one row per metric and point,
//! raw samples included) and Markdown.

use crate::model::run::Run;
use crate::stats::summary::relative_half_width;
use crate::units::{human, pct};
use crate::Result;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Json,
    Csv,
    Md,
}

pub fn export(run: &Run, format: Format) -> Result<String> {
    Ok(match format {
        Format::Json => serde_json::to_string_pretty(run)? + "\n",
        Format::Csv => csv(run),
        Format::Md => markdown(run),
    })
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// One CSV line of `fields`, quoted where needed.
fn csv_row(out: &mut String, fields: &[String]) {
    let line: Vec<String> = fields.iter().map(|f| csv_field(f)).collect();
    out.push_str(&line.join(","));
    out.push('\n');
}

pub fn csv(run: &Run) -> String {
    let mut out = String::from(
        "run_id,experiment,params,metric,unit,better,n,median,mean,trimmed_mean,stddev,cv,min,max,\
         ci95_low,ci95_high,stop_reason,samples\n",
    );
    for r in &run.results {
        for m in &r.metrics {
            let s = &m.summary;
            let samples: Vec<String> = m.samples.iter().map(|v| v.to_string()).collect();
            let fields = [
                run.id.clone(),
                r.experiment.clone(),
                r.params_label(),
                m.name.clone(),
                m.unit.clone(),
                format!("{:?}", m.better).to_lowercase(),
                s.n.to_string(),
                s.median.to_string(),
                s.mean.to_string(),
                s.trimmed_mean.to_string(),
                s.stddev.to_string(),
                s.cv.to_string(),
                s.min.to_string(),
                s.max.to_string(),
                s.ci95_low.to_string(),
                s.ci95_high.to_string(),
                s.stop_reason_str().to_string(),
                samples.join(" "),
            ];
            csv_row(&mut out, &fields);
        }
    }
    out
}

/// Text from a run inside a Markdown line or table cell: control characters
/// (a newline would end the line or row) become spaces, pipes are escaped.
fn md(s: &str) -> String {
    super::document::one_line(s).replace('|', "\\|")
}

pub fn markdown(run: &Run) -> String {
    let mut s = format!("# tunelab run {}\n\n", md(&run.id));
    if !run.label.is_empty() {
        s.push_str(&format!("Label: **{}**\n\n", md(&run.label)));
    }
    if let Some(host) = run.environment.get("host.name") {
        s.push_str(&format!("Machine: {}\n\n", md(host)));
    }
    s.push_str(&format!(
        "Status: {} · started {} · finished {} · tunelab {}\n",
        run.status.as_str(),
        run.started,
        run.finished,
        run.tool_version
    ));
    // The answer first: a study's verdicts, then the tables, the
    // environment last.
    if let Some(st) = &run.study {
        s.push_str(&format!(
            "\n## Study {}: {}\n\n| key issue | verdict | result | conclusion |\n|---|---|---|---|\n",
            md(&st.profile),
            md(&st.title)
        ));
        for i in &st.issues {
            s.push_str(&format!(
                "| {} | {} | {} | {} |\n",
                md(&i.name),
                md(&i.label()),
                md(&i.result),
                md(&i.conclusion)
            ));
        }
    }
    for exp in run.experiments() {
        s.push_str(&format!(
            "\n## {exp}\n\n| params | metric | median | 95% CI | ±CI | n | CV | stopped by |\n|---|---|---|---|---|---|---|---|\n"
        ));
        for r in run.results.iter().filter(|r| r.experiment == exp) {
            for m in &r.metrics {
                let x = &m.summary;
                s.push_str(&format!(
                    "| {} | {} | {} | {} … {} | {} | {} | {} | {} |\n",
                    md(&r.params_label()),
                    md(&m.name),
                    human(x.median, &m.unit),
                    human(x.ci95_low, &m.unit),
                    human(x.ci95_high, &m.unit),
                    pct(relative_half_width(x)),
                    x.n,
                    pct(x.cv),
                    x.stop_reason_str()
                ));
            }
        }
        let mut notes: Vec<&String> = run
            .results
            .iter()
            .filter(|r| r.experiment == exp)
            .flat_map(|r| &r.notes)
            .collect();
        notes.dedup();
        for n in notes {
            s.push_str(&format!("\n> {}\n", md(n)));
        }
    }
    if !run.warnings.is_empty() {
        s.push_str("\n## Warnings\n\n");
        for w in &run.warnings {
            s.push_str(&format!("- {}\n", md(w)));
        }
    }
    s.push_str("\n## Environment\n\n| fact | value |\n|---|---|\n");
    for (k, v) in &run.environment {
        s.push_str(&format!("| {} | {} |\n", md(k), md(v)));
    }
    s
}

/// A comparison of two runs as CSV: one row per metric of each paired point.
pub fn comparison_csv(c: &crate::analysis::compare::RunComparison) -> String {
    let mut out = String::from(
        "base_run,new_run,experiment,base_params,new_params,metric,unit,better,base_median,\
         new_median,ratio,ci95_low,ci95_high,verdict\n",
    );
    for p in &c.pairs {
        for m in &p.metrics {
            let x = m.comparison();
            let fields = [
                c.base.clone(),
                c.new.clone(),
                p.experiment.clone(),
                p.base_params.clone(),
                p.new_params.clone(),
                m.name.clone(),
                m.unit.clone(),
                format!("{:?}", m.better).to_lowercase(),
                m.base_median.to_string(),
                m.new_median.to_string(),
                x.ratio.to_string(),
                x.ci95_low.to_string(),
                x.ci95_high.to_string(),
                m.verdict_label(),
            ];
            csv_row(&mut out, &fields);
        }
    }
    out
}

/// Several devices compared as CSV: one row per device and metric, with
/// the ratio to the baseline device (empty for the baseline itself).
pub fn devices_csv(c: &crate::analysis::devices::DeviceComparison) -> String {
    let mut out = String::from(
        "machine,run,baseline,experiment,params,metric,unit,better,median,ratio,ci95_low,\
         ci95_high,verdict\n",
    );
    for m in &c.metrics {
        for (i, d) in c.devices.iter().enumerate() {
            let Some(median) = m.medians[i] else {
                continue;
            };
            let cmp = m.vs_baseline[i].as_ref();
            let num = |f: fn(&crate::stats::Comparison) -> f64| {
                cmp.map(|x| f(x).to_string()).unwrap_or_default()
            };
            let fields = [
                d.machine.clone(),
                d.run.clone(),
                (i == c.baseline).to_string(),
                m.experiment.clone(),
                m.params.clone(),
                m.metric.clone(),
                m.unit.clone(),
                format!("{:?}", m.better).to_lowercase(),
                median.to_string(),
                num(|x| x.ratio),
                num(|x| x.ci95_low),
                num(|x| x.ci95_high),
                cmp.map(|x| x.verdict.as_str().to_string())
                    .unwrap_or_default(),
            ];
            csv_row(&mut out, &fields);
        }
    }
    out
}
