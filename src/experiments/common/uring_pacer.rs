//! io.burst's mode=io-uring: at each frame slot the pacing thread submits
//! the frame's write() to an io_uring and goes back to pacing; the kernel
//! runs it (inline or in its io-wq workers when the write would block on
//! dirty throttling). At most `queue` writes are in flight, one buffer each;
//! a frame due while all are busy is dropped. Completions are reaped while
//! waiting for the next slot (io_uring_enter with a timeout), so their
//! timestamps are not rounded to frame slots.

use rustix::io::Errno;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use io_uring::types::{SubmitArgs, Timespec};
use io_uring::{opcode, types, IoUring};

use crate::experiments::common::util::{frame_slot, sleep_until};
use crate::safety::{signals, AlignedBuf};
use crate::stats::LatencyRecorder;
use crate::{Error, Result};

/// Whether this kernel (and its seccomp/sysctl policy) lets us use io_uring.
pub fn available() -> std::result::Result<(), String> {
    IoUring::new(2).map(drop).map_err(|e| e.to_string())
}

/// One burst's plan.
pub(crate) struct Pacer<'a> {
    pub(crate) file: &'a File,
    pub(crate) frame: usize,
    pub(crate) frames: u64,
    pub(crate) fps: f64,
    pub(crate) t0: Instant,
    /// Frames not started by then are abandoned.
    pub(crate) hard_stop: Instant,
    /// The lag histogram's buckets (width in ns, count), the caller's choice
    /// so its own and the ring's histograms line up.
    pub(crate) bucket_ns: u64,
    pub(crate) buckets: usize,
}

/// What the writes did: completion lag from each frame's slot.
pub(crate) struct Handoff {
    pub(crate) lag: LatencyRecorder,
    /// (slot start after t0, completion − slot start), by slot.
    pub(crate) series: Vec<(f64, f64)>,
    pub(crate) written: u64,
    /// Seconds from t0 to the last completion.
    pub(crate) last: f64,
    pub(crate) dropped: u64,
    pub(crate) max_backlog: u64,
    pub(crate) abandoned: u64,
}

struct Ring {
    ring: IoUring,
    /// Per buffer: the (frame, slot) written from it, while in flight.
    inflight: Vec<Option<(u64, Instant)>>,
    free: Vec<usize>,
    /// io_uring_enter cannot take a timeout (kernel < 5.11): poll instead.
    no_timeout: bool,
}

fn ring_error(what: &str, e: std::io::Error) -> Error {
    Error::measurement(format!("io.burst mode=io-uring: {what}: {e}"))
}

impl Ring {
    fn busy(&self) -> usize {
        self.inflight.len() - self.free.len()
    }

    /// Record every completion that is ready.
    fn reap(&mut self, p: &Pacer, out: &mut Handoff) -> Result<()> {
        let now = Instant::now();
        // No allocation in the pacing loop: walk the completion queue in place.
        for c in self.ring.completion() {
            let (b, res) = (c.user_data() as usize, c.result());
            let Some((_, slot)) = self.inflight.get_mut(b).and_then(Option::take) else {
                continue;
            };
            self.free.push(b);
            if res < 0 {
                return Err(ring_error("write", std::io::Error::from_raw_os_error(-res)));
            }
            if res as usize != p.frame {
                return Err(Error::measurement(format!(
                    "io.burst mode=io-uring: short write ({res} of {} bytes; disk full?)",
                    p.frame
                )));
            }
            let l = now.saturating_duration_since(slot);
            out.lag.record(l);
            out.series
                .push(((slot - p.t0).as_secs_f64(), l.as_secs_f64()));
            out.written += p.frame as u64;
            out.last = (now - p.t0).as_secs_f64();
        }
        Ok(())
    }

