//! `tunelab boot [--runs N] [--ready REGEX] [--marker NAME=REGEX]… -- CMD…`
//! or `… --serial DEV [--baud B] [--reset CMD]`: a board's boot time measured
//! from outside (grabserial-style), repeated N times with the usual
//! statistics and stored as an `app.boot` run (see
//! src/experiments/app/boot.rs for what each figure means).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use regex::Regex;

use super::{Cli, Out};
use crate::engine::model::{now_rfc3339, MetricResult, PointResult, Run};
use crate::engine::pipeline::store_run;
use crate::engine::session::{new_run, status_of};
use crate::engine::{Better, ParamValue};
use crate::experiments::app::boot::{
    self, follow, kernel_in_argv, marker_list, BootTrial, Marker, Serial, Tracker, Waited,
};
use crate::experiments::app::proc;
use crate::report::table::render as table;
use crate::stats;
use crate::units::human;
use crate::{Error, Result};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Timed boots (after the warm-up ones).
    #[arg(long, value_name = "N", default_value = "5")]
    pub runs: usize,
    /// Boots before the timed ones, recorded but not summarised.
    #[arg(long, value_name = "N", default_value = "0")]
    pub warmup: usize,
    /// The line that ends a boot (e.g. 'login:' or your application's "started" line).
    /// Without it the boot ends at the last marker (default: the kernel starting init).
    #[arg(long, value_name = "REGEX")]
    pub ready: Option<String>,
    /// An extra marker (repeatable), NAME=REGEX; the names kernel and init
    /// replace the built-in patterns.
    #[arg(long = "marker", value_name = "NAME=REGEX")]
    pub markers: Vec<String>,
    /// Read the console from this serial device instead of a command's output.
    #[arg(long, value_name = "DEV", conflicts_with = "command")]
    pub serial: Option<PathBuf>,
    /// Serial line speed.
    #[arg(
        long,
        value_name = "BAUD",
        default_value = "115200",
        requires = "serial"
    )]
    pub baud: u32,
    /// Shell command that power-cycles or resets the board before each boot
    /// (time zero is just before it). Without it, power the board on by hand:
    /// time zero is the first byte the serial line receives.
    #[arg(long, value_name = "CMD", requires = "serial")]
    pub reset: Option<String>,
    /// The kernel image, for its size (default: the -kernel FILE of a qemu command).
    #[arg(long, value_name = "FILE")]
    pub kernel: Option<PathBuf>,
    /// Give up on a boot that has not reached its last marker after this long.
    #[arg(long, value_name = "DURATION", default_value = "120s", value_parser = super::run::positive_duration)]
    pub timeout: f64,
    /// Signal that stops the command once the boot is over.
    #[arg(long, default_value = "TERM", value_parser = proc::parse_signal)]
    pub signal: i32,
    /// Write every console line with its time (grabserial style) to this new file.
    #[arg(long, value_name = "FILE")]
    pub log: Option<PathBuf>,
    /// A label stored with the run.
    #[arg(long, default_value = "")]
    pub label: String,
    /// Do not store the run.
    #[arg(long)]
    pub no_store: bool,
    /// The command whose output is the console (e.g. qemu-system-aarch64 … -nographic), after --.
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

fn markers(a: &Args) -> Result<Vec<Marker>> {
    let mut user = Vec::new();
    for m in &a.markers {
        let (name, re) = m.split_once('=').ok_or_else(|| {
            Error::usage(format!(
                "--marker '{m}' must be NAME=REGEX, e.g. --marker 'net=eth0: link up'"
            ))
        })?;
        user.push(Marker::new(name, re)?);
    }
    let ready = a
        .ready
        .as_deref()
        .map(Regex::new)
        .transpose()
        .map_err(|e| Error::usage(format!("--ready is not a valid regular expression: {e}")))?;
    Ok(marker_list(&user, ready.as_ref()))
}

/// The console: a command started anew for every boot, or one serial line.
enum Console {
    Command(Vec<String>),
    Serial {
        _port: Serial,
        rx: std::sync::mpsc::Receiver<boot::Line>,
        reset: Option<String>,
    },
}

