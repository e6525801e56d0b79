//! Laying out a point's file: a probe of the device first when the point
//! has a time budget, then only as much file as its trials have time for,
//! and with O_DIRECT the sweeps per phase calibrated to be timed well.

use rustix::fs::OFlags;
use std::time::Instant;

use super::run::{RecordSizeRun, MIN_PHASE};
use super::{fitted_size, Params};
use crate::engine::{Ctx, Fitted, PointRun, Room};
use crate::experiments::common::cache_control::{logical_block_size, IoMode};
use crate::experiments::common::util::{backing_note, fill_file};
use crate::safety::AlignedBuf;
use crate::units::format_size;
use crate::{Error, Result};

/// One point's file, probed and fitted; the run that times it.
pub(super) fn prepare(ctx: &Ctx, q: &Params) -> Result<Box<dyn PointRun>> {
    let started = Instant::now();
    let fit = fitted_size(q, &Room::for_ctx(ctx))?;
    let size = fit.value;
    let record = q.record as usize;
    let asked = q.mode;
    let mut mode = asked;
    let scratch = ctx.scratch()?;
    let fitted = fit.fitted("size", "free space");
    let mut notes: Vec<String> = fit.note.into_iter().collect();
    notes.push(backing_note(ctx));
    if mode == IoMode::Direct {
        let lbs = logical_block_size(scratch.path());
        if !(record as u64).is_multiple_of(lbs) || size % lbs != 0 {
            return Err(Error::usage(format!(
                "io.record-size: with mode=direct, record ({record}) and size ({size}) must be \
                 multiples of the device's logical block size ({lbs} B); use larger records \
                 or mode=buffered"
            )));
        }
    }
    scratch.ensure_space(size)?;
    let name = format!("record-size-{}-{record}", mode.as_str());
    let path = scratch.file_path(&name);
    let mut f = scratch.create_file(&name, 0)?;
    // A budgeted point first probes the device on a prefix of the file
    // (a 20 MB/s flash takes seconds per pass of the whole file), then
    // lays out only what its share of the budget has time for.
    // work=sized with a fixed trial count (a study): sized as if a trial's
    // share were a write and a read phase of the trial time, so one pass
    // of the file takes about a phase and passes repeat to fill it.
    let by_trial_time = ctx.point_time().is_none() && q.sized;
    let time = ctx.point_time().or_else(|| {
        by_trial_time.then(|| crate::engine::PointTime {
            seconds: 4.0 * ctx.trial_time().as_secs_f64() / TIME_MARGIN,
            trials: 1,
        })
    });
    let rec = record as u64;
    let mut probe = match time {
        Some(_) => (PROBE_START / rec * rec).clamp(rec, size),
        None => size,
    };
    fill_file(&mut f, &path, probe, 7)?;
    f.sync_all()
        .map_err(|e| Error::io("cannot fsync", &path, e))?;
    if mode == IoMode::Direct {
        if let Err(why) = direct_refused(&path) {
            mode = IoMode::Buffered;
            notes.push(format!(
                "mode=direct is not supported here ({why}): measured as mode=buffered \
                 instead, with the closing fsync timed and the page cache dropped before \
                 each read"
            ));
        }
    }
    let mut run = RecordSizeRun {
        fitted,
        path: path.clone(),
        size: probe,
        record,
        mode,
        asked,
        buf: AlignedBuf::random(record, 11)?,
        drop_method: None,
        passes: Vec::new(),
        samples: Default::default(),
        sweeps: 1,
        shortest: f64::INFINITY,
        notes,
    };
    let mut size = size;
    let mut probed = None;
    if let Some(t) = time {
        // Grow the probe until a phase lasts long enough to time (a fast
        // device) or the probe is PROBE_BYTES: 1 KiB O_DIRECT records on a
        // throttled USB stick run at a few hundred kB/s, and a 4 MiB
        // probe alone then took most of a minute.
        let top = (PROBE_BYTES / rec * rec).clamp(rec, size);
        let (mut w0, mut w, mut r);
        loop {
            run.size = probe;
            (w0, w, r) = run.probe(ctx, 1)?;
            if w0.min(r) >= PROBE_TIMED || probe >= top {
                break;
            }
            let next = (probe * 4).min(top);
            fill_file(&mut f, &path, next - probe, 9)?;
            f.sync_all()
                .map_err(|e| Error::io("cannot fsync", &path, e))?;
            probe = next;
        }
        // Phases under 100 ms: the fastest of two rounds (a preemption
        // must not make the device look slow).
        if w0.min(r) < MIN_PHASE {
            let (a, b, c) = run.probe(ctx, 1)?;
            (w0, w, r) = (w0.min(a), w.min(b), r.min(c));
        }
        probed = Some((w0, r));
        if let Some(fit) = fit_to_time(size, record as u64, probe, w, r, t, started) {
            size = fit.size;
            run.fitted = Some(Fitted {
                param: "size",
                used: crate::engine::ParamValue::Int(size),
                why: if by_trial_time {
                    "device speed and trial time"
                } else {
                    "device speed and time budget"
                }
                .into(),
            });
            run.notes.push(if by_trial_time {
                trial_time_note(size, fit.size_asked, probe, w, r, record as u64, ctx)
            } else {
                fit.note
            });
        }
    }
    if size > probe {
        fill_file(&mut f, &path, size - probe, 8)?;
        f.sync_all()
            .map_err(|e| Error::io("cannot fsync", &path, e))?;
    }
    drop(f);
    run.size = size;
    if mode == IoMode::Direct {
        // Calibrate (untimed for the result): with O_DIRECT a timed phase
        // sweeps the file often enough to last >= 100 ms; the cache is not
        // involved, so a second sweep is as cold as the first.
        // The fastest of two rounds, and a 1.5x margin: a calibration
        // pass slowed by a preemption must not leave phases short.
        // A probe long enough to time (a slow device) gives the phase
        // time of the whole file by proportion; otherwise (or without a
        // probe) two rounds over the whole file, cheap on a fast device.
        let fastest = match probed {
            Some((w0, r)) if w0.min(r) >= PROBE_TIMED => w0.min(r) * size as f64 / probe as f64,
            _ => {
                let (w0, _, r) = run.probe(ctx, 2)?;
                w0.min(r)
            }
        };
        run.sweeps = (1.5 * MIN_PHASE / fastest.max(1e-6))
            .ceil()
            .clamp(1.0, 10_000.0) as u64;
    }
    Ok(Box::new(run))
}

