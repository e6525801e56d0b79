//! `sched.messaging`: hackbench / `perf bench sched messaging` — groups of
//! sender and receiver processes flooding each other with small messages,
//! a scheduler and wake-up stress test.
//!
//! libc: poll, pollfd, POLLIN, EINTR, close (in the forked workers: async-signal-safe)

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::time::Instant;

use crate::engine::{
    Ctx, Experiment, Fitted, Footprint, Metric, MetricSpec, ParamKind, ParamSpec, ParamValue,
    Point, PointExtras, PointRun, Room, RunDefaults, TrialValues,
};
use crate::engine::{Needs, Spec};
use crate::experiments::common::child::{self, check_open_files, check_process_limit, Children};
use crate::experiments::common::pingpong::pipe;
use crate::experiments::common::speed;
use crate::{Error, Result};

pub(crate) struct Messaging;

/// Memory one forked worker costs the machine (kernel stack, page tables,
/// the pages it dirties, its socket buffers): 275 KiB measured on x86_64
/// Linux 6.18 as the growth of a memory cgroup's max_usage_in_bytes from 1 to
/// 5 groups of 20 pairs (14.4 MB → 58.4 MB for 160 more workers), rounded up.
/// A board with 64 MiB cannot hold perf's default 400 workers.
const WORKER_BYTES: u64 = 288 << 10;

/// A point's parameters, read by name once, here.
struct Params {
    groups: u64,
    pairs: u64,
    loops: u64,
    size: usize,
    /// ipc=socket: AF_UNIX socket pairs instead of pipes.
    sockets: bool,
    /// work=sized: fewer loops on a slow machine, so a trial keeps its time.
    sized: bool,
}

impl Params {
    fn parse(p: &Point) -> Result<Params> {
        Ok(Params {
            groups: p.u64("groups")?,
            pairs: p.u64("pairs")?,
            loops: p.u64("loops")?,
            size: p.usize("size")?,
            sockets: p.text("ipc")? == "socket",
            sized: p.text("work")? == "sized",
        })
    }
}

/// Groups and pairs that fit the memory budget and the process limit, and a
/// note when fewer than asked: fewer groups first; when not even one group
/// fits, fewer pairs (at least 2).
fn fitted_shape(q: &Params, room: &Room) -> Result<(u64, u64, Option<String>)> {
    let (groups, pairs) = (q.groups, q.pairs);
    let (mut g, mut pr) = (groups, pairs);
    let mut why = Vec::new();
    if let Some(budget) = room.memory {
        let workers = budget / WORKER_BYTES;
        if 2 * g * pr > workers {
            g = (workers / (2 * pr)).max(1);
            if 2 * g * pr > workers {
                pr = (workers / 2).clamp(2, pairs.max(2));
            }
            if 2 * g * pr > workers {
                return Err(Error::environment(format!(
                    "sched.messaging needs at least 4 workers ({} KiB each) but the memory \
                     budget is {} KiB ({}); free some memory",
                    WORKER_BYTES >> 10,
                    budget >> 10,
                    room.memory_why
                )));
            }
            why.push(format!(
                "memory for about {workers} workers at {} KiB each ({})",
                WORKER_BYTES >> 10,
                room.memory_why
            ));
        }
    }
    // A small board also caps the processes (threads-max scales with RAM).
    let by_memory = g;
    while g > 1 && check_process_limit("sched.messaging", 2 * g * pr).is_err() {
        g -= 1;
    }
    check_process_limit("sched.messaging", 2 * g * pr)?;
    if g < by_memory {
        why.push(format!(
            "the process limit (kernel.threads-max, RLIMIT_NPROC) leaves room for {} workers",
            2 * g * pr
        ));
    }
    let note = (!why.is_empty()).then(|| {
        format!(
            "{g} groups of {pr} pairs instead of {groups} of {pairs} ({} workers): {}",
            2 * g * pr,
            why.join("; ")
        )
    });
    Ok((g, pr, note))
}

