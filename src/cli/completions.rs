//! `tunelab completions SHELL|man`: generated from the same clap definitions.

use clap_complete::Shell;

use crate::{Error, Result};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// bash, zsh, fish, elvish, powershell — or `man` for the man page (roff).
    pub shell: String,
}

pub fn exec(args: &Args) -> Result<i32> {
    let mut cmd = super::command();
    let mut stdout = std::io::stdout();
    if args.shell == "man" {
        clap_mangen::Man::new(cmd)
            .render(&mut stdout)
            .map_err(|e| Error::environment(format!("cannot write the man page: {e}")))?;
        return Ok(0);
    }
    let shell: Shell = args.shell.parse().map_err(|_| {
        Error::usage(format!(
            "unknown shell '{}' (bash, zsh, fish, elvish, powershell or man)",
            args.shell
        ))
    })?;
    clap_complete::generate(shell, &mut cmd, "tunelab", &mut stdout);
    Ok(0)
}
