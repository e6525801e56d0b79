//! engine=io_uring: one thread keeps `depth` reads/writes in flight on one
//! ring (fio's io_uring engine with iodepth=depth, no SQ polling). The file
//! and the buffers are registered with the ring when the kernel allows it
//! (fio's registerfiles/fixedbufs): at a quarter-million operations a
//! second the per-operation file lookup and page pinning of O_DIRECT are
//! a cost of the tool, not of the device; where registration is refused
//! (locked-memory limit, old kernel) plain reads and writes are used and
//! the point's notes say which. The ring is set up as fio sets its up:
//! COOP_TASKRUN | SINGLE_ISSUER | DEFER_TASKRUN (completion work runs in our
//! thread when it waits, not through interrupts and wake-ups), dropping
//! the flags a kernel does not know (before 5.19/6.1). Every completion is replaced at once by a new
//! operation on the freed buffer until the time is up; then the ring is
//! drained. Latency = completion reaped − operation queued to the ring (the
//! submit system call is inside it: fio's `lat`, clat + slat). One clock
//! read per reaped batch serves both as the completion time of the batch
//! and the start time of the operations that replace it (they reach the
//! kernel together with the next submit call), so the clock costs one read
//! per batch, not two per operation.
//!
//! libc: iovec (the io-uring crate's register_buffers takes libc::iovec)

use rustix::io::Errno;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use io_uring::{opcode, types, IoUring};
use rand::rngs::SmallRng;
use rand::SeedableRng;

use super::{join_all, Job, Tally};
use crate::experiments::common::util::stamp_sectors;
use crate::safety::{signals, AlignedBuf};
use crate::stats::LatencyRecorder;
use crate::{Error, Result};

/// Stack of a ring's thread when there are several (its state is on the heap).
const STACK: usize = 256 << 10;

/// Whether this kernel (and its seccomp/sysctl policy) lets us use io_uring.
pub(crate) fn available() -> std::result::Result<(), String> {
    IoUring::new(2)
        .map(drop)
        .map_err(|e| match Errno::from_io_error(&e) {
            Some(Errno::NOSYS) => {
                "the kernel has no io_uring (before 5.1, or CONFIG_IO_URING=n)".into()
            }
            Some(Errno::PERM) => {
                "io_uring is disabled (kernel.io_uring_disabled, or a seccomp policy)".into()
            }
            _ => e.to_string(),
        })
}

fn ring_err(what: &str, e: std::io::Error) -> Error {
    Error::measurement(format!("io.random engine=io_uring: {what}: {e}"))
}

/// A ring with fio's setup flags, or without them on older kernels.
fn ring(entries: u32) -> Result<IoUring> {
    let tuned = IoUring::builder()
        .setup_coop_taskrun()
        .setup_single_issuer()
        .setup_defer_taskrun()
        .build(entries);
    match tuned {
        Ok(r) => Ok(r),
        Err(e) if Errno::from_io_error(&e) == Some(Errno::INVAL) => {
            IoUring::new(entries).map_err(|e| ring_err("cannot set up a ring", e))
        }
        Err(e) => Err(ring_err("cannot set up a ring", e)),
    }
}

/// Queues operations: the next random offset and direction for a buffer.
struct Issuer<'a> {
    job: &'a Job<'a>,
    fd: types::Fd,
    /// The file is registered as fixed file 0.
    fixed_file: bool,
    /// The buffers are registered, buffer index = slot.
    fixed_bufs: bool,
    rng: SmallRng,
    seq: u64,
    /// Per buffer: when its operation was queued, whether it reads, offset.
    slots: Vec<(Instant, bool, u64)>,
}

