//! `tunelab runs`: stored runs, newest first.

use super::Out;
use crate::report::table;
use crate::store::Store;
use crate::Result;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Show at most N runs.
    #[arg(long, short = 'n', value_name = "N")]
    pub limit: Option<usize>,
}

pub fn exec(args: &Args, out: &Out, store: &Store) -> Result<i32> {
    let mut runs = store.list()?;
    if let Some(n) = args.limit {
        runs.truncate(n);
    }
    if out.json {
        out.json_data(&runs)?;
    } else if runs.is_empty() {
        out.info(&format!(
            "no runs stored in {} yet (try 'tunelab run io.file-read')",
            store.location()
        ));
    } else {
        let rows = runs
            .into_iter()
            .map(|r| {
                vec![
                    r.id,
                    r.started,
                    r.label,
                    r.status,
                    r.experiments.join(" "),
                    r.results.to_string(),
                ]
            })
            .collect();
        out.data(&table::render(
            &["id", "started", "label", "status", "experiments", "points"],
            rows,
        ))?;
    }
    Ok(0)
}
