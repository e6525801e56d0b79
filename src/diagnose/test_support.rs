//! The fixtures of `diagnose`'s tests: files below tests/fixtures/diagnose
//! laid out as /proc and /sys.

use std::path::Path;

/// The fixture tree's root.
pub(crate) const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/diagnose");

/// The text of the fixture file `rel` (below `FIXTURES`).
pub(crate) fn fixture(rel: &str) -> String {
    let p = Path::new(FIXTURES).join(rel);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}
