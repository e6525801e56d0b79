//! The experiments a verb may ask for by name. The engine sits below the
//! experiments and never names one; the registry (`experiments::registry`)
//! fills this catalog once, in `main.rs`, and the CLI asks it for `run`,
//! `list`, `--help`, `tune` and `import` — handed down, not a global.

use super::Experiment;
use crate::Result;

/// The registry's answers, as functions.
#[derive(Clone, Copy)]
pub struct Catalog {
    /// Every experiment of this build, in family order.
    pub all: fn() -> Vec<Box<dyn Experiment>>,
    /// One experiment by name; a usage error with a suggestion otherwise.
    pub find: fn(&str) -> Result<Box<dyn Experiment>>,
    /// The stored kind of an experiment's parameter (runs stored before
    /// kinds travelled with them).
    pub param_kind: fn(&str, &str) -> Option<&'static str>,
}

impl Catalog {
    pub(crate) fn all(&self) -> Vec<Box<dyn Experiment>> {
        (self.all)()
    }

    pub(crate) fn find(&self, name: &str) -> Result<Box<dyn Experiment>> {
        (self.find)(name)
    }
}
