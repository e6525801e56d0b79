//! The command line: one file per verb. `main` parses, dispatches and maps
//! errors to exit codes; nothing is printed to stdout but data.

mod advise;
mod apply;
mod boot;
mod compare;
mod completions;
mod diagnose;
mod examples;
mod export;
mod export_flags;
mod history;

mod import;
mod inspect;
mod list;
mod memory;
mod monitor;
mod output;
mod progress;
mod remote;
mod report;
mod restore;
mod run;
mod runs;
mod show;
mod study;
mod time;
mod tune;

use std::path::PathBuf;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

pub(crate) use output::Out;

use crate::engine::catalog::Catalog;
use crate::engine::start::{start, Start};
use crate::store::Access::{Read, Write};
use crate::store::{Access, Store};
use crate::Result;

/// Measure, explain and tune the performance of Linux systems.
#[derive(Parser, Debug)]
#[command(name = "tunelab", version, about, long_about = None, after_help = EXIT_CODES)]
pub(crate) struct Cli {
    /// Print data as JSON on stdout (messages stay on stderr).
    #[arg(long, global = true)]
    pub(crate) json: bool,
    /// Result database (SQLite file). Default: $TUNELAB_DB when set and not
    /// empty, else $XDG_DATA_HOME/tunelab/results.db.
    #[arg(long, global = true, value_name = "PATH")]
    pub(crate) db: Option<PathBuf>,
    /// Print only data and errors.
    #[arg(long, short, global = true)]
    pub(crate) quiet: bool,
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// The hidden no-op subcommand (see `main`).
pub(crate) const NOOP: &str = "__noop";

pub(crate) const EXIT_CODES: &str =
    "Exit codes: 0 success · 1 measurement failed · 2 bad usage or input · \
3 needs privileges · 4 environment problem (no space, read-only, missing device) · \
5 regression found (--fail-on-regression) or drift (verify) · 130 interrupted";

#[derive(Subcommand, Debug)]
pub(crate) enum Command {
    /// List experiments with their parameters and metrics.
    List(list::Args),
    /// Run one experiment (parameters with -p key=value; comma lists sweep).
    Run(run::Args),
    /// List stored runs, newest first.
    Runs(runs::Args),
    /// Show one stored run (a study with its verdicts and the time per key issue).
    Show(show::Args),
    /// Compare two runs: environment differences, ratios with 95% CIs, verdicts.
    Compare(compare::Args),
    /// Export a stored run as JSON, CSV or Markdown.
    Export(export::Args),
    /// Store runs from another machine: `export --format json` files or a copied results.db.
    Import(import::Args),
    /// Configuration facts that decide performance, with where each came from.
    Inspect(inspect::Args),
    /// Findings from configuration facts and stored measurements, with the fix and its risk.
    Advise(advise::Args),
    /// Run a study profile of key issues and judge each (quick, storage, micro, set-top, pvr, full or FILE.toml).
    Study(study::Args),
    /// Sweep one knob (interleaved, randomised, repeated) and always restore it.
    Tune(tune::Args),
    /// Restore settings left changed by a tunelab that was killed.
    Restore(restore::Args),
    /// Print a shell completion script or the man page.
    Completions(completions::Args),
    /// Watch the machine: vmstat, iostat, hogs, irq, slab, dirty, psi, power (Ctrl-C stops, exit 0).
    Monitor(monitor::Args),
    /// Time programs' start-up and exit like hyperfine (stored as an app.time run).
    Time(time::Args),
    /// Memory of a program (RSS, PSS, VSZ, shared/private, peak) and of the system, before and after.
    Memory(memory::Args),
    /// Write a self-contained HTML (or Markdown) report of a run with charts; --vs adds a comparison.
    Report(report::Args),
    /// Stored medians of an experiment or study over time, change points and what changed at each.
    History(history::Args),
    /// Run a tunelab command on hosts over ssh (copying the static binary) and store their runs.
    Remote(remote::Args),

