//! `io.metadata`: create and delete N empty files per second under
//! durability levels — the classic commit-level table.

use std::fs::File;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::engine::Spec;
use crate::engine::{
    Ctx, Experiment, MetricSpec, Needs, ParamKind, ParamSpec, Point, PointExtras, PointRun,
    RunDefaults, TrialValues,
};
use crate::{Error, Result};

pub struct Metadata;

const LEVELS: &[&str] = &["none", "low", "medium", "high", "osync"];

pub static SPEC: Spec = Spec {
    name: "io.metadata",
    summary: "create/delete empty files per second at durability levels none/low/medium/high/osync",
    method:
        "Each trial makes a fresh subdirectory in the scratch directory, creates `files` empty \
         files in it (open O_CREAT|O_EXCL, close) and then deletes them (unlink), timing each \
         phase with a monotonic clock. Durability levels: none = no sync at all (the figures \
         are page-cache/journal-in-memory rates); low = one syncfs() at the end of the phase, \
         inside the timing; medium = fsync() of the directory after every create/unlink; high = \
         fsync() of the new file and of the directory after every create (directory after every \
         unlink); osync = files opened with O_SYNC plus a directory fsync after each operation. \
         Results are files per second (ops/s). The subdirectory is removed after the trial.",
    params: &[
        ParamSpec::new(
            "files",
            ParamKind::Count,
            "2000",
            "files created and deleted per trial",
        )
        .range(1.0, 10_000_000.0),
        ParamSpec::new(
            "level",
            ParamKind::Choice(LEVELS),
            "none,low,medium,high",
            "durability level (sweep); osync is optional",
        ),
    ],
    metrics: &[
        MetricSpec::higher("created_per_s", "ops/s", "empty files created per second"),
        MetricSpec::higher("deleted_per_s", "ops/s", "files deleted per second"),
    ],
    needs: Needs::SCRATCH,
    defaults: RunDefaults::new(1, 3, 10, 75.0),
    hidden: false,
};

impl Experiment for Metadata {
    fn spec(&self) -> &'static Spec {
        &SPEC
    }
    fn scratch_bytes(&self, p: &Point) -> u64 {
        // Inodes and directory blocks only.
        p.u64("files").unwrap_or(0) * 256
    }
    fn prepare(&self, ctx: &Ctx, p: &Point) -> Result<Box<dyn PointRun>> {
        Ok(Box::new(MetadataRun {
            dir: ctx.scratch_dir()?.to_path_buf(),
            files: p.u64("files")?,
            level: p.text("level")?.to_string(),
            n: 0,
        }))
    }
}

struct MetadataRun {
    dir: PathBuf,
    files: u64,
    level: String,
    n: u64,
}

fn fsync_dir(d: &File, path: &Path) -> Result<()> {
    d.sync_all()
        .map_err(|e| Error::io("cannot fsync directory", path, e))
}

fn syncfs(d: &File, path: &Path) -> Result<()> {
    rustix::fs::syncfs(d).map_err(|e| Error::io("cannot syncfs", path, e.into()))?;
    Ok(())
}

struct RemoveDir(PathBuf);
impl Drop for RemoveDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl PointRun for MetadataRun {
    fn trial(&mut self, ctx: &Ctx) -> Result<TrialValues> {
        self.n += 1;
        let sub = self.dir.join(format!("meta-{}-{}", self.level, self.n));
        std::fs::create_dir(&sub).map_err(|e| Error::io("cannot create directory", &sub, e))?;
        let _guard = RemoveDir(sub.clone());
        let d = File::open(&sub).map_err(|e| Error::io("cannot open directory", &sub, e))?;
        // Make the empty directory durable before timing anything.
        fsync_dir(&d, &sub)?;
        let level = self.level.as_str();
        let names: Vec<PathBuf> = (0..self.files)
            .map(|i| sub.join(format!("f{i:07}")))
            .collect();
        let flags = if level == "osync" { libc::O_SYNC } else { 0 };

        let t = Instant::now();
        for (i, p) in names.iter().enumerate() {
            if i % 256 == 0 {
                ctx.check_cancel()?;
            }
            let f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .custom_flags(flags)
                .open(p)
                .map_err(|e| Error::io("cannot create scratch file", p, e))?;
            match level {
                "medium" | "osync" => fsync_dir(&d, &sub)?,
                "high" => {
                    f.sync_all().map_err(|e| Error::io("cannot fsync", p, e))?;
                    fsync_dir(&d, &sub)?;
                }
                _ => {}
            }
        }
        if level == "low" {
            syncfs(&d, &sub)?;
        }
        let create = t.elapsed().as_secs_f64();

        let t = Instant::now();
        for (i, p) in names.iter().enumerate() {
            if i % 256 == 0 {
                ctx.check_cancel()?;
            }
            std::fs::remove_file(p).map_err(|e| Error::io("cannot delete", p, e))?;
            if matches!(level, "medium" | "high" | "osync") {
                fsync_dir(&d, &sub)?;
            }
        }
        if level == "low" {
            syncfs(&d, &sub)?;
        }
        let delete = t.elapsed().as_secs_f64();
        Ok(TrialValues::new()
            .with("created_per_s", self.files as f64 / create)
            .with("deleted_per_s", self.files as f64 / delete))
    }

    fn finish(&mut self, _ctx: &Ctx) -> Result<PointExtras> {
        Ok(PointExtras {
            notes: vec![format!(
                "level={}: {}",
                self.level,
                match self.level.as_str() {
                    "none" => "no sync: rates of the page cache and in-memory journal",
                    "low" => "one syncfs() at the end of each phase, timed",
                    "medium" => "directory fsync after every create/unlink",
                    "high" => "file fsync + directory fsync after every create; directory fsync after every unlink",
                    _ => "O_SYNC opens + directory fsync after every create/unlink",
                }
            )],
            ..Default::default()
        })
    }
}
