//! `tunelab restore`: put back every setting a dead tunelab left changed.

use super::Out;
use crate::safety::journal;
use crate::Result;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Also restore entries of tunelab processes that are still running.
    #[arg(long)]
    pub all: bool,
}

pub fn exec(args: &Args, out: &Out) -> Result<i32> {
    let msgs = journal::restore_stale(args.all);
    if out.json {
        out.json_data(&msgs)?;
    } else if msgs.is_empty() {
        let live = journal::load().len();
        out.info(&if live == 0 {
            "nothing to restore: the journal is empty".to_string()
        } else {
            format!("{live} setting(s) belong to tunelab processes still running (use --all to restore them anyway)")
        });
    } else {
        for m in &msgs {
            out.data(&format!("{m}\n"))?;
        }
    }
    Ok(0)
}
