//! Stored runs. SQLite (bundled) by default, PostgreSQL for a fleet of
//! machines sharing one database (`--db postgres://…`); both keep every raw
//! sample, the environment and the monitor samples, with versioned schema
//! migrations. Callers see one interface, [`Store`].

#[cfg(feature = "fleet")]
mod postgres;
mod schema;
pub(crate) mod select;
mod sqlite;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::model::applied::AppliedChange;
use crate::model::run::{LegacyKinds, PointResult, Run};
use crate::observe::sampler::MonitorSample;
use crate::{Error, Result};

/// Hands runs one at a time to the sink it is given (the store saves each
/// as it comes, inside one transaction), so an import never holds more than
/// one run in memory. An error from the feed or the sink undoes them all.
pub(crate) type Feed<'a> = dyn FnMut(&mut dyn FnMut(&Run) -> Result<()>) -> Result<()> + 'a;

pub struct Store {
    backend: Box<dyn Backend>,
    /// Where the runs are, for messages (a PostgreSQL password is hidden).
    location: String,
    /// The kinds of parameters stored before kinds travelled with results,
    /// from this build's registry (handed down by the CLI when it opens the
    /// store: the store knows no registry).
    kinds: Option<LegacyKinds>,
}

/// What a database must do for [`Store`]; runs are addressed by exact id
/// (references like `last~1` are resolved once, in `Store`).
trait Backend {
    fn save(&mut self, run: &Run) -> Result<()>;
    /// Save several runs in one transaction: all or none.
    fn save_all(&mut self, feed: &mut Feed) -> Result<usize>;
    /// Save, replacing a run stored under the same id (one transaction).
    fn replace(&mut self, run: &Run) -> Result<()>;
    /// The latest saved first (not by the start a run claims).
    fn list(&self) -> Result<Vec<RunInfo>>;
    fn load(&self, id: &str) -> Result<Option<Run>>;
    fn recent_environments(&self, limit: usize) -> Result<Vec<(String, BTreeMap<String, String>)>>;
    fn results_in(&self, id: &str, experiments: &[&str]) -> Result<Vec<PointResult>>;
    fn peak_dirty_sample(&self, id: &str) -> Result<Option<MonitorSample>>;
    /// Runs that measured experiment `subject` or are a study of profile
    /// `subject`, newest first as `list`, with only what a history reads (see
    /// [`Store::runs_about`]).
    fn runs_about(&self, subject: &str) -> Result<Vec<Run>>;
    /// Insert or update (by id) a change `tunelab apply` made.
    fn save_change(&mut self, change: &AppliedChange) -> Result<()>;
    /// Every recorded change, newest first.
    fn changes(&self) -> Result<Vec<AppliedChange>>;
}

/// One line of `tunelab runs`.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct RunInfo {
    pub(crate) id: String,
    pub(crate) started: String,
    pub(crate) label: String,
    pub(crate) status: String,
    pub(crate) experiments: Vec<String>,
    pub(crate) results: usize,
    /// The machine the run was recorded on: its inventory name (`fleet.host`)
    /// when `remote` brought it back, else its host name ("" for neither),
    /// as `compare --machine` and `history` name it.
    pub(crate) machine: String,
    /// The stable machine id recorded with it ("" when the machine had none).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub(crate) machine_id: String,
}

/// What `Store::import` did with each run offered.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub(crate) struct Imported {
    pub(crate) id: String,
    pub(crate) machine: String,
    /// "imported" or "already stored".
    pub(crate) outcome: &'static str,
}

/// Whether two copies of a run are the same run: same id, start and
/// machine, and the same content (another label or other results under one
/// id is a different run, never "already stored": it would be dropped
/// silently).
fn same_run(a: &Run, b: &Run) -> bool {
    a.id == b.id && fingerprint(a) == fingerprint(b)
}

/// What [`same_run`] compares, hashed: an import remembers the runs it
/// took by this, not whole.
fn fingerprint(r: &Run) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (
        &r.started,
        r.environment.get("host.name"),
        r.environment.get("machine.id"),
        &r.label,
        &r.finished,
        serde_json::to_string(&r.results).ok(),
    )
        .hash(&mut h);
    h.finish()
}

