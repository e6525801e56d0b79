//! The documents `tunelab report` writes, put together from the runs the
//! caller selected: one run (with `--vs`, its comparison with a base run
//! and the settings applied between the two), or several devices.

use super::diagnosis::{self, FindingText, Flame};
use super::document::{self, Block, Document};
use crate::analysis::devices::compare_devices;
use crate::model::applied::{self, AppliedChange};
use crate::model::run::Run;

/// What a one-run report is made of.
pub(crate) struct RunReport<'a> {
    pub(crate) run: &'a Run,
    /// `--vs`: the run before the change.
    pub(crate) base: Option<&'a Run>,
    /// Every change tunelab applied (those between the two runs are named).
    pub(crate) changes: &'a [AppliedChange],
    /// Differences smaller than this are "no change".
    pub(crate) noise: f64,
    /// The findings on the run's diagnosis (empty without one).
    pub(crate) findings: Vec<FindingText>,
    /// The profiler's flame-graph renderer (report does not reach into
    /// diagnose/).
    pub(crate) flame: Flame<'a>,
}

/// The document of one run.
pub(crate) fn run_document(r: RunReport) -> Document {
    let mut doc = document::build(r.run, r.base, r.noise);
    if let Some(b) = r.base {
        // The settings tunelab applied between the two runs: the
        // environment difference behind the verdicts, under the intro.
        let lines = applied::between(r.changes, &b.started, &r.run.started);
        if let (false, Some(sec)) = (
            lines.is_empty(),
            doc.sections.iter_mut().find(|s| s.id == "comparison"),
        ) {
            let at = sec.blocks.len().min(1);
            sec.blocks.insert(at, Block::Notes(lines));
        }
    }
    if let Some(d) = &r.run.diagnosis {
        let at = doc
            .sections
            .iter()
            .position(|s| s.id == "warnings")
            .unwrap_or(doc.sections.len());
        let mut extra = diagnosis::sections(d, r.flame);
        // The findings the terminal shows, first.
        extra.insert(0, diagnosis::findings_section(&r.findings));
        doc.sections.splice(at..at, extra);
    }
    doc
}

/// The device comparison of `runs` against `runs[baseline]`, as `compare`
/// prints it.
pub(crate) fn devices_document(runs: &[Run], baseline: usize, noise: f64) -> Document {
    super::devices::document(&compare_devices(runs, baseline, noise))
}
