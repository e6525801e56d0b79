//! Importing runs recorded on another machine (a board), from
//! `tunelab export RUN --format json` files or a copied results.db, keeping
//! each run's id, machine identity and environment. Every file is read and
//! checked before anything is stored; then the new runs are saved in one
//! transaction, so a bad file imports nothing. `tunelab import` prints.

use std::path::{Path, PathBuf};

use super::catalog::Catalog;
use crate::model::run::{Run, RUN_SCHEMA};
use crate::safety::Scratch;
use crate::store::{ImportCheck, Imported, Store};
use crate::{Error, Result};

const SQLITE_MAGIC: &[u8] = b"SQLite format 3\0";

/// Import every run of `files` into `store`: one outcome per run read
/// ("imported", or already stored), or the first file's error (nothing
/// imported then). Parameters are checked against `experiments`.
pub fn import(
    files: &[PathBuf],
    store: &mut Store,
    experiments: &Catalog,
) -> Result<Vec<Imported>> {
    // Two passes over the files, one run in memory at a time: every run is
    // read and checked first (a bad file or a clash imports nothing), then
    // the new ones are read again and saved in one transaction.
    let mut check = ImportCheck::default();
    let mut done = Vec::new();
    for f in files {
        read_runs(f, experiments, &mut |run| {
            done.push(store.import_check(&run, &mut check)?);
            Ok(())
        })?;
    }
    if done.iter().any(|d| d.outcome == "imported") {
        store.import_save(&mut |sink| {
            for f in files {
                read_runs(f, experiments, &mut |run| {
                    if check.take(&run)? {
                        sink(&run)?;
                    }
                    Ok(())
                })?;
            }
            Ok(())
        })?;
    }
    Ok(done)
}

/// Every run in `path`, checked, handed to `each` one at a time as it is
/// read; a clear usage error (exit 2) otherwise, or `each`'s own error.
/// JSON is read as a stream (a 200 MB export is never held whole, nor as a
/// JSON tree, in memory). Returns how many runs were read.
pub fn read_runs(
    path: &Path,
    experiments: &Catalog,
    each: &mut dyn FnMut(Run) -> Result<()>,
) -> Result<usize> {
    use std::io::Read;
    let open_err = |e: std::io::Error| match e.kind() {
        // A wrong file name is bad input (exit 2), like a bad file.
        std::io::ErrorKind::NotFound | std::io::ErrorKind::IsADirectory => Error::usage(format!(
            "{}: {e} — give files written by 'tunelab export RUN --format json' or a results.db; \
             nothing was imported",
            path.display()
        )),
        _ => Error::io("cannot read", path, e),
    };
    if path.is_dir() {
        return Err(open_err(std::io::Error::from(
            std::io::ErrorKind::IsADirectory,
        )));
    }
    let mut f = std::fs::File::open(path).map_err(open_err)?;
    let mut head = Vec::with_capacity(SQLITE_MAGIC.len());
    (&mut f)
        .take(SQLITE_MAGIC.len() as u64)
        .read_to_end(&mut head)
        .map_err(open_err)?;
    if head.starts_with(SQLITE_MAGIC) {
        return read_database(path, experiments, each);
    }
    let bad = |what: String| {
        Error::usage(format!(
            "{}: {what}; import takes files written by 'tunelab export RUN --format json' \
             or a tunelab results.db — nothing was imported",
            path.display()
        ))
    };
    let reader = std::io::BufReader::new(std::io::Cursor::new(head).chain(f));
    let mut de = serde_json::Deserializer::from_reader(reader);
    let why = std::cell::RefCell::new(None);
    let failed = std::cell::RefCell::new(None);
    let visitor = RunsVisitor {
        experiments,
        why: &why,
        failed: &failed,
        each,
    };
    let read = serde::Deserializer::deserialize_any(&mut de, visitor)
        .and_then(|r| de.end().map(|_| r))
        .map_err(|e| {
            if let Some(e) = failed.take() {
                return e;
            }
            bad(match why.take() {
                Some(m) => m,
                None if e.is_io() => format!("cannot be read ({e})"),
                None => format!("not a tunelab run export (not JSON: {e})"),
            })
        })?;
    Ok(read)
}

