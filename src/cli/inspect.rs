//! `tunelab inspect [--target DIR]`: configuration facts with their sources.

use std::path::PathBuf;

use super::Out;
use crate::engine::verbs::inspect;
use crate::Result;

#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// Directory whose file system and block device to inspect [default: .].
    #[arg(long, value_name = "DIR")]
    pub(crate) target: Option<PathBuf>,
}

pub(crate) fn exec(args: &Args, out: &Out) -> Result<i32> {
    let facts = inspect::plan(args.target.as_deref())?.measure();
    if out.json {
        out.json_data(&facts.0)?;
        return Ok(0);
    }
    let rows: Vec<Vec<String>> = facts
        .0
        .iter()
        .map(|f| {
            vec![
                f.section.to_string(),
                f.key.clone(),
                display(&f.key, &f.value),
                f.source.clone(),
            ]
        })
        .collect();
    let header = ["section", "fact", "value", "source"];
    if out.term.fits(&header, &rows) {
        out.data(&out.table(&header, rows))?;
        return Ok(0);
    }
    // A narrow screen (a serial console's 80 columns): the sources, mostly
    // the path the fact names, would wrap every row onto three lines.
    let rows = rows.into_iter().map(|mut r| {
        r.truncate(3);
        r
    });
    out.data(&out.table(&header[..3], rows.collect()))?;
    out.info("(sources left out to fit: see tunelab inspect --json, or widen the screen)");
    Ok(0)
}

/// Bytes in binary units (raw value kept), long values shortened (full in --json).
fn display(key: &str, value: &str) -> String {
    if key.ends_with("_bytes") {
        if let Ok(b) = value.parse::<u64>() {
            return format!("{} ({b})", crate::units::format_size(b));
        }
    }
    if value.chars().count() > 90 {
        let short: String = value.chars().take(87).collect();
        return format!("{short}… (--json for all)");
    }
    value.to_string()
}
