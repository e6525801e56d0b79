//! `tunelab completions SHELL|man`: generated from the same clap definitions.
//! Feature "completions" (the board build leaves it out: the scripts and
//! pages are the same for every build of a version, so a host makes them).
//! The scripts offer the registry's experiment names and the knob table's
//! names as value lists, and run references (`last`, stored ids) asked of
//! the store when completing: bash and fish run `tunelab completions
//! run-ids`, the other shells offer `last`.

#[cfg(feature = "completions")]
use std::path::Path;
use std::path::PathBuf;

#[cfg(feature = "completions")]
use clap_complete::Shell;

#[cfg(feature = "completions")]
use super::output::write_new;
use crate::engine::catalog::Catalog;
use crate::{Error, Result};

#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// bash, zsh, fish, elvish, powershell — or `man` for the man page
    /// (roff); `run-ids` prints the stored runs' ids (what the scripts call).
    pub(crate) shell: String,
    /// man: write tunelab.1 and one page per subcommand (tunelab-run.1, …)
    /// into DIR (created if missing; existing pages are never overwritten)
    /// instead of printing tunelab.1. Then: man -M DIR/.. tunelab-run, or
    /// copy them to /usr/local/share/man/man1.
    #[arg(long, value_name = "DIR")]
    pub(crate) dir: Option<PathBuf>,
}

#[cfg(feature = "completions")]
fn roff(man: &clap_mangen::Man) -> Result<String> {
    let mut buf = Vec::new();
    man.render(&mut buf)
        .map_err(|e| Error::environment(format!("cannot render the man page: {e}")))?;
    String::from_utf8(buf).map_err(|e| Error::environment(format!("man page not UTF-8: {e}")))
}

/// Every man page: (file name, roff), the top page first.
#[cfg(feature = "completions")]
pub(crate) fn man_pages(experiments: &Catalog) -> Result<Vec<(String, String)>> {
    let mut cmd = super::man_command(experiments).disable_help_subcommand(true);
    cmd.build();
    let mut pages = Vec::new();
    let top = clap_mangen::Man::new(cmd.clone());
    pages.push((
        top.get_filename(),
        super::examples::man_page(&roff(&top)?, &cmd),
    ));
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let man = clap_mangen::Man::new(sub.clone());
        pages.push((
            man.get_filename(),
            super::examples::man_page(&roff(&man)?, sub),
        ));
    }
    Ok(pages)
}

#[cfg(feature = "completions")]
fn write_pages(dir: &Path, experiments: &Catalog) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io("cannot create", dir, e))?;
    let pages = man_pages(experiments)?;
    // Refuse before writing anything: a half-written set is worse than none.
    for (name, _) in &pages {
        let p = dir.join(name);
        if p.exists() {
            return Err(Error::usage(format!(
                "{} already exists; choose a new directory (tunelab never overwrites a file)",
                p.display()
            )));
        }
    }
    let mut written = Vec::new();
    for (name, text) in &pages {
        let p = dir.join(name);
        write_new(&p, text)?;
        written.push(p);
    }
    Ok(written)
}

/// Without feature "completions": the verb is there, and says where to get them.
#[cfg(not(feature = "completions"))]
pub(crate) fn exec(
    args: &Args,
    out: &super::Out,
    _experiments: &Catalog,
    store: &dyn Fn() -> Result<crate::store::Store>,
) -> Result<i32> {
    if args.shell == RUN_IDS {
        return run_ids(out, store);
    }
    let what = if args.shell == "man" {
        "man pages"
    } else {
        "shell completions"
    };
    Err(Error::usage(format!(
        "this tunelab was built without {what} (feature \"completions\"; the static board \
         build leaves it out to stay small): run `tunelab completions {}` with a host build of \
         the same version and copy the output to the board",
        args.shell
    )))
}

/// The `shell` word that prints run ids instead of a script.
const RUN_IDS: &str = "run-ids";

/// `last` and every stored run's id, one per line, for the scripts; nothing
/// (and exit 0) when there is no store yet.
fn run_ids(out: &super::Out, store: &dyn Fn() -> Result<crate::store::Store>) -> Result<i32> {
    let mut text = String::from("last\n");
    if let Ok(runs) = store().and_then(|s| s.list()) {
        for r in runs {
            text.push_str(&r.id);
            text.push('\n');
        }
    }
    out.data(&text)?;
    Ok(0)
}

/// Placeholder value of a run reference, replaced in the script by a call
/// to `tunelab completions run-ids` (or by `last` where a shell cannot).
#[cfg(feature = "completions")]
const RUN_REF: &str = "@tunelab-run-ids@";

