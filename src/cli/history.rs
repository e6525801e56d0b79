//! `tunelab history EXP|STUDY`: stored medians over time, change points and
//! the environment differences at each of them.

use super::Out;
use crate::analysis::history::{history, Query};
use crate::report::history::render;
use crate::store::Store;
use crate::{Error, Result};

#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// An experiment (io.record-size) or a study profile (quick, pvr, …).
    pub(crate) subject: String,
    /// Only this metric (default: every metric).
    #[arg(long, short)]
    pub(crate) metric: Option<String>,
    /// Only runs recorded on this machine (its host name).
    #[arg(long)]
    pub(crate) machine: Option<String>,
    /// Fewest runs on each side of a change point.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u16).range(2..))]
    pub(crate) min_segment: u16,
    /// Also write the history as a self-contained HTML report with trend charts (a new file).
    #[arg(long, value_name = "FILE")]
    pub(crate) html: Option<std::path::PathBuf>,
    /// Exit 5 when the newest run belongs to a segment worse than the one
    /// before it (not when the change rests on suspect runs: see --trust-suspect).
    #[arg(long)]
    pub(crate) fail_on_regression: bool,
    /// With --fail-on-regression, also fail on a change that rests on runs
    /// whose trials the validity guard flagged.
    #[arg(long)]
    pub(crate) trust_suspect: bool,
}

pub(crate) fn exec(args: &Args, out: &Out, store: &Store) -> Result<i32> {
    // Only the runs about the subject, in a few queries (not a load per run).
    let runs = store.runs_about(&args.subject)?;
    let q = Query {
        subject: args.subject.clone(),
        metric: args.metric.clone(),
        machine: args.machine.clone(),
        min_segment: args.min_segment as usize,
    };
    let h = history(&runs, &q);
    if h.runs == 0 {
        return Err(Error::usage(format!(
            "no stored run measured '{}'{} in {}; name an experiment (tunelab list) or a study profile",
            args.subject,
            args.machine
                .as_ref()
                .map(|m| format!(" on machine {m}"))
                .unwrap_or_default(),
            store.location()
        )));
    }
    if h.series.is_empty() {
        return Err(Error::usage(format!(
            "the runs of '{}' have no metric named '{}'",
            args.subject,
            args.metric.as_deref().unwrap_or("")
        )));
    }
    if out.json {
        out.json_data(&h)?;
    } else {
        out.data(&render(&h, out.term))?;
    }
    if let Some(path) = &args.html {
        let page = crate::report::html::render(&crate::report::history::document(&h));
        super::output::write_new(path, &page)?;
        out.info(&format!("wrote {}", path.display()));
    }
    let (needed, judged) = h.can_detect(args.min_segment as usize);
    if args.fail_on_regression && !judged {
        // A gate that can find nothing must not pass as if nothing regressed.
        return Err(Error::usage(format!(
            "--fail-on-regression: no series of '{}' has the {needed} runs a change point \
             needs (segments of --min-segment runs on each side; the longest has {}), so \
             nothing was judged; store more runs, or lower --min-segment",
            args.subject,
            h.series.iter().map(|s| s.entries.len()).max().unwrap_or(0)
        )));
    }
    let (bad, suspect): (Vec<_>, Vec<_>) = h
        .regressions()
        .into_iter()
        .partition(|s| args.trust_suspect || !s.regression_suspect());
    if args.fail_on_regression && !suspect.is_empty() {
        out.warn(&format!(
            "not failing on {} regression(s) resting on runs the validity guard flagged; \
             pass --trust-suspect to fail on them",
            suspect.len()
        ));
    }
    if args.fail_on_regression && !bad.is_empty() {
        let names: Vec<String> = bad
            .iter()
            .map(|s| format!("{} {} {}", s.experiment, s.params, s.metric))
            .collect();
        return Err(Error::Regression(format!(
            "the newest run is in a worse segment for: {}",
            names.join("; ")
        )));
    }
    Ok(0)
}
