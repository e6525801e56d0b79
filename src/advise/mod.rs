//! `advise`: rules that turn configuration facts and stored measurements into
//! findings. Each finding carries its evidence, why it matters, the exact
//! command to change it, the risk, and how to verify the change. Where a rule
//! lacks the measurement it needs, it reports a gap instead of guessing.

#[cfg(test)]
mod builder_tests;
mod evidence;
mod rules;

use serde::Serialize;

pub(crate) use evidence::{gather, Evidence};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Severity {
    Info,
    Warning,
    Critical,
}

impl Severity {
    pub(crate) fn as_str(&self) -> &'static str {
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
pub(crate) enum Workload {
    General,
    /// Interactive or real-time work: start-up, UI, frame deadlines.
    Latency,
    /// Sequential media streams (recorders, players).
    Media,
    Throughput,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct Finding {
    pub(crate) id: &'static str,
    pub(crate) severity: Severity,
    pub(crate) title: String,
    /// Facts and measurements the finding rests on, with their sources.
    pub(crate) evidence: Vec<String>,
    pub(crate) why: String,
    /// The exact command that changes it.
    pub(crate) command: String,
    pub(crate) risk: String,
    /// The experiment or `tune` command that would verify the change.
    pub(crate) verify: String,
}

/// What a finding shows in a field its rule did not state. Rules state every
/// field today; the default makes an omission read as one, not as a blank.
pub(crate) const NOT_STATED: &str = "not stated by this rule";

/// Rules build findings through these methods (never a struct literal: a
/// test in `rules` checks), stating only what they know; every field left
/// out reads [`NOT_STATED`].
impl Finding {
    pub(crate) fn new(id: &'static str, severity: Severity, title: impl Into<String>) -> Self {
        Finding {
            id,
            severity,
            title: title.into(),
            evidence: vec![NOT_STATED.to_string()],
            why: NOT_STATED.to_string(),
            command: NOT_STATED.to_string(),
            risk: NOT_STATED.to_string(),
            verify: NOT_STATED.to_string(),
        }
    }

    /// The facts and measurements, one line each, with their sources.
    pub(crate) fn evidence(mut self, lines: Vec<String>) -> Self {
        self.evidence = lines;
        self
    }

    pub(crate) fn why(mut self, why: impl Into<String>) -> Self {
        self.why = why.into();
        self
    }

    /// The exact command that changes it, and what the change risks.
    pub(crate) fn fix(mut self, command: impl Into<String>, risk: impl Into<String>) -> Self {
        self.command = command.into();
        self.risk = risk.into();
        self
    }

    /// The experiment or `tune` command that would verify the change.
    pub(crate) fn verify(mut self, verify: impl Into<String>) -> Self {
        self.verify = verify.into();
        self
    }
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct Advice {
    pub(crate) schema: &'static str,
    pub(crate) workload: Workload,
    pub(crate) findings: Vec<Finding>,
    /// Rules that could not decide for lack of evidence, and what would supply it.
    pub(crate) gaps: Vec<String>,
}

/// The findings on one diagnosis alone (what `diagnose` prints at its end).
pub(crate) fn diagnosis_findings(
    run_id: &str,
    d: &crate::model::diagnosis::Diagnosis,
) -> Vec<Finding> {
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
pub(crate) fn advise(ev: &Evidence, workload: Workload) -> Advice {
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
