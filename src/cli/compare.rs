//! `tunelab compare A B [--fail-on-regression]`.

use super::Out;
use crate::report::comparison::{compare_runs, render};
use crate::store::Store;
use crate::{Error, Result};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The base run (before the change): id, unique prefix, `last` or `last~N`.
    pub base: String,
    /// The new run (after the change).
    pub new: String,
    /// Differences smaller than this are "no change" (e.g. 2% or 0.02).
    #[arg(long, default_value = "2%", value_parser = parse_noise)]
    pub noise: f64,
    /// Exit with code 5 when any metric regressed.
    #[arg(long)]
    pub fail_on_regression: bool,
}

pub fn parse_noise(s: &str) -> std::result::Result<f64, String> {
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

pub fn exec(args: &Args, out: &Out, store: &Store) -> Result<i32> {
    let a = store.load(&args.base)?;
    let b = store.load(&args.new)?;
    let c = compare_runs(&a, &b, args.noise);
    if out.json {
        out.json_data(&c)?;
    } else {
        out.data(&render(&c))?;
    }
    if c.pairs.is_empty() {
        out.warn("the two runs have no experiment in common: nothing was compared");
    }
    if args.fail_on_regression && c.regressions > 0 {
        return Err(Error::Regression(format!(
            "{} metric(s) regressed from {} to {}",
            c.regressions, a.id, b.id
        )));
    }
    Ok(0)
}
