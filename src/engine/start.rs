//! What every tunelab process does before its verb, in this order: signal
//! handling (SIGINT/SIGTERM/SIGHUP end the run cleanly; under `tunelab
//! remote`, the end of stdin is a hang-up), the settings a killed tunelab
//! left changed put back, and, for the verbs that measure or run programs,
//! enough descriptors and processes.

use std::path::Path;
use std::time::Duration;

use super::verbs::restore;
use crate::safety::{journal, rlimits, signals};
use crate::{Error, Result};

/// What the process start needs to know about the verb.
pub(crate) struct Start<'a> {
    /// `--db` (or `TUNELAB_DB`): the store that settles an apply cut short.
    pub(crate) db: Option<&'a Path>,
    /// Put back the settings dead tunelab processes left changed (all verbs
    /// but `restore`, which does it itself and reports each one).
    pub(crate) restore_left: bool,
    /// The verb measures or runs programs: raise the descriptor and process
    /// limits to what it needs, or refuse.
    pub(crate) measures: bool,
}

/// How the start went.
pub(crate) struct Started {
    /// One per setting put back, or why the journal could not be read.
    pub(crate) warnings: Vec<String>,
    /// Limits too low to measure: the process ends before the verb.
    pub(crate) refused: Option<Error>,
}

/// Start the process (see the module's text for what, in which order).
pub(crate) fn start(s: &Start) -> Started {
    crate::safety::install_signal_handlers();
    if std::env::var_os(signals::STDIN_GUARD).is_some() {
        signals::hang_up_on_stdin_eof(Duration::from_secs(20));
    }
    let mut warnings = Vec::new();
    // An unreadable journal only blocks changing settings (tune, --fs);
    // `restore` explains what it holds.
    if s.restore_left {
        match restore::plan(false, s.db).put_back() {
            Ok(msgs) => warnings.extend(msgs),
            Err(e) => warnings.push(format!(
                "{e}\n(the knob journal {} is unreadable or refused: settings it records may \
                 still be changed; run 'tunelab restore' for what it holds)",
                journal::path().display()
            )),
        }
    }
    Started {
        warnings,
        refused: s.measures.then(rlimits::check).and_then(Result::err),
    }
}
