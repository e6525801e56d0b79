//! `tunelab export RUN --format NAME`: a stored run in any format of the
//! exporter table (json, csv, md, junit, bmf, openmetrics, lava; pprof,
//! speedscope, folded and folded-off-cpu for a diagnose run).

use std::path::PathBuf;

use super::Out;
use crate::report::export::{find, Subject, EXPORTERS};
use crate::store::Store;
use crate::{Error, Result};

#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// Run id, unique prefix, `last` or `last~N`.
    pub(crate) run: String,
    /// Output format.
    #[arg(long, short, default_value = "json", value_parser = formats())]
    pub(crate) format: String,
    /// Write to this new file instead of stdout (an existing file is never overwritten).
    #[arg(long, short, value_name = "FILE")]
    pub(crate) output: Option<PathBuf>,
}

/// The table's formats, each with its one-line help; "md" for Markdown.
fn formats() -> clap::builder::PossibleValuesParser {
    clap::builder::PossibleValuesParser::new(EXPORTERS.iter().map(|e| {
        let v = clap::builder::PossibleValue::new(e.name()).help(e.about());
        if e.name() == "markdown" {
            v.alias("md")
        } else {
            v
        }
    }))
}

pub(crate) fn exec(args: &Args, out: &Out, store: &Store) -> Result<i32> {
    let run = store.load(&args.run)?;
    let exporter = find(&args.format)
        .ok_or_else(|| Error::usage(format!("unknown format '{}'", args.format)))?;
    let bytes = exporter.export(&Subject::Run(&run))?;
    match &args.output {
        None => match String::from_utf8(bytes) {
            Ok(text) => out.data(&text)?,
            Err(_) => {
                return Err(Error::usage(format!(
                    "the {} format is binary: write it to a file with --output FILE",
                    args.format
                )))
            }
        },
        Some(path) => super::export_flags::write_bytes(path, &bytes, out)?,
    }
    Ok(0)
}
