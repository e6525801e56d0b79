//! `advise`: rules that turn configuration facts and stored measurements into
//! findings. Each finding carries its evidence, why it matters, the exact
//! command to change it, the risk, and how to verify the change. Where a rule
//! lacks the measurement it needs, it reports a gap instead of guessing.

mod evidence;
mod rules;

use serde::Serialize;

pub use evidence::{gather, Evidence};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Info,
    Warning,
    Critical,
}

impl Severity {
    pub fn as_str(&self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Critical => "critical",
        }
    }
}

/// What the system is for: some settings are only wrong for some workloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Workload {
    General,
    /// Interactive or real-time work: start-up, UI, frame deadlines.
    Latency,
    /// Sequential media streams (recorders, players).
    Media,
    Throughput,
}

#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    pub id: &'static str,
    pub severity: Severity,
    pub title: String,
    /// Facts and measurements the finding rests on, with their sources.
    pub evidence: Vec<String>,
    pub why: String,
    /// The exact command that changes it.
    pub command: String,
    pub risk: String,
    /// The experiment or `tune` command that would verify the change.
    pub verify: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Advice {
    pub schema: &'static str,
    pub workload: Workload,
    pub findings: Vec<Finding>,
    /// Rules that could not decide for lack of evidence, and what would supply it.
    pub gaps: Vec<String>,
}

/// The findings on one diagnosis alone (what `diagnose` prints at its end).
pub fn diagnosis_findings(run_id: &str, d: &crate::model::diagnosis::Diagnosis) -> Vec<Finding> {
    let ev = Evidence {
        diagnosis: Some((run_id.to_string(), d.clone())),
        ..Default::default()
    };
    let mut v: Vec<Finding> = advise(&ev, Workload::General)
        .findings
        .into_iter()
        .filter(|f| f.id.starts_with("diagnose."))
        .collect();
    v.sort_by_key(|f| std::cmp::Reverse(f.severity));
    v
}

/// Apply every rule to the evidence; findings sorted by severity.
pub fn advise(ev: &Evidence, workload: Workload) -> Advice {
    let mut findings = Vec::new();
    let mut gaps = Vec::new();
    for rule in rules::ALL {
        match rule(ev, workload) {
            rules::Outcome::Finding(f) => findings.push(*f),
            rules::Outcome::Gap(g) => gaps.push(g),
            rules::Outcome::Fine => {}
        }
    }
    findings.sort_by_key(|f| std::cmp::Reverse(f.severity));
    Advice {
        schema: "tunelab.advice/1",
        workload,
        findings,
        gaps,
    }
}
