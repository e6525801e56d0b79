//! The reader thread: drains the ring buffers, follows each process's
//! mappings and names, keeps distinct stacks with counts (or hands switch
//! events to the off-CPU pairing) and re-resolves late-mapped addresses.

use std::collections::{HashMap, HashSet};
use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use perf_event::data::Record as Rec;
use perf_event::Sampler;
use rustix::event::{PollFd, PollFlags};

use super::super::collected::{Collected, FrameKey};
use super::super::common;
use super::super::maps::{self, AddressSpace, Mapping};
use super::super::Scope;
use super::fitter::{Adapt, Fitter};
use super::holders::Holders;
use super::leaf;
use super::open::Opened;
use super::pairing::{
    monotonic_ns, switch_ids, OffEvent, OffKind, OffState, MISC_SWITCH_OUT,
    MISC_SWITCH_OUT_PREEMPT, PERF_RECORD_SWITCH, PERF_RECORD_SWITCH_CPU_WIDE,
};
use super::stacks::{add_stack, resolve_late, splice_scanned};
use super::windows::{switch_all, Held, Turn};
use crate::diagnose::budget::Pace;

const PERF_CONTEXT_MAX: u64 = -4095i64 as u64;
const PERF_CONTEXT_KERNEL: u64 = -128i64 as u64;
const PERF_CONTEXT_USER: u64 = -512i64 as u64;
const MISC_CPUMODE_MASK: u16 = 7;
const MISC_KERNEL: u16 = 1;
const MISC_COMM_EXEC: u16 = 1 << 13;
const MISC_MMAP_DATA: u16 = 1 << 13;
/// Return addresses taken from the scan, at most.
const SCAN_FRAMES: usize = 6;
/// Distinct full stacks kept while sampling (~20 frames × 16 bytes each,
/// a few MiB at most).
pub(super) const MAX_STACKS: usize = 20_000;

/// Per-process state the reader keeps while sampling.
struct Reader {
    out: Collected,
    spaces: HashMap<u32, AddressSpace>,
    comm_of_pid: HashMap<u32, u32>,
    comm_index: HashMap<String, u32>,
    /// Off-CPU tracing: switch events waiting to be paired.
    off: Option<OffState>,
    /// Off-CPU tracing: each CPU's recent switch-ins (CPU-wide records).
    holders: Holders,
    /// tunelab's own pid, read once (getpid is a system call per sample).
    me: u32,
    /// tunelab's executable when the target is a command it forked, and the
    /// processes seen to exec: until then its samples are tunelab's own.
    own_exe: Option<String>,
    execed: HashSet<u32>,
    /// Samples that looked like tunelab's own fork before its exec: the
    /// exec's COMM record may sit in another CPU's buffer not read yet (the
    /// board's programs and tunelab are both linked at 0x400000, so the
    /// program's addresses resolve in tunelab's old mappings). Decided
    /// after the last drain, when every exec has been read.
    pending: Vec<Pending>,
}

/// A sample held until the end (see `Reader::pending`).
struct Pending {
    pid: u32,
    raw: Vec<(u64, bool)>,
    return_address: Option<u64>,
    leaf_kernel: bool,
}

/// Events are paired in time order; the ring buffers of different CPUs are
/// drained one after the other, so events younger than this stay queued
/// until the next pass.
const HOLD_BACK_NS: u64 = 300_000_000;
/// How the reader is told it may start (`ready`, once its set-up is done),
/// woken to stop (a byte on `fd`), and held to diagnose's budget (`pace`).
pub(super) struct Wake {
    pub(crate) fd: std::os::fd::OwnedFd,
    pub(crate) ready: std::sync::mpsc::Sender<()>,
    pub(crate) pace: Option<Arc<Pace>>,
}

impl Reader {
    fn comm_id(&mut self, name: &str) -> u32 {
        if let Some(i) = self.comm_index.get(name) {
            return *i;
        }
        let i = self.out.comms.len() as u32;
        self.out.comms.push(name.to_string());
        self.comm_index.insert(name.to_string(), i);
        i
    }

    fn pid_comm(&mut self, pid: u32) -> u32 {
        if let Some(c) = self.comm_of_pid.get(&pid) {
            return *c;
        }
        let name = if pid == 0 {
            // The idle task of each CPU, named as perf names it.
            "swapper".to_string()
        } else {
            common::comm_of(pid as i32).unwrap_or_else(|| format!("[pid {pid}]"))
        };
        let c = self.comm_id(&name);
        self.comm_of_pid.insert(pid, c);
        c
    }

