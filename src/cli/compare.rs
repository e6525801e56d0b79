//! `tunelab compare A B [--fail-on-regression]`, and with more runs or a
//! selection (`--machine`, `--label`, `--since`) a table of devices.

use super::Out;
use crate::analysis::compare::{compare_runs_with, History};
use crate::analysis::devices::{compare_devices, machine_of};
use crate::model::applied;
use crate::model::run::Run;
use crate::report::compare::render;
use crate::report::devices;
use crate::report::export::Subject;
use crate::store::select;
use crate::store::Store;
use crate::{Error, Result};

#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// Runs: the base (before the change) then the new one; with more than
    /// two, the first is the baseline device. Id, unique prefix, `last` or `last~N`.
    #[arg(value_name = "RUN")]
    pub(crate) runs: Vec<String>,
    #[command(flatten)]
    pub(crate) sel: Selection,
    /// Differences smaller than this are "no change" (e.g. 2% or 0.02).
    #[arg(long, default_value = "2%", value_parser = parse_noise)]
    pub(crate) noise: f64,
    /// With several devices: also write the comparison as a self-contained HTML file (new file).
    #[arg(long, value_name = "FILE")]
    pub(crate) html: Option<std::path::PathBuf>,
    /// Exit with code 5 when any metric regressed (not on suspect verdicts:
    /// see --trust-suspect).
    #[arg(long)]
    pub(crate) fail_on_regression: bool,
    /// With --fail-on-regression, also fail on regressions that rest on
    /// trials the validity guard flagged (by default they are reported as
    /// "(suspect)" and do not change the exit code).
    #[arg(long)]
    pub(crate) trust_suspect: bool,
    /// Judge on the two runs alone: do not learn the between-run noise from
    /// other stored runs of the same points (the default floor applies).
    #[arg(long)]
    pub(crate) no_history: bool,
    #[command(flatten)]
    pub(crate) export: super::export_flags::ExportArgs,
}

/// Runs picked by machine, label or time, and the baseline among them
/// (shared by `compare` and `report`).
#[derive(clap::Args, Debug, Default)]
pub(crate) struct Selection {
    /// Select the newest run of this machine (inventory name of a `remote` run, else host name); repeatable.
    #[arg(long, value_name = "HOST")]
    pub(crate) machine: Vec<String>,
    /// Select runs with this label (the newest per machine).
    #[arg(long)]
    pub(crate) label: Option<String>,
    /// Select runs started at or after this time (RFC 3339 or YYYY-MM-DD; newest per machine).
    #[arg(long, value_name = "TIME")]
    pub(crate) since: Option<String>,
    /// With several devices: the baseline, by machine name or run (default: the first).
    #[arg(long)]
    pub(crate) baseline: Option<String>,
}

pub(crate) fn parse_noise(s: &str) -> std::result::Result<f64, String> {
    let v = match s.strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().map(|v| v / 100.0),
        None => s.parse::<f64>(),
    }
    .map_err(|_| format!("'{s}' is not a fraction (e.g. 2% or 0.02)"))?;
    if (0.0..1.0).contains(&v) {
        Ok(v)
    } else {
        Err(format!("'{s}' must be between 0 and 100%"))
    }
}

impl Selection {
    /// The selection as the store reads it.
    pub(super) fn query(&self) -> select::Selection<'_> {
        select::Selection {
            machine: &self.machine,
            label: self.label.as_deref(),
            since: self.since.as_deref(),
        }
    }

    pub(super) fn selecting(&self) -> bool {
        self.query().selecting()
    }

    /// The named runs, then those the selection adds.
    pub(super) fn gather(&self, named: &[String], store: &Store) -> Result<Vec<Run>> {
        select::gather(store, named, &self.query())
    }

    /// Index of --baseline among `runs` (default: the first).
    pub(super) fn baseline_index(&self, runs: &[Run]) -> Result<usize> {
        match &self.baseline {
            None => Ok(0),
            Some(b) => runs
                .iter()
                .position(|r| r.id.starts_with(b.as_str()) || machine_of(r) == Some(b))
                .ok_or_else(|| {
                    Error::usage(format!(
                        "--baseline {b} is none of the compared runs or machines"
                    ))
                }),
        }
    }
}

pub(crate) fn exec(args: &Args, out: &Out, store: &Store) -> Result<i32> {
    args.export.check()?;
    let runs = args.sel.gather(&args.runs, store)?;
    if runs.len() < 2 {
        return Err(Error::usage(format!(
            "compare needs two runs or more; {} found (name runs, or select them with --machine, --label or --since)",
            runs.len()
        )));
    }
    if runs.len() == 2
        && !args.sel.selecting()
        && args.sel.baseline.is_none()
        && args.html.is_none()
    {
        let code = pair(&runs[0], &runs[1], args, out, store);
        if !out.json {
            let changes = select::applied_changes(store);
            for line in applied::between(&changes, &runs[0].started, &runs[1].started) {
                out.data(&format!("{line}\n"))?;
            }
        }
        return code;
    }
    let baseline = args.sel.baseline_index(&runs)?;
    let c = compare_devices(&runs, baseline, args.noise);
    if out.json {
        out.json_data(&c)?;
    } else {
        out.data(&devices::render(&c, out.term))?;
    }
    args.export.write(&Subject::Devices(&c), out)?;
    if let Some(path) = &args.html {
        let page = crate::report::html::render(&devices::document(&c));
        super::output::write_new(path, &page)?;
        out.info(&format!("wrote {}", path.display()));
    }
    if args.fail_on_regression && c.regressions > 0 {
        return Err(Error::Regression(format!(
            "{} metric(s) of some device regressed against {}",
            c.regressions, c.devices[baseline].name
        )));
    }
    Ok(0)
}

fn pair(a: &Run, b: &Run, args: &Args, out: &Out, store: &Store) -> Result<i32> {
    let others = if args.no_history {
        Vec::new()
    } else {
        select::history_of(store, a, b)?
    };
    let c = compare_runs_with(a, b, args.noise, &History { runs: &others });
    if out.json {
        out.json_data(&c)?;
    } else {
        out.data(&render(&c, out.term))?;
    }
    args.export.write(&Subject::Comparison(&c), out)?;
    if c.pairs.is_empty() {
        // A gate that compared nothing must not pass as if nothing regressed.
        if args.fail_on_regression {
            return Err(Error::usage(format!(
                "--fail-on-regression: {} and {} have no experiment with the same \
                 parameters in common, so nothing was compared; compare runs of the \
                 same experiments (see `tunelab runs`)",
                a.id, b.id
            )));
        }
        out.warn("the two runs have no experiment in common: nothing was compared");
    }
    let counted = c.regressions
        + if args.trust_suspect {
            c.suspect_regressions
        } else {
            0
        };
    if args.fail_on_regression && counted > 0 {
        return Err(Error::Regression(format!(
            "{counted} metric(s) regressed from {} to {}",
            a.id, b.id
        )));
    }
    if args.fail_on_regression && c.suspect_regressions > 0 {
        out.warn(&format!(
            "not failing: the {} regression(s) rest on trials the validity guard flagged \
             (other load during the run); rerun on a quiet machine, or pass --trust-suspect \
             to fail on them",
            c.suspect_regressions
        ));
    }
    Ok(0)
}