impl Issuer<'_> {
    /// Queue an operation on `slot`'s buffer; `now` is its start time (the
    /// batch's one clock read: every operation of a batch reaches the
    /// kernel with the same submit call).
    fn queue(
        &mut self,
        ring: &mut IoUring,
        slot: usize,
        buf: &mut AlignedBuf,
        now: Instant,
    ) -> Result<()> {
        let bs = self.job.bs;
        let (off, is_read) = self.job.next_op(&mut self.rng);
        let b = &mut buf.as_mut_slice()[..bs];
        if !is_read {
            self.seq += 1;
            stamp_sectors(b, off, self.seq);
        }
        let (ptr, len, index) = (b.as_mut_ptr(), bs as u32, slot as u16);
        // Four shapes: plain or fixed file × plain or fixed buffer.
        macro_rules! op {
            ($fd:expr) => {
                match (is_read, self.fixed_bufs) {
                    (true, false) => opcode::Read::new($fd, ptr, len).offset(off).build(),
                    (true, true) => opcode::ReadFixed::new($fd, ptr, len, index)
                        .offset(off)
                        .build(),
                    (false, false) => opcode::Write::new($fd, ptr, len).offset(off).build(),
                    (false, true) => opcode::WriteFixed::new($fd, ptr, len, index)
                        .offset(off)
                        .build(),
                }
            };
        }
        let entry = if self.fixed_file {
            op!(types::Fixed(0))
        } else {
            op!(self.fd)
        }
        .user_data(slot as u64);
        self.slots[slot] = (now, is_read, off);
        // SAFETY: the buffer is not touched again until this operation's
        // completion is reaped; run() drains the ring before it returns (or
        // leaks the buffers when it cannot).
        unsafe { ring.submission().push(&entry) }
            .map_err(|_| Error::measurement("io.random: io_uring submission queue full"))
    }
}

