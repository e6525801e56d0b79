//! Timing a point: write passes (with and without the closing fsync) and
//! read passes over the file with the page cache dropped, every record
//! stamped so no pass rewrites identical data.

use rustix::fs::OFlags;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::time::Instant;

use crate::engine::{Ctx, Fitted, Metric, PointExtras, PointRun, Series, TrialValues};
use crate::experiments::common::cache_control::{drop_file_cache, open_with, DropMethod, IoMode};
use crate::experiments::common::util::{read_through, stamp_sectors};
use crate::safety::AlignedBuf;
use crate::stats;
use crate::units::format_size;
use crate::{Error, Result};

// The metrics a trial emits, checked against the Spec while compiling.
const READ_THROUGHPUT: Metric = super::SPEC.emits("read_throughput");
const WRITE_THROUGHPUT: Metric = super::SPEC.emits("write_throughput");
const WRITE_THROUGHPUT_NOFSYNC: Metric = super::SPEC.emits("write_throughput_nofsync");

/// Shortest timed phase (one write or one read of the file) worth timing.
pub(super) const MIN_PHASE: f64 = 0.1;

pub(super) struct RecordSizeRun {
    pub(super) fitted: Option<Fitted>,
    pub(super) path: PathBuf,
    pub(super) size: u64,
    pub(super) record: usize,
    /// The mode measured, and the one asked for (they differ after a fallback).
    pub(super) mode: IoMode,
    pub(super) asked: IoMode,
    pub(super) buf: AlignedBuf,
    /// Sweeps over the file per timed phase (direct: calibrated to >= 100 ms).
    pub(super) sweeps: u64,
    /// Shortest timed phase seen, seconds.
    pub(super) shortest: f64,
    pub(super) notes: Vec<String>,
    pub(super) drop_method: Option<DropMethod>,
    pub(super) passes: Vec<u64>,
    /// (write, write_nofsync, read) per trial, for the series.
    pub(super) samples: [Vec<f64>; 3],
}

// A point's file goes when the point ends, not with the scratch directory at
// the end of the run: on a small partition the next point is fitted to the
// space this one leaves.
impl Drop for RecordSizeRun {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

impl RecordSizeRun {
    /// One write pass: (seconds without fsync, seconds with fsync).
    fn write_pass(&mut self, ctx: &Ctx) -> Result<(f64, f64)> {
        // Buffered and O_SYNC writes start from an empty file, so sub-page
        // records never read-modify-write uncached pages; O_DIRECT
        // overwrites the allocated file in place, like fio does.
        let trunc = if self.mode == IoMode::Direct {
            0
        } else {
            OFlags::TRUNC.bits() as i32
        };
        let f = open_with(&self.path, true, self.mode.write_flags() | trunc)?;
        let rec = self.record;
        let pass = pass_id();
        let buf = &mut self.buf.as_mut_slice()[..rec];
        let t = Instant::now();
        let mut calls = 0u32;
        for sweep in 0..self.sweeps {
            let mut off = 0u64;
            while off < self.size {
                stamp_sectors(buf, off, pass.wrapping_add(sweep));
                let n = f
                    .write_at(buf, off)
                    .map_err(|e| Error::io("cannot write", &self.path, e))?;
                if n == 0 {
                    return Err(Error::measurement("write() returned 0"));
                }
                off += n as u64;
                calls = calls.wrapping_add(1);
                if calls.is_multiple_of(4096) {
                    ctx.check_cancel()?;
                }
            }
        }
        let nofsync = t.elapsed().as_secs_f64();
        f.sync_all()
            .map_err(|e| Error::io("cannot fsync", &self.path, e))?;
        let with = t.elapsed().as_secs_f64();
        Ok((nofsync, with))
    }

    /// `first`: the first pass of a trial drops the whole page cache (root);
    /// later passes of the same trial only evict this file's pages, which is
    /// enough for a clean file and keeps short passes from calling
    /// drop_caches hundreds of times.
    /// The fastest write and read phases of untimed rounds over the
    /// current size (a round slowed by a preemption does not count).
    /// Returns (write without fsync, write with fsync, read) seconds.
    pub(super) fn probe(&mut self, ctx: &Ctx, rounds: usize) -> Result<(f64, f64, f64)> {
        let (mut w0, mut w, mut r) = (f64::INFINITY, f64::INFINITY, f64::INFINITY);
        for _ in 0..rounds {
            let (a, b) = self.write_pass(ctx)?;
            w0 = w0.min(a);
            w = w.min(b);
            r = r.min(self.read_pass(ctx, false)?);
        }
        Ok((w0, w, r))
    }

