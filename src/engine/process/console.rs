//! app.boot — a board's boot time measured from outside, the way grabserial
//! does it: every console line is timestamped on the host's monotonic clock
//! (when its first byte arrived) from power-on/reset, and the first line
//! matching each marker gives that marker's time.
//!
//! The console is the output of a command (an emulator such as the board
//! lab's qemu: time zero is just before the spawn) or a serial device (time
//! zero is just before the `--reset` command, or, without one, the first
//! byte after the previous boot: the board is switched on by hand).
//!
//! Metrics per boot, in seconds from time zero: `first_output`, one per
//! marker (default `kernel` = the kernel's first line, `init` = the kernel
//! starting the init program, then any `--marker`s, then `ready`), and, for
//! marker lines carrying a printk timestamp (`[    1.234567] …`), the
//! kernel's own clock at that line as `<marker>_printk`. The kernel image's
//! size (`kernel_image_size`, B) is stored beside them.

use std::io::Read;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

use regex::Regex;
use serde::Serialize;

use crate::safety::signals;
use crate::{Error, Result};

/// A named pattern in the console output.
#[derive(Debug, Clone)]
pub(crate) struct Marker {
    pub(crate) name: String,
    pub(crate) re: Regex,
}

impl Marker {
    pub(crate) fn new(name: &str, re: &str) -> Result<Marker> {
        let ok = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !ok {
            return Err(Error::usage(format!(
                "marker name '{name}' must be letters, digits, '_' or '-'"
            )));
        }
        let re = Regex::new(re).map_err(|e| {
            Error::usage(format!(
                "marker {name}: '{re}' is not a valid regular expression: {e}"
            ))
        })?;
        Ok(Marker {
            name: name.to_string(),
            re,
        })
    }
}

/// The kernel's first line (arm64 and x86 print one of these first) and the
/// kernel handing over to init (`Run /init as init process` needs console
/// loglevel ≥ 7; "Freeing unused kernel memory" is printed just before it at
/// the default level).
pub(crate) fn default_markers() -> Vec<Marker> {
    [
        (
            "kernel",
            r"Booting Linux on physical CPU|Linux version [0-9]",
        ),
        (
            "init",
            r"Run /\S+ as init process|Freeing unused kernel (image )?memory",
        ),
    ]
    .iter()
    .map(|(n, r)| Marker::new(n, r).expect("built-in marker"))
    .collect()
}

/// The markers to find: the defaults (unless replaced by a marker of the
/// same name), then the user's, then `ready`. The boot is over at the last.
pub(crate) fn marker_list(user: &[Marker], ready: Option<&Regex>) -> Vec<Marker> {
    let mut v: Vec<Marker> = default_markers()
        .into_iter()
        .filter(|d| !user.iter().any(|u| u.name == d.name))
        .collect();
    v.extend(user.iter().cloned());
    if let Some(re) = ready {
        v.retain(|m| m.name != "ready");
        v.push(Marker {
            name: "ready".into(),
            re: re.clone(),
        });
    }
    v
}

/// The kernel's printk timestamp at the start of a console line, seconds.
pub(crate) fn printk_time(line: &str) -> Option<f64> {
    let rest = line.trim_start().strip_prefix('[')?;
    let (num, _) = rest.split_once(']')?;
    num.trim().parse::<f64>().ok().filter(|v| v.is_finite())
}

/// One marker as found in one boot.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) struct Hit {
    pub(crate) marker: String,
    /// Host time since time zero, s.
    pub(crate) at_s: f64,
    /// The kernel's printk clock on that line, s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) printk_s: Option<f64>,
    pub(crate) line: String,
}

/// One timed boot.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct BootTrial {
    pub(crate) first_output_s: Option<f64>,
    pub(crate) hits: Vec<Hit>,
    /// Markers not seen before the last one.
    pub(crate) missed: Vec<String>,
    pub(crate) lines: usize,
    pub(crate) warmup: bool,
}

/// Follows the console of one boot, line by line.
pub(crate) struct Tracker {
    markers: Vec<Marker>,
    hits: Vec<Option<Hit>>,
    first: Option<f64>,
    lines: usize,
    /// The last lines, for the error message when the boot never finishes.
    tail: std::collections::VecDeque<String>,
}

impl Tracker {
    pub(crate) fn new(markers: Vec<Marker>) -> Tracker {
        let n = markers.len();
        Tracker {
            markers,
            hits: vec![None; n],
            first: None,
            lines: 0,
            tail: Default::default(),
        }
    }