    /// Why is it slow: USE table, CPU profile, locks, blocking, slab churn, wake-ups, start-up (--for DUR | --pid P | -- CMD).
    Diagnose(diagnose::Args),
    /// Time a board's boot from its console (a command such as qemu, or --serial DEV), grabserial-style.
    Boot(boot::Args),
    /// Keep a tune run's winning value across boots (sysctl.d drop-in, udev rule, fstab line).
    Apply(apply::ApplyArgs),
    /// List the settings tunelab applied.
    Applied(apply::AppliedArgs),
    /// Compare live values with the applied ones; say what drifted and why (exit 5 on drift).
    Verify(apply::VerifyArgs),
    /// Remove tunelab's files and restore the values from before apply.
    Unapply(apply::UnapplyArgs),
}

/// The clap command with examples on every subcommand's help. `run --help`
/// stays short: the experiments are `tunelab list [EXP]` (and the man page).
pub(crate) fn command() -> clap::Command {
    examples::add(Cli::command())
}

/// The command as the man pages describe it: `tunelab-run(1)` also lists
/// every experiment with its parameters.
#[cfg(feature = "completions")]
pub(crate) fn man_command(experiments: &Catalog) -> clap::Command {
    command().mut_subcommand("run", |r| {
        let help = format!(
            "{}\n{}",
            examples::text("run").unwrap_or_default(),
            list::experiments_help(experiments)
        );
        r.after_long_help(help)
    })
}

/// Entry point of the binary: returns the process exit code.
pub fn main(experiments: &Catalog) -> i32 {
    let args: Vec<String> = std::env::args().collect();
    // `tunelab __noop`: a program every board has (this one) that does
    // nothing, for timing process start-up (`/proc/self/exe __noop` in the
    // profiles instead of `true`, which a minimal board may lack).
    if args.len() == 2 && args[1] == NOOP {
        return 0;
    }
    let term = output::terminal();
    if let Some(code) = run::help_for_experiment(&args, experiments, term) {
        return code;
    }
    let matches = match command().try_get_matches_from(&args) {
        Ok(m) => m,
        Err(e) => {
            print_clap(&e, term);
            return if e.use_stderr() { 2 } else { 0 };
        }
    };
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return 2;
        }
    };
    let out = Out::new(cli.json, cli.quiet, term);
    // Settings a killed tunelab left changed are put back before anything
    // else; the commands that measure or run programs get their limits.
    let started = start(&Start {
        db: cli.db.as_deref(),
        restore_left: !matches!(cli.command, Command::Restore(_)),
        measures: matches!(
            cli.command,
            Command::Run(_)
                | Command::Study(_)
                | Command::Tune(_)
                | Command::Time(_)
                | Command::Memory(_)
                | Command::Diagnose(_)
                | Command::Boot(_)
                | Command::Remote(_)
        ),
    });
    started.warnings.iter().for_each(|w| out.warn(w));
    if let Some(e) = started.refused {
        out.error(&e.to_string());
        return e.exit_code();
    }
    match dispatch(&cli, &out, &args, experiments) {
        Ok(code) => code,
        Err(e) => {
            out.error(&e.to_string());
            e.exit_code()
        }
    }
}

/// Help and usage errors: clap's own colours on a terminal that takes them,
/// else plain text (ASCII in a non-UTF-8 locale).
fn print_clap(e: &clap::Error, term: crate::report::table::Terminal) {
    use std::io::Write;
    if term.escapes() && !term.ascii() {
        let _ = e.print();
        return;
    }
    let text = e.render().to_string();
    let text = term.plain(&text);
    let _ = if e.use_stderr() {
        std::io::stderr().write_all(text.as_bytes())
    } else {
        std::io::stdout().write_all(text.as_bytes())
    };
}

fn dispatch(cli: &Cli, out: &Out, argv: &[String], experiments: &Catalog) -> Result<i32> {
    match &cli.command {
        Command::List(a) => list::exec(a, out, experiments),
        Command::Run(a) => run::exec(a, out, cli, argv, experiments),
        Command::Runs(a) => runs::exec(a, out, &open_store(cli, Read, Some(experiments))?),
        Command::Show(a) => show::exec(a, out, &open_store(cli, Read, Some(experiments))?),
        Command::Compare(a) => compare::exec(a, out, &open_store(cli, Read, Some(experiments))?),
        Command::Export(a) => export::exec(a, out, &open_store(cli, Read, Some(experiments))?),
        Command::Import(a) => import::exec(
            a,
            out,
            &mut open_store(cli, Write, Some(experiments))?,
            experiments,
        ),
        Command::Inspect(a) => inspect::exec(a, out),
        Command::Advise(a) => advise::exec(a, out, cli, experiments),
        Command::Study(a) => study::exec(a, out, cli, argv),
        Command::Tune(a) => tune::exec(a, out, cli, argv, experiments),
        Command::Restore(a) => restore::exec(a, out, cli.db.as_deref()),
        Command::Completions(a) => completions::exec(a, out, experiments, &|| {
            open_store(cli, Read, Some(experiments))
        }),
        Command::Monitor(a) => monitor::exec(a, out, cli.json),
        Command::Time(a) => time::exec(a, out, cli, argv),
        Command::Memory(a) => memory::exec(a, out),
        Command::Report(a) => report::exec(a, out, &open_store(cli, Read, Some(experiments))?),
        Command::History(a) => history::exec(a, out, &open_store(cli, Read, Some(experiments))?),
        Command::Remote(a) => remote::exec(a, out, cli),

        Command::Boot(a) => boot::exec(a, out, cli, argv),
        Command::Diagnose(a) => diagnose::exec(a, out, cli, argv),
        Command::Apply(a) => {
            apply::exec_apply(a, out, &mut open_store(cli, Write, Some(experiments))?)
        }
        Command::Applied(a) => {
            apply::exec_applied(a, out, &open_store(cli, Write, Some(experiments))?)
        }
        Command::Verify(a) => {
            apply::exec_verify(a, out, &open_store(cli, Write, Some(experiments))?)
        }
        Command::Unapply(a) => {
            apply::exec_unapply(a, out, &mut open_store(cli, Write, Some(experiments))?)
        }
    }
}

/// The results database for a verb that reads it (never created) or
/// writes it: the verb says which where it is dispatched.
/// Results read from it learn the kinds of parameters stored before kinds
/// travelled with them from `experiments` (this build's registry); a
/// measuring verb that only adds its own runs, stamped with their kinds,
/// passes None.
pub(crate) fn open_store(
    cli: &Cli,
    access: Access,
    experiments: Option<&Catalog>,
) -> Result<Store> {
    let store = crate::store::open(cli.db.as_deref(), access)?;
    Ok(match experiments {
        Some(e) => store.learning_kinds(e.param_kind),
        None => store,
    })
}
