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
use serde_json::value::RawValue;

const SQLITE_MAGIC: &[u8] = b"SQLite format 3\0";

/// Import every run of `files` into `store`: one outcome per run read
/// ("imported", or already stored), or the first file's error (nothing
/// imported then). Parameters are checked against `experiments`.
pub(crate) fn import(
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
pub(crate) fn read_runs(
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
    // The first byte that is not blank tells one run from an array of runs.
    let mut first = None;
    let mut byte = [0u8; 1];
    while first.is_none() {
        if let Some(&b) = head.iter().find(|b| !b.is_ascii_whitespace()) {
            first = Some(b);
        } else if f.read(&mut byte).map_err(open_err)? == 0 {
            break;
        } else {
            head.push(byte[0]);
        }
    }
    let used = std::rc::Rc::new(std::cell::Cell::new(0u64));
    let reader = Capped {
        inner: std::io::BufReader::new(std::io::Cursor::new(head).chain(f)),
        used: used.clone(),
    };
    let mut de = serde_json::Deserializer::from_reader(reader);
    let why = std::cell::RefCell::new(None);
    let failed = std::cell::RefCell::new(None);
    let mut visitor = RunsVisitor {
        experiments,
        why: &why,
        failed: &failed,
        each,
        used: used.clone(),
    };
    let read = match first {
        Some(b'[') => serde::Deserializer::deserialize_seq(&mut de, visitor),
        Some(b'{') => serde::Deserialize::deserialize(&mut de).and_then(|raw: Box<RawValue>| {
            visitor.take(0, &raw)?;
            Ok(1)
        }),
        // Not a run: say whether it is JSON at all.
        _ => serde::Deserialize::deserialize(&mut de)
            .and_then(|_: serde::de::IgnoredAny| Err(visitor.fail(NOT_A_RUN.into()))),
    }
    .and_then(|r| de.end().map(|_| r))
    .map_err(|e| {
        if let Some(e) = failed.take() {
            return e;
        }
        bad(match why.take() {
            Some(m) => m,
            None if used.get() > MAX_RUN_JSON_BYTES => format!(
                "a run is larger than {} MiB of JSON, the most one imported run may be \
                 (split it, or import the board's results.db)",
                MAX_RUN_JSON_BYTES >> 20
            ),
            None if e.is_io() => format!("cannot be read ({e})"),
            None => format!("not a tunelab run export (not JSON: {e})"),
        })
    })?;
    Ok(read)
}

/// Most bytes of JSON one imported run may take: far above a real run (a
/// study of hundreds of points is a few MiB), low enough that reading one
/// run stays a small multiple of this in memory (bench/bounds_scale.sh:
/// a run at the result cap, 19 MiB, imports in about 100 MiB RSS).
pub(crate) const MAX_RUN_JSON_BYTES: u64 = 24 << 20;

/// Most results (points) one imported run may hold: `show` of such a run
/// stays under 200 MiB RSS.
pub(crate) const MAX_RESULTS_PER_RUN: usize = 5_000;

/// Longest label (characters) a run may carry, here and on the command line.
pub(crate) const MAX_LABEL_CHARS: usize = 200;

/// Longest other text field (an environment value, a warning, a note).
pub(crate) const MAX_TEXT_CHARS: usize = 4096;

/// Most entries of a run's lists of text (argv, environment, warnings).
const MAX_TEXT_ITEMS: usize = 10_000;

/// The file, counting the bytes of the run being read: past
/// MAX_RUN_JSON_BYTES it fails, so no run is ever held whole beyond it.
struct Capped<R> {
    inner: R,
    used: std::rc::Rc<std::cell::Cell<u64>>,
}

impl<R: std::io::Read> std::io::Read for Capped<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.used.set(self.used.get() + n as u64);
        if self.used.get() > MAX_RUN_JSON_BYTES {
            return Err(std::io::Error::other("run too large"));
        }
        Ok(n)
    }
}

/// An array of runs, each checked as it is read and handed to `each`;
/// what is wrong with a run is kept aside (serde's error would append a
/// position to it), and so is `each`'s error.
struct RunsVisitor<'a, 'f> {
    experiments: &'a Catalog,
    why: &'a std::cell::RefCell<Option<String>>,
    failed: &'a std::cell::RefCell<Option<Error>>,
    each: &'a mut (dyn FnMut(Run) -> Result<()> + 'f),
    used: std::rc::Rc<std::cell::Cell<u64>>,
}

impl RunsVisitor<'_, '_> {
    fn fail<E: serde::de::Error>(&self, why: String) -> E {
        *self.why.borrow_mut() = Some(why);
        E::custom("bad run")
    }

