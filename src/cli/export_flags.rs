//! `--export-json/--export-csv/--export-markdown FILE` on run, study, time
//! and compare (as hyperfine has them): the result also goes to new files,
//! whatever is printed. The files are checked before measuring, so a long
//! study does not end on "already exists", and written with `write_new`, so
//! a file that appeared meanwhile is still never overwritten.

use std::path::{Path, PathBuf};

use super::output::write_new;
use super::Out;
use crate::{Error, Result};

#[derive(clap::Args, Debug, Clone, Default)]
pub struct ExportArgs {
    /// Also write the result as JSON to this new file (never overwritten).
    #[arg(long, value_name = "FILE")]
    pub export_json: Option<PathBuf>,
    /// Also write the result as CSV (one row per metric) to this new file.
    #[arg(long, value_name = "FILE")]
    pub export_csv: Option<PathBuf>,
    /// Also write the result as Markdown tables to this new file.
    #[arg(long, value_name = "FILE")]
    pub export_markdown: Option<PathBuf>,
}

/// The three texts of a result, computed only for the files asked for.
pub struct Texts<'a> {
    pub json: &'a dyn Fn() -> Result<String>,
    pub csv: &'a dyn Fn() -> Result<String>,
    pub markdown: &'a dyn Fn() -> Result<String>,
}

impl ExportArgs {
    fn files(&self) -> Vec<(&'static str, &Path)> {
        [
            ("json", &self.export_json),
            ("csv", &self.export_csv),
            ("markdown", &self.export_markdown),
        ]
        .into_iter()
        .filter_map(|(k, p)| p.as_deref().map(|p| (k, p)))
        .collect()
    }

    pub fn wanted(&self) -> bool {
        !self.files().is_empty()
    }

    /// Before measuring: each file must be new, in an existing directory,
    /// and named once.
    pub fn check(&self) -> Result<()> {
        let files = self.files();
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

    /// Write every file asked for.
    pub fn write(&self, texts: &Texts, out: &Out) -> Result<()> {
        for (kind, p) in self.files() {
            let text = match kind {
                "json" => (texts.json)()?,
                "csv" => (texts.csv)()?,
                _ => (texts.markdown)()?,
            };
            write_new(p, &text)?;
            out.info(&format!("wrote {}", p.display()));
        }
        Ok(())
    }

    /// Write a run in the formats of `tunelab export`.
    pub fn write_run(&self, run: &crate::model::run::Run, out: &Out) -> Result<()> {
        use crate::report::export::{export, Format};
        self.write(
            &Texts {
                json: &|| export(run, Format::Json),
                csv: &|| export(run, Format::Csv),
                markdown: &|| export(run, Format::Md),
            },
            out,
        )
    }
}
