//! `tunelab export RUN --format json|csv|md`.

use std::path::PathBuf;

use super::Out;
use crate::report::export::{export, Format};
use crate::store::Store;
use crate::{Error, Result};

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
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(path)
                .map_err(|e| {
                    if e.kind() == std::io::ErrorKind::AlreadyExists {
                        Error::usage(format!(
                            "{} already exists; choose a new file name",
                            path.display()
                        ))
                    } else {
                        Error::io("cannot create", path, e)
                    }
                })?;
            f.write_all(text.as_bytes())
                .map_err(|e| Error::io("cannot write", path, e))?;
            out.info(&format!("wrote {}", path.display()));
        }
    }
    Ok(0)
}