pub(crate) static SPEC: Spec = Spec {
    name: "sched.messaging",
    summary: "hackbench-style scheduler stress: groups of senders and receivers exchanging messages (perf bench sched messaging)",
    method: "Same workload and timing as `perf bench sched messaging` (hackbench). A trial forks \
         `groups` groups of `pairs` receivers and `pairs` senders (2 x groups x pairs \
         processes); each receiver owns one AF_UNIX stream socketpair (ipc=socket) or pipe \
         (ipc=pipe), and every sender of a group writes `loops` messages of `size` bytes to \
         every receiver of its group (short writes/reads are completed). All processes first \
         report ready on a pipe and wait in poll() on a wake-up pipe; the clock starts when \
         tunelab writes the wake-up byte and stops when every process has exited and been \
         reaped, so process creation is outside the timing and process exit inside (as in \
         perf). total_time is that wall time in seconds; message_rate = groups x pairs x pairs x \
         loops messages / total_time. Measured against perf 6.1 on a 2-CPU VM, tunelab's time is \
         about 15-20% lower than perf's for the same workload, and so is a minimal C program \
         with perf's exact protocol and timing (bench/micro_vs_reference.sh runs it): the \
         difference is the weight of the forked processes, not the definition. perf's workers \
         are copies of the 9 MB perf binary with ~28 shared libraries and exit through exit() \
         (library destructors); each takes ~150 page faults (copy-on-write, exit) inside the \
         timed window against ~25-40 for tunelab's or the C program's workers, which touch only \
         their stack and buffer and leave with _exit(). The same C program with perf's libraries \
         preloaded and exit() in its workers lands within 2% of perf. Sweep groups (-p groups=1,2,4,8,16) to see how the \
         scheduler copes with load.",
    params: &[
            ParamSpec::new("groups", ParamKind::Count, "10", "number of groups")
                .range(1.0, 10_000.0),
            ParamSpec::new(
                "pairs",
                ParamKind::Count,
                "20",
                "senders and receivers per group (perf: -g/--group's fds, 20)",
            )
            .range(1.0, 1000.0),
            ParamSpec::new(
                "loops",
                ParamKind::Count,
                "100",
                "messages each sender sends to each receiver",
            )
            .range(1.0, 10_000_000.0),
            ParamSpec::new("size", ParamKind::Size, "100", "bytes per message")
                .range(1.0, (1u64 << 20) as f64),
            ParamSpec::new(
                "ipc",
                ParamKind::Choice(&["socket", "pipe"]),
                "socket",
                "AF_UNIX stream socket pairs (perf default) or pipes (perf -p)",
            ),
            ParamSpec::new(
                "work",
                ParamKind::Choice(&["fixed", "sized"]),
                "fixed",
                "fixed: `loops` as given (perf's workload); sized: fewer loops when a one-group \
                 probe says a trial would outlast the trial time (a slow board)",
            ),
        ],
    metrics: &[
            MetricSpec::lower(
                "total_time",
                "s",
                "wall time from wake-up to the last worker reaped",
            ),
            MetricSpec::higher("message_rate", "ops/s", "messages delivered per second"),
        ],
    needs: Needs::NOTHING,
    defaults: RunDefaults::new(1, 5, 10, 40.0),
    hidden: false,
};

// The metrics a trial emits, checked against the Spec while compiling.
const MESSAGE_RATE: Metric = SPEC.emits("message_rate");
const TOTAL_TIME: Metric = SPEC.emits("total_time");

impl Experiment for Messaging {
    fn spec(&self) -> &'static Spec {
        &SPEC
    }
    fn validate(&self, p: &Point) -> Result<()> {
        // Up to the default 10 groups, a small board's process limit is
        // fitted at prepare (one group must fit); more groups than the
        // default were asked for on purpose and must fit as asked.
        let Params { groups, pairs, .. } = Params::parse(p)?;
        let need = if groups > 10 {
            2 * groups * pairs
        } else {
            2 * pairs
        };
        check_process_limit("sched.messaging", need)?;
        // Each group's descriptors are open in tunelab at the same time.
        let fds_needed = 2 * pairs + 16;
        check_open_files(fds_needed, |lim| {
            format!(
                "sched.messaging: pairs={pairs} needs {fds_needed} open files per group but the \
                 limit is {lim}; use fewer pairs or raise `ulimit -n`"
            )
        })
    }
    fn footprint(&self, p: &Point, room: &Room) -> Footprint {
        let (groups, pairs) = Params::parse(p)
            .and_then(|q| fitted_shape(&q, room))
            .map_or((0, 0), |f| (f.0, f.1));
        Footprint {
            peak_memory: groups * 2 * pairs * WORKER_BYTES,
            ..Footprint::default()
        }
    }
    fn prepare(&self, ctx: &Ctx, p: &Point) -> Result<Box<dyn PointRun>> {
        // The workers follow the memory really available (cgroup included).
        let q = Params::parse(p)?;
        let (groups, pairs, fit_note) = fitted_shape(&q, &Room::read(None))?;
        let mut run = MessagingRun {
            fit_note,
            speed_note: None,
            asked: (groups, q.loops),
            groups,
            pairs: pairs as usize,
            loops: q.loops,
            size: q.size,
            sockets: q.sockets,
        };
        if q.sized {
            run.size_to_speed(ctx)?;
        }
        Ok(Box::new(run))
    }
}

