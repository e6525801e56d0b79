//! What `tunelab report` says about a run, independent of the output format:
//! sections of tables, charts, notes and warnings. `report::html` and
//! `report::md_report` turn a [`Document`] into HTML or Markdown.
//!
//! Which charts an experiment gets is decided in `report::pick_charts`.

use super::charts::{Axis, Chart, ForestPlot, ForestRow, Line, LineChart};
use super::comparison::{compare_runs, RunComparison};
use super::pick_charts::{experiment_charts, median_of};
use crate::engine::model::{PointResult, Run};
use crate::engine::params::{ParamKind, ParamSpec, ParamValue};
use crate::stats::summary::relative_half_width;
use crate::stats::{HistogramData, Verdict};
use crate::units::format_size;
use crate::units::{human, pct, seconds, sig};

/// A table cell; `class` marks cells to colour ("pass", "fail", "warn").
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    pub text: String,
    pub class: Option<&'static str>,
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
pub struct Table {
    pub header: Vec<String>,
    pub rows: Vec<Vec<Cell>>,
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
pub struct Figure {
    pub title: String,
    pub svg: Result<String, String>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    Heading(String),
    Text(String),
    Table(Table),
    Figure(Figure),
    Notes(Vec<String>),
    Warnings(Vec<String>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Section {
    /// Anchor (letters, digits, '-').
    pub id: String,
    pub title: String,
    pub blocks: Vec<Block>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    pub title: String,
    /// Run facts shown under the title (id, label, status, times…).
    pub facts: Vec<(String, String)>,
    pub sections: Vec<Section>,
}

impl Document {
    pub fn figures(&self) -> impl Iterator<Item = &Figure> {
        self.sections
            .iter()
            .flat_map(|s| &s.blocks)
            .filter_map(|b| match b {
                Block::Figure(f) => Some(f),
                _ => None,
            })
    }
}

fn figure(chart: Chart) -> Block {
    Block::Figure(Figure {
        title: chart.title().to_string(),
        svg: chart.render(),
    })
}

/// An anchor from free text.
pub fn slug(s: &str) -> String {
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
pub fn one_line(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// Build the report of `run`; with `base`, a comparison (ratios run/base)
/// comes first.
pub fn build(run: &Run, base: Option<&Run>, noise: f64) -> Document {
    let mut facts = vec![("run".to_string(), run.id.clone())];
    if !run.label.is_empty() {
        facts.push(("label".into(), one_line(&run.label)));
    }
    if let Some(host) = run.environment.get("host.name") {
        facts.push(("machine".into(), one_line(host)));
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
    let mut sections = Vec::new();
    if let Some(b) = base {
        sections.push(comparison_section(&compare_runs(b, run, noise)));
    }
    sections.push(system_section(run));
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

fn comparison_section(c: &RunComparison) -> Section {
    let mut blocks = vec![Block::Text(format!(
        "new = {} (this run), base = {}; ratios are new/base with a bootstrap 95% CI; \
         noise threshold ±{}%.",
        c.new,
        c.base,
        sig(c.noise * 100.0)
    ))];
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
    let mut rows = Vec::new();
    let mut t = Table::new(&[
        "result", "metric", "base", "new", "new/base", "95% CI", "verdict",
    ]);
    for p in &c.pairs {
        let distinct = distinct_params(c, &p.experiment, &p.new_params);
        let params = if p.base_params == p.new_params {
            p.base_params.clone()
        } else {
            format!("{} → {}", p.base_params, p.new_params)
        };
        for m in &p.metrics {
            let x = &m.comparison;
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
            });
            t.rows.push(vec![
                format!("{} {params}", p.experiment).into(),
                m.name.as_str().into(),
                human(m.base_median, &m.unit).into(),
                human(m.new_median, &m.unit).into(),
                format!("{}×", sig(x.ratio)).into(),
                format!("{}× … {}×", sig(x.ci95_low), sig(x.ci95_high)).into(),
                Cell {
                    text: x.verdict.as_str().to_string(),
                    class: verdict_class(x.verdict),
                },
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
             Green improved, red regressed, grey no change, amber inconclusive."
                .into(),
        ));
        blocks.push(Block::Heading("Verdicts".into()));
        blocks.push(Block::Table(t));
        blocks.push(Block::Text(format!("{} regression(s).", c.regressions)));
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

/// A fact for display: byte counts in binary units.
fn fact_value(key: &str, v: &str) -> String {
    if key.ends_with("_bytes") {
        if let Ok(b) = v.parse::<f64>() {
            if b >= 1024.0 {
                return format!("{} ({v} B)", human(b, "B"));
            }
        }
    }
    v.to_string()
}

fn is_hardware(key: &str) -> bool {
    key.starts_with("cpu.model")
        || key == "cpu.count"
        || key == "cpu.max_mhz"
        || key.starts_with("mem.total")
        || key.starts_with("block.")
        || key == "target.device"
        || key == "target.disk"
}

fn system_section(run: &Run) -> Section {
    let env = &run.environment;
    let mut hw = Table::new(&["fact", "value"]);
    let mut sw = Table::new(&["fact", "value"]);
    // The most telling facts first, then the rest alphabetically.
    const FIRST: &[&str] = &[
        "cpu.model",
        "cpu.count",
        "cpu.max_mhz",
        "mem.total_bytes",
        "target.device",
        "target.disk",
        "kernel.release",
        "kernel.version",
        "host.name",
        "target.path",
        "target.fs",
        "target.mount_options",
        "cpu.governor",
        "mm.thp_enabled",
    ];
    let mut keys: Vec<&String> = FIRST
        .iter()
        .filter_map(|k| env.get_key_value(*k).map(|(k, _)| k))
        .collect();
    keys.extend(env.keys().filter(|k| !FIRST.contains(&k.as_str())));
    for k in keys {
        let row = vec![k.as_str().into(), fact_value(k, &env[k]).into()];
        if is_hardware(k) {
            hw.rows.push(row);
        } else {
            sw.rows.push(row);
        }
    }
    let mut blocks = Vec::new();
    if env.is_empty() {
        blocks.push(Block::Text("No environment was recorded.".into()));
    } else {
        blocks.push(Block::Heading("Hardware".into()));
        blocks.push(Block::Table(hw));
        blocks.push(Block::Heading("Software and settings".into()));
        blocks.push(Block::Table(sw));
    }
    let q = &run.quietness;
    if q.seconds > 0.0 {
        let busy: Vec<String> = q
            .busy
            .iter()
            .map(|p| format!("{} (pid {}) {:.0}%", p.name, p.pid, p.cpu_pct))
            .collect();
        blocks.push(Block::Text(format!(
            "Quietness check ({:.1} s before the run): other processes used {:.0}% of the \
             machine's CPU, iowait {:.1}%{}{}.",
            q.seconds,
            q.machine_busy_pct,
            q.iowait_pct,
            q.disk_busy_pct
                .map(|d| format!(", disk {d:.0}% busy"))
                .unwrap_or_default(),
            if busy.is_empty() {
                String::new()
            } else {
                format!("; busiest: {}", busy.join(", "))
            }
        )));
    }
    Section {
        id: "system".into(),
        title: "System".into(),
        blocks,
    }
}

fn study_section(st: &crate::engine::model::StudySummary) -> Section {
    let mut t = Table::new(&["key issue", "question", "result", "verdict", "conclusion"]);
    for i in &st.issues {
        let class = match i.verdict.as_str() {
            "pass" => Some("pass"),
            "fail" => Some("fail"),
            _ => Some("warn"),
        };
        t.rows.push(vec![
            i.name.as_str().into(),
            i.question.as_str().into(),
            i.result.as_str().into(),
            Cell {
                text: i.label().to_lowercase(),
                class,
            },
            i.conclusion.as_str().into(),
        ]);
    }
    let pass = st.issues.iter().filter(|i| i.verdict == "pass").count();
    let fail = st.issues.iter().filter(|i| i.verdict == "fail").count();
    let marginal = st.issues.iter().filter(|i| i.verdict == "marginal").count();
    let suspect = st.issues.iter().filter(|i| !i.suspect.is_empty()).count();
    Section {
        id: "study".into(),
        title: "Study summary".into(),
        blocks: vec![
            Block::Text(format!(
                "Profile {}: {} — {pass} passed, {fail} failed, {marginal} marginal (the 95% CI \
                 straddles the need), {} informational or unknown; {suspect} on suspect data.",
                st.profile,
                st.title,
                st.issues.len() - pass - fail - marginal
            )),
            Block::Table(t),
        ],
    }
}

pub(super) fn param_specs(exp: &str) -> Vec<ParamSpec> {
    crate::engine::registry::find(exp)
        .map(|e| e.params())
        .unwrap_or_default()
}

pub(super) fn param_unit(specs: &[ParamSpec], key: &str) -> &'static str {
    match specs.iter().find(|s| s.name == key).map(|s| &s.kind) {
        Some(ParamKind::Size) => "B",
        Some(ParamKind::Duration) => "s",
        _ => "count",
    }
}

/// `key=value` with sizes in binary units.
pub(super) fn param_text(specs: &[ParamSpec], key: &str, v: Option<&ParamValue>) -> String {
    match v {
        None => format!("{key}=–"),
        Some(ParamValue::Int(n)) if param_unit(specs, key) == "B" => {
            format!("{key}={}", format_size(*n))
        }
        Some(ParamValue::Float(x)) if param_unit(specs, key) == "s" => {
            format!("{key}={}", seconds(*x))
        }
        Some(v) => format!("{key}={v}"),
    }
}

/// Parameters whose values differ between the results, in key order.
pub(super) fn varying(results: &[&PointResult]) -> Vec<String> {
    let mut keys: Vec<&String> = results.iter().flat_map(|r| r.params.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter(|k| {
            let first = results[0].params.get(*k);
            results.iter().any(|r| r.params.get(*k) != first)
        })
        .cloned()
        .collect()
}

fn experiment_section(exp: &str, results: &[&PointResult]) -> Section {
    let mut t = Table::new(&[
        "params",
        "metric",
        "median",
        "95% CI of median",
        "±CI",
        "n",
        "CV",
        "stopped by",
        "outliers",
    ]);
    for r in results {
        for m in &r.metrics {
            let s = &m.summary;
            t.rows.push(vec![
                r.params_label().into(),
                m.name.as_str().into(),
                human(s.median, &m.unit).into(),
                format!(
                    "{} … {}",
                    human(s.ci95_low, &m.unit),
                    human(s.ci95_high, &m.unit)
                )
                .into(),
                format!("±{}", pct(relative_half_width(s))).into(),
                s.n.to_string().into(),
                pct(s.cv).into(),
                s.stop_reason.as_str().into(),
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
    for c in experiment_charts(exp, results, &notes) {
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

fn monitor_section(run: &Run) -> Option<Section> {
    let s = &run.samples;
    if s.is_empty() {
        return None;
    }
    let line = |name: &str, f: &dyn Fn(&crate::observe::sampler::MonitorSample) -> f64| Line {
        name: name.to_string(),
        points: s.iter().map(|x| (x.t, f(x))).collect(),
        ..Default::default()
    };
    let t = || Axis::new("time since the run started", "s");
    let mut blocks = vec![Block::Text(format!(
        "{} samples of vmstat, the target's disk statistics and Dirty/Writeback, \
         about one per second.",
        s.len()
    ))];
    let throttle = median_of(s.iter().map(|x| x.dirty.throttle_point() as f64).collect());
    let background = median_of(
        s.iter()
            .map(|x| x.dirty.background_threshold_bytes as f64)
            .collect(),
    );
    blocks.push(figure(Chart::Line(LineChart {
        title: "Dirty and Writeback page cache".into(),
        x: t(),
        y: Axis::new("memory", "B"),
        lines: vec![
            line("Dirty", &|x| x.dirty.dirty_bytes as f64),
            line("Writeback", &|x| x.dirty.writeback_bytes as f64),
            Line {
                dashed: true,
                ..line("Dirty + Writeback", &|x| {
                    (x.dirty.dirty_bytes + x.dirty.writeback_bytes) as f64
                })
            },
        ],
        vlines: Vec::new(),
        hlines: vec![
            (throttle, "writers throttled above".into()),
            (background, "background writeback starts".into()),
        ],
    })));
    blocks.push(figure(Chart::Line(LineChart {
        title: "CPU: iowait, user and system time".into(),
        x: t(),
        y: Axis::new("share of all CPUs", "%"),
        lines: vec![
            line("iowait %", &|x| x.vmstat.wa),
            line("user %", &|x| x.vmstat.us),
            line("system %", &|x| x.vmstat.sy),
        ],
        vlines: Vec::new(),
        hlines: Vec::new(),
    })));
    let disk = s
        .iter()
        .find_map(|x| x.disk.as_ref().map(|d| d.device.clone()));
    let (title, lines) = match &disk {
        Some(dev) => (
            format!("Disk {dev}: read and write throughput"),
            vec![
                line(&format!("{dev} read"), &|x| {
                    x.disk.as_ref().map_or(f64::NAN, |d| d.rkb_s * 1024.0)
                }),
                line(&format!("{dev} write"), &|x| {
                    x.disk.as_ref().map_or(f64::NAN, |d| d.wkb_s * 1024.0)
                }),
            ],
        ),
        None => (
            "Block I/O of all devices (vmstat bi/bo)".to_string(),
            vec![
                line("block in (bi)", &|x| x.vmstat.bi * 1024.0),
                line("block out (bo)", &|x| x.vmstat.bo * 1024.0),
            ],
        ),
    };
    blocks.push(figure(Chart::Line(LineChart {
        title,
        x: t(),
        y: Axis::new("throughput", "B/s"),
        lines,
        vlines: Vec::new(),
        hlines: Vec::new(),
    })));
    Some(Section {
        id: "monitor".into(),
        title: "Monitor".into(),
        blocks,
    })
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

    #[test]
    fn slugs() {
        assert_eq!(slug("io.record-size"), "io-record-size");
    }
}