    fn read_pass(&mut self, ctx: &Ctx, first: bool) -> Result<f64> {
        if self.mode != IoMode::Direct {
            let f = File::open(&self.path).map_err(|e| Error::io("cannot open", &self.path, e))?;
            let m = drop_file_cache(&f, &self.path, ctx.is_root && first, &ctx.cache_drops)?;
            if first {
                self.drop_method = Some(m);
            }
        }
        let f = open_with(&self.path, false, self.mode.read_flags())?;
        let rec = self.record;
        let buf = &mut self.buf.as_mut_slice()[..rec];
        let t = Instant::now();
        let mut calls = 0u32;
        for _ in 0..self.sweeps {
            read_through(&f, &self.path, self.size, buf, |piece| {
                std::hint::black_box(piece);
                calls = calls.wrapping_add(1);
                if calls.is_multiple_of(4096) {
                    ctx.check_cancel()?;
                }
                Ok(())
            })?;
        }
        Ok(t.elapsed().as_secs_f64())
    }
}

/// A value that differs between write passes, also across runs (the clock in
/// ns), so a pass never rewrites a block with the content it already holds.
fn pass_id() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

impl PointRun for RecordSizeRun {
    fn fitted(&self) -> Vec<Fitted> {
        self.fitted.clone().into_iter().collect()
    }
    fn trial(&mut self, ctx: &Ctx) -> Result<TrialValues> {
        let (mut w0, mut w1, mut r) = (0.0, 0.0, 0.0);
        let mut passes = 0u64;
        let mut shortest = f64::INFINITY;
        let min = ctx.trial_time().as_secs_f64();
        while passes == 0 || ((w0 < min || r < min) && passes < 1000) {
            ctx.check_cancel()?;
            let (a, b) = self.write_pass(ctx)?;
            let c = self.read_pass(ctx, passes == 0)?;
            self.shortest = self.shortest.min(a).min(c);
            shortest = shortest.min(a).min(c);
            w0 += a;
            w1 += b;
            r += c;
            passes += 1;
        }
        self.passes.push(passes);
        let bytes = (self.size * self.sweeps * passes) as f64;
        // The calibration ran on a machine that may have sped up since (a
        // busy neighbour went quiet): lengthen later phases so they last.
        if self.mode == IoMode::Direct && shortest < MIN_PHASE {
            self.sweeps = ((self.sweeps as f64) * 1.5 * MIN_PHASE / shortest.max(1e-6))
                .ceil()
                .clamp(1.0, 10_000.0) as u64;
        }
        let v = [bytes / w1, bytes / w0, bytes / r];
        for (s, x) in self.samples.iter_mut().zip(v) {
            s.push(x);
        }
        Ok(TrialValues::new()
            .with(WRITE_THROUGHPUT, v[0])
            .with(WRITE_THROUGHPUT_NOFSYNC, v[1])
            .with(READ_THROUGHPUT, v[2]))
    }

    fn finish(&mut self, _ctx: &Ctx) -> Result<PointExtras> {
        let names = [
            "write_throughput",
            "write_throughput_nofsync",
            "read_throughput",
        ];
        let series = names
            .iter()
            .zip(&self.samples)
            .filter(|(_, s)| !s.is_empty())
            .map(|(n, s)| Series {
                name: format!("{n} mode={}", self.mode.as_str()),
                x_label: "record".into(),
                x_unit: "B".into(),
                y_label: (*n).into(),
                y_unit: "B/s".into(),
                points: vec![(self.record as f64, stats::summarize(s).median)],
            })
            .collect();
        let mut notes = std::mem::take(&mut self.notes);
        notes.push(format!(
            "timing: each timed write or read phase sweeps the {} file {} time(s) from one \
             open (one fsync after the last write sweep); shortest phase {:.0} ms{}",
            format_size(self.size),
            self.sweeps,
            self.shortest * 1e3,
            if self.shortest < MIN_PHASE {
                format!(
                    " — under the {:.0} ms a timing should last: start-up and the closing fsync \
                     weigh more{}",
                    MIN_PHASE * 1e3,
                    if self.mode == IoMode::Direct {
                        ""
                    } else {
                        " (buffered and sync passes cannot repeat within one timing without \
                         reading the cache: use a larger size)"
                    }
                )
            } else {
                String::new()
            }
        ));
        if self.asked != self.mode {
            notes.push(format!(
                "measured mode={} although mode={} was asked (see above)",
                self.mode.as_str(),
                self.asked.as_str()
            ));
        }
        notes.push(format!(
            "mode={} ({}); {} per pass, passes per trial: {:?}; write_throughput includes the closing fsync, \
             write_throughput_nofsync does not",
            self.mode.as_str(),
            match self.mode {
                IoMode::Buffered => "page cache",
                IoMode::Direct => "O_DIRECT, page cache bypassed",
                IoMode::Sync => "O_SYNC writes",
            },
            format_size(self.size),
            self.passes
        ));
        match (self.mode, self.drop_method) {
            (IoMode::Direct, _) => {
                notes.push("reads use O_DIRECT: the page cache is not involved".into())
            }
            (_, Some(m)) => {
                notes.push(m.note().into());
                if m == DropMethod::DropCaches {
                    notes.push(
                        "drop_caches before the first pass of each trial; later passes of the \
                         same trial evict the file with fdatasync + posix_fadvise(DONTNEED)"
                            .into(),
                    );
                }
            }
            _ => {}
        }
        Ok(PointExtras {
            series,
            notes,
            ..Default::default()
        })
    }
}