    /// Feed one line that began arriving `at_s` after time zero. True once
    /// the last marker has been seen (the boot is over).
    pub(crate) fn line(&mut self, at_s: f64, raw: &str) -> bool {
        let text = clean(raw);
        self.first.get_or_insert(at_s);
        self.lines += 1;
        if self.tail.len() == 20 {
            self.tail.pop_front();
        }
        self.tail.push_back(text.clone());
        for (m, h) in self.markers.iter().zip(self.hits.iter_mut()) {
            if h.is_none() && m.re.is_match(&text) {
                *h = Some(Hit {
                    marker: m.name.clone(),
                    at_s,
                    printk_s: printk_time(&text),
                    line: text.clone(),
                });
            }
        }
        self.done()
    }

    pub(crate) fn done(&self) -> bool {
        self.hits.last().is_some_and(|h| h.is_some())
    }

    pub(crate) fn finish(self, warmup: bool) -> BootTrial {
        let missed = self
            .markers
            .iter()
            .zip(&self.hits)
            .filter(|(_, h)| h.is_none())
            .map(|(m, _)| m.name.clone())
            .collect();
        BootTrial {
            first_output_s: self.first,
            hits: self.hits.into_iter().flatten().collect(),
            missed,
            lines: self.lines,
            warmup,
        }
    }

    /// Why the boot is not over, with the last console lines.
    pub(crate) fn unfinished(&self, why: &str) -> Error {
        let last = self.markers.last().map_or("", |m| m.name.as_str());
        let seen: Vec<&str> = self
            .hits
            .iter()
            .flatten()
            .map(|h| h.marker.as_str())
            .collect();
        Error::measurement(format!(
            "boot not finished: {why} before the '{last}' marker (seen: {}; {} console line(s)); last lines:\n{}",
            if seen.is_empty() { "none".to_string() } else { seen.join(", ") },
            self.lines,
            self.tail.iter().map(|l| format!("  | {l}")).collect::<Vec<_>>().join("\n")
        ))
    }
}

/// Printable text of a console line: no CR, no ANSI escape sequences.
fn clean(raw: &str) -> String {
    let mut s = String::with_capacity(raw.len());
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\x1b' => {
                // CSI: ESC [ params final-byte
                if chars.peek() == Some(&'[') {
                    chars.next();
                    for d in chars.by_ref() {
                        if ('@'..='~').contains(&d) {
                            break;
                        }
                    }
                }
            }
            '\r' | '\n' => {}
            c if c.is_control() && c != '\t' => {}
            c => s.push(c),
        }
    }
    s
}

/// A console line and when its first byte arrived. `None`: the source ended.
pub(crate) type Line = Option<(Instant, String)>;

/// Read `r` in a thread, sending each line with the time its first byte
/// arrived; a `None` at the end. Reads are unbuffered chunks so a line's
/// time is not delayed by a buffer filling up.
pub(crate) fn read_lines<R: Read + Send + 'static>(mut r: R, tx: Sender<Line>) {
    let _ = std::thread::Builder::new()
        .name("tunelab-console".into())
        .spawn(move || {
            let mut buf = [0u8; 4096];
            let mut line: Vec<u8> = Vec::with_capacity(256);
            let mut began: Option<Instant> = None;
            loop {
                let n = match r.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(_) => break,
                };
                let now = Instant::now();
                for &b in &buf[..n] {
                    began.get_or_insert(now);
                    if b == b'\n' {
                        let text = String::from_utf8_lossy(&line).into_owned();
                        if tx.send(Some((began.take().unwrap_or(now), text))).is_err() {
                            return;
                        }
                        line.clear();
                    } else {
                        line.push(b);
                    }
                }
            }
            if let Some(t) = began {
                let _ = tx.send(Some((t, String::from_utf8_lossy(&line).into_owned())));
            }
            let _ = tx.send(None);
        });
}

/// What ended the wait for the boot.
pub(crate) enum Waited {
    /// The last marker was seen.
    Done,
    /// The console ended (the command exited) first.
    Closed,
    Timeout,
}

