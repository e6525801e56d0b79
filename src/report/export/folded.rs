//! Folded stacks ("root;caller;leaf COUNT", one per line), the input of
//! flamegraph.pl, inferno and speedscope's importer: the CPU profile of a
//! diagnosis (`folded`, in samples) or its off-CPU profile (`folded-off-cpu`,
//! in microseconds blocked) — two units, so two files. The stacks are the
//! ones the diagnosis stored; this module also hands them to the pprof and
//! speedscope writers.

use super::{not_for, Exporter, Subject};
use crate::model::profile::FoldedStack;
use crate::{Error, Result};

/// One stored profile of a diagnosis.
pub(crate) struct Stacks<'a> {
    /// "cpu" or "off-cpu".
    pub(crate) name: &'static str,
    /// What one count is: "samples" or "microseconds".
    pub(crate) unit: &'static str,
    /// What was sampled, in words ("cycles", "sched switch events").
    pub(crate) event: String,
    pub(crate) stacks: &'a [FoldedStack],
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Which {
    Cpu,
    OffCpu,
}

/// The profiles of the diagnosis in `s` that have stacks; an error naming
/// why when it has none (not a diagnosis, or each section's skip reason).
pub(crate) fn profiles<'a>(s: &Subject<'a>, format: &str) -> Result<(Vec<Stacks<'a>>, f64)> {
    let what = "a diagnosis (tunelab diagnose, or a stored diagnose run)";
    let d = s
        .run()
        .and_then(|r| r.diagnosis.as_deref())
        .ok_or_else(|| not_for(format, s, what))?;
    let mut out = Vec::new();
    let mut missing = Vec::new();
    match d.profile.data() {
        Some(p) if !p.folded.is_empty() => out.push(Stacks {
            name: "cpu",
            unit: "samples",
            event: p.event.clone(),
            stacks: &p.folded,
        }),
        Some(_) => missing.push("the CPU profile has no stacks".to_string()),
        None => missing.push(format!("no CPU profile ({})", skip_reason(&d.profile))),
    }
    match d.offcpu.data() {
        Some(o) if !o.folded.is_empty() => out.push(Stacks {
            name: "off-cpu",
            unit: "microseconds",
            event: o.source.clone(),
            stacks: &o.folded,
        }),
        Some(_) => missing.push("the off-CPU profile has no stacks".to_string()),
        None => missing.push(format!("no off-CPU profile ({})", skip_reason(&d.offcpu))),
    }
    if out.is_empty() {
        return Err(Error::measurement(format!(
            "the {format} export has nothing to write: {}",
            missing.join("; ")
        )));
    }
    Ok((out, d.interval_s))
}

fn skip_reason<T>(s: &crate::model::diagnosis::Section<T>) -> String {
    match s {
        crate::model::diagnosis::Section::Skipped { reason } => reason.clone(),
        crate::model::diagnosis::Section::Present { .. } => "present".into(),
    }
}

pub(crate) struct Folded(pub(crate) Which);

impl Exporter for Folded {
    fn name(&self) -> &'static str {
        match self.0 {
            Which::Cpu => "folded",
            Which::OffCpu => "folded-off-cpu",
        }
    }
    fn about(&self) -> &'static str {
        match self.0 {
            Which::Cpu => "a diagnosis's CPU profile as folded stacks (samples)",
            Which::OffCpu => "a diagnosis's off-CPU profile as folded stacks (µs blocked)",
        }
    }
    fn export(&self, s: &Subject) -> Result<Vec<u8>> {
        let want = match self.0 {
            Which::Cpu => "cpu",
            Which::OffCpu => "off-cpu",
        };
        let (all, _) = profiles(s, self.name())?;
        let p = all.iter().find(|p| p.name == want).ok_or_else(|| {
            Error::measurement(format!(
                "the diagnosis has no {want} stacks to write (it has: {})",
                all.iter().map(|p| p.name).collect::<Vec<_>>().join(", ")
            ))
        })?;
        Ok(text(p.stacks).into_bytes())
    }
}

pub(crate) fn text(stacks: &[FoldedStack]) -> String {
    stacks
        .iter()
        .map(|s| format!("{} {}\n", s.stack, s.samples))
        .collect()
}
