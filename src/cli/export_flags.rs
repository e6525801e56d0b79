//! The `--export-FORMAT FILE` flags (as hyperfine has them): the result also
//! goes to new files, whatever is printed, in any format of the exporter
//! table (`report::export::EXPORTERS`). run, study, time and compare take
//! the result formats (`ExportArgs`), diagnose the profile formats
//! (`ProfileExportArgs`). The files are checked before measuring, so a long
//! study does not end on "already exists", and created new, so a file that
//! appeared meanwhile is still never overwritten.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use super::output::create_new;
use super::Out;
use crate::report::export::{find, Subject};
use crate::{Error, Result};

#[derive(clap::Args, Debug, Clone, Default)]
pub(crate) struct ExportArgs {
    /// Also write the result as JSON to this new file (never overwritten).
    #[arg(long, value_name = "FILE")]
    pub(crate) export_json: Option<PathBuf>,
    /// Also write the result as CSV (one row per metric) to this new file.
    #[arg(long, value_name = "FILE")]
    pub(crate) export_csv: Option<PathBuf>,
    /// Also write the result as Markdown tables to this new file.
    #[arg(long, value_name = "FILE")]
    pub(crate) export_markdown: Option<PathBuf>,
    /// Also write JUnit XML for a CI gate: a key issue, metric or comparison
    /// row per test case; FAIL and regressed are failures with the figures.
    #[arg(long, value_name = "FILE")]
    pub(crate) export_junit: Option<PathBuf>,
    /// Also write Bencher Metric Format JSON (median, lower/upper = 95% CI;
    /// for a comparison the ratio new/base).
    #[arg(long, value_name = "FILE")]
    pub(crate) export_bmf: Option<PathBuf>,
    /// Also write OpenMetrics text gauges (Prometheus, GitLab metrics reports).
    #[arg(long, value_name = "FILE")]
    pub(crate) export_openmetrics: Option<PathBuf>,
    /// Also print `lava-test-case NAME --result pass|fail --measurement X
    /// --units U` lines for LAVA device farms (on stdout; with --json on stderr).
    #[arg(long)]
    pub(crate) lava: bool,
}

/// diagnose's profile exports.
#[derive(clap::Args, Debug, Clone, Default)]
pub(crate) struct ProfileExportArgs {
    /// Also write the CPU and off-CPU profiles as a pprof profile.proto
    /// (uncompressed; `go tool pprof FILE` reads it).
    #[arg(long, value_name = "FILE")]
    pub(crate) export_pprof: Option<PathBuf>,
    /// Also write the CPU and off-CPU profiles for speedscope (JSON).
    #[arg(long, value_name = "FILE")]
    pub(crate) export_speedscope: Option<PathBuf>,
    /// Also write the CPU profile as folded stacks (flamegraph.pl, inferno).
    #[arg(long, value_name = "FILE")]
    pub(crate) export_folded: Option<PathBuf>,
    /// Also write the off-CPU profile as folded stacks (µs blocked).
    #[arg(long, value_name = "FILE")]
    pub(crate) export_folded_off_cpu: Option<PathBuf>,
}

/// (format name in the exporter table, file) for each file asked for.
type Files<'a> = Vec<(&'static str, &'a Path)>;

fn pick<'a, const N: usize>(pairs: [(&'static str, &'a Option<PathBuf>); N]) -> Files<'a> {
    pairs
        .into_iter()
        .filter_map(|(k, p)| p.as_deref().map(|p| (k, p)))
        .collect()
}

impl ExportArgs {
    fn files(&self) -> Files<'_> {
        pick([
            ("json", &self.export_json),
            ("csv", &self.export_csv),
            ("markdown", &self.export_markdown),
            ("junit", &self.export_junit),
            ("bmf", &self.export_bmf),
            ("openmetrics", &self.export_openmetrics),
        ])
    }

    pub(crate) fn wanted(&self) -> bool {
        !self.files().is_empty() || self.lava
    }

    /// Before measuring: each file must be new, in an existing directory,
    /// and named once.
    pub(crate) fn check(&self) -> Result<()> {
        check(&self.files())
    }

    /// Write every file asked for, then the LAVA lines.
    pub(crate) fn write(&self, subject: &Subject, out: &Out) -> Result<()> {
        write(&self.files(), subject, out)?;
        if self.lava {
            let lines = String::from_utf8_lossy(&export_bytes("lava", subject)?).into_owned();
            // With --json the lines go to stderr, so stdout stays one document.
            if out.json {
                eprint!("{lines}");
            } else {
                out.data(&lines)?;
            }
        }
        Ok(())
    }

    /// Write a run.
    pub(crate) fn write_run(&self, run: &crate::model::run::Run, out: &Out) -> Result<()> {
        self.write(&Subject::Run(run), out)
    }
}

impl ProfileExportArgs {
    fn files(&self) -> Files<'_> {
        pick([
            ("pprof", &self.export_pprof),
            ("speedscope", &self.export_speedscope),
            ("folded", &self.export_folded),
            ("folded-off-cpu", &self.export_folded_off_cpu),
        ])
    }

    pub(crate) fn check(&self) -> Result<()> {
        check(&self.files())
    }

    pub(crate) fn write(&self, run: &crate::model::run::Run, out: &Out) -> Result<()> {
        write(&self.files(), &Subject::Run(run), out)
    }
}

fn export_bytes(format: &str, subject: &Subject) -> Result<Vec<u8>> {
    find(format)
        .ok_or_else(|| Error::usage(format!("internal: no exporter {format}")))?
        .export(subject)
}

fn check(files: &Files) -> Result<()> {
    for (i, (kind, p)) in files.iter().enumerate() {
        if files[..i].iter().any(|(_, q)| q == p) {
            return Err(Error::usage(format!(
                "--export-{kind} {} names the same file as another --export flag",
                p.display()
            )));
        }
        if p.exists() {
            return Err(Error::usage(format!(
                "--export-{kind}: {} already exists; choose a new file name (tunelab \
                 never overwrites a file)",
                p.display()
            )));
        }
        let dir = p.parent().filter(|d| !d.as_os_str().is_empty());
        if let Some(d) = dir {
            if !d.is_dir() {
                return Err(Error::usage(format!(
                    "--export-{kind}: the directory {} does not exist",
                    d.display()
                )));
            }
        }
    }
    Ok(())
}

/// Every file is rendered before the first is created, so a format that
/// cannot express the subject leaves no half of the set behind.
fn write(files: &Files, subject: &Subject, out: &Out) -> Result<()> {
    let mut rendered = Vec::with_capacity(files.len());
    for (kind, p) in files {
        rendered.push((*p, export_bytes(kind, subject)?));
    }
    for (p, bytes) in rendered {
        write_bytes(p, &bytes, out)?;
    }
    Ok(())
}

/// Write `bytes` to a new file (never an existing one) and say so.
pub(crate) fn write_bytes(p: &Path, bytes: &[u8], out: &Out) -> Result<()> {
    let mut f = create_new(p)?;
    f.write_all(bytes)
        .and_then(|_| f.flush())
        .map_err(|e| Error::io("cannot write", p, e))?;
    out.info(&format!("wrote {}", p.display()));
    Ok(())
}
