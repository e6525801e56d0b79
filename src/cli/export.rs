//! `tunelab export RUN --format json|csv|md`.

use std::path::PathBuf;

use super::Out;
use crate::engine::Store;
use crate::report::export::{export, Format};
use crate::Result;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Run id, unique prefix, `last` or `last~N`.
    pub run: String,
    /// Output format.
    #[arg(long, short, value_enum, default_value = "json")]
    pub format: Format,
    /// Write to this new file instead of stdout (an existing file is never overwritten).
    #[arg(long, short, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

pub fn exec(args: &Args, out: &Out, store: &Store) -> Result<i32> {
    let run = store.load(&args.run)?;
    let text = export(&run, args.format)?;
    match &args.output {
        None => out.data(&text)?,
        Some(path) => {
            super::output::write_new(path, &text)?;
            out.info(&format!("wrote {}", path.display()));
        }
    }
    Ok(0)
}
