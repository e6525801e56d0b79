//! Where output goes: data on stdout (JSON with --json), messages on stderr.

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::sync::Mutex;

use serde::Serialize;

use super::progress::Progress;
use crate::engine::observer::{Event, Observer};
use crate::report::table::Terminal;

use crate::{Error, Result};

pub(crate) struct Out {
    pub(crate) json: bool,
    pub(crate) quiet: bool,
    /// Progress bars only on an interactive stderr that takes cursor
    /// movement (not TERM=dumb nor NO_COLOR).
    pub(crate) interactive: bool,
    /// The series of items in progress (a bar, or lines off a terminal).
    progress: Mutex<Option<Progress>>,
    /// Messages go to a terminal: long lines are broken between words.
    stderr_tty: bool,
    /// How stdout shows text, decided at start-up: what tables and
    /// reports are laid out for.
    pub(crate) term: Terminal,
}

impl Out {
    pub(crate) fn new(json: bool, quiet: bool, term: Terminal) -> Self {
        Out {
            json,
            quiet,
            interactive: std::io::stderr().is_terminal() && term.escapes() && !quiet,
            progress: Mutex::new(None),
            stderr_tty: std::io::stderr().is_terminal(),
            term,
        }
    }

    /// A table laid out for stdout (see [`Terminal::render`]).
    pub(crate) fn table(&self, header: &[&str], rows: Vec<Vec<String>>) -> String {
        self.term.render(header, rows)
    }

    /// `msg` as the terminal shows it: ASCII in a non-UTF-8 locale, long
    /// lines broken between words on a terminal.
    fn shown(&self, msg: &str) -> String {
        let msg = self.term.plain(msg);
        if self.stderr_tty {
            self.term.wrap_lines(&msg, 2)
        } else {
            msg.into_owned()
        }
    }

    /// A message for the human (stderr), suppressed by --quiet.
    pub(crate) fn info(&self, msg: &str) {
        if !self.quiet {
            eprintln!("{}", self.shown(msg));
        }
    }

    /// A warning (stderr), shown even with --quiet.
    pub(crate) fn warn(&self, msg: &str) {
        eprintln!("{}", self.shown(&format!("tunelab: warning: {msg}")));
    }

    /// A warning that is also kept with the run, whose output (the run
    /// view, or the JSON) prints it again: on stderr only without --quiet,
    /// so that -q prints each thing once.
    pub(crate) fn run_warning(&self, msg: &str) {
        if !self.quiet {
            self.warn(msg);
        }
    }

    pub(crate) fn error(&self, msg: &str) {
        eprintln!("{}", self.shown(&format!("tunelab: error: {msg}")));
    }

    /// Write data to stdout; a closed pipe (e.g. `| head`) is not an error.
    pub(crate) fn data(&self, text: &str) -> Result<()> {
        self.raw(&self.term.plain(text))
    }

    pub(crate) fn json_data<T: Serialize>(&self, value: &T) -> Result<()> {
        let mut s = serde_json::to_string_pretty(value)?;
        s.push('\n');
        self.raw(&json_text(s, self.term))
    }

    /// Write to stdout as is (JSON already made ASCII by [`json_text`]).
    fn raw(&self, text: &str) -> Result<()> {
        let mut so = std::io::stdout().lock();
        match so.write_all(text.as_bytes()).and_then(|_| so.flush()) {
            Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
                Err(Error::environment(format!("cannot write to stdout: {e}")))
            }
            _ => Ok(()),
        }
    }
}

/// Whether stdout is an interactive terminal (tables use box drawing then,
/// Markdown-compatible ASCII otherwise).
pub(crate) fn output_is_terminal() -> bool {
    std::io::stdout().is_terminal()
}

/// The terminal, decided once at start-up from the environment: whether
/// stdout is one (and its width), ASCII only (the locale is set and not
/// UTF-8 — C, POSIX, a Latin-1 one), cursor movement and colour (stderr is
/// a tty, TERM is not `dumb` and NO_COLOR is not set). An unset locale is
/// taken as UTF-8, as on today's terminals; a serial console sets LANG=C
/// to get ASCII.
pub(crate) fn terminal() -> Terminal {
    let (ascii, escapes) = plain_terminal();
    Terminal::detect(output_is_terminal(), ascii, escapes)
}

fn plain_terminal() -> (bool, bool) {
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let locale = var("LC_ALL")
        .or_else(|| var("LC_CTYPE"))
        .or_else(|| var("LANG"));
    let escapes = std::io::stderr().is_terminal()
        && var("NO_COLOR").is_none()
        && var("TERM").as_deref() != Some("dumb");
    (locale.is_some_and(|l| !utf8_locale(&l)), escapes)
}

/// JSON for stdout: in a non-UTF-8 locale every non-ASCII character is
/// written as a `\uXXXX` escape, so the data stays exact and the bytes ASCII.
pub(crate) fn json_text(s: String, term: Terminal) -> String {
    if !term.ascii() || s.is_ascii() {
        return s;
    }
    let mut o = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        if c.is_ascii() {
            o.push(c);
        } else {
            let mut buf = [0u16; 2];
            for u in c.encode_utf16(&mut buf) {
                o.push_str(&format!("\\u{u:04x}"));
            }
        }
    }
    o
}

fn utf8_locale(locale: &str) -> bool {
    let l = locale.to_ascii_lowercase();
    l.contains("utf-8") || l.contains("utf8")
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
                if self.interactive {
                    eprint!("\rround {n}");
                }
            }
        }
    }
}

// Files the CLI writes (reports, history and comparison pages): always new
// files, a user's file is never overwritten.

/// Create `path`, which must not exist.
pub(crate) fn create_new(path: &Path) -> Result<std::fs::File> {
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

pub(crate) fn write_all(f: &mut std::fs::File, path: &Path, text: &str) -> Result<()> {
    f.write_all(text.as_bytes())
        .and_then(|_| f.flush())
        .map_err(|e| Error::io("cannot write", path, e))
}

/// Write `text` to a new file (a user's file is never overwritten).
pub(crate) fn write_new(path: &Path, text: &str) -> Result<()> {
    write_all(&mut create_new(path)?, path, text)
}

#[cfg(test)]
mod tests {
    #[test]
    fn utf8_locales_by_their_codeset() {
        for l in ["C.UTF-8", "en_US.utf8", "de_DE.UTF-8@euro"] {
            assert!(super::utf8_locale(l), "{l}");
        }
        for l in ["C", "POSIX", "en_US", "en_US.ISO-8859-1"] {
            assert!(!super::utf8_locale(l), "{l}");
        }
    }
}