/// Err(reason) when the file system refuses O_DIRECT on `path`.
fn direct_refused(path: &std::path::Path) -> std::result::Result<(), String> {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(OFlags::DIRECT.bits() as i32)
        .open(path)
    {
        Ok(_) => Ok(()),
        Err(e) => Err(format!("open with O_DIRECT: {e}")),
    }
}

/// Bytes of the file a budgeted point probes the device with before it
/// decides how much of the file its share of the budget has time for: it
/// starts at PROBE_START and grows 4x until a phase lasts PROBE_TIMED.
const PROBE_START: u64 = 256 << 10;
const PROBE_BYTES: u64 = 4 << 20;

/// The least file the time fitting leaves (or one record): a trial repeats
/// passes until each phase has lasted the trial time, so a small file still
/// times well; below this the per-pass open and fsync weigh too much.
const FIT_FLOOR: u64 = 256 << 10;

/// A probe phase at least this long is timed well enough to scale to the
/// whole file (shorter: a fast device, calibrated on the whole file).
const PROBE_TIMED: f64 = 0.02;

/// The time fitting's margin: trials are sized to take at most this share
/// of the time they are given (the validity guard, fsync, the odd slow pass).
const TIME_MARGIN: f64 = 0.7;

/// `size` cut so that `t.trials` trials (a write and a read phase each) fit
/// in what is left of the point's share of the budget, from the fastest
/// write and read phases (`w`, `r` seconds) of a probe of `probe` bytes.
/// None when the whole size fits (a fast device keeps its size).
struct TimeFit {
    size: u64,
    size_asked: u64,
    note: String,
}