    fn take<E: serde::de::Error>(
        &mut self,
        i: usize,
        raw: &RawValue,
    ) -> std::result::Result<(), E> {
        // The first signal stops the import (nothing is saved yet, or the
        // transaction saving it is rolled back).
        if let Err(e) = crate::safety::signals::check() {
            *self.failed.borrow_mut() = Some(e);
            return Err(E::custom("interrupted"));
        }
        let run = one_run(i, raw, self.experiments).map_err(|m| self.fail(m))?;
        (self.each)(run).map_err(|e| {
            *self.failed.borrow_mut() = Some(e);
            E::custom("import stopped")
        })
    }
}

/// Check one run's JSON and turn it into a run; `i` is its place (0: first).
fn one_run(i: usize, raw: &RawValue, experiments: &Catalog) -> std::result::Result<Run, String> {
    let at = |m: String| {
        if i == 0 {
            m
        } else {
            format!("run #{}: {m}", i + 1)
        }
    };
    // Its schema first (read alone: other fields are skipped, not built),
    // so a foreign or newer file is named as such.
    #[derive(serde::Deserialize)]
    struct Head {
        schema: Option<serde_json::Value>,
    }
    let head: Head = serde_json::from_str(raw.get()).map_err(|_| at(NOT_A_RUN.into()))?;
    check_schema(head.schema.as_ref().and_then(|s| s.as_str())).map_err(at)?;
    let run: Run = serde_json::from_str(raw.get())
        .map_err(|e| at(format!("not a valid tunelab run ({e})")))?;
    check_run(&run, experiments).map_err(at)?;
    Ok(run)
}