/// Fewest loops a sized trial keeps: each sender still sends every
/// receiver of its group a burst, not a single message.
const MIN_LOOPS: u64 = 10;

struct MessagingRun {
    fit_note: Option<String>,
    /// Groups and loops cut to the machine's speed (work=sized), and why.
    speed_note: Option<String>,
    /// (groups, loops) before work=sized cut them.
    asked: (u64, u64),
    groups: u64,
    pairs: usize,
    loops: u64,
    size: usize,
    sockets: bool,
}

fn channel(sockets: bool) -> Result<(OwnedFd, OwnedFd)> {
    if sockets {
        use rustix::net::{socketpair, AddressFamily, SocketFlags, SocketType};
        socketpair(
            AddressFamily::UNIX,
            SocketType::STREAM,
            SocketFlags::CLOEXEC,
            None,
        )
        .map_err(|e| Error::environment(format!("socketpair(AF_UNIX): {e} (too many open files?)")))
    } else {
        pipe()
    }
}

/// Tell tunelab we are ready and wait for the wake-up byte (perf's ready()).
fn ready(ready_w: RawFd, wake_r: RawFd) -> bool {
    if !child::write_all(ready_w, b"R") {
        return false;
    }
    let mut pfd = libc::pollfd {
        fd: wake_r,
        events: libc::POLLIN,
        revents: 0,
    };
    loop {
        // SAFETY: one valid pollfd.
        let r = unsafe { libc::poll(&mut pfd, 1, -1) };
        if r == 1 {
            return true;
        }
        if r < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
            continue;
        }
        return false;
    }
}

impl MessagingRun {
    fn procs(&self) -> u64 {
        2 * self.groups * self.pairs as u64
    }

    /// work=sized: one group with a tenth of the loops, untimed for the
    /// result, then as many groups as the trial time has room to fork
    /// (forking is outside the timing but not outside the study: under
    /// emulation 4 groups took 5 s a trial to fork) and as many loops as a
    /// trial of the trial time holds (the groups share the CPUs).
    fn size_to_speed(&mut self, ctx: &Ctx) -> Result<()> {
        let asked = (self.groups, self.loops);
        let probe = MessagingRun {
            fit_note: None,
            speed_note: None,
            groups: 1,
            loops: (asked.1 / 10).max(1),
            ..*self
        };
        let began = Instant::now();
        let secs = probe.once(ctx)?;
        let setup = (began.elapsed().as_secs_f64() - secs).max(0.0);
        let target = ctx.trial_time().as_secs_f64();
        let groups = speed::ops_for(asked.0, 1, 1, 1, setup, target);
        let loops = if asked.1 > MIN_LOOPS {
            speed::ops_for(
                asked.1,
                MIN_LOOPS,
                1,
                probe.loops,
                secs * groups as f64,
                target,
            )
        } else {
            asked.1
        };
        let mut notes = Vec::new();
        if groups < asked.0 {
            notes.push(speed::note(
                "groups",
                groups,
                asked.0,
                &format!("{:.0} ms to fork one group", setup * 1e3),
                target,
            ));
        }
        if loops < asked.1 {
            let rate = (self.pairs * self.pairs) as f64 * probe.loops as f64 / secs;
            notes.push(speed::note(
                "loops",
                loops,
                asked.1,
                &crate::units::human(rate, "messages/s"),
                target,
            ));
        }
        if !notes.is_empty() {
            self.speed_note = Some(notes.join("; "));
        }
        (self.groups, self.loops) = (groups, loops);
        self.asked = asked;
        Ok(())
    }

