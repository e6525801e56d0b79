//! `tunelab advise [--target DIR] [--workload W]`: evidence-based findings.

use std::path::PathBuf;

use super::{Cli, Out};
use crate::study::advice::{advice, Workload};
use crate::{Error, Result};

#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// Directory whose file system and device to judge [default: .].
    #[arg(long, value_name = "DIR")]
    pub(crate) target: Option<PathBuf>,
    /// What the machine is for: some settings are only wrong for some workloads.
    #[arg(long, value_enum, default_value = "general")]
    pub(crate) workload: Workload,
}

pub(crate) fn exec(
    args: &Args,
    out: &Out,
    cli: &Cli,
    experiments: &crate::engine::catalog::Catalog,
) -> Result<i32> {
    let target = args.target.clone().unwrap_or_else(|| PathBuf::from("."));
    if !target.exists() {
        return Err(Error::usage(format!(
            "target {} does not exist (give an existing directory)",
            target.display()
        )));
    }
    let store = match super::open_store(cli, crate::store::Access::Read, Some(experiments)) {
        Ok(s) => Some(s),
        Err(e) => {
            out.warn(&format!("{e}: advising from configuration facts only"));
            None
        }
    };
    let advice = advice(&target, store.as_ref(), args.workload);
    if out.json {
        out.json_data(&advice)?;
        return Ok(0);
    }
    let mut s = String::new();
    if advice.findings.is_empty() {
        s.push_str("No findings: nothing in the configuration or the stored measurements calls for a change.\n");
    }
    for f in &advice.findings {
        s.push_str(&format!(
            "\n[{}] {} — {}\n",
            f.severity.as_str(),
            f.id,
            f.title
        ));
        for e in &f.evidence {
            s.push_str(&format!("  evidence: {e}\n"));
        }
        s.push_str(&format!(
            "  why:      {}\n  change:   {}\n  risk:     {}\n  verify:   {}\n",
            f.why, f.command, f.risk, f.verify
        ));
    }
    if !advice.gaps.is_empty() {
        s.push_str("\nNot judged for lack of evidence:\n");
        for g in &advice.gaps {
            s.push_str(&format!("  - {g}\n"));
        }
    }
    out.data(&s)?;
    Ok(0)
}
