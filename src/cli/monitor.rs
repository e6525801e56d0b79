//! `tunelab monitor VIEW`: watch the machine like vmstat, iostat -x, hogs,
//! sar -I, slabtop, a dirty-page watch, PSI and CPU power states.
//!
//! Every view reads cumulative counters, sleeps one interval (in 100 ms
//! slices, so Ctrl-C is noticed at once) and prints the rates of that
//! interval: a table on a terminal, one JSON object per line with `--json`
//! (flushed per sample), or a Prometheus/OpenMetrics text exposition per
//! sample with `--format openmetrics`. Unlike procps vmstat / sysstat iostat
//! there is no first "since boot" line: every line is one measured interval.
//!
//! Stopping: `--count N` stops after N samples; Ctrl-C (SIGINT/SIGTERM) stops
//! cleanly after printing the dirty view's summary, and the exit code is 0
//! — stopping a monitor is its normal end, not a failure. A closed stdout
//! (`| head`) also ends it with 0. The views (reading and rates) are
//! `engine::verbs::monitor`'s, and so is the loop (`Planned::measure`); this file
//! parses and prints each sample.

use std::io::Write;

use serde_json::{json, Value};

use super::Out;
use crate::engine::verbs::monitor::{self, Kind, Options};
use crate::units::parse_duration;
use crate::{Error, Result};

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Format {
    /// A table row per sample.
    Table,
    /// JSON Lines: one JSON object per sample, one per line (jq -c, not one array).
    Json,
    /// OpenMetrics text exposition, one block per sample.
    Openmetrics,
}

#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// What to watch.
    #[arg(value_parser = view_parser())]
    pub(crate) view: Kind,
    /// Seconds between samples (e.g. 1, 500ms, 2s).
    #[arg(long, short = 'i', default_value = "1", value_name = "DURATION", value_parser = parse_interval)]
    pub(crate) interval: f64,
    /// Stop after N samples [default: run until Ctrl-C].
    #[arg(long, short = 'c', value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) count: Option<u64>,
    /// Output format; json prints JSON Lines (one object per sample and line);
    /// --json is the same as --format json.
    #[arg(long, value_enum, default_value = "table")]
    pub(crate) format: Format,
    /// iostat: only these devices (repeatable) [default: every disk with I/O since boot].
    #[arg(long = "device", short = 'd', value_name = "NAME")]
    pub(crate) devices: Vec<String>,
    /// hogs/irq/slab: at most N rows per sample.
    #[arg(long, short = 'n', default_value = "10", value_name = "N")]
    pub(crate) top: usize,
    /// hogs: only tasks using at least this % of one CPU (like hogs -% 5).
    #[arg(long = "min-pct", default_value = "0", value_name = "PCT")]
    pub(crate) min_pct: f64,
    /// hogs: list threads instead of processes.
    #[arg(long)]
    pub(crate) threads: bool,
}

fn parse_interval(s: &str) -> std::result::Result<f64, String> {
    match parse_duration(s) {
        Some(v) if v > 0.0 && v.is_finite() => Ok(v),
        Some(_) => Err("the interval must be greater than zero".into()),
        None => Err(format!("'{s}' is not a duration (e.g. 1, 500ms, 2s)")),
    }
}

/// Write to stdout and flush; Ok(false) when stdout was closed.
fn emit(text: &str) -> Result<bool> {
    let mut so = std::io::stdout().lock();
    match so.write_all(text.as_bytes()).and_then(|_| so.flush()) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(false),
        Err(e) => Err(Error::environment(format!("cannot write to stdout: {e}"))),
    }
}

/// The views' names and help, from the engine's list of them.
fn view_parser() -> impl clap::builder::TypedValueParser<Value = Kind> {
    use clap::builder::TypedValueParser as _;
    let names = Kind::ALL
        .iter()
        .map(|(_, name, about)| clap::builder::PossibleValue::new(*name).help(*about));
    clap::builder::PossibleValuesParser::new(names)
        .try_map(|name| Kind::named(&name).ok_or_else(|| format!("'{name}' is not a view")))
}

/// OpenMetrics text: one family per metric name, gauges, ending in # EOF
/// (the writer the run and comparison exports use).
fn openmetrics(metrics: &[(String, String, f64)], unix_ms: i64) -> String {
    crate::report::export::openmetrics::text(metrics, Some(unix_ms as f64 / 1000.0), &|_| None)
}

pub(crate) fn exec(a: &Args, out: &Out, json_flag: bool) -> Result<i32> {
    let format = if json_flag { Format::Json } else { a.format };
    let mut view = monitor::plan(monitor::Request {
        options: Options {
            kind: a.view,
            devices: a.devices.clone(),
            top: a.top,
            min_pct: a.min_pct,
            threads: a.threads,
            term: out.term,
        },
        interval: a.interval,
        count: a.count,
    })?;
    let name = a.view.name();
    if format == Format::Table {
        for p in view.preface() {
            out.info(&p);
        }
    }
    let watched = view.measure(&mut |smp| {
        let e = &smp.emitted;
        let text = match format {
            Format::Table => out.term.plain(&e.table).into_owned(),
            Format::Json => {
                let mut j = json!({ "view": name, "sample": smp.n, "t": smp.t,
                                    "unix": smp.unix, "interval_s": smp.seconds });
                if let (Value::Object(dst), Value::Object(src)) = (&mut j, e.json.clone()) {
                    dst.extend(src);
                }
                format!(
                    "{}\n",
                    super::output::json_text(serde_json::to_string(&j)?, out.term)
                )
            }
            Format::Openmetrics => openmetrics(&e.metrics, (smp.unix * 1000.0) as i64),
        };
        for w in &e.warnings {
            out.warn(w);
        }
        if format == Format::Table {
            for h in &e.hints {
                out.info(&format!("hint: {h}"));
            }
        }
        emit(&text)
    })?;
    let (n, open, stopped_by) = (watched.n, !watched.closed, watched.stopped_by);
    if open {
        if let Some((table, j)) = view.finish() {
            match format {
                Format::Table => {
                    emit(&out.term.plain(&table))?;
                }
                Format::Json => {
                    let mut o = json!({ "view": name, "final": true, "samples": n });
                    if let (Value::Object(dst), Value::Object(src)) = (&mut o, j) {
                        dst.extend(src);
                    }
                    emit(&format!(
                        "{}\n",
                        super::output::json_text(serde_json::to_string(&o)?, out.term)
                    ))?;
                }
                // Metrics expositions carry no summary; say it on stderr.
                Format::Openmetrics => out.info(table.trim_start()),
            }
        }
    }
    if let Some(sig) = stopped_by {
        out.info(&format!("monitor stopped by {sig} after {n} sample(s)"));
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interval_must_be_positive() {
        assert!(parse_interval("0").is_err());
        assert!(parse_interval("-1").is_err());
        assert!(parse_interval("abc").is_err());
        assert_eq!(parse_interval("500ms"), Ok(0.5));
    }

    #[test]
    fn openmetrics_groups_families() {
        let m = vec![
            ("a".to_string(), "x=\"1\"".to_string(), 1.0),
            ("b".to_string(), String::new(), 2.0),
            ("a".to_string(), "x=\"2\"".to_string(), 3.0),
        ];
        let s = openmetrics(&m, 1000);
        assert_eq!(
            s,
            "# TYPE a gauge\na{x=\"1\"} 1 1.000\na{x=\"2\"} 3 1.000\n# TYPE b gauge\nb 2 1.000\n# EOF\n"
        );
    }
}