/// The new runs of an import so far, by id: their fingerprint and what
/// names them in a message. Built by [`Store::import_check`]; the second
/// pass takes each run from it once.
#[derive(Default)]
pub(crate) struct ImportCheck {
    fresh: std::collections::HashMap<String, (u64, RunHead)>,
}

impl ImportCheck {
    /// Whether `run` is to be saved now: new, and not handed over before.
    /// A run whose content changed since the first pass (its file was
    /// rewritten meanwhile) is an error: nothing is imported.
    pub(crate) fn take(&mut self, run: &Run) -> Result<bool> {
        match self.fresh.get(&run.id) {
            None => Ok(false),
            Some((p, _)) if *p != fingerprint(run) => Err(Error::usage(format!(
                "run {} changed while it was being imported (was its file rewritten?): \
                 nothing was imported; import it again",
                run.id
            ))),
            Some(_) => {
                self.fresh.remove(&run.id);
                Ok(true)
            }
        }
    }
}

/// A run's names for a message.
struct RunHead {
    what: &'static str,
    machine: String,
    started: String,
    label: String,
}

impl RunHead {
    fn of(r: &Run, what: &'static str) -> RunHead {
        RunHead {
            what,
            machine: r
                .environment
                .get("host.name")
                .map_or("?", |v| v)
                .to_string(),
            started: r.started.clone(),
            label: r.label.clone(),
        }
    }
}

/// Where the database lives without `--db`: `TUNELAB_DB` (an empty one
/// means not set), else `$XDG_DATA_HOME/tunelab/results.db`
/// (~/.local/share by default).
pub(crate) fn default_path() -> PathBuf {
    if let Some(db) = std::env::var_os("TUNELAB_DB").filter(|v| !v.is_empty()) {
        return PathBuf::from(db);
    }
    let base = std::env::var_os("XDG_DATA_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share")))
        .unwrap_or_else(|| PathBuf::from("."));
    base.join("tunelab").join("results.db")
}

/// How a verb uses the results database, said by the verb when it asks
/// for it: one that only reads never creates a database (nor its directory).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    Read,
    Write,
}

/// Whether `--db` names a PostgreSQL server rather than a SQLite file.
fn is_url(s: &str) -> bool {
    s.starts_with("postgres://") || s.starts_with("postgresql://")
}

/// The results database at `path` (None: [`default_path`]) for `access`.
pub(crate) fn open(path: Option<&Path>, access: Access) -> Result<Store> {
    let path = path.map_or_else(default_path, Path::to_path_buf);
    match access {
        Access::Read => Store::open_read(&path),
        Access::Write => Store::open(&path),
    }
}

impl Store {
    /// Open (creating or migrating as needed) the store at `path`: a SQLite
    /// file, or a `postgres://` / `postgresql://` URL.
    pub fn open(path: &Path) -> Result<Store> {
        let s = path.to_string_lossy();
        if is_url(&s) {
            #[cfg(feature = "fleet")]
            return Ok(Store {
                backend: Box::new(postgres::Postgres::open(&s)?),
                location: postgres::redact(&s),
                kinds: None,
            });
            #[cfg(not(feature = "fleet"))]
            return Err(Error::usage(
                "this build has no PostgreSQL client (built without the \"fleet\" feature, \
                 as the static board binaries are); use a SQLite path with --db or TUNELAB_DB",
            ));
        }
        Ok(Store {
            backend: Box::new(sqlite::Sqlite::open(path)?),
            location: path.display().to_string(),
            kinds: None,
        })
    }

    /// For commands that only read: a SQLite file that does not exist is
    /// not created (nor its directories); it reads as an empty database.
    pub(crate) fn open_read(path: &Path) -> Result<Store> {
        if is_url(&path.to_string_lossy()) || path.exists() {
            return Store::open(path);
        }
        Ok(Store {
            backend: Box::new(sqlite::Sqlite::open(Path::new(":memory:"))?),
            location: format!("{} (does not exist yet)", path.display()),
            kinds: None,
        })
    }

