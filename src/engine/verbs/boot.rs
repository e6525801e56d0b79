//! `tunelab boot`: [`plan`] checks the markers, the console, the kernel
//! image and the log before any boot; [`Planned::measure`] boots the board
//! N times (warm-up ones first) through its console — a command whose output is the console, or a
//! serial line — timing each marker, and store the boots as one `app.boot`
//! point. See `engine::process::console` for what each figure means.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use crate::engine::observer::Observer;
use crate::engine::pipeline::{close, Finished};
use crate::engine::process::console::{
    channel, follow, kernel_in_argv, marker_list, read_lines, BootTrial, Line, Marker, Serial,
    Tracker, Waited,
};
use crate::engine::process::{ready_regex, run_shell};
use crate::engine::session::Session;
use crate::engine::{Better, ParamValue};
use crate::model::run::{MetricResult, PointResult};
use crate::safety::child::send_signal;
use crate::stats::{self, StopReason};
use crate::store::Store;
use crate::{Error, Result};

/// The console: a command started anew for every boot, or one serial line.
enum Console {
    Command(Vec<String>),
    Serial {
        _port: Serial,
        rx: Receiver<Line>,
        reset: Option<String>,
    },
}

impl Console {
    /// The serial line `dev` at `baud`, read from now on; `reset` is the
    /// shell command that resets the board before each boot.
    fn serial(dev: &Path, baud: u32, reset: Option<String>) -> Result<Console> {
        let port = Serial::open(dev, baud)?;
        let (tx, rx) = channel();
        read_lines(port.reader()?, tx);
        Ok(Console::Serial {
            _port: port,
            rx,
            reset,
        })
    }
}

/// What `boot` was asked for, as parsed.
pub(crate) struct Request {
    pub(crate) runs: usize,
    pub(crate) warmup: usize,
    /// `--ready REGEX`, unparsed.
    pub(crate) ready: Option<String>,
    /// Each `--marker NAME=REGEX`, unsplit.
    pub(crate) markers: Vec<String>,
    /// `--serial DEV` and its `--baud`, `--reset`.
    pub(crate) serial: Option<PathBuf>,
    pub(crate) baud: u32,
    pub(crate) reset: Option<String>,
    /// `--kernel FILE` (default: the `-kernel FILE` of the command).
    pub(crate) kernel: Option<PathBuf>,
    /// Seconds a boot may take to reach its last marker.
    pub(crate) timeout: f64,
    /// Signal that stops the command once the boot is over.
    pub(crate) signal: i32,
    /// `--log FILE`: a new file for every console line with its time.
    pub(crate) log: Option<PathBuf>,
    /// The command whose output is the console (after `--`).
    pub(crate) command: Vec<String>,
    pub(crate) label: String,
}

/// The boots checked and their console open, none begun.
pub(crate) struct Planned {
    console: Console,
    /// The point's label: the program's name, or `serial DEV BAUD baud`.
    console_label: String,
    markers: Vec<Marker>,
    /// The kernel image booted and its size.
    kernel: Option<(PathBuf, u64)>,
    runs: usize,
    warmup: usize,
    timeout: f64,
    signal: i32,
    log: Option<std::fs::File>,
    label: String,
}

fn markers(req: &Request) -> Result<Vec<Marker>> {
    let mut user = Vec::new();
    for m in &req.markers {
        let (name, re) = m.split_once('=').ok_or_else(|| {
            Error::usage(format!(
                "--marker '{m}' must be NAME=REGEX, e.g. --marker 'net=eth0: link up'"
            ))
        })?;
        user.push(Marker::new(name, re)?);
    }
    let ready = ready_regex(req.ready.as_deref())?;
    Ok(marker_list(&user, ready.as_ref()))
}

/// Check and plan the boots: the count, the markers, the console (a
/// serial line is opened and read from now on), the kernel image's size
/// and the new `--log` file, each refusal one error before any boot.
pub(crate) fn plan(req: Request) -> Result<Planned> {
    if req.runs == 0 {
        return Err(Error::usage("--runs must be at least 1"));
    }
    let markers = markers(&req)?;
    let (console, console_label) = match (&req.serial, req.command.is_empty()) {
        (Some(dev), true) => (
            Console::serial(dev, req.baud, req.reset.clone())?,
            format!("serial {} {} baud", dev.display(), req.baud),
        ),
        // The program's name labels the point; the whole command line is in the run's argv.
        (None, false) => (
            Console::Command(req.command.clone()),
            Path::new(&req.command[0])
                .file_name()
                .map_or(req.command[0].clone(), |n| n.to_string_lossy().into_owned()),
        ),
        _ => return Err(Error::usage(
            "give the console: a command after -- (e.g. -- qemu-system-aarch64 …) or --serial DEV",
        )),
    };
    let kernel = match req
        .kernel
        .clone()
        .or_else(|| kernel_in_argv(&req.command).map(PathBuf::from))
    {
        Some(p) => {
            let size = kernel_size(&p)?;
            Some((p, size))
        }
        None => None,
    };
    let log = match &req.log {
        Some(p) => Some(
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(p)
                .map_err(|e| {
                    Error::usage(format!(
                        "--log {}: {e} (tunelab never overwrites a file; give a new name)",
                        p.display()
                    ))
                })?,
        ),
        None => None,
    };
    Ok(Planned {
        console,
        console_label,
        markers,
        kernel,
        runs: req.runs,
        warmup: req.warmup,
        timeout: req.timeout,
        signal: req.signal,
        log,
        label: req.label,
    })
}

