//! `tunelab report RUN [--vs BASE] -o FILE.html|FILE.md`: a report to read
//! and keep — system, study verdicts, every experiment with its table and
//! charts, monitor timelines, and with `--vs` a comparison first. With
//! several runs or a selection (`--machine`, `--label`, `--since`), the
//! device comparison that `compare` prints, as a document.

use std::path::{Path, PathBuf};

use super::output::{create_new, write_all};
use super::Out;
use crate::report::{assemble, html, md_report};
use crate::store::{select, Store};
use crate::{Error, Result};

pub(crate) const AFTER_HELP: &str = "\
The format follows the file name: .html/.htm is one self-contained file (inline CSS and SVG \
charts, no scripts, nothing loaded from the network); .md is Markdown, with the charts written \
as SVG files into FILE-assets/ next to it (e.g. report.md + report-assets/01-….svg) and linked \
relatively. Existing files are never overwritten.

With --vs, RUN is the new run and --vs names the base (before the change): environment \
differences, then ratios RUN/BASE with 95% CIs as a forest plot, then the verdict table.

With several runs, or runs selected by --machine/--label/--since (the newest run of each \
machine), the report compares devices as `compare` does: a chart of each device's ratio to the \
baseline (--baseline, default the first) per metric with 95% CIs, the key issues' verdicts per \
device, the ratios, and the environment facts that differ between the devices.";

#[derive(clap::Args, Debug)]
#[command(after_help = AFTER_HELP)]
pub(crate) struct Args {
    /// Run(s) to report on: id, unique prefix, `last` or `last~N`; several
    /// (or a selection) make a device comparison.
    #[arg(value_name = "RUN")]
    pub(crate) runs: Vec<String>,
    #[command(flatten)]
    pub(crate) sel: super::compare::Selection,
    /// Compare with this base run (before the change): id, prefix, `last` or `last~N`.
    #[arg(long, value_name = "RUN")]
    pub(crate) vs: Option<String>,
    /// New file to write: FILE.html (or .htm) or FILE.md.
    #[arg(long, short, value_name = "FILE")]
    pub(crate) output: PathBuf,
    /// With --vs: differences smaller than this are "no change" (e.g. 2% or 0.02).
    #[arg(long, default_value = "2%", value_parser = super::compare::parse_noise)]
    pub(crate) noise: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Html,
    Markdown,
}

fn format_of(path: &Path) -> Result<Format> {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    match ext.as_deref() {
        Some("html") | Some("htm") => Ok(Format::Html),
        Some("md") | Some("markdown") => Ok(Format::Markdown),
        _ => Err(Error::usage(format!(
            "cannot tell the report format from '{}': name the file *.html, *.htm or *.md",
            path.display()
        ))),
    }
}

/// `dir/report.md` → (`dir/report-assets`, `report-assets`).
fn assets_dir(path: &Path) -> (PathBuf, String) {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "report".into());
    let name = format!("{stem}-assets");
    (path.with_file_name(&name), name)
}