/// One run (a JSON object) or an array of runs, each checked as it is read
/// and handed to `each`; what is wrong with a run is kept aside (serde's
/// error would append a position to it), and so is `each`'s error.
struct RunsVisitor<'a, 'f> {
    experiments: &'a Catalog,
    why: &'a std::cell::RefCell<Option<String>>,
    failed: &'a std::cell::RefCell<Option<Error>>,
    each: &'a mut (dyn FnMut(Run) -> Result<()> + 'f),
}

impl RunsVisitor<'_, '_> {
    fn fail<E: serde::de::Error>(&self, why: String) -> E {
        *self.why.borrow_mut() = Some(why);
        E::custom("bad run")
    }

    fn take<E: serde::de::Error>(
        &mut self,
        i: usize,
        item: serde_json::Value,
    ) -> std::result::Result<(), E> {
        let run = one_run(i, item, self.experiments).map_err(|m| self.fail(m))?;
        (self.each)(run).map_err(|e| {
            *self.failed.borrow_mut() = Some(e);
            E::custom("import stopped")
        })
    }
}

/// Check one run's JSON and turn it into a run; `i` is its place (0: first).
fn one_run(
    i: usize,
    item: serde_json::Value,
    experiments: &Catalog,
) -> std::result::Result<Run, String> {
    let at = |m: String| {
        if i == 0 {
            m
        } else {
            format!("run #{}: {m}", i + 1)
        }
    };
    if !item.is_object() {
        return Err(at(NOT_A_RUN.into()));
    }
    check_schema(item.get("schema").and_then(|s| s.as_str())).map_err(at)?;
    let run: Run =
        serde_json::from_value(item).map_err(|e| at(format!("not a valid tunelab run ({e})")))?;
    check_run(&run, experiments).map_err(at)?;
    Ok(run)
}

