//! `tunelab import FILE…`: store runs recorded on another machine (a board),
//! from `tunelab export RUN --format json` files or a copied results.db,
//! keeping each run's id, machine identity and environment. Every file is
//! read and checked before anything is stored (`engine::import`); then the
//! new runs are saved in one transaction, so a bad file imports nothing.

use std::path::PathBuf;

use super::Out;
use crate::engine::catalog::Catalog;
use crate::store::Store;
use crate::Result;

#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// Files written by `tunelab export RUN --format json` (one run, or a JSON
    /// array of runs), or a tunelab SQLite results database copied from a board.
    #[arg(required = true, value_name = "FILE")]
    pub(crate) files: Vec<PathBuf>,
}

pub(crate) fn exec(
    args: &Args,
    out: &Out,
    store: &mut Store,
    experiments: &Catalog,
) -> Result<i32> {
    let done = crate::engine::import::import(&args.files, store, experiments)?;
    let fresh = done.iter().filter(|d| d.outcome == "imported").count();
    if out.json {
        out.json_data(&done)?;
    } else {
        let rows = done
            .iter()
            .map(|d| {
                vec![
                    d.id.clone(),
                    super::runs::cell(&d.machine),
                    d.outcome.to_string(),
                ]
            })
            .collect();
        out.data(&out.table(&["run", "machine", "import"], rows))?;
    }
    out.info(&format!(
        "{fresh} run(s) imported, {} already stored, into {}",
        done.len() - fresh,
        store.location()
    ));
    Ok(0)
}