pub(crate) fn exec(args: &Args, out: &Out, store: &Store) -> Result<i32> {
    let format = format_of(&args.output)?;
    if args.output.symlink_metadata().is_ok() {
        return Err(Error::usage(format!(
            "{} already exists; choose a new file name (reports never overwrite)",
            args.output.display()
        )));
    }
    let devices = args.runs.len() > 1 || args.sel.selecting();
    let (doc, ids, vs_id, baseline_id) = if devices {
        if args.vs.is_some() {
            return Err(Error::usage(
                "--vs compares two runs; with several runs or a selection, name the baseline \
                 with --baseline",
            ));
        }
        let runs = args.sel.gather(&args.runs, store)?;
        if runs.len() < 2 {
            return Err(Error::usage(format!(
                "a device comparison needs two runs or more; {} found (name runs, or select \
                 them with --machine, --label or --since)",
                runs.len()
            )));
        }
        let baseline = args.sel.baseline_index(&runs)?;
        let ids: Vec<String> = runs.iter().map(|r| r.id.clone()).collect();
        (
            assemble::devices_document(&runs, baseline, args.noise),
            ids,
            None,
            Some(runs[baseline].id.clone()),
        )
    } else {
        let Some(name) = args.runs.first() else {
            return Err(Error::usage(
                "name the run to report on (or select runs with --machine, --label or --since)",
            ));
        };
        if args.sel.baseline.is_some() {
            return Err(Error::usage(
                "--baseline picks one of several devices; for two runs use --vs BASE",
            ));
        }
        let run = store.load(name)?;
        let base = match &args.vs {
            Some(r) => Some(store.load(r)?),
            None => None,
        };
        let doc = assemble::run_document(assemble::RunReport {
            run: &run,
            base: base.as_ref(),
            changes: &select::applied_changes(store),
            noise: args.noise,
            findings: run
                .diagnosis
                .as_ref()
                .map(|d| crate::study::advice::diagnosis_finding_texts(&run.id, d))
                .unwrap_or_default(),
            flame: &super::diagnose::flame,
        });
        (doc, vec![run.id.clone()], base.map(|b| b.id), None)
    };
    let charts = doc.figures().filter(|f| f.svg.is_ok()).count();
    let failed: Vec<String> = doc
        .figures()
        .filter_map(|f| f.svg.as_ref().err().map(|e| format!("{}: {e}", f.title)))
        .collect();
    // Without feature "charts" every chart is missing for one reason: say it once.
    #[cfg(not(feature = "charts"))]
    let failed: Vec<String> = match failed.len() {
        0 => failed,
        n => vec![format!(
            "{n} chart(s): {}",
            crate::report::charts::NO_CHARTS
        )],
    };
    let path = &args.output;
    let mut assets = Vec::new();
    match format {
        Format::Html => {
            let text = html::render(&doc);
            let mut f = create_new(path)?;
            write_all(&mut f, path, &text)?;
        }
        Format::Markdown => {
            let (dir, dir_name) = assets_dir(path);
            let (text, files) = md_report::render(&doc, &dir_name);
            let mut f = create_new(path)?;
            if !files.is_empty() {
                if let Err(e) = std::fs::create_dir(&dir) {
                    // Leave nothing half-written behind.
                    let _ = std::fs::remove_file(path);
                    return Err(if e.kind() == std::io::ErrorKind::AlreadyExists {
                        Error::usage(format!(
                            "{} already exists (the Markdown report puts its charts there); \
                             choose a new file name",
                            dir.display()
                        ))
                    } else {
                        Error::io("cannot create", &dir, e)
                    });
                }
                for (name, svg) in &files {
                    let p = dir.join(name);
                    let mut af = create_new(&p)?;
                    write_all(&mut af, &p, svg)?;
                    assets.push(p);
                }
            }
            write_all(&mut f, path, &text)?;
        }
    }
    for f in &failed {
        out.warn(&format!("chart not drawn: {f}"));
    }
    if out.json {
        out.json_data(&serde_json::json!({
            "path": path,
            "format": match format { Format::Html => "html", Format::Markdown => "md" },
            "run": ids.first(),
            "runs": ids,
            "vs": vs_id,
            "baseline": baseline_id,
            "charts": charts,
            "assets": assets,
        }))?;
    }
    out.info(&format!(
        "wrote {} ({} section(s), {charts} chart(s){})",
        path.display(),
        doc.sections.len(),
        if assets.is_empty() {
            String::new()
        } else {
            format!(" in {}", assets_dir(path).0.display())
        }
    ));
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_from_extension() {
        assert_eq!(format_of(Path::new("a.html")).unwrap(), Format::Html);
        assert_eq!(format_of(Path::new("a.HTM")).unwrap(), Format::Html);
        assert_eq!(format_of(Path::new("x/a.md")).unwrap(), Format::Markdown);
        assert_eq!(format_of(Path::new("a.pdf")).unwrap_err().exit_code(), 2);
        assert_eq!(format_of(Path::new("report")).unwrap_err().exit_code(), 2);
        let (p, n) = assets_dir(Path::new("/tmp/r.md"));
        assert_eq!(p, PathBuf::from("/tmp/r-assets"));
        assert_eq!(n, "r-assets");
    }
}