impl<'de> serde::de::Visitor<'de> for RunsVisitor<'_, '_> {
    type Value = usize;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a tunelab run or an array of runs")
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(
        mut self,
        mut seq: A,
    ) -> std::result::Result<usize, A::Error> {
        let mut n = 0;
        while let Some(item) = seq.next_element::<serde_json::Value>()? {
            self.take(n, item)?;
            n += 1;
        }
        if n == 0 {
            return Err(self.fail("holds no runs".into()));
        }
        Ok(n)
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(
        mut self,
        map: A,
    ) -> std::result::Result<usize, A::Error> {
        let item: serde_json::Value =
            serde::Deserialize::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
        self.take(0, item)?;
        Ok(1)
    }

    // A JSON scalar (a string, a number…) is JSON, but not a run.
    fn visit_bool<E: serde::de::Error>(self, _: bool) -> std::result::Result<usize, E> {
        Err(self.fail(NOT_A_RUN.into()))
    }

    fn visit_i64<E: serde::de::Error>(self, _: i64) -> std::result::Result<usize, E> {
        Err(self.fail(NOT_A_RUN.into()))
    }

    fn visit_u64<E: serde::de::Error>(self, _: u64) -> std::result::Result<usize, E> {
        Err(self.fail(NOT_A_RUN.into()))
    }

    fn visit_f64<E: serde::de::Error>(self, _: f64) -> std::result::Result<usize, E> {
        Err(self.fail(NOT_A_RUN.into()))
    }

    fn visit_str<E: serde::de::Error>(self, _: &str) -> std::result::Result<usize, E> {
        Err(self.fail(NOT_A_RUN.into()))
    }

    fn visit_unit<E: serde::de::Error>(self) -> std::result::Result<usize, E> {
        Err(self.fail(NOT_A_RUN.into()))
    }
}

const NOT_A_RUN: &str = "not a tunelab run export (JSON, but not a run)";

/// `tunelab.run/N`: N up to this build's; a newer one is refused, anything
/// else is a foreign file.
fn check_schema(schema: Option<&str>) -> std::result::Result<(), String> {
    let known = version_of(RUN_SCHEMA).unwrap_or(1);
    let Some(schema) = schema else {
        return Err("not a tunelab run export (no \"schema\" field)".into());
    };
    match schema
        .strip_prefix("tunelab.run/")
        .and_then(|_| version_of(schema))
    {
        None => Err(format!(
            "not a tunelab run export (schema '{schema}', expected {RUN_SCHEMA})"
        )),
        Some(v) if v > known => Err(format!(
            "the run is in format {schema}, written by a newer tunelab; this build reads up to \
             {RUN_SCHEMA}: upgrade tunelab on this machine"
        )),
        Some(_) => Ok(()),
    }
}

fn version_of(schema: &str) -> Option<u32> {
    schema.rsplit_once('/')?.1.parse().ok()
}

/// What the store keys on must be sane (an id to address it by), and the
/// parameters must be values the experiment accepts: a hand-made
/// `files=1e32` would otherwise be stored and shown as if measured.
fn check_run(run: &Run, experiments: &Catalog) -> std::result::Result<(), String> {
    let ok = |c: char| c.is_ascii_alphanumeric() || "-_.:".contains(c);
    if run.id.is_empty() || run.id.len() > 100 || !run.id.chars().all(ok) {
        return Err(format!("run id {:?} is not a tunelab run id", run.id));
    }
    for p in &run.results {
        let spec = experiments.find(&p.experiment).ok().map(|e| e.params());
        for (name, v) in &p.params {
            let Some(x) = v.as_f64() else { continue };
            let range = spec
                .as_ref()
                .and_then(|s| s.iter().find(|s| s.name == name))
                .map(|s| (s.min, s.max));
            let out_of_range = match range {
                Some((min, max)) => min.is_some_and(|m| x < m) || max.is_some_and(|m| x > m),
                None => false,
            };
            if !x.is_finite() || x.abs() > 1e18 || out_of_range {
                return Err(format!(
                    "run {}: {} parameter {name}={x} is not a value {} accepts",
                    run.id, p.experiment, p.experiment
                ));
            }
        }
    }
    Ok(())
}

/// All runs of a copied tunelab SQLite database. The file is copied to a
/// private scratch directory and opened there (older schemas are migrated
/// in the copy), so the user's file is never modified.
fn read_database(
    path: &Path,
    experiments: &Catalog,
    each: &mut dyn FnMut(Run) -> Result<()>,
) -> Result<usize> {
    let bad =
        |what: String| Error::usage(format!("{}: {what} — nothing was imported", path.display()));
    let scratch = Scratch::create(None)?;
    let copy = scratch.path().join("import.db");
    std::fs::copy(path, &copy).map_err(|e| Error::io("cannot copy", path, e))?;
    // A SQLite file without tunelab's schema version is someone else's database.
    let version: i64 = rusqlite::Connection::open(&copy)
        .and_then(|c| c.pragma_query_value(None, "user_version", |r| r.get(0)))
        .map_err(|e| bad(format!("not a readable SQLite database ({e})")))?;
    if version == 0 {
        return Err(bad(
            "a SQLite database, but not a tunelab results database (no tunelab schema)".into(),
        ));
    }
    let db = Store::open(&copy).map_err(|e| {
        bad(format!(
            "not a usable tunelab results database ({})",
            e.to_string()
                .replace(&copy.display().to_string(), "the copy")
        ))
    })?;
    let cannot = |e: Error| {
        bad(format!(
            "cannot be read as a tunelab results database ({e})"
        ))
    };
    // Oldest first, so they list in the order they were recorded; one run
    // loaded at a time.
    let ids = db.list().map_err(cannot)?;
    for info in ids.iter().rev() {
        let run = db.load_id(&info.id).map_err(cannot)?;
        check_run(&run, experiments).map_err(bad)?;
        each(run)?;
    }
    Ok(ids.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemas() {
        assert!(check_schema(Some("tunelab.run/1")).is_ok());
        let newer = check_schema(Some("tunelab.run/2")).unwrap_err();
        assert!(newer.contains("newer tunelab"), "{newer}");
        assert!(check_schema(Some("tunelab.compare/1")).is_err());
        assert!(check_schema(Some("fio/3"))
            .unwrap_err()
            .contains("not a tunelab run"));
        assert!(check_schema(Some("tunelab.run/x")).is_err());
        assert!(check_schema(None).unwrap_err().contains("no \"schema\""));
    }
}