/// Feed lines from `rx` (time zero `t0`; `None` = start at the first line
/// received) into `tracker` until the last marker, the end of the console,
/// the timeout or Ctrl-C. Every line also goes to `log` (grabserial format:
/// `[seconds since zero] line`).
pub(crate) fn follow(
    rx: &Receiver<Line>,
    t0: Option<Instant>,
    tracker: &mut Tracker,
    timeout: Duration,
    log: &mut dyn FnMut(f64, &str),
) -> Result<(Waited, Instant)> {
    let waited_from = Instant::now();
    let mut zero = t0;
    loop {
        signals::check()?;
        let limit = zero.unwrap_or(waited_from) + timeout;
        let now = Instant::now();
        if now >= limit {
            return Ok((Waited::Timeout, zero.unwrap_or(waited_from)));
        }
        match rx.recv_timeout((limit - now).min(Duration::from_millis(50))) {
            Ok(Some((at, text))) => {
                let z = *zero.get_or_insert(at);
                let s = at.saturating_duration_since(z).as_secs_f64();
                log(s, &text);
                if tracker.line(s, &text) {
                    return Ok((Waited::Done, z));
                }
            }
            Ok(None) | Err(RecvTimeoutError::Disconnected) => {
                return Ok((Waited::Closed, zero.unwrap_or(waited_from)))
            }
            Err(RecvTimeoutError::Timeout) => {}
        }
    }
}

/// A serial console opened raw at a baud rate; the device's previous
/// settings are put back when it is dropped.
pub(crate) struct Serial {
    file: std::fs::File,
    saved: rustix::termios::Termios,
}

/// The standard rates (the kernel's B* constants) accepted for `--baud`.
fn baud_const(baud: u32) -> Option<u32> {
    const RATES: [u32; 13] = [
        9600, 19200, 38400, 57600, 115200, 230400, 460800, 500000, 921600, 1000000, 1500000,
        2000000, 3000000,
    ];
    RATES.contains(&baud).then_some(baud)
}

impl Serial {
    /// Open `path` for reading only (tunelab never writes to the board) and
    /// set raw mode at `baud`, 8N1, no flow control.
    pub(crate) fn open(path: &std::path::Path, baud: u32) -> Result<Serial> {
        use rustix::termios::{self as tc, ControlModes, InputModes, SpecialCodeIndex};
        use std::os::unix::fs::OpenOptionsExt;
        let speed = baud_const(baud).ok_or_else(|| {
            Error::usage(format!(
                "--baud {baud} is not a standard rate (9600 … 3000000, e.g. 115200)"
            ))
        })?;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(rustix::fs::OFlags::NOCTTY.bits() as i32)
            .open(path)
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::NotFound => {
                    Error::environment(format!("serial device {} does not exist", path.display()))
                }
                std::io::ErrorKind::PermissionDenied => Error::privilege(format!(
                    "cannot open {}: permission denied (join the dialout group or run as root)",
                    path.display()
                )),
                _ => Error::environment(format!("cannot open {}: {e}", path.display())),
            })?;
        let saved = tc::tcgetattr(&file).map_err(|e| {
            Error::usage(format!(
                "{} is not a terminal (serial) device: {e}",
                path.display()
            ))
        })?;
        let mut t = saved.clone();
        t.make_raw();
        t.control_modes |= ControlModes::CLOCAL | ControlModes::CREAD;
        t.control_modes &= !(ControlModes::CSTOPB | ControlModes::PARENB | ControlModes::CRTSCTS);
        t.input_modes &= !(InputModes::IXON | InputModes::IXOFF);
        t.special_codes[SpecialCodeIndex::VMIN] = 1;
        t.special_codes[SpecialCodeIndex::VTIME] = 0;
        t.set_speed(speed)
            .and_then(|()| tc::tcsetattr(&file, tc::OptionalActions::Now, &t))
            .map_err(|e| {
                Error::environment(format!(
                    "cannot set {} to {baud} baud raw: {e}",
                    path.display()
                ))
            })?;
        // Best effort, as before: stale input is only noise before time zero.
        let _ = tc::tcflush(&file, tc::QueueSelector::IFlush);
        Ok(Serial { file, saved })
    }

    /// A reader of the same device (for [`read_lines`]).
    pub(crate) fn reader(&self) -> Result<std::fs::File> {
        self.file
            .try_clone()
            .map_err(|e| Error::environment(format!("serial device: {e}")))
    }
}

impl Drop for Serial {
    fn drop(&mut self) {
        // Restores the attributes read in `open`; nothing to do on failure.
        let _ = rustix::termios::tcsetattr(
            &self.file,
            rustix::termios::OptionalActions::Now,
            &self.saved,
        );
    }
}

/// A channel for [`read_lines`].
pub(crate) fn channel() -> (Sender<Line>, Receiver<Line>) {
    mpsc::channel()
}

/// The kernel image a qemu-style command line boots (`-kernel FILE`).
pub(crate) fn kernel_in_argv(argv: &[String]) -> Option<&str> {
    argv.windows(2)
        .find(|w| w[0] == "-kernel")
        .map(|w| w[1].as_str())
}

#[cfg(test)]
mod tests;