/// The command with value lists on the arguments that take an experiment,
/// a knob or a run reference — only for the scripts: parsing stays as is.
#[cfg(feature = "completions")]
pub(crate) fn completing(experiments: &Catalog) -> clap::Command {
    use clap::builder::PossibleValue;
    let exps: Vec<&'static str> = experiments
        .all()
        .iter()
        .filter(|e| !e.spec().hidden)
        .map(|e| e.spec().name)
        .collect();
    let knobs = crate::tune::knobs::NAMES;
    let values = |arg: &clap::Arg| -> Option<Vec<&'static str>> {
        let id = arg.get_id().as_str();
        let names: Vec<String> = arg
            .get_value_names()
            .map(|v| v.iter().map(|s| s.to_string()).collect())
            .unwrap_or_default();
        let named = |n: &str| names.iter().any(|v| v == n);
        if id == "experiment" || named("EXP") {
            Some(exps.clone())
        } else if id == "knob" {
            Some(knobs.to_vec())
        } else if named("KNOB|all") {
            Some(knobs.iter().copied().chain(["all"]).collect())
        } else if id == "run" || id == "runs" || named("RUN") {
            Some(vec![RUN_REF])
        } else {
            None
        }
    };
    let mut cmd = super::command();
    let subs: Vec<String> = cmd
        .get_subcommands()
        .map(|s| s.get_name().to_string())
        .collect();
    for sub in subs {
        cmd = cmd.mut_subcommand(&sub, |mut sc| {
            let ids: Vec<(String, Vec<&'static str>)> = sc
                .get_arguments()
                .filter_map(|a| values(a).map(|v| (a.get_id().to_string(), v)))
                .collect();
            for (id, vals) in ids {
                sc = sc.mut_arg(&id, |a| {
                    a.value_parser(clap::builder::PossibleValuesParser::new(
                        vals.iter().map(|v| PossibleValue::new(*v)),
                    ))
                });
            }
            sc
        });
    }
    cmd
}

/// A shell's script with the run-reference placeholder resolved.
#[cfg(feature = "completions")]
pub(crate) fn script(shell: Shell, experiments: &Catalog) -> Result<String> {
    let mut cmd = completing(experiments);
    let mut buf = Vec::new();
    clap_complete::generate(shell, &mut cmd, "tunelab", &mut buf);
    let text = String::from_utf8(buf)
        .map_err(|e| Error::environment(format!("completion script not UTF-8: {e}")))?;
    let ids = match shell {
        // Inside the script's double-quoted word list: run when completing.
        Shell::Bash => "$(tunelab completions run-ids 2>/dev/null)",
        Shell::Fish => "(tunelab completions run-ids 2>/dev/null)",
        _ => "last",
    };
    Ok(text.replace(RUN_REF, ids))
}

#[cfg(feature = "completions")]
pub(crate) fn exec(
    args: &Args,
    out: &super::Out,
    experiments: &Catalog,
    store: &dyn Fn() -> Result<crate::store::Store>,
) -> Result<i32> {
    if args.shell == RUN_IDS {
        return run_ids(out, store);
    }
    if args.shell == "man" {
        match &args.dir {
            Some(dir) => {
                let written = write_pages(dir, experiments)?;
                out.info(&format!(
                    "wrote {} man pages to {} (try: man -l {})",
                    written.len(),
                    dir.display(),
                    dir.join("tunelab-run.1").display()
                ));
            }
            None => {
                let (_, top) = man_pages(experiments)?.swap_remove(0);
                out.data(&top)?;
            }
        }
        return Ok(0);
    }
    if args.dir.is_some() {
        return Err(Error::usage(
            "--dir is for `completions man`: shell completions are printed on stdout",
        ));
    }
    let shell: Shell = args.shell.parse().map_err(|_| {
        Error::usage(format!(
            "unknown shell '{}' (bash, zsh, fish, elvish, powershell or man)",
            args.shell
        ))
    })?;
    out.data(&script(shell, experiments)?)?;
    Ok(0)
}

#[cfg(all(test, feature = "completions"))]
mod tests {
    use super::*;

    #[test]
    fn one_man_page_per_subcommand_with_examples() {
        // The experiments on tunelab-run.1 are the registry's (main.rs hands
        // it in): tests/cli_help.rs checks them through the binary.
        let none = Catalog {
            all: Vec::new,
            find: |n| Err(crate::Error::usage(format!("no experiment {n}"))),
            param_kind: |_, _| None,
        };
        let pages = man_pages(&none).unwrap();
        let names: Vec<&str> = pages.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names[0], "tunelab.1");
        for verb in ["run", "study", "report", "monitor", "remote"] {
            let name = format!("tunelab-{verb}.1");
            let (_, text) = pages
                .iter()
                .find(|(n, _)| *n == name)
                .unwrap_or_else(|| panic!("no {name} in {names:?}"));
            assert!(text.contains(".TH tunelab-"), "{name} title");
            assert!(text.contains(".SH EXAMPLES"), "{name} has no examples");
        }
        // Every page the top page points to exists.
        let top = &pages[0].1;
        for (n, _) in &pages[1..] {
            let stem = n.trim_end_matches(".1");
            assert!(
                top.contains(&stem.replace('-', "\\-")),
                "tunelab.1 does not name {stem}"
            );
        }
        let run = &pages.iter().find(|(n, _)| n == "tunelab-run.1").unwrap().1;
        assert!(
            run.contains("Experiments (tunelab list EXP"),
            "tunelab-run.1 has the experiment list"
        );
    }
}