/// The boots measured: the run (closed, stored) and every boot.
pub(crate) struct Booted {
    pub(crate) finished: Finished,
    pub(crate) trials: Vec<BootTrial>,
}

/// The kernel image's size, for `kernel_image_size`.
fn kernel_size(path: &Path) -> Result<u64> {
    std::fs::metadata(path)
        .map(|m| m.len())
        .map_err(|e| Error::usage(format!("kernel image {}: {e}", path.display())))
}

/// One boot of a command: its stdout and stderr (one pipe) are the console.
fn boot_command(
    argv: &[String],
    tracker: &mut Tracker,
    req: &Planned,
    log: &mut dyn FnMut(f64, &str),
) -> Result<()> {
    let (prog, args) = argv
        .split_first()
        .ok_or_else(|| Error::usage("empty command"))?;
    let (r, w) = rustix::pipe::pipe()
        .map_err(|e| Error::environment(format!("cannot create a pipe: {e}")))?;
    let w2 = w
        .try_clone()
        .map_err(|e| Error::environment(format!("cannot duplicate a pipe: {e}")))?;
    let (tx, rx) = channel();
    let t0 = Instant::now();
    let mut cmd = std::process::Command::new(prog);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::from(w))
        .stderr(Stdio::from(w2));
    // Dies with tunelab (SIGKILL included) and is stopped with its group.
    crate::safety::child::contain(&mut cmd);
    let mut child = cmd.spawn().map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => Error::usage(format!("command not found: {prog}")),
        _ => Error::measurement(format!("cannot start {prog}: {e}")),
    })?;
    // Drop the Command (and its copies of the write end): EOF comes when the child exits.
    drop(cmd);
    read_lines(std::fs::File::from(r), tx);
    let pid = child.id() as i32;
    crate::safety::signals::register_child(pid);
    let _forget = Unregister(pid);
    // The group our unreaped child leads, then the child itself.
    let stop = |sig: i32| {
        send_signal(pid, sig, true);
        send_signal(pid, sig, false);
    };
    let sigkill = rustix::process::Signal::KILL.as_raw();
    let waited = follow(
        &rx,
        Some(t0),
        tracker,
        Duration::from_secs_f64(req.timeout),
        log,
    );
    let how = match waited {
        Ok((w, _)) => w,
        Err(e) => {
            stop(sigkill);
            let _ = child.wait();
            return Err(e);
        }
    };
    if !matches!(how, Waited::Closed) {
        stop(req.signal);
        let end = Instant::now() + Duration::from_secs(10);
        while child.try_wait().ok().flatten().is_none() {
            if Instant::now() > end {
                stop(sigkill);
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    let status = child
        .wait()
        .map_err(|e| Error::measurement(format!("waiting for {prog}: {e}")))?;
    match how {
        Waited::Done => Ok(()),
        Waited::Closed => Err(tracker.unfinished(&format!("{prog} exited ({status})"))),
        Waited::Timeout => {
            Err(tracker.unfinished(&format!("{:.0} s passed (--timeout)", req.timeout)))
        }
    }
}

/// Takes the child off the emergency kill list once it is reaped.
struct Unregister(i32);

impl Drop for Unregister {
    fn drop(&mut self) {
        crate::safety::signals::unregister_child(self.0);
    }
}

fn boot_serial(
    rx: &Receiver<Line>,
    reset: Option<&str>,
    tracker: &mut Tracker,
    timeout: f64,
    obs: &dyn Observer,
    which: &str,
    log: &mut dyn FnMut(f64, &str),
) -> Result<()> {
    while let Ok(Some(_)) = rx.try_recv() {} // what the board printed before this boot
    let t0 = match reset {
        Some(cmd) => {
            let t0 = Instant::now();
            run_shell("--reset", cmd)?;
            Some(t0)
        }
        None => {
            obs.info(&format!("{which}: power the board on or reset it now"));
            None
        }
    };
    match follow(rx, t0, tracker, Duration::from_secs_f64(timeout), log)?.0 {
        Waited::Done => Ok(()),
        Waited::Closed => Err(tracker.unfinished("the serial device closed")),
        Waited::Timeout => Err(tracker.unfinished(&format!("{timeout:.0} s passed (--timeout)"))),
    }
}

fn metric(
    name: String,
    unit: &str,
    trials: &[BootTrial],
    f: &dyn Fn(&BootTrial) -> Option<f64>,
) -> Option<MetricResult> {
    let of = |warm: bool| -> Vec<f64> {
        trials
            .iter()
            .filter(|t| t.warmup == warm)
            .filter_map(f)
            .collect()
    };
    super::metric(
        name,
        unit,
        Better::Lower,
        of(false),
        of(true),
        Some(StopReason::Fixed),
    )
}

fn point(
    console: &str,
    marker_names: &[String],
    trials: &[BootTrial],
    kernel: Option<(&Path, u64)>,
    elapsed: f64,
) -> PointResult {
    let mut metrics: Vec<MetricResult> = Vec::new();
    metrics.extend(metric("first_output".into(), "s", trials, &|t| {
        t.first_output_s
    }));
    for name in marker_names {
        let n = name.clone();
        metrics.extend(metric(name.clone(), "s", trials, &move |t| {
            t.hits.iter().find(|h| h.marker == n).map(|h| h.at_s)
        }));
    }
    for name in marker_names {
        let n = name.clone();
        metrics.extend(metric(format!("{name}_printk"), "s", trials, &move |t| {
            t.hits
                .iter()
                .find(|h| h.marker == n)
                .and_then(|h| h.printk_s)
        }));
    }
    let mut params = BTreeMap::new();
    params.insert("console".to_string(), ParamValue::Text(console.to_string()));
    let mut notes = vec![format!(
        "host monotonic clock from {} to the first console line matching each marker \
         (a line's time is when its first byte arrived); <marker>_printk is the kernel's \
         own clock on that line; markers: {}",
        if console.starts_with("serial ") {
            "the reset command (or, without one, the first byte received)"
        } else {
            "just before the command was spawned"
        },
        marker_names.join(", ")
    )];
    if let Some((path, size)) = kernel {
        let name = path.file_name().map_or(path.display().to_string(), |n| {
            n.to_string_lossy().into_owned()
        });
        params.insert("kernel".to_string(), ParamValue::Text(name));
        let mut summary = stats::summarize(&[size as f64]);
        summary.stop_reason = Some(StopReason::Fixed);
        metrics.push(MetricResult {
            name: "kernel_image_size".into(),
            unit: "B".into(),
            better: Better::Lower,
            samples: vec![size as f64],
            warmup: Vec::new(),
            summary,
        });
        notes.push(format!(
            "kernel_image_size: size of the file {} as booted (compressed if it is a vmlinuz)",
            path.display()
        ));
    }
    for name in marker_names {
        let missed = trials
            .iter()
            .filter(|t| !t.warmup && t.missed.contains(name))
            .count();
        if missed > 0 {
            notes.push(format!("marker '{name}' not seen in {missed} boot(s)"));
        }
    }
    super::point("app.boot", params, metrics, notes, elapsed)
}

impl Planned {
    /// Boot `warmup + runs` times, stop at the first failed boot, store the
    /// run in `store` (when given).
    pub(crate) fn measure(
        mut self,
        argv: &[String],
        store: Option<&mut Store>,
        obs: &dyn Observer,
    ) -> Booted {
        let mut log = self.log.take();
        let mut session = Session::open(&self.label, argv, None);
        let names: Vec<String> = self.markers.iter().map(|m| m.name.clone()).collect();
        let t_all = Instant::now();
        let total = self.warmup + self.runs;
        let mut trials: Vec<BootTrial> = Vec::new();
        let mut error = None;
        for i in 0..total {
            let warm = i < self.warmup;
            let which = format!(
                "boot {}/{}{}",
                i + 1,
                total,
                if warm { " (warm-up)" } else { "" }
            );
            obs.info(&which);
            let mut tracker = Tracker::new(self.markers.clone());
            let mut write_log = |s: f64, l: &str| {
                if let Some(f) = log.as_mut() {
                    let _ = writeln!(f, "[{s:11.6}] {l}");
                }
            };
            write_log(0.0, &format!("==== tunelab boot: {which}"));
            let r = match &self.console {
                Console::Command(argv) => boot_command(argv, &mut tracker, &self, &mut write_log),
                Console::Serial { rx, reset, .. } => boot_serial(
                    rx,
                    reset.as_deref(),
                    &mut tracker,
                    self.timeout,
                    obs,
                    &which,
                    &mut write_log,
                ),
            };
            if let Err(e) = r {
                error = Some(e);
                break;
            }
            let t = tracker.finish(warm);
            let shown: Vec<String> = t
                .hits
                .iter()
                .map(|h| format!("{} {:.3} s", h.marker, h.at_s))
                .collect();
            obs.info(&format!("  {}", shown.join(", ")));
            trials.push(t);
        }
        if trials.iter().any(|t| !t.warmup) {
            session.run.results.push(point(
                &self.console_label,
                &names,
                &trials,
                self.kernel.as_ref().map(|(p, s)| (p.as_path(), *s)),
                t_all.elapsed().as_secs_f64(),
            ));
        }
        Booted {
            finished: close(session, error, store, false, obs),
            trials,
        }
    }
}
