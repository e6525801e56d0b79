//! Findings for the CLI: advise's rules over the evidence gathered on a
//! target (configuration, stored runs) or over one diagnosis. advise sits
//! beside study; the CLI reaches it only through here.

use std::path::Path;

pub(crate) use crate::advise::{Advice, Finding, Workload};
use crate::model::diagnosis::Diagnosis;
use crate::store::Store;

/// Everything advise can say about `target` and the runs in `store`.
pub(crate) fn advice(target: &Path, store: Option<&Store>, workload: Workload) -> Advice {
    crate::advise::advise(&crate::advise::gather(target, store), workload)
}

/// The findings on one diagnosis alone (what `diagnose` prints at its end).
pub(crate) fn diagnosis_findings(run_id: &str, d: &Diagnosis) -> Vec<Finding> {
    crate::advise::diagnosis_findings(run_id, d)
}

/// The findings on one diagnosis as the report writes them (its first
/// section when the run holds a diagnosis).
pub(crate) fn diagnosis_finding_texts(
    run_id: &str,
    d: &Diagnosis,
) -> Vec<crate::report::diagnosis::FindingText> {
    diagnosis_findings(run_id, d)
        .into_iter()
        .map(|f| crate::report::diagnosis::FindingText {
            severity: f.severity.as_str().to_string(),
            id: f.id.to_string(),
            title: f.title,
            evidence: f.evidence,
            why: f.why,
            fix: f.command,
            verify: f.verify,
        })
        .collect()
}