    /// The address space of pid, reading /proc/PID/maps the first time a
    /// sample needs it (MMAP2 records only cover mappings made after start).
    fn space(&mut self, pid: u32) -> &mut AddressSpace {
        let files = &mut self.out.files;
        let sp = self.spaces.entry(pid).or_default();
        if !sp.proc_read {
            sp.proc_read = true;
            if let Ok(text) = crate::system::proc::read_pid(pid, "maps") {
                sp.add_older(maps::parse_proc_maps(&text, files));
            }
        }
        sp
    }

    fn record(&mut self, rec: &perf_event::Record) {
        let misc = rec.misc();
        if rec.ty() == PERF_RECORD_SWITCH {
            if let (Some(off), Some((pid, tid, time))) =
                (self.off.as_mut(), switch_ids(&rec.to_contiguous()))
            {
                let kind = if misc & MISC_SWITCH_OUT != 0 {
                    OffKind::Out {
                        preempt: misc & MISC_SWITCH_OUT_PREEMPT != 0,
                    }
                } else {
                    OffKind::In
                };
                off.push(OffEvent {
                    time,
                    pid,
                    tid,
                    kind,
                });
            }
            return;
        }
        if rec.ty() == PERF_RECORD_SWITCH_CPU_WIDE {
            // next_prev_pid, next_prev_tid, then the sample_id trailer
            // (pid, tid, time, cpu): who ran on each CPU, and for a
            // workload thread back from a preemption, over its wait.
            let body = rec.to_contiguous();
            let ids = body.get(8..).and_then(switch_ids);
            let cpu = body
                .get(24..28)
                .and_then(|b| b.try_into().ok())
                .map(u32::from_ne_bytes);
            let (Some(off), Some((pid, tid, time)), Some(cpu)) = (self.off.as_ref(), ids, cpu)
            else {
                return;
            };
            let follow = off.follows(pid);
            if misc & MISC_SWITCH_OUT != 0 {
                if follow && misc & MISC_SWITCH_OUT_PREEMPT != 0 {
                    self.holders.preempted(tid, time);
                } else if follow {
                    self.holders.blocked(tid);
                }
                return;
            }
            for (h, ns) in self.holders.switched_in(cpu, pid, tid, time, follow) {
                *self.out.holders_ns.entry((pid, h)).or_default() += ns;
                if !self.out.holder_comm.contains_key(&h) {
                    let c = self.pid_comm(h);
                    self.out.holder_comm.insert(h, c);
                }
            }
            return;
        }
        let parsed = match rec.parse_record() {
            Ok(r) => r,
            Err(e) => {
                if self.out.errors.len() < 10 {
                    self.out.errors.push(e.to_string());
                }
                return;
            }
        };
        match parsed {
            Rec::Sample(s) => self.sample(&s, misc),
            Rec::Mmap2(m) if m.prot & rustix::mm::ProtFlags::EXEC.bits() != 0 => {
                self.mapping(m.pid, m.addr, m.len, m.pgoff, &m.filename);
            }
            Rec::Mmap(m) if misc & MISC_MMAP_DATA == 0 => {
                self.mapping(m.pid, m.addr, m.len, m.pgoff, &m.filename);
            }
            Rec::Comm(c) => {
                let name = String::from_utf8_lossy(&c.comm).into_owned();
                let id = self.comm_id(&name);
                // Only the process's main thread names the process.
                if c.pid == c.tid {
                    self.comm_of_pid.insert(c.pid, id);
                }
                if misc & MISC_COMM_EXEC != 0 {
                    self.execed.insert(c.pid);
                    let sp = self.spaces.entry(c.pid).or_default();
                    sp.clear();
                    sp.proc_read = true;
                }
            }
            // A new process (not a thread): it starts with its parent's
            // mappings and name.
            Rec::Fork(f) if f.pid != f.ppid => {
                if let Some(parent) = self.spaces.get(&f.ppid).cloned() {
                    self.spaces.insert(f.pid, parent);
                }
                if let Some(c) = self.comm_of_pid.get(&f.ppid).copied() {
                    self.comm_of_pid.insert(f.pid, c);
                }
            }
            Rec::Exit(x) => {
                if let Some(off) = self.off.as_mut() {
                    off.push(OffEvent {
                        time: x.time,
                        pid: x.pid,
                        tid: x.tid,
                        kind: OffKind::Exit,
                    });
                }
            }
            Rec::Lost(l) => self.out.lost += l.lost,
            Rec::LostSamples(l) => self.out.lost += l.lost,
            Rec::Throttle(_) => self.out.throttled += 1,
            _ => {}
        }
    }