/// One boot of a command: its stdout and stderr (one pipe) are the console.
fn boot_command(
    argv: &[String],
    tracker: &mut Tracker,
    a: &Args,
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
    let (tx, rx) = boot::channel();
    let t0 = Instant::now();
    let mut cmd = Command::new(prog);
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
    boot::read_lines(std::fs::File::from(r), tx);
    let pid = child.id() as i32;
    crate::safety::signals::register_child(pid);
    let _forget = Unregister(pid);
    // SAFETY: signalling the group our unreaped child leads.
    let stop = |sig: i32| unsafe {
        libc::kill(-pid, sig);
        libc::kill(pid, sig);
    };
    let waited = follow(
        &rx,
        Some(t0),
        tracker,
        Duration::from_secs_f64(a.timeout),
        log,
    );
    let how = match waited {
        Ok((w, _)) => w,
        Err(e) => {
            stop(libc::SIGKILL);
            let _ = child.wait();
            return Err(e);
        }
    };
    if !matches!(how, Waited::Closed) {
        stop(a.signal);
        let end = Instant::now() + Duration::from_secs(10);
        while child.try_wait().ok().flatten().is_none() {
            if Instant::now() > end {
                stop(libc::SIGKILL);
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
            Err(tracker.unfinished(&format!("{:.0} s passed (--timeout)", a.timeout)))
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
    rx: &std::sync::mpsc::Receiver<boot::Line>,
    reset: Option<&str>,
    tracker: &mut Tracker,
    a: &Args,
    out: &Out,
    which: &str,
    log: &mut dyn FnMut(f64, &str),
) -> Result<()> {
    while let Ok(Some(_)) = rx.try_recv() {} // what the board printed before this boot
    let t0 = match reset {
        Some(cmd) => {
            let t0 = Instant::now();
            proc::run_shell("--reset", cmd)?;
            Some(t0)
        }
        None => {
            out.info(&format!("{which}: power the board on or reset it now"));
            None
        }
    };
    match follow(rx, t0, tracker, Duration::from_secs_f64(a.timeout), log)?.0 {
        Waited::Done => Ok(()),
        Waited::Closed => Err(tracker.unfinished("the serial device closed")),
        Waited::Timeout => {
            Err(tracker.unfinished(&format!("{:.0} s passed (--timeout)", a.timeout)))
        }
    }
}

fn metric(
    name: String,
    unit: &str,
    trials: &[BootTrial],
    f: &dyn Fn(&BootTrial) -> Option<f64>,
) -> Option<MetricResult> {
    let samples: Vec<f64> = trials.iter().filter(|t| !t.warmup).filter_map(f).collect();
    if samples.is_empty() {
        return None;
    }
    let mut summary = stats::summarize(&samples);
    summary.stop_reason = Some(stats::StopReason::Fixed);
    Some(MetricResult {
        name,
        unit: unit.to_string(),
        better: Better::Lower,
        samples,
        warmup: trials.iter().filter(|t| t.warmup).filter_map(f).collect(),
        summary,
    })
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
        summary.stop_reason = Some(stats::StopReason::Fixed);
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
    PointResult {
        experiment: "app.boot".into(),
        params,
        metrics,
        series: Vec::new(),
        histograms: Vec::new(),
        notes,
        elapsed_s: elapsed,
        ..Default::default()
    }
}

pub fn exec(a: &Args, out: &Out, cli: &Cli, argv: &[String]) -> Result<i32> {
    if a.runs == 0 {
        return Err(Error::usage("--runs must be at least 1"));
    }
    let list = markers(a)?;
    let names: Vec<String> = list.iter().map(|m| m.name.clone()).collect();
    let (console, label) = match (&a.serial, a.command.is_empty()) {
        (Some(dev), true) => {
            let port = Serial::open(dev, a.baud)?;
            let (tx, rx) = boot::channel();
            boot::read_lines(port.reader()?, tx);
            (
                Console::Serial {
                    _port: port,
                    rx,
                    reset: a.reset.clone(),
                },
                format!("serial {} {} baud", dev.display(), a.baud),
            )
        }
        // The program's name labels the point; the whole command line is in the run's argv.
        (None, false) => (
            Console::Command(a.command.clone()),
            Path::new(&a.command[0])
                .file_name()
                .map_or(a.command[0].clone(), |n| n.to_string_lossy().into_owned()),
        ),
        _ => return Err(Error::usage(
            "give the console: a command after -- (e.g. -- qemu-system-aarch64 …) or --serial DEV",
        )),
    };
    let kernel_path = a
        .kernel
        .clone()
        .or_else(|| kernel_in_argv(&a.command).map(PathBuf::from));
    let kernel = match &kernel_path {
        Some(p) => Some((
            p.as_path(),
            std::fs::metadata(p)
                .map_err(|e| Error::usage(format!("kernel image {}: {e}", p.display())))?
                .len(),
        )),
        None => None,
    };
    let mut log = match &a.log {
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
    let mut store = if a.no_store {
        None
    } else {
        Some(super::open_store(cli)?)
    };
    let mut run = new_run(None, &a.label, argv);
    let t_all = Instant::now();
    let total = a.warmup + a.runs;
    let mut trials: Vec<BootTrial> = Vec::new();
    let mut outcome = Ok(());
    for i in 0..total {
        let warm = i < a.warmup;
        let which = format!(
            "boot {}/{}{}",
            i + 1,
            total,
            if warm { " (warm-up)" } else { "" }
        );
        out.info(&which);
        let mut tracker = Tracker::new(list.clone());
        let mut write_log = |s: f64, l: &str| {
            if let Some(f) = log.as_mut() {
                let _ = writeln!(f, "[{s:11.6}] {l}");
            }
        };
        write_log(0.0, &format!("==== tunelab boot: {which}"));
        let r = match &console {
            Console::Command(argv) => boot_command(argv, &mut tracker, a, &mut write_log),
            Console::Serial { rx, reset, .. } => boot_serial(
                rx,
                reset.as_deref(),
                &mut tracker,
                a,
                out,
                &which,
                &mut write_log,
            ),
        };
        if let Err(e) = r {
            outcome = Err(e);
            break;
        }
        let t = tracker.finish(warm);
        let shown: Vec<String> = t
            .hits
            .iter()
            .map(|h| format!("{} {:.3} s", h.marker, h.at_s))
            .collect();
        out.info(&format!("  {}", shown.join(", ")));
        trials.push(t);
    }
    run.status = status_of(outcome.as_ref().err());
    if trials.iter().any(|t| !t.warmup) {
        run.results.push(point(
            &label,
            &names,
            &trials,
            kernel,
            t_all.elapsed().as_secs_f64(),
        ));
    }
    run.finished = now_rfc3339();
    // A store that cannot be written must not lose the boots measured: the
    // results are printed first, the store's failure reported after them.
    let store_error = if run.results.is_empty() {
        None
    } else {
        store_run(&run, store.as_mut(), false, out)
    };
    if out.json {
        let mut doc = serde_json::to_value(&run)?;
        doc["trials"] = serde_json::to_value(&trials)?;
        out.json_data(&doc)?;
    } else if let Some(p) = run.results.first() {
        out.data(&render(&run, p))?;
    }
    outcome?;
    store_error.map_or(Ok(0), Err)
}

fn render(run: &Run, p: &PointResult) -> String {
    let rows = p
        .metrics
        .iter()
        .map(|m| {
            let s = &m.summary;
            vec![
                m.name.clone(),
                human(s.median, &m.unit),
                format!(
                    "{} … {}",
                    human(s.ci95_low, &m.unit),
                    human(s.ci95_high, &m.unit)
                ),
                human(s.min, &m.unit),
                human(s.max, &m.unit),
                s.n.to_string(),
            ]
        })
        .collect();
    let mut s = format!("run {} app.boot: {}\n", run.id, p.params_label());
    s.push_str(&table(
        &["metric", "median", "95% CI of median", "min", "max", "n"],
        rows,
    ));
    for n in &p.notes {
        s.push_str(&format!("  {n}\n"));
    }
    s
}
