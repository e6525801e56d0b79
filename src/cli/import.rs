//! `tunelab import FILE…`: store runs recorded on another machine (a board),
//! from `tunelab export RUN --format json` files or a copied results.db,
//! keeping each run's id, machine identity and environment. Every file is
//! read and checked before anything is stored; then the new runs are saved
//! in one transaction, so a bad file imports nothing.

use std::path::{Path, PathBuf};

use super::Out;
use crate::engine::model::{Run, RUN_SCHEMA};
use crate::report::table;
use crate::safety::Scratch;
use crate::store::Store;
use crate::{Error, Result};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Files written by `tunelab export RUN --format json` (one run, or a JSON
    /// array of runs), or a tunelab SQLite results database copied from a board.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
}

const SQLITE_MAGIC: &[u8] = b"SQLite format 3\0";

pub fn exec(args: &Args, out: &Out, store: &mut Store) -> Result<i32> {
    let mut runs = Vec::new();
    for f in &args.files {
        runs.extend(read_runs(f)?);
    }
    let done = store.import(&runs)?;
    let fresh = done.iter().filter(|d| d.outcome == "imported").count();
    if out.json {
        out.json_data(&done)?;
    } else {
        let rows = done
            .iter()
            .map(|d| {
                vec![
                    d.id.clone(),
                    super::runs::clean(&d.machine),
                    d.outcome.to_string(),
                ]
            })
            .collect();
        out.data(&table::render(&["run", "machine", "import"], rows))?;
    }
    out.info(&format!(
        "{fresh} run(s) imported, {} already stored, into {}",
        done.len() - fresh,
        store.location()
    ));
    Ok(0)
}

/// Every run in `path`, checked; a clear usage error (exit 2) otherwise.
pub fn read_runs(path: &Path) -> Result<Vec<Run>> {
    let bytes = std::fs::read(path).map_err(|e| match e.kind() {
        // A wrong file name is bad input (exit 2), like a bad file.
        std::io::ErrorKind::NotFound | std::io::ErrorKind::IsADirectory => Error::usage(format!(
            "{}: {e} — give files written by 'tunelab export RUN --format json' or a results.db; \
             nothing was imported",
            path.display()
        )),
        _ => Error::io("cannot read", path, e),
    })?;
    if bytes.starts_with(SQLITE_MAGIC) {
        return read_database(path);
    }
    let bad = |what: String| {
        Error::usage(format!(
            "{}: {what}; import takes files written by 'tunelab export RUN --format json' \
             or a tunelab results.db — nothing was imported",
            path.display()
        ))
    };
    let value: serde_json::Value = serde_json::from_slice(&bytes)
        .map_err(|e| bad(format!("not a tunelab run export (not JSON: {e})")))?;
    let items = match value {
        serde_json::Value::Array(v) => v,
        v @ serde_json::Value::Object(_) => vec![v],
        _ => return Err(bad("not a tunelab run export (JSON, but not a run)".into())),
    };
    if items.is_empty() {
        return Err(bad("holds no runs".into()));
    }
    items
        .into_iter()
        .enumerate()
        .map(|(i, item)| {
            let at = |m: String| {
                if i == 0 {
                    m
                } else {
                    format!("run #{}: {m}", i + 1)
                }
            };
            check_schema(item.get("schema").and_then(|s| s.as_str())).map_err(|m| bad(at(m)))?;
            let run: Run = serde_json::from_value(item)
                .map_err(|e| bad(at(format!("not a valid tunelab run ({e})"))))?;
            check_run(&run).map_err(|m| bad(at(m)))?;
            Ok(run)
        })
        .collect()
}

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

/// What the store keys on must be sane: an id to address it by.
fn check_run(run: &Run) -> std::result::Result<(), String> {
    let ok = |c: char| c.is_ascii_alphanumeric() || "-_.:".contains(c);
    if run.id.is_empty() || run.id.len() > 100 || !run.id.chars().all(ok) {
        return Err(format!("run id {:?} is not a tunelab run id", run.id));
    }
    Ok(())
}

/// All runs of a copied tunelab SQLite database. The file is copied to a
/// private scratch directory and opened there (older schemas are migrated
/// in the copy), so the user's file is never modified.
fn read_database(path: &Path) -> Result<Vec<Run>> {
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
    let read = || -> Result<Vec<Run>> {
        let ids = db.list()?;
        ids.iter().map(|r| db.load(&r.id)).collect()
    };
    let mut runs = read().map_err(|e| {
        bad(format!(
            "cannot be read as a tunelab results database ({e})"
        ))
    })?;
    // Oldest first, so they list in the order they were recorded.
    runs.reverse();
    for r in &runs {
        check_run(r).map_err(bad)?;
    }
    Ok(runs)
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