    fn mapping(&mut self, pid: u32, addr: u64, len: u64, pgoff: u64, name: &[u8]) {
        let name = String::from_utf8_lossy(name);
        if name.is_empty() || name.starts_with("//anon") {
            return;
        }
        let file = self.out.files.intern(&name);
        self.spaces.entry(pid).or_default().add(Mapping {
            start: addr,
            end: addr.saturating_add(len),
            pgoff,
            file,
        });
    }

    fn sample(&mut self, s: &perf_event::data::Sample, misc: u16) {
        let pid = s.pid().unwrap_or(0);
        // tunelab's own threads are not the machine's load (and a stripped
        // board binary's frames would be bare addresses): counted, left out.
        if pid == self.me {
            self.out.own_samples += 1;
            return;
        }
        let leaf_kernel = misc & MISC_CPUMODE_MASK == MISC_KERNEL;
        let mut raw: Vec<(u64, bool)> = Vec::new();
        match s.callchain() {
            Some(chain) if !chain.is_empty() => {
                let mut kernel = leaf_kernel;
                for &ip in chain {
                    if ip >= PERF_CONTEXT_MAX {
                        kernel = match ip {
                            PERF_CONTEXT_KERNEL => true,
                            PERF_CONTEXT_USER => false,
                            // hypervisor/guest contexts: not ours to resolve
                            _ => kernel,
                        };
                        continue;
                    }
                    raw.push((ip, kernel));
                }
            }
            _ => {
                if let Some(ip) = s.ip() {
                    raw.push((ip, leaf_kernel));
                }
            }
        }
        let mut frames = self.frames(pid, &raw);
        let return_address = if self.off.is_none() {
            leaf::return_address(s).filter(|&a| a >= 4096)
        } else {
            None
        };
        if self.before_exec(pid, &frames) {
            if self.off.is_none() {
                self.pending.push(Pending {
                    pid,
                    raw,
                    return_address,
                    leaf_kernel,
                });
            } else {
                self.out.own_samples += 1;
            }
            return;
        }
        if self.off.is_none() {
            self.splice_caller(pid, &mut frames, return_address);
        } else if let Some(stack) = s.stack_user() {
            let found = self.scan_stack(pid, stack, &frames);
            splice_scanned(&mut frames, found);
        }
        if let Some(off) = self.off.as_mut() {
            off.push(OffEvent {
                time: s.time().unwrap_or(0),
                pid,
                tid: s.tid().unwrap_or(pid),
                kind: OffKind::Stack(pid, frames),
            });
            return;
        }
        let comm = self.pid_comm(pid);
        add_stack(&mut self.out, comm, frames, leaf_kernel, MAX_STACKS);
    }

    /// The frames of a raw call chain, user addresses looked up in `pid`'s
    /// address space as read so far.
    fn frames(&mut self, pid: u32, raw: &[(u64, bool)]) -> Vec<FrameKey> {
        let mut frames = Vec::with_capacity(raw.len());
        for (i, &(ip, kernel)) in raw.iter().enumerate() {
            // Callers' entries are return addresses: step back into the
            // call instruction so a call at a function's very end resolves.
            let addr = if i > 0 { ip.saturating_sub(1) } else { ip };
            if kernel {
                frames.push(FrameKey::Kernel(addr));
            } else {
                let key = match self.space(pid).lookup(addr) {
                    Some((file, off)) => FrameKey::User(file, off),
                    None => FrameKey::Unmapped(pid, addr),
                };
                frames.push(key);
            }
        }
        frames
    }

    /// The leaf's caller from its return address, when it resolves.
    fn splice_caller(&mut self, pid: u32, frames: &mut Vec<FrameKey>, ra: Option<u64>) {
        if let Some(ra) = ra {
            if let Some((file, off)) = self.space(pid).lookup(ra - 1) {
                leaf::splice(frames, FrameKey::Caller(file, off));
            }
        }
    }

    /// The held samples, once every record is read: a process that exec'd
    /// had them after its exec (before it, tunelab's fork only waits on a
    /// pipe), so they are the program's, looked up in its final mappings;
    /// the others are tunelab's own.
    fn settle_pending(&mut self) {
        for p in std::mem::take(&mut self.pending) {
            if !self.execed.contains(&p.pid) {
                self.out.own_samples += 1;
                continue;
            }
            let mut frames = self.frames(p.pid, &p.raw);
            self.splice_caller(p.pid, &mut frames, p.return_address);
            let comm = self.pid_comm(p.pid);
            add_stack(&mut self.out, comm, frames, p.leaf_kernel, MAX_STACKS);
        }
    }