/// Keep `bufs.len()` operations in flight for `dur`. When the ring fails
/// with operations in flight the buffers are leaked (taken out of `bufs`),
/// never freed under the kernel's feet.
pub(crate) fn run(
    job: &Job,
    dur: Duration,
    bufs: &mut Vec<AlignedBuf>,
    seed: u64,
) -> Result<Tally> {
    let depth = bufs.len();
    let mut ring = ring(depth.next_power_of_two().max(2) as u32)?;
    let (fixed_file, fixed_bufs) = register(&ring, job, bufs);
    let start = Instant::now();
    let mut is = Issuer {
        job,
        fd: types::Fd(job.file.as_raw_fd()),
        fixed_file,
        fixed_bufs,
        rng: SmallRng::seed_from_u64(seed),
        seq: 0,
        slots: vec![(start, true, 0); depth],
    };
    let mut done: Vec<(u64, i32)> = Vec::with_capacity(depth * 2);
    let mut t = Tally {
        read: LatencyRecorder::new(),
        write: LatencyRecorder::new(),
        ..Default::default()
    };
    let deadline = start + dur;
    let bs = job.bs as i32;
    let mut inflight = 0usize;
    let mut failed: Option<Error> = None;
    for (slot, buf) in bufs.iter_mut().enumerate() {
        if let Err(e) = is.queue(&mut ring, slot, buf, start) {
            failed = Some(e);
            break;
        }
        inflight += 1;
    }
    let mut last = start;
    let mut hard_errors = 0;
    while inflight > 0 {
        match ring.submit_and_wait(1) {
            Ok(_) => {}
            Err(e)
                if matches!(
                    Errno::from_io_error(&e),
                    Some(Errno::INTR) | Some(Errno::BUSY)
                ) => {}
            Err(e) => {
                hard_errors += 1;
                if hard_errors > 100 {
                    std::mem::forget(std::mem::take(bufs));
                    return Err(ring_err("cannot wait for completions", e));
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        let now = Instant::now();
        done.clear();
        done.extend(ring.completion().map(|c| (c.user_data(), c.result())));
        let more = failed.is_none() && now < deadline && signals::caught().is_none();
        for &(ud, res) in &done {
            let slot = ud as usize;
            inflight -= 1;
            let (queued, is_read, off) = is.slots[slot];
            if res != bs {
                if failed.is_none() {
                    failed = Some(if res < 0 {
                        Error::io(
                            if is_read {
                                "cannot read"
                            } else {
                                "cannot write"
                            },
                            job.path,
                            std::io::Error::from_raw_os_error(-res),
                        )
                    } else {
                        Error::measurement(format!(
                            "io.random: short {} ({res} of {bs} bytes at offset {off})",
                            if is_read { "read" } else { "write" }
                        ))
                    });
                }
                continue;
            }
            let ns = (now - queued).as_nanos() as u64;
            if is_read {
                t.reads += 1;
                t.read.record_ns(ns);
            } else {
                t.write.record_ns(ns);
            }
            t.ops += 1;
            last = now;
            if more {
                match is.queue(&mut ring, slot, &mut bufs[slot], now) {
                    Ok(()) => inflight += 1,
                    Err(e) => failed = Some(e),
                }
            }
        }
    }
    if let Some(e) = failed {
        return Err(e);
    }
    t.span = Some((start, last));
    t.registered = Some((fixed_file, fixed_bufs));
    Ok(t)
}

/// `jobs` rings at once, each in its own thread with an equal share of
/// `bufs` as its depth (fio numjobs with iodepth). IOPS count every ring's
/// operations over the time from the first start to the last completion.
/// A ring that fails with operations in flight leaks its share, so `bufs`
/// comes back shorter and the point ends with the error.
pub(crate) fn run_jobs(
    job: &Job,
    dur: Duration,
    bufs: &mut Vec<AlignedBuf>,
    seed: u64,
    jobs: usize,
) -> Result<Tally> {
    if jobs <= 1 {
        // One ring runs in a thread of its own too, as each of several
        // does, not in the thread that drives the point (docs/performance.md:
        // one ring in the calling thread trailed fio where rings in their
        // own threads did not).
        let out = std::thread::scope(|s| {
            let h = std::thread::Builder::new()
                .name("io.random-ring0".into())
                .stack_size(STACK)
                .spawn_scoped(s, || run(job, dur, bufs, seed));
            join_all(vec![h], "an io_uring thread", "fewer jobs")
        });
        return out.into_iter().next().unwrap_or_else(|| {
            Err(Error::measurement(
                "io.random: the io_uring thread did not report",
            ))
        });
    }
    let depth = bufs.len() / jobs;
    let mut shares: Vec<Vec<AlignedBuf>> =
        (0..jobs).map(|_| bufs.drain(..depth).collect()).collect();
    let outs: Vec<Result<Tally>> = std::thread::scope(|s| {
        let handles: Vec<_> = shares
            .iter_mut()
            .enumerate()
            .map(|(i, share)| {
                std::thread::Builder::new()
                    .name(format!("io.random-ring{i}"))
                    .stack_size(STACK)
                    .spawn_scoped(s, move || {
                        run(job, dur, share, seed ^ ((i as u64 + 1) << 32))
                    })
            })
            .collect();
        join_all(handles, "an io_uring thread", "fewer jobs")
    });
    bufs.extend(shares.into_iter().flatten());
    let mut t = Tally::default();
    for o in outs {
        t.add(&o?);
    }
    Ok(t)
}

/// Register the file and the buffers with the ring where the kernel lets
/// us (fixed buffers count against RLIMIT_MEMLOCK before 5.12): which of
/// the two took. The ring is dropped (and they with it) when run() ends.
fn register(ring: &IoUring, job: &Job, bufs: &mut [AlignedBuf]) -> (bool, bool) {
    let sub = ring.submitter();
    let file = sub.register_files(&[job.file.as_raw_fd()]).is_ok();
    let iovecs: Vec<libc::iovec> = bufs
        .iter_mut()
        .map(|b| {
            let s = b.as_mut_slice();
            libc::iovec {
                iov_base: s.as_mut_ptr().cast(),
                iov_len: s.len(),
            }
        })
        .collect();
    // SAFETY: the buffers outlive the ring: run() owns the ring and drains
    // (or leaks the buffers) before it returns, and the registration ends
    // when the ring is dropped.
    let bufs_ok =
        bufs.len() <= u16::MAX as usize && unsafe { sub.register_buffers(&iovecs) }.is_ok();
    (file, bufs_ok)
}
