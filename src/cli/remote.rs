//! `tunelab remote HOST… -- ARGS…`: run a tunelab command on boards over ssh
//! and store the runs they bring back.

use std::path::PathBuf;
use std::time::Duration;

use super::Out;
use crate::engine::model::Run;
use crate::fleet::inventory::Host;
use crate::fleet::remote::{self, Plan};
use crate::report::table;
use crate::store::Store;
use crate::{Error, Result};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Hosts as [user@]name[:port], or inventory groups/hosts with --inventory.
    pub hosts: Vec<String>,
    /// Ansible inventory file (INI, or YAML: *.yml/*.yaml); HOSTS (default: all) select groups or hosts in it.
    #[arg(long, short, value_name = "FILE")]
    pub inventory: Option<PathBuf>,
    /// Static tunelab binaries for the hosts' architectures (scripts/build-static.sh output).
    #[arg(long = "bin", value_name = "DIR")]
    pub binaries: Option<PathBuf>,
    /// Hosts worked on at once.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..))]
    pub parallel: u16,
    /// Time allowed per host, copy and command included (e.g. 30m).
    #[arg(long, default_value = "1h", value_parser = super::run::positive_duration)]
    pub timeout: f64,
    /// Extra option for ssh, before the host (e.g. -o "-F ./ssh_config"); repeatable.
    #[arg(
        long = "ssh-option",
        short = 'o',
        value_name = "OPT",
        allow_hyphen_values = true
    )]
    pub ssh_options: Vec<String>,
    /// Do not store the runs the hosts bring back.
    #[arg(long)]
    pub no_store: bool,
    /// Copy a dynamically linked tunelab too (refused by default: boards
    /// without its libc cannot run it); for hosts with the same libc.
    #[arg(long)]
    pub allow_dynamic: bool,
    /// The tunelab command line to run on each host (after --).
    #[arg(last = true, required = true, value_name = "ARGS")]
    pub args: Vec<String>,
}

/// The inventory's text, read no further than the size limit; a file that
/// is not UTF-8 text is bad input (exit 2), not a failure.
fn read_inventory(path: &std::path::Path) -> Result<String> {
    use std::io::Read;
    let f =
        std::fs::File::open(path).map_err(|e| Error::io("cannot read the inventory", path, e))?;
    let mut bytes = Vec::new();
    f.take(crate::fleet::MAX_INVENTORY_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Error::io("cannot read the inventory", path, e))?;
    String::from_utf8(bytes).map_err(|_| {
        Error::usage(format!(
            "inventory {} is not UTF-8 text: give an Ansible INI or YAML inventory",
            path.display()
        ))
    })
}

fn hosts(a: &Args) -> Result<Vec<Host>> {
    let list = match &a.inventory {
        Some(path) => {
            let text = read_inventory(path)?;
            let inv = crate::fleet::load_inventory(&text, &path.to_string_lossy())?;
            let pattern = if a.hosts.is_empty() {
                "all".to_string()
            } else {
                a.hosts.join(",")
            };
            inv.select(&pattern)?
        }
        None => a
            .hosts
            .iter()
            .map(|h| Host::parse(h))
            .collect::<Result<_>>()?,
    };
    if list.is_empty() {
        return Err(Error::usage(
            "no hosts: name them, or give --inventory FILE",
        ));
    }
    Ok(list)
}

pub fn exec(a: &Args, out: &Out, store: Option<Store>) -> Result<i32> {
    let hosts = hosts(a)?;
    if a.args.first().is_some_and(|c| c == "remote") {
        return Err(Error::usage(
            "remote runs tunelab on the hosts; 'remote' there would fan out again",
        ));
    }
    let mut store = if a.no_store { None } else { store };
    let ssh_options: Vec<String> = a
        .ssh_options
        .iter()
        .flat_map(|o| o.split_whitespace().map(str::to_string).collect::<Vec<_>>())
        .collect();
    let plan = Plan {
        ssh: std::env::var("TUNELAB_SSH")
            .ok()
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "ssh".into()),
        ssh_options,
        binaries: a.binaries.clone(),
        args: &a.args,
        timeout: Duration::from_secs_f64(a.timeout),
        parallel: a.parallel as usize,
        allow_dynamic: a.allow_dynamic,
    };
    // Without --bin this very binary is copied: refused before connecting
    // when it is dynamically linked (the hosts' own check covers --bin).
    if a.binaries.is_none() {
        if let Ok(me) = std::env::current_exe() {
            let interp = std::fs::read(&me)
                .ok()
                .and_then(|b| crate::fleet::elf::interpreter(&b));
            match (interp, a.allow_dynamic) {
                (Some(i), false) => return Err(Error::usage(crate::fleet::elf::refusal(&me, &i))),
                (Some(i), true) => out.warn(&format!(
                    "copying the dynamically linked {} (needs {i} on every host)",
                    me.display()
                )),
                (None, _) => {}
            }
        }
    }
    out.info(&format!(
        "running on {} host(s), {} at a time",
        hosts.len(),
        plan.parallel.min(hosts.len())
    ));
    let outcomes = remote::run(&plan, &hosts, &|host, line| {
        out.info(&format!("[{host}] {line}"))
    });
    let mut stored: Vec<(String, String)> = Vec::new();
    for o in &outcomes {
        let Some(doc) = &o.output else { continue };
        let is_run = doc["schema"]
            .as_str()
            .is_some_and(|s| s.starts_with("tunelab.run/"));
        if let (true, Some(store)) = (is_run, store.as_mut()) {
            let mut run: Run = serde_json::from_value(doc.clone()).map_err(|e| {
                Error::measurement(format!(
                    "{}: the run it sent back is not readable: {e}",
                    o.host
                ))
            })?;
            // The inventory name tells boards apart when they share a host
            // name (cloned images are all "buildroot"); --machine matches it.
            run.environment
                .insert(crate::analysis::devices::FLEET_HOST.into(), o.host.clone());
            crate::engine::pipeline::store_received(&run, store)?;
            stored.push((o.host.clone(), run.id.clone()));
        }
    }
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
        out.data(&table::render(
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
