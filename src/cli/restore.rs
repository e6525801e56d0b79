//! `tunelab restore`: put back every setting a dead tunelab left changed.

use super::Out;
use crate::engine::verbs::restore;
use crate::Result;

#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// Also restore entries of tunelab processes that are still running.
    #[arg(long)]
    pub(crate) all: bool,
}

/// Exit 0 when everything is restored (or nothing was left); an unreadable
/// journal is an error (4) that shows what it holds and how to restore by
/// hand; entries that could not be restored exit 4 too.
pub(crate) fn exec(args: &Args, out: &Out, db: Option<&std::path::Path>) -> Result<i32> {
    let restore::Restored {
        messages: msgs,
        live,
        journal,
    } = restore::plan(args.all, db).measure()?;
    let failed = msgs.iter().filter(|m| m.starts_with("could not")).count();
    if out.json {
        out.json_data(&msgs)?;
    } else if msgs.is_empty() {
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
    if failed > 0 {
        return Err(crate::Error::environment(format!(
            "{failed} setting(s) could not be restored; they stay in {}",
            journal.display()
        )));
    }
    Ok(0)
}
