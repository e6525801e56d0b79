//! `tunelab remote`: [`plan`] resolves the hosts (names or an Ansible
//! inventory) and checks the command and the binary to copy before
//! connecting; [`Planned::measure`] runs the tunelab command on every
//! host over ssh (`crate::fleet::remote`) and store the runs they bring
//! back as they came (`pipeline::store_received`). The CLI prints.

use std::path::PathBuf;
use std::time::Duration;

use crate::engine::observer::Observer;
use crate::fleet::inventory::Host;
use crate::fleet::remote::{self, Plan};
use crate::model::run::Run;
use crate::store::Store;
use crate::{Error, Result};

// The CLI prints each host's outcome (plain data, named there).
pub(crate) use crate::fleet::remote::HostOutcome;

/// What to run where, as the CLI parsed it.
pub(crate) struct Request {
    /// `[user@]name[:port]`, or inventory groups/hosts with `inventory`.
    pub(crate) hosts: Vec<String>,
    pub(crate) inventory: Option<PathBuf>,
    /// Static tunelab binaries for the hosts' architectures.
    pub(crate) binaries: Option<PathBuf>,
    /// Hosts worked on at once.
    pub(crate) parallel: usize,
    /// Seconds allowed per host.
    pub(crate) timeout: f64,
    /// Extra ssh options, each possibly several words.
    pub(crate) ssh_options: Vec<String>,
    pub(crate) allow_dynamic: bool,
    /// The tunelab command line to run on each host.
    pub(crate) args: Vec<String>,
}

/// Every host's outcome, and the runs stored: (host, run id).
pub(crate) struct Fanned {
    pub(crate) outcomes: Vec<HostOutcome>,
    pub(crate) stored: Vec<(String, String)>,
    /// The signal that cut the fan-out short (the ssh connections killed).
    pub(crate) interrupted: Option<&'static str>,
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

fn hosts(a: &Request) -> Result<Vec<Host>> {
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

/// The hosts resolved, the command and the binary to copy checked; no
/// host contacted yet.
pub(crate) struct Planned {
    hosts: Vec<Host>,
    /// The ssh program (`ssh`, or `TUNELAB_SSH`).
    ssh: String,
    /// The extra ssh options, split into words.
    ssh_options: Vec<String>,
    binaries: Option<PathBuf>,
    args: Vec<String>,
    timeout: Duration,
    parallel: usize,
    allow_dynamic: bool,
    /// Said as the fan-out begins (a dynamically linked binary copied).
    warnings: Vec<String>,
}

/// Check and plan the fan-out: the hosts (names or the inventory's
/// selection), the command (never `remote` again), the ssh program and
/// options, and the binary copied when `--bin` is not given (refused when
/// dynamically linked, unless `--allow-dynamic`), before connecting.
pub(crate) fn plan(a: Request) -> Result<Planned> {
    let hosts = hosts(&a)?;
    if a.args.first().is_some_and(|c| c == "remote") {
        return Err(Error::usage(
            "remote runs tunelab on the hosts; 'remote' there would fan out again",
        ));
    }
    let ssh_options: Vec<String> = a
        .ssh_options
        .iter()
        .flat_map(|o| o.split_whitespace().map(str::to_string).collect::<Vec<_>>())
        .collect();
    let mut warnings = Vec::new();
    // Without --bin this very binary is copied: refused before connecting
    // when it is dynamically linked (the hosts' own check covers --bin).
    if a.binaries.is_none() {
        if let Ok(me) = std::env::current_exe() {
            let interp = std::fs::read(&me)
                .ok()
                .and_then(|b| crate::fleet::elf::interpreter(&b));
            match (interp, a.allow_dynamic) {
                (Some(i), false) => return Err(Error::usage(crate::fleet::elf::refusal(&me, &i))),
                (Some(i), true) => warnings.push(format!(
                    "copying the dynamically linked {} (needs {i} on every host)",
                    me.display()
                )),
                (None, _) => {}
            }
        }
    }
    Ok(Planned {
        hosts,
        ssh: std::env::var("TUNELAB_SSH")
            .ok()
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "ssh".into()),
        ssh_options,
        binaries: a.binaries,
        args: a.args,
        timeout: Duration::from_secs_f64(a.timeout),
        parallel: a.parallel,
        allow_dynamic: a.allow_dynamic,
        warnings,
    })
}

impl Planned {
    /// Run the command on every host; the runs they send back go to
    /// `store` (when given). A run that cannot be read or stored is the
    /// error at once.
    pub(crate) fn measure(
        &self,
        mut store: Option<&mut Store>,
        obs: &(dyn Observer + Sync),
    ) -> Result<Fanned> {
        for w in &self.warnings {
            obs.warn(w);
        }
        let plan = Plan {
            ssh: self.ssh.clone(),
            ssh_options: self.ssh_options.clone(),
            binaries: self.binaries.clone(),
            args: &self.args,
            timeout: self.timeout,
            parallel: self.parallel,
            allow_dynamic: self.allow_dynamic,
        };
        let hosts = &self.hosts;
        obs.info(&format!(
            "running on {} host(s), {} at a time",
            hosts.len(),
            plan.parallel.min(hosts.len())
        ));
        let outcomes = remote::run(&plan, hosts, &|host, line| {
            obs.info(&format!("[{host}] {line}"))
        });
        let mut stored: Vec<(String, String)> = Vec::new();
        for o in &outcomes {
            let Some(doc) = &o.output else { continue };
            let is_run = doc["schema"]
                .as_str()
                .is_some_and(|s| s.starts_with("tunelab.run/"));
            if let (true, Some(store)) = (is_run, store.as_deref_mut()) {
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
        Ok(Fanned {
            outcomes,
            stored,
            interrupted: crate::safety::signals::caught(),
        })
    }
}