    /// The database file or (password hidden) URL.
    pub(crate) fn location(&self) -> &str {
        &self.location
    }

    /// Save a whole run in one transaction: it is stored completely or not at all.
    pub fn save(&mut self, run: &Run) -> Result<()> {
        self.backend.save(run)
    }

    /// Save again a run that grows (a study after each key issue): the
    /// stored copy under its id is replaced in one transaction. `save`
    /// still refuses a duplicate id.
    pub(crate) fn replace(&mut self, run: &Run) -> Result<()> {
        self.backend.replace(run)
    }

    #[cfg(test)]
    /// Store runs recorded elsewhere (another machine's export or database),
    /// keeping their ids and environments. A run already stored is skipped
    /// ("already stored"); a different run under a stored id is refused. The
    /// new runs are saved in one transaction: all of them or none.
    pub(crate) fn import(&mut self, runs: &[Run]) -> Result<Vec<Imported>> {
        let mut check = ImportCheck::default();
        let done = runs
            .iter()
            .map(|r| self.import_check(r, &mut check))
            .collect::<Result<Vec<_>>>()?;
        self.import_save(&mut |sink| {
            for r in runs {
                if check.take(r)? {
                    sink(r)?;
                }
            }
            Ok(())
        })?;
        Ok(done)
    }

    /// The first pass of an import, one run at a time: whether `run` is new
    /// ("imported"), stored already or offered twice ("already stored"), or
    /// a different run under an id that is stored or offered (exit 2, naming
    /// both). `check` remembers the new runs by a fingerprint, not whole.
    pub(crate) fn import_check(&self, run: &Run, check: &mut ImportCheck) -> Result<Imported> {
        let machine = run
            .environment
            .get("host.name")
            .cloned()
            .unwrap_or_default();
        let print = fingerprint(run);
        let clash = |other: &RunHead| {
            Error::usage(format!(
                "run {} from machine '{machine}' started {} (label '{}') has the id of \
                 a different {} run {} (machine '{}', started {}, label '{}'): \
                 nothing was imported; export the stored one and remove it, or import \
                 into another --db",
                run.id,
                run.started,
                run.label,
                other.what,
                run.id,
                other.machine,
                other.started,
                other.label
            ))
        };
        let outcome = if let Some((p, head)) = check.fresh.get(&run.id) {
            if *p != print {
                return Err(clash(head));
            }
            "already stored"
        } else {
            match self.backend.load(&run.id)? {
                Some(s) if same_run(&s, run) => "already stored",
                Some(s) => return Err(clash(&RunHead::of(&s, "stored"))),
                None => {
                    check
                        .fresh
                        .insert(run.id.clone(), (print, RunHead::of(run, "imported")));
                    "imported"
                }
            }
        };
        Ok(Imported {
            id: run.id.clone(),
            machine,
            outcome,
        })
    }

    /// The second pass of an import: the runs `feed` hands over are saved in
    /// one transaction (see [`Feed`]); returns how many.
    pub(crate) fn import_save(&mut self, feed: &mut Feed) -> Result<usize> {
        self.backend.save_all(feed)
    }

    /// Runs, newest first; runs started in the same second (`started` has
    /// whole seconds) by when they were saved.
    pub(crate) fn list(&self) -> Result<Vec<RunInfo>> {
        self.backend.list().map_err(|e| self.named(e))
    }

    /// An error of a damaged database names the database.
    fn named(&self, e: Error) -> Error {
        match e {
            Error::Environment(m) | Error::Measurement(m) if !m.contains(&self.location) => {
                let m = m.strip_prefix("result database: ").unwrap_or(&m);
                Error::environment(format!(
                    "result database {}: {m} (damaged? restore it from a backup or move it \
                     away and start a new one)",
                    self.location
                ))
            }
            e => e,
        }
    }

