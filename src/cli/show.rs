//! `tunelab show RUN`: one stored run.

use super::Out;
use crate::report::runview;
use crate::store::Store;
use crate::Result;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Run id, unique prefix, `last` or `last~N`.
    pub run: String,
}

pub fn exec(args: &Args, out: &Out, store: &Store) -> Result<i32> {
    let run = store.load(&args.run)?;
    if out.json {
        out.json_data(&run)?;
    } else {
        out.data(&runview::render(&run))?;
    }
    Ok(0)
}
