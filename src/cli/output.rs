//! Where output goes: data on stdout (JSON with --json), messages on stderr.

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::sync::Mutex;

use serde::Serialize;

use super::progress::Progress;
use crate::engine::observer::{Event, Observer};

use crate::{Error, Result};

pub struct Out {
    pub json: bool,
    pub quiet: bool,
    /// Progress bars only on an interactive stderr.
    pub interactive: bool,
    /// The series of items in progress (a bar, or lines off a terminal).
    progress: Mutex<Option<Progress>>,
}

impl Out {
    pub fn new(json: bool, quiet: bool) -> Self {
        Out {
            json,
            quiet,
            interactive: std::io::stderr().is_terminal() && !quiet,
            progress: Mutex::new(None),
        }
    }

    /// A message for the human (stderr), suppressed by --quiet.
    pub fn info(&self, msg: &str) {
        if !self.quiet {
            eprintln!("{msg}");
        }
    }

    /// A warning (stderr), shown even with --quiet.
    pub fn warn(&self, msg: &str) {
        eprintln!("tunelab: warning: {msg}");
    }

    /// A warning that is also kept with the run, whose output (the run
    /// view, or the JSON) prints it again: on stderr only without --quiet,
    /// so that -q prints each thing once.
    pub fn run_warning(&self, msg: &str) {
        if !self.quiet {
            self.warn(msg);
        }
    }

    pub fn error(&self, msg: &str) {
        eprintln!("tunelab: error: {msg}");
    }

    /// Write data to stdout; a closed pipe (e.g. `| head`) is not an error.
    pub fn data(&self, text: &str) -> Result<()> {
        let mut so = std::io::stdout().lock();
        match so.write_all(text.as_bytes()).and_then(|_| so.flush()) {
            Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
                Err(Error::environment(format!("cannot write to stdout: {e}")))
            }
            _ => Ok(()),
        }
    }

    pub fn json_data<T: Serialize>(&self, value: &T) -> Result<()> {
        let mut s = serde_json::to_string_pretty(value)?;
        s.push('\n');
        self.data(&s)
    }
}

/// Whether stdout is an interactive terminal (tables use box drawing then,
/// Markdown-compatible ASCII otherwise).
pub fn output_is_terminal() -> bool {
    std::io::stdout().is_terminal()
}

/// The terminal's (and the JSON output's) observer: messages on stderr,
/// progress as a bar on a terminal or as plain lines off one.
impl Observer for Out {
    fn info(&self, msg: &str) {
        Out::info(self, msg)
    }
    fn warn(&self, msg: &str) {
        Out::warn(self, msg)
    }
    fn run_warning(&self, msg: &str) {
        Out::run_warning(self, msg)
    }
    fn error(&self, msg: &str) {
        Out::error(self, msg)
    }
    fn progress(&self, event: Event) {
        let mut shown = self.progress.lock().unwrap_or_else(|p| p.into_inner());
        match event {
            Event::Begin {
                what,
                weights,
                budget,
                expected,
            } => {
                let p = Progress::new(self, what, weights.to_vec(), budget);
                *shown = Some(if expected { p.expected() } else { p });
            }
            Event::End => {
                if let Some(p) = shown.take() {
                    p.finish()
                }
            }
            Event::Started { of, label, .. } => {
                if let Some(p) = shown.as_mut() {
                    if of.is_empty() {
                        p.start(label)
                    } else {
                        p.start(&format!("{of} {label}"))
                    }
                }
            }
            Event::Trial { n, max } => {
                if let Some(p) = shown.as_mut() {
                    p.tick(&format!("trial {n} (≤{max})"))
                }
            }
            Event::Done { .. } => {
                if let Some(p) = shown.as_mut() {
                    p.done()
                }
            }
            Event::Round(n) => {
                if !self.quiet && self.interactive {
                    eprint!("\rround {n}");
                }
            }
        }
    }
}

// Files the CLI writes (reports, history and comparison pages): always new
// files, a user's file is never overwritten.

/// Create `path`, which must not exist.
pub fn create_new(path: &Path) -> Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(|e| {
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                Error::usage(format!(
                    "{} already exists; choose a new file name (tunelab never overwrites a file)",
                    path.display()
                ))
            } else {
                Error::io("cannot create", path, e)
            }
        })
}

pub fn write_all(f: &mut std::fs::File, path: &Path, text: &str) -> Result<()> {
    f.write_all(text.as_bytes())
        .and_then(|_| f.flush())
        .map_err(|e| Error::io("cannot write", path, e))
}

/// Write `text` to a new file (a user's file is never overwritten).
pub fn write_new(path: &Path, text: &str) -> Result<()> {
    write_all(&mut create_new(path)?, path, text)
}