    /// A sample of a process that has not exec'd yet, in tunelab's own
    /// executable: a command's child between tunelab's fork and its exec.
    fn before_exec(&self, pid: u32, frames: &[FrameKey]) -> bool {
        let leaf = frames.iter().find_map(|f| match f {
            FrameKey::User(file, _) => Some(*file),
            _ => None,
        });
        let name = leaf.and_then(|f| self.out.files.names.get(f as usize));
        !self.execed.contains(&pid) && name.is_some() && name == self.own_exe.as_ref()
    }

    /// Words of the copied user stack that point into executable code of
    /// the process: return addresses of the callers the frame-pointer
    /// chain missed, nearest first (at most SCAN_FRAMES, stopping at the
    /// chain's own next frame).
    fn scan_stack(&mut self, pid: u32, stack: &[u8], frames: &[FrameKey]) -> Vec<FrameKey> {
        let first_user = frames
            .iter()
            .position(|f| !matches!(f, FrameKey::Kernel(_)));
        let next = first_user.and_then(|i| frames.get(i + 1)).copied();
        let leaf = first_user.map(|i| frames[i]);
        let mut out = Vec::new();
        for w in stack.chunks_exact(8) {
            let v = u64::from_ne_bytes(w.try_into().expect("8 bytes"));
            if v < 4096 {
                continue;
            }
            // A return address: look up the call instruction (v - 1).
            let Some((file, off)) = self.space(pid).lookup(v - 1) else {
                continue;
            };
            let key = FrameKey::User(file, off);
            if Some(key) == next {
                break;
            }
            if Some(key) == leaf || out.contains(&key) {
                continue;
            }
            out.push(key);
            if out.len() == SCAN_FRAMES {
                break;
            }
        }
        out
    }

    /// Pair the off-CPU events older than `upto`; with u64::MAX (the end)
    /// waits still open are charged up to `end` (the tracer's early end)
    /// or now.
    fn pair(&mut self, upto: u64, end: Option<u64>) {
        let Some(mut off) = self.off.take() else {
            return;
        };
        let mut out = std::mem::take(&mut self.out);
        off.pair(upto, &mut out, &mut |pid| self.pid_comm(pid));
        if upto == u64::MAX {
            let end = end.unwrap_or_else(monotonic_ns);
            off.close_open(end, &mut out, &mut |pid| self.pid_comm(pid));
        }
        self.out = out;
        self.off = Some(off);
    }
}

/// Drain until the thread's CPU clock passes `deadline_ns` (checked every
/// few records): (records read, whether records were left in the ring).
/// One pass over a fork loop's records cost 0.7 s on the emulated board
/// (a process name and mappings read per new child): a pass is bounded.
fn drain_until(sampler: &mut Sampler, reader: &mut Reader, deadline_ns: u64) -> (u64, bool) {
    let mut n = 0;
    while let Some(rec) = sampler.next_record() {
        reader.record(&rec);
        n += 1;
        if n % 16 == 0 && deadline_ns != u64::MAX && common::thread_cpu_ns() >= deadline_ns {
            return (n, true);
        }
    }
    (n, false)
}