    /// Fork all groups, start them together, wait for all: seconds.
    fn once(&self, ctx: &Ctx) -> Result<f64> {
        let (ready_r, ready_w) = pipe()?;
        let (wake_r, wake_w) = pipe()?;
        let (rw, wr) = (ready_w.as_raw_fd(), wake_r.as_raw_fd());
        let mut kids = Children::new();
        let (size, loops, pairs) = (self.size, self.loops, self.pairs);
        for _ in 0..self.groups {
            ctx.check_cancel()?;
            let mut out_fds: Vec<OwnedFd> = Vec::with_capacity(pairs);
            for _ in 0..pairs {
                let (rx, tx) = channel(self.sockets)?;
                let (rx_fd, tx_fd) = (rx.as_raw_fd(), tx.as_raw_fd());
                let mut buf = vec![0u8; size];
                let packets = pairs as u64 * loops;
                kids.spawn(move || {
                    // As perf's receiver: drop our copy of the sending end.
                    // SAFETY: close is async-signal-safe; tx_fd is an inherited copy.
                    unsafe { libc::close(tx_fd) };
                    if !ready(rw, wr) {
                        return 2;
                    }
                    for _ in 0..packets {
                        if !child::read_exact(rx_fd, &mut buf) {
                            return 1;
                        }
                    }
                    0
                })?;
                drop(rx);
                out_fds.push(tx);
            }
            let raw: Vec<RawFd> = out_fds.iter().map(|f| f.as_raw_fd()).collect();
            for _ in 0..pairs {
                let data = vec![b'S'; size];
                let raw = raw.clone();
                kids.spawn(move || {
                    if !ready(rw, wr) {
                        return 2;
                    }
                    for _ in 0..loops {
                        for &fd in &raw {
                            if !child::write_all(fd, &data) {
                                return 1;
                            }
                        }
                    }
                    0
                })?;
            }
            drop(out_fds);
        }
        drop(ready_w);
        drop(wake_r);
        let mut got = vec![0u8; kids.len()];
        if !child::read_exact(ready_r.as_raw_fd(), &mut got) {
            ctx.check_cancel()?;
            kids.wait_all()?;
            return Err(Error::measurement(
                "sched.messaging: workers did not all report ready",
            ));
        }
        let start = Instant::now();
        if !child::write_all(wake_w.as_raw_fd(), b"G") {
            return Err(Error::measurement(
                "sched.messaging: cannot wake the workers",
            ));
        }
        kids.wait_all()?;
        Ok(start.elapsed().as_secs_f64())
    }
}

impl PointRun for MessagingRun {
    fn trial(&mut self, ctx: &Ctx) -> Result<TrialValues> {
        let t = self.once(ctx)?;
        let messages = self.groups * self.pairs as u64 * self.pairs as u64 * self.loops;
        Ok(TrialValues::new()
            .with(TOTAL_TIME, t)
            .with(MESSAGE_RATE, messages as f64 / t))
    }
    fn finish(&mut self, _ctx: &Ctx) -> Result<PointExtras> {
        Ok(PointExtras {
            notes: vec![format!(
                "{} processes per trial ({} groups x {} senders + {} receivers), {} messages \
                 of {} B over {}; process creation outside the timing, exit and reaping inside",
                self.procs(),
                self.groups,
                self.pairs,
                self.pairs,
                self.groups * self.pairs as u64 * self.pairs as u64 * self.loops,
                self.size,
                if self.sockets {
                    "AF_UNIX stream sockets"
                } else {
                    "pipes"
                }
            )]
            .into_iter()
            .chain(self.fit_note.clone())
            .chain(self.speed_note.clone())
            .collect(),
            ..Default::default()
        })
    }
    fn fitted(&self) -> Vec<Fitted> {
        let fit = |param, used, asked| {
            (used < asked).then(|| Fitted {
                param,
                used: ParamValue::Int(used),
                why: "machine speed".into(),
            })
        };
        fit("groups", self.groups, self.asked.0)
            .into_iter()
            .chain(fit("loops", self.loops, self.asked.1))
            .collect()
    }
}
