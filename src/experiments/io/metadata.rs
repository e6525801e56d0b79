//! `io.metadata`: create and delete N empty files per second under
//! durability levels — the classic commit-level table.

use rustix::fs::OFlags;
use std::fs::File;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::engine::Spec;
use crate::engine::{
    Ctx, Experiment, Fitted, Footprint, Metric, MetricSpec, Needs, ParamKind, ParamSpec,
    ParamValue, Point, PointExtras, PointRun, Room, RunDefaults, TrialValues,
};
use crate::experiments::common::speed;
use crate::units::format_size;
use crate::{Error, Result};

pub(crate) struct Metadata;

const LEVELS: &[&str] = &["none", "low", "medium", "high", "osync"];

pub(crate) static SPEC: Spec = Spec {
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
        ParamSpec::new(
            "work",
            ParamKind::Choice(&["fixed", "sized"]),
            "fixed",
            "fixed: `files` as given; sized: fewer files (at least 100) when a probe of 100 \
             says a trial would outlast the trial time (a slow board)",
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

// The metrics a trial emits, checked against the Spec while compiling.
const CREATED_PER_S: Metric = SPEC.emits("created_per_s");
const DELETED_PER_S: Metric = SPEC.emits("deleted_per_s");

/// Kernel memory one empty file holds while it exists: its inode (a tmpfs
/// inode is about 0.7 KiB on 64-bit 6.x kernels) and its dentry (192 B),
/// rounded up. On a RAM-backed target nothing can reclaim it.
const FILE_BYTES: u64 = 1 << 10;
/// tunelab's own memory per file of a trial: its path, built before timing.
const NAME_BYTES: u64 = 128;
/// Fewest files a trial creates when it is sized down: a rate timed over
/// fewer is mostly the clock and the directory set-up.
const MIN_FILES: u64 = 100;

/// A point's parameters, read by name once, here.
struct Params {
    files: u64,
    level: String,
    /// work=sized: fewer files on a slow target, so a trial keeps its time.
    sized: bool,
}

impl Params {
    fn parse(p: &Point) -> Result<Params> {
        Ok(Params {
            files: p.u64("files")?,
            level: p.text("level")?.to_string(),
            sized: p.text("work")? == "sized",
        })
    }
}

/// `files` cut to what the memory budget holds (on a RAM-backed target
/// every file is memory too), with the note saying why.
fn fitted_files(files: u64, room: &Room) -> Result<(u64, Option<String>)> {
    let per_file = NAME_BYTES + if room.ram.is_some() { FILE_BYTES } else { 0 };
    let Some(budget) = room.memory else {
        return Ok((files, None));
    };
    let fits = budget / per_file;
    if fits >= files {
        return Ok((files, None));
    }
    if fits < MIN_FILES.min(files) {
        return Err(Error::environment(format!(
            "io.metadata needs {} of memory for {} files ({} each{}) but the budget is {} \
             ({}); free some memory or use a disk-backed --target",
            format_size(MIN_FILES.min(files) * per_file),
            MIN_FILES.min(files),
            format_size(per_file),
            if room.ram.is_some() {
                ", the files on a RAM-backed target included"
            } else {
                ""
            },
            format_size(budget),
            room.memory_why
        )));
    }
    Ok((
        fits,
        Some(format!(
            "fitted to the memory available: {fits} files instead of {files} ({} each{}; {})",
            format_size(per_file),
            if room.ram.is_some() {
                ", the files on a RAM-backed target included"
            } else {
                ""
            },
            room.memory_why
        )),
    ))
}

impl Experiment for Metadata {
    fn spec(&self) -> &'static Spec {
        &SPEC
    }
    fn scratch_bytes(&self, p: &Point) -> u64 {
        // Inodes and directory blocks only.
        Params::parse(p).map_or(0, |q| q.files) * 256
    }
    fn footprint(&self, p: &Point, room: &Room) -> Footprint {
        let files = Params::parse(p)
            .and_then(|q| fitted_files(q.files, room))
            .map_or(0, |f| f.0);
        Footprint {
            setup_written: files * 256,
            peak_memory: files * NAME_BYTES,
            stored: files * FILE_BYTES,
            ..Footprint::default()
        }
    }
    fn prepare(&self, ctx: &Ctx, p: &Point) -> Result<Box<dyn PointRun>> {
        let q = Params::parse(p)?;
        let (files, fit_note) = fitted_files(q.files, &Room::for_ctx(ctx))?;
        let mut run = MetadataRun {
            dir: ctx.scratch_dir()?.to_path_buf(),
            files,
            level: q.level,
            n: 0,
            notes: fit_note.into_iter().collect(),
            fitted: None,
        };
        if files > MIN_FILES && q.sized {
            run.size_to_speed(ctx, q.files)?;
        } else if files < q.files {
            run.fitted = Some(Fitted {
                param: "files",
                used: ParamValue::Int(files),
                why: "memory available".into(),
            });
        }
        Ok(Box::new(run))
    }
}

struct MetadataRun {
    dir: PathBuf,
    files: u64,
    level: String,
    n: u64,
    notes: Vec<String>,
    fitted: Option<Fitted>,
}

impl MetadataRun {
    /// Probe: create and delete MIN_FILES files at the point's level (one
    /// untimed cycle), then keep as many files as a trial of the trial time
    /// holds — 2000 files took 3.4 s a trial on an emulated 64 MiB board
    /// and 40 ms on a host.
    fn size_to_speed(&mut self, ctx: &Ctx, asked: u64) -> Result<()> {
        let (create, delete) = self.cycle(ctx, MIN_FILES, "probe")?;
        let secs = create + delete;
        let target = ctx.trial_time().as_secs_f64();
        let n = speed::ops_for(self.files, MIN_FILES, 10, MIN_FILES, secs, target);
        if n < self.files {
            self.notes.push(speed::note(
                "files",
                n,
                self.files,
                &format!("{:.0} files/s created and deleted", MIN_FILES as f64 / secs),
                target,
            ));
            self.files = n;
        }
        if self.files < asked {
            self.fitted = Some(Fitted {
                param: "files",
                used: ParamValue::Int(self.files),
                why: "memory available and machine speed".into(),
            });
        }
        Ok(())
    }
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
        let (create, delete) = self.cycle(ctx, self.files, &self.n.to_string())?;
        Ok(TrialValues::new()
            .with(CREATED_PER_S, self.files as f64 / create)
            .with(DELETED_PER_S, self.files as f64 / delete))
    }

    fn fitted(&self) -> Vec<Fitted> {
        self.fitted.clone().into_iter().collect()
    }

    fn finish(&mut self, _ctx: &Ctx) -> Result<PointExtras> {
        let mut notes = std::mem::take(&mut self.notes);
        notes.push(format!(
            "level={}: {}",
            self.level,
            match self.level.as_str() {
                "none" => "no sync: rates of the page cache and in-memory journal",
                "low" => "one syncfs() at the end of each phase, timed",
                "medium" => "directory fsync after every create/unlink",
                "high" => "file fsync + directory fsync after every create; directory fsync after every unlink",
                _ => "O_SYNC opens + directory fsync after every create/unlink",
            }
        ));
        Ok(PointExtras {
            notes,
            ..Default::default()
        })
    }
}