    /// Sleep until `until` or the next completion, whichever comes first.
    fn wait(&mut self, until: Instant) -> Result<()> {
        let d = until.saturating_duration_since(Instant::now());
        if self.no_timeout {
            std::thread::sleep(d.min(Duration::from_millis(1)));
            return Ok(());
        }
        let ts = Timespec::new().sec(d.as_secs()).nsec(d.subsec_nanos());
        let args = SubmitArgs::new().timespec(&ts);
        match self.ring.submitter().submit_with_args(1, &args) {
            Ok(_) => Ok(()),
            Err(e) => match Errno::from_io_error(&e) {
                Some(Errno::TIME) | Some(Errno::INTR) | Some(Errno::BUSY) => Ok(()),
                Some(Errno::INVAL) => {
                    self.no_timeout = true;
                    Ok(())
                }
                _ => Err(ring_error("wait", e)),
            },
        }
    }

    /// Wait for every write in flight (the buffers must outlive them).
    fn drain(&mut self, p: &Pacer, out: &mut Handoff) -> Result<()> {
        while self.busy() > 0 {
            match self.ring.submit_and_wait(1) {
                Ok(_) => {}
                Err(e) if Errno::from_io_error(&e) == Some(Errno::INTR) => {}
                Err(e) => return Err(ring_error("wait", e)),
            }
            self.reap(p, out)?;
        }
        Ok(())
    }
}

/// Pace `p.frames` frames through an io_uring with one write in flight per
/// buffer of `bufs`. `on_frame(slot, latency)` is called after each slot's
/// submission (or drop) with the time it took from the slot start.
pub(crate) fn pace(
    p: &Pacer,
    bufs: &[AlignedBuf],
    mut on_frame: impl FnMut(Instant, Duration),
) -> Result<Handoff> {
    let queue = bufs.len().max(1);
    let ring = IoUring::new(queue.next_power_of_two().max(2) as u32)
        .map_err(|e| ring_error("cannot set up a ring", e))?;
    let mut r = Ring {
        ring,
        inflight: vec![None; queue],
        free: (0..queue).rev().collect(),
        no_timeout: false,
    };
    let mut out = Handoff {
        lag: LatencyRecorder::with_buckets(p.bucket_ns, p.buckets),
        series: Vec::with_capacity(p.frames as usize),
        written: 0,
        last: 0.0,
        dropped: 0,
        max_backlog: 0,
        abandoned: 0,
    };
    let paced = pace_frames(p, bufs, &mut r, &mut out, &mut on_frame);
    // Always wait for what is in flight before the buffers can go away.
    let drained = r.drain(p, &mut out);
    paced.and(drained)?;
    out.series.sort_by(|a, b| a.0.total_cmp(&b.0));
    Ok(out)
}

fn pace_frames(
    p: &Pacer,
    bufs: &[AlignedBuf],
    r: &mut Ring,
    out: &mut Handoff,
    on_frame: &mut impl FnMut(Instant, Duration),
) -> Result<()> {
    let fd = types::Fd(p.file.as_raw_fd());
    for i in 0..p.frames {
        let slot = frame_slot(p.t0, p.fps, i);
        loop {
            r.reap(p, out)?;
            let now = Instant::now();
            if now >= slot {
                break;
            }
            if r.busy() == 0 {
                sleep_until(slot);
            } else {
                r.wait(slot)?;
            }
        }
        if Instant::now() >= p.hard_stop || signals::caught().is_some() {
            out.abandoned = p.frames - i;
            break;
        }
        match r.free.pop() {
            Some(b) => {
                let write = opcode::Write::new(fd, bufs[b].as_slice().as_ptr(), p.frame as u32)
                    .offset(i * p.frame as u64)
                    .build()
                    .user_data(b as u64);
                // SAFETY: the buffer stays alive and untouched until its
                // completion is reaped (pace() drains before returning).
                unsafe { r.ring.submission().push(&write) }
                    .map_err(|_| Error::measurement("io.burst: io_uring submission queue full"))?;
                r.inflight[b] = Some((i, slot));
                r.ring
                    .submit()
                    .map_err(|e| ring_error("cannot submit", e))?;
            }
            None => out.dropped += 1,
        }
        on_frame(slot, Instant::now().saturating_duration_since(slot));
        out.max_backlog = out.max_backlog.max(r.busy() as u64);
    }
    Ok(())
}
