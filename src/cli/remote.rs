//! `tunelab remote HOST… -- ARGS…`: run a tunelab command on boards over ssh
//! and store the runs they bring back (`engine::verbs::remote`: plan, then
//! measure); this file parses and prints.

use std::path::PathBuf;

use super::{Cli, Out};
use crate::engine::verbs::remote::{self, Fanned, Request};
use crate::store::Access;
use crate::{Error, Result};

#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// Hosts as [user@]name[:port], or inventory groups/hosts with --inventory.
    pub(crate) hosts: Vec<String>,
    /// Ansible inventory file (INI, or YAML: *.yml/*.yaml); HOSTS (default: all) select groups or hosts in it.
    #[arg(long, short, value_name = "FILE")]
    pub(crate) inventory: Option<PathBuf>,
    /// Static tunelab binaries for the hosts' architectures (scripts/build-static.sh output).
    #[arg(long = "bin", value_name = "DIR")]
    pub(crate) binaries: Option<PathBuf>,
    /// Hosts worked on at once.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..))]
    pub(crate) parallel: u16,
    /// Time allowed per host, copy and command included (e.g. 30m).
    #[arg(long, default_value = "1h", value_parser = super::run::positive_duration)]
    pub(crate) timeout: f64,
    /// Extra option for ssh, before the host (e.g. -o "-F ./ssh_config"); repeatable.
    #[arg(
        long = "ssh-option",
        short = 'o',
        value_name = "OPT",
        allow_hyphen_values = true
    )]
    pub(crate) ssh_options: Vec<String>,
    /// Do not store the runs the hosts bring back.
    #[arg(long)]
    pub(crate) no_store: bool,
    /// Copy a dynamically linked tunelab too (refused by default: boards
    /// without its libc cannot run it); for hosts with the same libc.
    #[arg(long)]
    pub(crate) allow_dynamic: bool,
    /// The tunelab command line to run on each host (after --).
    #[arg(last = true, required = true, value_name = "ARGS")]
    pub(crate) args: Vec<String>,
}

pub(crate) fn exec(a: &Args, out: &Out, cli: &Cli) -> Result<i32> {
    let request = Request {
        hosts: a.hosts.clone(),
        inventory: a.inventory.clone(),
        binaries: a.binaries.clone(),
        parallel: a.parallel as usize,
        timeout: a.timeout,
        ssh_options: a.ssh_options.clone(),
        allow_dynamic: a.allow_dynamic,
        args: a.args.clone(),
    };
    let planned = remote::plan(request)?;
    // Opened after the plan, as every verb's store: bad hosts are said first.
    let mut store = if a.no_store {
        None
    } else {
        Some(super::open_store(cli, Access::Write, None)?)
    };
    let Fanned {
        outcomes,
        stored,
        interrupted,
    } = planned.measure(store.as_mut(), out)?;
    let failed: Vec<&str> = outcomes
        .iter()
        .filter(|o| o.status != "ok")
        .map(|o| o.host.as_str())
        .collect();
    if out.json {
        let docs: Vec<serde_json::Value> = outcomes
            .iter()
            .map(|o| {
                let mut v = serde_json::to_value(o).unwrap_or_default();
                v["run"] = stored
                    .iter()
                    .find(|(h, _)| h == &o.host)
                    .map(|(_, id)| serde_json::Value::String(id.clone()))
                    .unwrap_or(serde_json::Value::Null);
                if o.output
                    .as_ref()
                    .is_some_and(|d| d["schema"] != "tunelab.run/1")
                {
                    v["output"] = o.output.clone().unwrap_or_default();
                }
                v
            })
            .collect();
        out.json_data(&serde_json::json!({ "schema": "tunelab.remote/1", "hosts": docs }))?;
    } else {
        let rows = outcomes
            .iter()
            .map(|o| {
                vec![
                    o.host.clone(),
                    o.arch.clone().unwrap_or_else(|| "–".into()),
                    o.status.clone(),
                    o.exit_code.map_or("–".into(), |c| c.to_string()),
                    format!("{:.1} s", o.seconds),
                    // Only what happened: a host never reached got nothing.
                    if o.copied {
                        "copied"
                    } else if o.cached {
                        "cached"
                    } else {
                        "–"
                    }
                    .to_string(),
                    stored
                        .iter()
                        .find(|(h, _)| h == &o.host)
                        .map_or("–".into(), |(_, id)| id.clone()),
                    o.error.clone().unwrap_or_default(),
                ]
            })
            .collect();
        out.data(&out.table(
            &[
                "host",
                "arch",
                "status",
                "exit",
                "time",
                "binary",
                "stored run",
                "error",
            ],
            rows,
        ))?;
    }
    if let Some(s) = &store {
        if !stored.is_empty() {
            out.info(&format!(
                "stored {} run(s) in {}",
                stored.len(),
                s.location()
            ));
        }
    }
    // Interrupted: the table shows what finished (hosts never started are
    // left out); the exit code says the fan-out was cut short.
    if let Some(sig) = interrupted {
        return Err(Error::Interrupted(format!(
            "{sig}: the ssh connections were killed; the table lists the {} host(s) with an outcome",
            outcomes.len()
        )));
    }
    if failed.is_empty() {
        Ok(0)
    } else {
        Err(Error::measurement(format!(
            "{} of {} host(s) did not complete: {}",
            failed.len(),
            outcomes.len(),
            failed.join(", ")
        )))
    }
}