impl<'de> serde::de::Visitor<'de> for RunsVisitor<'_, '_> {
    type Value = usize;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("an array of tunelab runs")
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(
        mut self,
        mut seq: A,
    ) -> std::result::Result<usize, A::Error> {
        let mut n = 0;
        loop {
            // Each run is counted (and capped) on its own.
            self.used.set(0);
            let Some(raw) = seq.next_element::<Box<RawValue>>()? else {
                break;
            };
            self.take(n, &raw)?;
            n += 1;
        }
        if n == 0 {
            return Err(self.fail("holds no runs".into()));
        }
        Ok(n)
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

/// A run is checked like command-line input: what the store keys on must
/// be sane (an id to address it by), names are names, times are RFC 3339,
/// text is bounded, and the parameters must be values the experiment
/// accepts (through its Spec when this build knows it): a hand-made
/// `files=1e32` or `chunk: "../../etc"` would otherwise be stored and shown
/// as if measured.
fn check_run(run: &Run, experiments: &Catalog) -> std::result::Result<(), String> {
    let ok = |c: char| c.is_ascii_alphanumeric() || "-_.:".contains(c);
    if run.id.is_empty() || run.id.len() > 100 || !run.id.chars().all(ok) {
        return Err(format!("run id {:?} is not a tunelab run id", run.id));
    }
    let id = &run.id;
    if run.label.chars().count() > MAX_LABEL_CHARS {
        return Err(format!(
            "run {id}: its label is longer than {MAX_LABEL_CHARS} characters, the most a label may be"
        ));
    }
    for (what, t) in [("started", &run.started), ("finished", &run.finished)] {
        if !is_rfc3339(t) {
            return Err(format!(
                "run {id}: {what} {:?} is not an RFC 3339 time (such as 2026-11-25T15:28:47Z)",
                clip(t)
            ));
        }
    }
    check_texts(run).map_err(|m| format!("run {id}: {m}"))?;
    if run.results.len() > MAX_RESULTS_PER_RUN {
        return Err(format!(
            "run {id} holds {} results, more than the {MAX_RESULTS_PER_RUN} one imported run may hold",
            run.results.len()
        ));
    }
    for p in &run.results {
        if !is_name(&p.experiment) {
            return Err(format!(
                "run {id}: {:?} is not an experiment name (letters, digits, '.', '-', '_')",
                clip(&p.experiment)
            ));
        }
        if !p.elapsed_s.is_finite() || p.elapsed_s < 0.0 {
            return Err(format!(
                "run {id}: {} took {} s, not a time",
                p.experiment, p.elapsed_s
            ));
        }
        let spec = experiments.find(&p.experiment).ok().map(|e| e.params());
        for (name, v) in &p.params {
            if !is_name(name) {
                return Err(format!(
                    "run {id}: {} has a parameter named {:?}, not a parameter name",
                    p.experiment,
                    clip(name)
                ));
            }
            let known = spec
                .as_ref()
                .and_then(|s| s.iter().find(|s| s.name == name));
            let verdict = match known {
                Some(s) => s.accepts(v),
                None => plain_value(v),
            };
            verdict.map_err(|why| {
                format!(
                    "run {id}: {} parameter {name}={} is not a value {} accepts ({why})",
                    p.experiment,
                    clip(&v.to_string()),
                    p.experiment
                )
            })?;
        }
    }
    Ok(())
}

/// A parameter the experiment does not declare (an older or newer build's):
/// a finite, bounded number or a short line of text.
fn plain_value(v: &crate::model::ParamValue) -> std::result::Result<(), String> {
    use crate::model::ParamValue;
    match v {
        ParamValue::Bool(_) | ParamValue::Int(_) => Ok(()),
        ParamValue::Float(x) if x.is_finite() && x.abs() <= 1e18 => Ok(()),
        ParamValue::Float(_) => Err("not a finite number".into()),
        ParamValue::Text(t) if t.chars().count() <= 256 && !t.chars().any(char::is_control) => {
            Ok(())
        }
        ParamValue::Text(_) => Err("not a short line of text".into()),
    }
}

/// An experiment or parameter name: what `tunelab list` shows.
fn is_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
}

/// The start of a text for a message (a bad field may be megabytes).
fn clip(s: &str) -> String {
    match s.char_indices().nth(40) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

/// Free text of a run bounded in length and count, so that listing or
/// showing it stays linear and small.
fn check_texts(run: &Run) -> std::result::Result<(), String> {
    let long = |what: &str, t: &str| {
        (t.chars().count() > MAX_TEXT_CHARS).then(|| {
            format!(
                "{what} is longer than {MAX_TEXT_CHARS} characters, the most a text field may be"
            )
        })
    };
    let many = |what: &str, n: usize| {
        (n > MAX_TEXT_ITEMS)
            .then(|| format!("{what} has {n} entries, more than the {MAX_TEXT_ITEMS} allowed"))
    };
    let mut problems = [
        many("argv", run.argv.len()),
        many("environment", run.environment.len()),
        many("warnings", run.warnings.len()),
        long("tool_version", &run.tool_version),
    ]
    .into_iter()
    .flatten()
    .chain(run.argv.iter().filter_map(|a| long("an argument", a)))
    .chain(run.warnings.iter().filter_map(|w| long("a warning", w)))
    .chain(
        run.environment
            .iter()
            .filter_map(|(k, v)| long("an environment name", k).or_else(|| long(k, v))),
    )
    .chain(
        run.results
            .iter()
            .flat_map(|p| &p.notes)
            .filter_map(|n| long("a note", n)),
    );
    problems.next().map_or(Ok(()), Err)
}

/// `2026-11-25T15:28:47Z`, with optional fractions of a second and a
/// numeric offset instead of Z, as RFC 3339 writes a time.
fn is_rfc3339(t: &str) -> bool {
    let b = t.as_bytes();
    let num = |r: std::ops::Range<usize>, max: u32| -> bool {
        b.get(r.clone())
            .is_some_and(|d| d.iter().all(u8::is_ascii_digit))
            && t[r].parse::<u32>().is_ok_and(|v| v <= max)
    };
    let at = |i: usize, c: u8| b.get(i) == Some(&c);
    if !(num(0..4, 9999)
        && at(4, b'-')
        && num(5..7, 12)
        && at(7, b'-')
        && num(8..10, 31)
        && (at(10, b'T') || at(10, b't') || at(10, b' '))
        && num(11..13, 23)
        && at(13, b':')
        && num(14..16, 59)
        && at(16, b':')
        && num(17..19, 60)
        && t[5..7] != *"00"
        && t[8..10] != *"00")
    {
        return false;
    }
    let mut i = 19;
    if at(i, b'.') {
        let digits = b[i + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
        if digits == 0 {
            return false;
        }
        i += 1 + digits;
    }
    match b.get(i) {
        Some(b'Z' | b'z') => i + 1 == b.len(),
        Some(b'+' | b'-') => {
            i + 6 == b.len() && num(i + 1..i + 3, 23) && at(i + 3, b':') && num(i + 4..i + 6, 59)
        }
        _ => false,
    }
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
        // Counted before loading: a run past the cap is never built.
        if info.results > MAX_RESULTS_PER_RUN {
            return Err(bad(format!(
                "run {} holds {} results, more than the {MAX_RESULTS_PER_RUN} one imported run may hold",
                info.id, info.results
            )));
        }
        crate::safety::signals::check()?;
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