    /// Resolve a run reference: a full id, a unique prefix, `last` (or
    /// `latest`), or `last~N` (the Nth before the last).
    pub(crate) fn resolve(&self, reference: &str) -> Result<String> {
        let ids: Vec<String> = self.list()?.into_iter().map(|r| r.id).collect();
        let back = match reference {
            "last" | "latest" => Some(0),
            r => r
                .strip_prefix("last~")
                .and_then(|n| n.parse::<usize>().ok()),
        };
        if let Some(n) = back {
            return ids.get(n).cloned().ok_or_else(|| {
                Error::usage(format!(
                    "no run '{reference}': the database holds {} run(s)",
                    ids.len()
                ))
            });
        }
        if ids.iter().any(|i| i == reference) {
            return Ok(reference.to_string());
        }
        let matches: Vec<&String> = ids.iter().filter(|i| i.starts_with(reference)).collect();
        match matches.len() {
            1 => Ok(matches[0].clone()),
            0 => Err(Error::usage(format!(
                "no run '{reference}' in {} (see 'tunelab runs')",
                self.location
            ))),
            n => Err(Error::usage(format!(
                "run reference '{reference}' is ambiguous: {n} runs start with it"
            ))),
        }
    }

    /// Results read from this store learn the kinds of parameters stored
    /// before kinds were recorded from `lookup`.
    pub(crate) fn learning_kinds(mut self, lookup: LegacyKinds) -> Store {
        self.kinds = Some(lookup);
        self
    }

    fn learned(&self, mut results: Vec<PointResult>) -> Vec<PointResult> {
        if let Some(lookup) = self.kinds {
            results.iter_mut().for_each(|r| r.learn_kinds(lookup));
        }
        results
    }

    fn learned_run(&self, mut run: Run) -> Run {
        run.results = self.learned(std::mem::take(&mut run.results));
        run
    }

    /// A whole run (results and monitor samples included) by reference.
    pub(crate) fn load(&self, reference: &str) -> Result<Run> {
        let id = self.resolve(reference)?;
        let run = self.backend.load(&id).map_err(|e| self.named(e))?;
        run.map(|r| self.learned_run(r))
            .ok_or_else(|| Error::usage(format!("no run '{id}'")))
    }

    /// Id and environment of the newest `limit` runs, newest first, without
    /// their results or samples (for advice).
    pub(crate) fn recent_environments(
        &self,
        limit: usize,
    ) -> Result<Vec<(String, BTreeMap<String, String>)>> {
        self.backend.recent_environments(limit)
    }

    /// A run's results of the given experiments only.
    pub(crate) fn results_in(&self, id: &str, experiments: &[&str]) -> Result<Vec<PointResult>> {
        Ok(self.learned(self.backend.results_in(id, experiments)?))
    }

    /// A run by its exact id (as `list` gives it), without resolving a
    /// reference: walking every run of a large store stays O(n), not O(n²).
    pub(crate) fn load_id(&self, id: &str) -> Result<Run> {
        let run = self.backend.load(id)?;
        run.map(|r| self.learned_run(r))
            .ok_or_else(|| Error::usage(format!("no run '{id}'")))
    }

    /// The runs a history of `subject` reads: those that measured the
    /// experiment `subject` or are a study of the profile `subject`, in
    /// `list` order (newest first), read in a few queries. Their results are only those of the
    /// experiment (all of them for a study of the profile), with metrics,
    /// parameters, notes and validity checks but without time series or
    /// histograms; no monitor samples or diagnosis.
    pub(crate) fn runs_about(&self, subject: &str) -> Result<Vec<Run>> {
        let runs = self.backend.runs_about(subject)?;
        Ok(runs.into_iter().map(|r| self.learned_run(r)).collect())
    }

    /// The monitor sample of a run with the most Dirty + Writeback (None: the
    /// run has no samples).
    pub(crate) fn peak_dirty_sample(&self, id: &str) -> Result<Option<MonitorSample>> {
        self.backend.peak_dirty_sample(id)
    }

    /// Record (or update, by id) a setting `tunelab apply` made persistent.
    pub fn save_change(&mut self, change: &AppliedChange) -> Result<()> {
        self.backend.save_change(change)
    }

    /// Every setting `apply` recorded (applied and unapplied), newest first.
    pub fn changes(&self) -> Result<Vec<AppliedChange>> {
        self.backend.changes()
    }
}

#[cfg(test)]
pub(crate) mod tests;
