//! engine=psync: `depth` threads, each with one pread()/pwrite() in flight
//! at a time (fio's psync with numjobs=depth). Each thread keeps its
//! latencies in a small local batch and adds the batch to the shared HDR
//! histograms under a lock every `BATCH` operations, so the hot loop never
//! allocates and threads rarely meet on the lock; one shared histogram
//! instead of one per thread keeps memory flat at depth 256 (an HDR
//! histogram spanning 1 ns–100 s is ~230 KiB).

use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::SeedableRng;

use super::{join_all, Job, Tally};
use crate::experiments::common::util::stamp_sectors;
use crate::safety::{signals, AlignedBuf};
use crate::stats::LatencyRecorder;
use crate::{Error, Result};

const BATCH: usize = 128;
const WAIT: u8 = 0;
const GO: u8 = 1;
const ABORT: u8 = 2;

/// Start gate: threads begin together once all exist (a barrier would hang
/// if one could not be created). They block on a condition variable, not
/// a sleep loop: 128 threads polling every 100 µs while the rest are
/// created cost a measurable share of the trial's CPU per I/O.
struct Gate {
    state: Mutex<u8>,
    cv: Condvar,
}

impl Gate {
    fn open(&self, to: u8) {
        if let Ok(mut s) = self.state.lock() {
            *s = to;
        }
        self.cv.notify_all();
    }
    /// GO or ABORT (a poisoned lock counts as ABORT).
    fn wait(&self) -> u8 {
        let Ok(mut s) = self.state.lock() else {
            return ABORT;
        };
        while *s == WAIT {
            s = match self.cv.wait(s) {
                Ok(s) => s,
                Err(_) => return ABORT,
            };
        }
        *s
    }
}
/// Small stacks: 256 threads must fit a 64 MB board.
const STACK: usize = 128 << 10;

struct Shared {
    read: LatencyRecorder,
    write: LatencyRecorder,
}

/// What one thread did.
struct ThreadOut {
    ops: u64,
    reads: u64,
    start: Instant,
    end: Instant,
}

pub(crate) fn run(job: &Job, dur: Duration, bufs: &mut [AlignedBuf], seed: u64) -> Result<Tally> {
    let shared = Mutex::new(Shared {
        read: LatencyRecorder::new(),
        write: LatencyRecorder::new(),
    });
    let stop = AtomicBool::new(false);
    let gate = Gate {
        state: Mutex::new(WAIT),
        cv: Condvar::new(),
    };
    let outs: Vec<std::result::Result<ThreadOut, Error>> = std::thread::scope(|s| {
        let handles: Vec<_> = bufs
            .iter_mut()
            .enumerate()
            .map(|(i, buf)| {
                let (shared, stop, gate) = (&shared, &stop, &gate);
                std::thread::Builder::new()
                    .name(format!("io.random-{i}"))
                    .stack_size(STACK)
                    .spawn_scoped(s, move || {
                        let r = worker(job, dur, buf, seed ^ (i as u64 + 1), shared, stop, gate);
                        if r.is_err() {
                            stop.store(true, Ordering::Relaxed);
                        }
                        r
                    })
            })
            .collect();
        let all = handles.iter().all(|h| h.is_ok());
        gate.open(if all { GO } else { ABORT });
        join_all(handles, "a psync thread", "a smaller depth")
    });
    let mut t = Tally::default();
    for o in outs {
        let o = o?;
        t.ops += o.ops;
        t.reads += o.reads;
        t.cover(o.start, o.end);
    }
    let sh = shared
        .into_inner()
        .map_err(|_| Error::measurement("io.random: latency lock poisoned"))?;
    t.read = sh.read;
    t.write = sh.write;
    Ok(t)
}

fn worker(
    job: &Job,
    dur: Duration,
    buf: &mut AlignedBuf,
    seed: u64,
    shared: &Mutex<Shared>,
    stop: &AtomicBool,
    gate: &Gate,
) -> Result<ThreadOut> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut lat_r: Vec<u64> = Vec::with_capacity(BATCH);
    let mut lat_w: Vec<u64> = Vec::with_capacity(BATCH);
    let flush = |r: &mut Vec<u64>, w: &mut Vec<u64>| {
        if let Ok(mut sh) = shared.lock() {
            r.drain(..).for_each(|ns| sh.read.record_ns(ns));
            w.drain(..).for_each(|ns| sh.write.record_ns(ns));
        }
    };
    let bs = job.bs;
    if gate.wait() != GO {
        let now = Instant::now();
        return Ok(ThreadOut {
            ops: 0,
            reads: 0,
            start: now,
            end: now,
        });
    }
    let start = Instant::now();
    let deadline = start + dur;
    let (mut ops, mut reads) = (0u64, 0u64);
    let mut now = start;
    let mut result = Ok(());
    while now < deadline {
        let (off, is_read) = job.next_op(&mut rng);
        let b = &mut buf.as_mut_slice()[..bs];
        let t0 = Instant::now();
        let r = if is_read {
            job.file.read_at(b, off)
        } else {
            stamp_sectors(b, off, ops);
            job.file.write_at(b, off)
        };
        now = Instant::now();
        match r {
            Ok(n) if n == bs => {}
            Ok(n) => {
                result = Err(Error::measurement(format!(
                    "io.random: short {} ({n} of {bs} bytes at offset {off})",
                    if is_read { "read" } else { "write" }
                )));
                break;
            }
            Err(e) => {
                result = Err(Error::io(
                    if is_read {
                        "cannot read"
                    } else {
                        "cannot write"
                    },
                    job.path,
                    e,
                ));
                break;
            }
        }
        let ns = (now - t0).as_nanos() as u64;
        if is_read {
            reads += 1;
            lat_r.push(ns);
        } else {
            lat_w.push(ns);
        }
        ops += 1;
        if lat_r.len() + lat_w.len() >= BATCH {
            flush(&mut lat_r, &mut lat_w);
            if stop.load(Ordering::Relaxed) || signals::caught().is_some() {
                break;
            }
        }
    }
    flush(&mut lat_r, &mut lat_w);
    result.map(|()| ThreadOut {
        ops,
        reads,
        start,
        end: now,
    })
}