impl MetadataRun {
    /// Create then delete `files` files in a fresh subdirectory: the seconds
    /// of each phase.
    fn cycle(&self, ctx: &Ctx, files: u64, tag: &str) -> Result<(f64, f64)> {
        let sub = self.dir.join(format!("meta-{}-{tag}", self.level));
        std::fs::create_dir(&sub).map_err(|e| Error::io("cannot create directory", &sub, e))?;
        let _guard = RemoveDir(sub.clone());
        let d = File::open(&sub).map_err(|e| Error::io("cannot open directory", &sub, e))?;
        // Make the empty directory durable before timing anything.
        fsync_dir(&d, &sub)?;
        let level = self.level.as_str();
        let names: Vec<PathBuf> = (0..files).map(|i| sub.join(format!("f{i:07}"))).collect();
        let flags = if level == "osync" {
            OFlags::SYNC.bits() as i32
        } else {
            0
        };

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
        Ok((create, delete))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::params::expand_points;

    fn point(files: &str) -> Point {
        let o = [
            ("files".to_string(), files.to_string()),
            ("level".to_string(), "none".to_string()),
        ];
        expand_points(SPEC.params, &o).unwrap().remove(0)
    }

    #[test]
    fn files_fit_the_memory_left_and_ram_targets_count_them() {
        let disk = Room::fixture(64 << 20, Some(1 << 30));
        assert_eq!(fitted_files(2000, &disk).unwrap(), (2000, None));
        // 1 MiB of budget on a tmpfs: 1152 B a file (inode, dentry, path).
        let ram = Room {
            ram: Some("tmpfs".into()),
            ..Room::fixture(1 << 20, Some(1 << 20))
        };
        let (n, note) = fitted_files(2000, &ram).unwrap();
        assert_eq!(n, (1 << 20) / (FILE_BYTES + NAME_BYTES));
        let note = note.unwrap();
        assert!(
            note.contains("instead of 2000") && note.contains("RAM-backed"),
            "{note}"
        );
        let f = Metadata.footprint(&point("2000"), &ram);
        assert!(f.peak_memory + f.stored <= 1 << 20, "{f:?}");
        // Not even the least files: a clear error, not an OOM kill.
        let tiny = Room {
            ram: Some("tmpfs".into()),
            ..Room::fixture(64 << 10, Some(1 << 20))
        };
        let e = fitted_files(2000, &tiny).unwrap_err().to_string();
        assert!(
            e.contains("needs") && e.contains("disk-backed --target"),
            "{e}"
        );
    }
}