pub(super) fn read_loop(
    mut opened: Opened,
    stop: &AtomicBool,
    scope: Scope,
    own_until_exec: bool,
    off: bool,
    adapt: Option<Adapt>,
    wake: Wake,
) -> Collected {
    let mut fitter = adapt.map(Fitter::new);
    let mut held = Held::new(wake.pace.clone());
    let mut reader = Reader {
        out: Collected {
            holders_open: opened.holders.clone(),
            rates: adapt.map(|a| vec![a.hz]).unwrap_or_default(),
            ..Collected::default()
        },
        spaces: HashMap::new(),
        comm_of_pid: HashMap::new(),
        comm_index: HashMap::new(),
        off: off.then(OffState::default),
        holders: Holders::default(),
        me: std::process::id(),
        own_exe: own_until_exec
            .then(|| std::fs::read_link(crate::system::proc::SELF_EXE).ok())
            .flatten()
            .map(|p| p.to_string_lossy().into_owned()),
        execed: HashSet::new(),
        pending: Vec::new(),
    };
    if let Scope::Process { pid } = scope {
        // The target's current mappings and name, while it surely exists.
        reader.space(pid as u32);
        reader.pid_comm(pid as u32);
    }
    let _ = wake.ready.send(());
    drop(wake.ready);
    let (mut passes, mut total) = (0u64, 0u64);
    // Fds whose task has gone (POLLHUP) are not polled again: poll would
    // return at once for them forever.
    let mut live: Vec<bool> = vec![true; opened.samplers.len()];
    while !stop.load(Ordering::SeqCst) {
        // An off-CPU tracer that ended waits for the stop alone.
        let idx: Vec<usize> = (0..live.len())
            .filter(|i| live[*i] && held.ended.is_none())
            .collect();
        // Not polled once kicks outrun poll's returns (`Held::returned`).
        let mut fds: Vec<PollFd> = idx
            .iter()
            .filter(|_| held.watch())
            // SAFETY: the samplers stay open (and in place) while `fds` lives.
            .map(|&i| unsafe { BorrowedFd::borrow_raw(opened.samplers[i].as_raw_fd()) })
            .map(|fd| PollFd::from_borrowed_fd(fd, PollFlags::IN))
            .collect();
        fds.push(PollFd::new(&wake.fd, PollFlags::IN));
        // The kernel wakes the reader when a buffer is half full (the
        // watermark), not per sample, and `stop` through the pipe (a short
        // run's records are all read after it); a held pass is tried again
        // when the budget has room, kicks are judged once a second.
        let d = held.poll_timeout();
        let timeout = rustix::event::Timespec {
            tv_sec: d.as_secs() as i64,
            tv_nsec: d.subsec_nanos() as i64,
        };
        if rustix::event::poll(&mut fds, Some(&timeout)).is_err() {
            continue; // EINTR
        }
        let mut wanted = held.returned();
        for (k, &i) in idx.iter().enumerate().filter(|_| held.watch()) {
            let ev = fds[k].revents();
            if ev.contains(PollFlags::HUP) {
                // The workload has ended: its records are read at the stop,
                // after the interval, not now while tunelab's own CPU
                // still counts.
                live[i] = false;
            } else if ev.contains(PollFlags::IN) {
                wanted = true;
            }
        }
        if !wanted || stop.load(Ordering::SeqCst) {
            continue;
        }
        match held.turn(off) {
            Turn::Hold => continue,
            Turn::End => {
                // Off for good; what the buffers hold is read after the
                // interval, paired up to this moment.
                switch_all(&mut opened, false);
                held.end(monotonic_ns());
                continue;
            }
            Turn::Read => {}
        }
        let c0 = common::thread_cpu_ns();
        let deadline = held.pass_deadline_ns(c0);
        let (mut records, mut left) = (0, false);
        for &i in &idx {
            if live[i] && !left {
                let (n, l) = drain_until(&mut opened.samplers[i], &mut reader, deadline);
                records += n;
                left = l;
            }
        }
        passes += 1;
        total += records;
        if let Some(f) = fitter.as_mut() {
            f.after_pass(records, &opened, &mut reader.out);
        }
        if let Some(o) = &reader.off {
            let upto = o.newest.saturating_sub(HOLD_BACK_NS);
            reader.pair(upto, None);
        }
        held.read(common::thread_cpu_ns().saturating_sub(c0) as f64 * 1e-9);
        if left {
            // Cut short: the samplers' rest waits in the ring (the next
            // pass, or losses counted); the tracer ends here, its rest is
            // read after the interval.
            if off {
                switch_all(&mut opened, false);
                held.end(monotonic_ns());
            } else {
                held.owe();
            }
        }
    }
    switch_all(&mut opened, false);
    for i in 0..opened.samplers.len() {
        total += drain_until(&mut opened.samplers[i], &mut reader, u64::MAX).0;
    }
    reader.pair(u64::MAX, held.ended.map(|(_, ns)| ns));
    (reader.out.traced_ns, reader.out.span_ns) = held.traced_ns();
    reader.out.ended_early = held.ended.is_some();
    reader.settle_pending();
    resolve_late(&mut reader.out, &reader.spaces);
    reader.out.reader_cpu_ns = common::thread_cpu_ns();
    if crate::diagnose::selfcost::debug() {
        eprintln!(
            "tunelab cost: {} reader: {passes} passes, {total} records, {:.1} ms CPU in all{}",
            if off { "off-CPU" } else { "profile" },
            reader.out.reader_cpu_ns as f64 / 1e6,
            ["; read on a timer (kicks)", ""][held.watch() as usize]
        );
    }
    reader.out
}

#[cfg(test)]
#[path = "reader_tests.rs"]
mod tests;