/// The note of a file cut to the trial time (work=sized, fixed trials).
fn trial_time_note(
    size: u64,
    asked: u64,
    probe: u64,
    w: f64,
    r: f64,
    record: u64,
    ctx: &Ctx,
) -> String {
    format!(
        "sized to the device's speed: size {} instead of {} — the probe wrote at {} and read \
         at {} with {} records, so a pass of the whole file would outlast a phase of the \
         trial time ({}); passes repeat until it is reached (work=fixed keeps the size)",
        format_size(size),
        format_size(asked),
        crate::units::human(probe as f64 / w.max(1e-9), "B/s"),
        crate::units::human(probe as f64 / r.max(1e-9), "B/s"),
        format_size(record),
        crate::units::human(ctx.trial_time().as_secs_f64(), "s")
    )
}

fn fit_to_time(
    size: u64,
    record: u64,
    probe: u64,
    w: f64,
    r: f64,
    t: crate::engine::PointTime,
    started: Instant,
) -> Option<TimeFit> {
    let per_byte = (w + r).max(1e-9) / probe as f64;
    let left = (t.seconds - started.elapsed().as_secs_f64()).max(0.0);
    // The trials, and laying out the rest of the file (one more write).
    let per_trial = left * TIME_MARGIN / (t.trials + 1) as f64;
    if per_byte * size as f64 <= per_trial {
        return None;
    }
    // Whole records; at least one, and at least FIT_FLOOR when the share is
    // too short even for that (the trials then take longer than planned).
    let fitted = ((per_trial / per_byte) as u64 / record * record)
        .max(record)
        .max(FIT_FLOOR.min(size) / record * record)
        .min(size);
    if fitted >= size {
        return None;
    }
    Some(TimeFit {
        size: fitted,
        size_asked: size,
        note: format!(
            "fitted to the device's speed: size {} instead of {} — the probe wrote at {} and \
             read at {} with {} records, so {} trials of the whole file would not fit in this \
             point's {:.0} s share of the time budget (raise it with --budget)",
            format_size(fitted),
            format_size(size),
            crate::units::human(probe as f64 / w.max(1e-9), "B/s"),
            crate::units::human(probe as f64 / r.max(1e-9), "B/s"),
            format_size(record),
            t.trials,
            t.seconds
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slow_device_gets_a_file_its_trials_have_time_for() {
        const MIB: u64 = 1 << 20;
        let t = crate::engine::PointTime {
            seconds: 10.0,
            trials: 4,
        };
        let now = Instant::now();
        // 20 MB/s: a 4 MiB probe takes ~0.2 s to write and to read.
        let (w, r) = (0.21, 0.21);
        let f = fit_to_time(32 * MIB, 4096, 4 * MIB, w, r, t, now).expect("cut");
        // 10 s × 0.7 over 5 (4 trials + the layout): 1.4 s a trial, 0.42 s
        // per 4 MiB of write + read → 13.3 MiB, whole records.
        assert!(f.size > 12 * MIB && f.size < 14 * MIB, "{}", f.size);
        assert_eq!(f.size % 4096, 0);
        assert!(f.note.contains("instead of 32 MiB"), "{}", f.note);
        assert!(f.note.contains("10 s share"), "{}", f.note);
        // A fast device (2 GB/s) keeps its whole file.
        assert!(fit_to_time(32 * MIB, 4096, 4 * MIB, 0.002, 0.002, t, now).is_none());
        // No time at all: never below the floor, or one record.
        let none = crate::engine::PointTime {
            seconds: 0.0,
            trials: 4,
        };
        let f = fit_to_time(32 * MIB, 4096, 4 * MIB, w, r, none, now).unwrap();
        assert_eq!(f.size, FIT_FLOOR);
        let f = fit_to_time(32 * MIB, MIB, 4 * MIB, w, r, none, now).unwrap();
        assert_eq!(f.size, MIB);
    }
}
