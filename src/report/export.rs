//! Every file format a result can be written in, behind one `Exporter`
//! trait and one table (`EXPORTERS`): `tunelab export --format NAME` and the
//! `--export-NAME FILE` flags of run, study, time, compare and diagnose all
//! look a format up there. The run's own formats (JSON, CSV with raw
//! samples, Markdown) are here; the formats other tools read are in
//! `export/`: JUnit XML and Bencher's BMF for CI gates, OpenMetrics for
//! dashboards, LAVA test-case lines for device farms, and pprof, speedscope
//! and folded stacks for profilers.

pub(crate) mod bmf;
pub(crate) mod cases;
pub(crate) mod folded;
pub(crate) mod junit;
pub(crate) mod lava;
pub(crate) mod openmetrics;
pub(crate) mod pprof;
pub(crate) mod speedscope;

use crate::analysis::compare::RunComparison;
use crate::analysis::devices::DeviceComparison;
use crate::model::run::Run;
use crate::stats::summary::relative_half_width;
use crate::units::{human, pct};
use crate::{Error, Result};

/// What is being written.
#[derive(Clone, Copy)]
pub(crate) enum Subject<'a> {
    Run(&'a Run),
    /// `time`'s result: the run and its JSON document (with the trials).
    Timed(&'a Run, &'a dyn Fn() -> Result<String>),
    /// Two runs compared.
    Comparison(&'a RunComparison),
    /// Several devices compared.
    Devices(&'a DeviceComparison),
}

impl<'a> Subject<'a> {
    pub(crate) fn run(&self) -> Option<&'a Run> {
        match *self {
            Subject::Run(r) | Subject::Timed(r, _) => Some(r),
            _ => None,
        }
    }

    fn words(&self) -> &'static str {
        match self {
            Subject::Run(_) | Subject::Timed(..) => "a run",
            Subject::Comparison(_) => "a comparison of two runs",
            Subject::Devices(_) => "a comparison of devices",
        }
    }
}

/// One file format. `export` returns bytes: pprof is binary.
pub(crate) trait Exporter: Sync {
    /// The format's name: `--export-NAME`, `tunelab export --format NAME`.
    fn name(&self) -> &'static str;
    /// One line for `--help`.
    fn about(&self) -> &'static str;
    fn export(&self, subject: &Subject) -> Result<Vec<u8>>;
}

/// Every format, registered once.
pub(crate) static EXPORTERS: &[&dyn Exporter] = &[
    &Json,
    &Csv,
    &Markdown,
    &junit::JUnit,
    &bmf::Bmf,
    &openmetrics::OpenMetrics,
    &lava::Lava,
    &pprof::Pprof,
    &speedscope::Speedscope,
    &folded::Folded(folded::Which::Cpu),
    &folded::Folded(folded::Which::OffCpu),
];

/// The exporter called `name` ("md" is Markdown's short name).
pub(crate) fn find(name: &str) -> Option<&'static dyn Exporter> {
    let name = if name == "md" { "markdown" } else { name };
    EXPORTERS.iter().copied().find(|e| e.name() == name)
}

/// The error of a format asked for a subject it cannot express.
pub(crate) fn not_for(format: &str, subject: &Subject, what: &str) -> Error {
    Error::usage(format!(
        "the {format} export is for {what}, and this is {}; drop that export flag here",
        subject.words()
    ))
}

struct Json;
impl Exporter for Json {
    fn name(&self) -> &'static str {
        "json"
    }
    fn about(&self) -> &'static str {
        "the whole result as JSON"
    }
    fn export(&self, s: &Subject) -> Result<Vec<u8>> {
        let text = match *s {
            Subject::Run(r) => serde_json::to_string_pretty(r)? + "\n",
            Subject::Timed(_, json) => json()?,
            Subject::Comparison(c) => serde_json::to_string_pretty(c)? + "\n",
            Subject::Devices(c) => serde_json::to_string_pretty(c)? + "\n",
        };
        Ok(text.into_bytes())
    }
}

struct Csv;
impl Exporter for Csv {
    fn name(&self) -> &'static str {
        "csv"
    }
    fn about(&self) -> &'static str {
        "one row per metric (a run's raw samples included)"
    }
    fn export(&self, s: &Subject) -> Result<Vec<u8>> {
        let text = match *s {
            Subject::Run(r) | Subject::Timed(r, _) => csv(r),
            Subject::Comparison(c) => comparison_csv(c),
            Subject::Devices(c) => devices_csv(c),
        };
        Ok(text.into_bytes())
    }
}

struct Markdown;
impl Exporter for Markdown {
    fn name(&self) -> &'static str {
        "markdown"
    }
    fn about(&self) -> &'static str {
        "Markdown tables"
    }
    fn export(&self, s: &Subject) -> Result<Vec<u8>> {
        let text = match *s {
            Subject::Run(r) | Subject::Timed(r, _) => markdown(r),
            Subject::Comparison(c) => {
                super::md_report::render_text(&super::document::comparison_document(c))
            }
            Subject::Devices(c) => super::md_report::render_text(&super::devices::document(c)),
        };
        Ok(text.into_bytes())
    }
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

pub(crate) fn csv(run: &Run) -> String {
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

pub(crate) fn markdown(run: &Run) -> String {
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
pub(crate) fn comparison_csv(c: &RunComparison) -> String {
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
pub(crate) fn devices_csv(c: &DeviceComparison) -> String {
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
