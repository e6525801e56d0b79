//! The measurement engine shared by `ipc.pipe`, `ipc.unix` and `ipc.fifo`:
//! a forked echo child for round-trip latency and a forked writer child for
//! stream bandwidth, over whatever pair of file descriptors the experiment
//! provides.
//!
//! The engine is here; `placing` holds where the two sides run and
//! what the trials say about it.

mod placing;

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::time::Instant;

use super::child::{self, Children, CpuReports, CpuSet, PinGuard};
use crate::engine::{
    metric_in, Ctx, Experiment, Metric, MetricSpec, Needs, ParamKind, ParamSpec, Point,
    PointExtras, PointRun, RunDefaults, Spec, TrialValues,
};
use crate::safety::AlignedBuf;
use crate::stats::LatencyRecorder;
use crate::{Error, Result};

use placing::migrations_of;

pub(crate) use placing::{
    placement, placement_notes, Placement, BW_MIGRATIONS, BW_SAME_CPU, CPU_PARAM, RT_MIGRATIONS,
    RT_SAME_CPU,
};

/// The metrics every round-trip experiment may emit (ipc.fifo declares the
/// round-trip three of them): the handles below are checked against this
/// list while compiling, and the runner checks each against the running
/// experiment's own Spec.
const PAIR_METRICS: [MetricSpec; 6] = pair_metrics("", "");
const BANDWIDTH: Metric = metric_in(&PAIR_METRICS, "bandwidth");
const M_BW_MIGRATIONS: Metric = metric_in(&PAIR_METRICS, "bw_migrations");
const M_BW_SAME_CPU: Metric = metric_in(&PAIR_METRICS, "bw_same_cpu");
const M_RT_MIGRATIONS: Metric = metric_in(&PAIR_METRICS, "rt_migrations");
const M_RT_SAME_CPU: Metric = metric_in(&PAIR_METRICS, "rt_same_cpu");
const ROUND_TRIP: Metric = metric_in(&PAIR_METRICS, "round_trip");

/// One bidirectional channel between tunelab and a child.
pub(crate) struct Channel {
    /// tunelab writes here, the child reads `child_in`.
    pub(crate) to_child: RawFd,
    pub(crate) child_in: RawFd,
    /// The child writes `child_out`, tunelab reads here.
    pub(crate) child_out: RawFd,
    pub(crate) from_child: RawFd,
    /// Descriptors tunelab keeps (held only to keep them open).
    #[allow(dead_code)]
    pub(crate) keep: Vec<OwnedFd>,
    /// Descriptors only the child needs: closed in tunelab after the fork.
    pub(crate) child_only: Vec<OwnedFd>,
}

impl Channel {
    /// Two pipes: parent -> child and child -> parent.
    pub(crate) fn pipes() -> Result<Self> {
        let (a_r, a_w) = pipe()?;
        let (b_r, b_w) = pipe()?;
        Ok(Channel {
            to_child: a_w.as_raw_fd(),
            child_in: a_r.as_raw_fd(),
            child_out: b_w.as_raw_fd(),
            from_child: b_r.as_raw_fd(),
            keep: vec![a_w, b_r],
            child_only: vec![a_r, b_w],
        })
    }

    /// One AF_UNIX stream socket pair, each side reading and writing its end.
    pub(crate) fn unix_stream() -> Result<Self> {
        use rustix::net::{socketpair, AddressFamily, SocketFlags, SocketType};
        let (a, b) = socketpair(
            AddressFamily::UNIX,
            SocketType::STREAM,
            SocketFlags::CLOEXEC,
            None,
        )
        .map_err(|e| Error::environment(format!("socketpair(AF_UNIX): {e}")))?;
        Ok(Channel {
            to_child: a.as_raw_fd(),
            from_child: a.as_raw_fd(),
            child_in: b.as_raw_fd(),
            child_out: b.as_raw_fd(),
            keep: vec![a],
            child_only: vec![b],
        })
    }
}

fn make_fifo(ctx: &Ctx, name: &str) -> Result<OwnedFd> {
    use rustix::fs::{mknodat, open, FileType, Mode, OFlags, CWD};
    let path = ctx.scratch()?.file_path(name);
    mknodat(CWD, &path, FileType::Fifo, Mode::from_raw_mode(0o600), 0)
        .map_err(|e| Error::io("cannot mkfifo", &path, e.into()))?;
    // O_RDWR on a FIFO never blocks in open() on Linux; each side only uses
    // its direction.
    open(&path, OFlags::RDWR | OFlags::CLOEXEC, Mode::empty())
        .map_err(|e| Error::io("cannot open fifo", &path, e.into()))
}

pub(crate) fn pipe() -> Result<(OwnedFd, OwnedFd)> {
    rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
        .map_err(|e| Error::environment(format!("pipe: {e} (too many open files?)")))
}

impl Channel {
    /// Two named FIFOs in the scratch directory, opened before the fork.
    fn fifos(ctx: &Ctx) -> Result<Self> {
        let a = make_fifo(ctx, "ping.fifo")?;
        let b = make_fifo(ctx, "pong.fifo")?;
        Ok(Channel {
            to_child: a.as_raw_fd(),
            child_in: a.as_raw_fd(),
            child_out: b.as_raw_fd(),
            from_child: b.as_raw_fd(),
            keep: vec![a, b],
            child_only: vec![],
        })
    }
}

pub(crate) struct PingPong {
    kids: Children,
    lat: Channel,
    bw: Option<Channel>,
    buf: AlignedBuf,
    chunk: usize,
    round_trips: u64,
    /// The trial time of the last trial, ms (for the notes).
    trial_ms: u128,
    chunks: u64,
    hist: LatencyRecorder,
    _pin: PinGuard,
    what: &'static str,
    /// The placement asked for (any, same, split).
    cpu_mode: String,
    echo_pid: i32,
    writer_pid: Option<i32>,
    /// Where the echo child (slot ECHO) and the writer (slot WRITER) ran last.
    cpus: CpuReports,
    /// Per trial, where the two sides of the round trips / the stream ran.
    rt_place: Vec<Placement>,
    bw_place: Vec<Placement>,
}

/// Time between placement samples inside a trial (a sample reads the
/// shared report page and calls sched_getcpu: no system call on most
/// systems; its time is left out of the measurement all the same).
const SAMPLE_EVERY: std::time::Duration = std::time::Duration::from_millis(10);
/// A child reports its CPU once per this many round trips or writes.
const REPORT_EVERY: u32 = 16;
/// Slots of the shared [`CpuReports`] page.
const ECHO: usize = 0;
const WRITER: usize = 1;

impl PingPong {
    /// Start the echo child on `lat` and, with `bw`, a writer child sending
    /// `chunk`-byte writes on it; calibrate batch sizes.
    pub(crate) fn start(
        ctx: &Ctx,
        what: &'static str,
        lat: Channel,
        bw: Option<Channel>,
        chunk: usize,
        cpu: &str,
    ) -> Result<Self> {
        let (mine, theirs) = placement(cpu)?;
        let child_set = theirs.map(CpuSet::one);
        let mut kids = Children::new();
        let (cin, cout) = (lat.child_in, lat.child_out);
        let mut writer_pid = None;
        let cpus = CpuReports::new(2)?;
        let reports = &cpus;
        let echo_pid = kids.spawn(move || {
            if let Some(s) = &child_set {
                child::pin_self(s);
            }
            let mut b = [0u8; 1];
            let mut i = 0u32;
            loop {
                reports.report_every(ECHO, &mut i, REPORT_EVERY);
                if !child::read_exact(cin, &mut b) {
                    return 0;
                }
                if !child::write_all(cout, &b) {
                    return 1;
                }
            }
        })?;
        let mut lat = lat;
        lat.child_only.clear();
        let bw = match bw {
            Some(mut ch) => {
                let src = AlignedBuf::random(chunk, 7)?;
                let cout = ch.child_out;
                // Like lmbench bw_pipe/bw_unix: write continuously; the
                // reader's pace is the only brake (a full pipe blocks).
                let pid = kids.spawn(move || {
                    if let Some(s) = &child_set {
                        child::pin_self(s);
                    }
                    let data = &src.as_slice()[..chunk];
                    let mut i = 0u32;
                    loop {
                        reports.report_every(WRITER, &mut i, REPORT_EVERY);
                        if !child::write_all(cout, data) {
                            return 0;
                        }
                    }
                })?;
                writer_pid = Some(pid);
                ch.child_only.clear();
                Some(ch)
            }
            None => None,
        };
        let pin = PinGuard::new(mine)?;
        let mut pp = PingPong {
            kids,
            lat,
            bw,
            buf: AlignedBuf::zeroed(chunk.max(1))?,
            chunk,
            round_trips: 0,
            trial_ms: 0,
            chunks: 0,
            hist: LatencyRecorder::new(),
            _pin: pin,
            what,
            cpu_mode: cpu.to_string(),
            echo_pid,
            writer_pid,
            cpus,
            rt_place: Vec::new(),
            bw_place: Vec::new(),
        };
        // Wake both children up and fault everything in.
        pp.ping(ctx, 200, false)?;
        if pp.bw.is_some() {
            pp.stream(ctx, 4 * chunk as u64)?;
        }
        Ok(pp)
    }

    /// `n` 1-byte round trips; seconds taken.
    fn ping(&mut self, ctx: &Ctx, n: u64, record: bool) -> Result<f64> {
        let b = [0x5au8; 1];
        let mut r = [0u8; 1];
        let start = Instant::now();
        let mut last = start;
        for i in 0..n {
            if i % 8192 == 8191 {
                ctx.check_cancel()?;
            }
            if !child::write_all(self.lat.to_child, &b)
                || !child::read_exact(self.lat.from_child, &mut r)
            {
                return Err(self.broken());
            }
            if record {
                let now = Instant::now();
                self.hist.record(now - last);
                last = now;
            }
        }
        Ok(start.elapsed().as_secs_f64())
    }

    /// Read `want` bytes of the continuous stream; seconds taken.
    fn stream(&mut self, ctx: &Ctx, want: u64) -> Result<f64> {
        let start = Instant::now();
        self.stream_until(ctx, |got, _| got >= want, None)?;
        Ok(start.elapsed().as_secs_f64())
    }

    /// Read the writer's continuous stream in `chunk`-byte reads until
    /// `done(bytes, elapsed)`; placement samples (untimed) every
    /// `SAMPLE_EVERY` when `place` is given. Returns (bytes, seconds
    /// reading, sampling time excluded).
    fn stream_until(
        &mut self,
        ctx: &Ctx,
        done: impl Fn(u64, std::time::Duration) -> bool,
        mut place: Option<&mut Placement>,
    ) -> Result<(u64, f64)> {
        let PingPong {
            bw,
            buf,
            chunk,
            kids,
            what,
            writer_pid,
            cpus,
            ..
        } = self;
        let Some(bw) = bw else {
            return Ok((0, 0.0));
        };
        let buf = &mut buf.as_mut_slice()[..*chunk];
        let start = Instant::now();
        let mut untimed = std::time::Duration::ZERO;
        let mut next_sample = start;
        let mut got = 0u64;
        let mut calls = 0u32;
        loop {
            let now = Instant::now();
            if done(got, now - start - untimed) {
                break;
            }
            if let (Some(p), Some(_)) = (place.as_deref_mut(), *writer_pid) {
                if now >= next_sample {
                    p.sample(cpus.get(WRITER));
                    let after = Instant::now();
                    untimed += after - now;
                    next_sample = after + SAMPLE_EVERY;
                }
            }
            let k = child::read_some(bw.from_child, buf);
            if k == 0 {
                return Err(broken(what));
            }
            got += k as u64;
            calls = calls.wrapping_add(1);
            if calls.is_multiple_of(4096) {
                if let Err(e) = ctx.check_cancel() {
                    kids.kill_all();
                    return Err(e);
                }
            }
        }
        std::hint::black_box(&buf);
        Ok((got, (start.elapsed() - untimed).as_secs_f64()))
    }

    fn broken(&self) -> Error {
        broken(self.what)
    }

    /// Round trips in blocks of 256 until at least the trial time has passed,
    /// with a placement sample (untimed) at most every `SAMPLE_EVERY`:
    /// (count, seconds).
    fn ping_for_min_trial(&mut self, ctx: &Ctx, place: &mut Placement) -> Result<(u64, f64)> {
        let mut n = 0u64;
        let mut t = 0.0;
        let mut next_sample = Instant::now();
        let min = ctx.trial_time().as_secs_f64();
        loop {
            if Instant::now() >= next_sample {
                place.sample(self.cpus.get(ECHO));
                next_sample = Instant::now() + SAMPLE_EVERY;
            }
            t += self.ping(ctx, 256, true)?;
            n += 256;
            if t >= min {
                return Ok((n, t));
            }
        }
    }

    pub(crate) fn trial(
        &mut self,
        ctx: &Ctx,
        latency: bool,
        bandwidth: bool,
    ) -> Result<TrialValues> {
        let mut v = TrialValues::new();
        self.trial_ms = ctx.trial_time().as_millis();
        if latency {
            let mut place = Placement::default();
            let m0 = migrations_of(&[self.echo_pid]);
            let (n, t) = self.ping_for_min_trial(ctx, &mut place)?;
            place.migrations = m0.zip(migrations_of(&[self.echo_pid])).map(|(a, b)| b - a);
            self.round_trips = n;
            v.set(ROUND_TRIP, t / n as f64);
            v.set(M_RT_SAME_CPU, place.same_share());
            if let Some(m) = place.migrations {
                v.set(M_RT_MIGRATIONS, m as f64);
            }
            self.rt_place.push(place);
        }
        if bandwidth && self.bw.is_some() {
            let mut place = Placement::default();
            let w: Vec<_> = self.writer_pid.into_iter().collect();
            let m0 = migrations_of(&w);
            let min = ctx.trial_time();
            let (bytes, t) = self.stream_until(ctx, |_, el| el >= min, Some(&mut place))?;
            place.migrations = m0.zip(migrations_of(&w)).map(|(a, b)| b - a);
            self.chunks = bytes / self.chunk as u64;
            v.set(BANDWIDTH, bytes as f64 / t);
            v.set(M_BW_SAME_CPU, place.same_share());
            if let Some(m) = place.migrations {
                v.set(M_BW_MIGRATIONS, m as f64);
            }
            self.bw_place.push(place);
        }
        Ok(v)
    }

    pub(crate) fn extras(&self) -> PointExtras {
        let mut notes = vec![format!(
            "batches of 256 round trips until a trial lasts {} ms ({} in the last trial; 1 byte each way, blocking read/write, \
             two processes); histogram = every round trip of every trial",
            self.trial_ms, self.round_trips
        )];
        if self.bw.is_some() {
            notes.push(format!(
                "continuous stream like lmbench bw_pipe/bw_unix: the writer write()s {} B pieces \
                 without pause, tunelab read()s for {} ms per trial (~{} reads' worth in the \
                 last trial), bytes counted once (as received)",
                self.chunk, self.trial_ms, self.chunks
            ));
        }
        notes.extend(placement_notes(
            &self.cpu_mode,
            "round trips",
            "echo child",
            &self.rt_place,
        ));
        notes.extend(placement_notes(
            &self.cpu_mode,
            "stream",
            "writer child",
            &self.bw_place,
        ));
        PointExtras {
            histograms: if self.hist.is_empty() {
                vec![]
            } else {
                vec![self.hist.to_data("round_trip")]
            },
            notes,
            ..Default::default()
        }
    }
}

fn broken(what: &str) -> Error {
    Error::measurement(format!(
        "{what}: the worker process stopped answering (killed?)"
    ))
}

/// A [`PointRun`] over [`PingPong`] measuring the selected tests.
pub(crate) struct PingPongRun {
    pub(crate) pp: PingPong,
    pub(crate) latency: bool,
    pub(crate) bandwidth: bool,
}

impl PointRun for PingPongRun {
    fn trial(&mut self, ctx: &Ctx) -> Result<TrialValues> {
        self.pp.trial(ctx, self.latency, self.bandwidth)
    }
    fn finish(&mut self, _ctx: &Ctx) -> Result<PointExtras> {
        Ok(self.pp.extras())
    }
}

/// What the experiments that measure both round trips and a stream
/// (ipc.pipe, ipc.unix) share: parameters, needs and run defaults. Each
/// declares its name, texts and `pair_metrics`, then `..PAIR_SPEC`.
pub(crate) const PAIR_SPEC: Spec = Spec {
    name: "",
    summary: "",
    method: "",
    params: PAIR_PARAMS,
    metrics: &[],
    needs: Needs::NOTHING,
    defaults: RunDefaults::new(1, 5, 20, 30.0),
    hidden: false,
};

/// The metrics of a round trip and a stream over one channel, each with
/// its help text, then where the two sides ran.
pub(crate) const fn pair_metrics(
    round_trip: &'static str,
    bandwidth: &'static str,
) -> [MetricSpec; 6] {
    [
        MetricSpec::lower("round_trip", "s", round_trip),
        MetricSpec::higher("bandwidth", "B/s", bandwidth),
        RT_SAME_CPU,
        RT_MIGRATIONS,
        BW_SAME_CPU,
        BW_MIGRATIONS,
    ]
}

const PAIR_PARAMS: &[ParamSpec] = &[
    ParamSpec::new(
        "test",
        ParamKind::Choice(&["both", "latency", "bandwidth"]),
        "both",
        "what to measure in each trial",
    ),
    ParamSpec::new(
        "chunk",
        ParamKind::Size,
        "64k",
        "bytes per write() for bandwidth",
    )
    .range(1.0, (16u64 << 20) as f64),
    CPU_PARAM,
];

/// What a round trip travels through.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Medium {
    /// Two pipes, one per direction.
    Pipes,
    /// One AF_UNIX stream socket pair.
    UnixStream,
    /// Two named FIFOs made in the scratch directory (round trips only).
    Fifos,
}

impl Medium {
    fn open(self, ctx: &Ctx) -> Result<Channel> {
        match self {
            Medium::Pipes => Channel::pipes(),
            Medium::UnixStream => Channel::unix_stream(),
            Medium::Fifos => Channel::fifos(ctx),
        }
    }
}

/// One round-trip experiment over any [`Medium`]: ipc.pipe, ipc.unix and
/// ipc.fifo are this with their own Spec. An experiment whose Spec has no
/// `test` parameter measures round trips only.
pub(crate) struct RoundTrip {
    pub(crate) spec: &'static Spec,
    pub(crate) medium: Medium,
}

/// A point's parameters, read by name once, here: `test` and `chunk` when
/// the Spec declares them (ipc.fifo measures round trips only).
struct Params {
    latency: bool,
    bandwidth: bool,
    chunk: usize,
    cpu: String,
}

impl Params {
    fn parse(spec: &Spec, p: &Point) -> Result<Params> {
        let test = match spec.param("test") {
            Some(_) => p.text("test")?,
            None => "latency",
        };
        Ok(Params {
            latency: test != "bandwidth",
            bandwidth: test != "latency",
            chunk: match spec.param("chunk") {
                Some(_) => p.usize("chunk")?,
                None => 1,
            },
            cpu: p.text("cpu")?.to_string(),
        })
    }
}

impl Experiment for RoundTrip {
    fn spec(&self) -> &'static Spec {
        self.spec
    }
    fn validate(&self, p: &Point) -> Result<()> {
        placement(&Params::parse(self.spec, p)?.cpu).map(|_| ())
    }
    fn prepare(&self, ctx: &Ctx, p: &Point) -> Result<Box<dyn PointRun>> {
        let Params {
            latency,
            bandwidth,
            chunk,
            cpu,
        } = Params::parse(self.spec, p)?;
        let bw = if bandwidth {
            Some(self.medium.open(ctx)?)
        } else {
            None
        };
        let lat = self.medium.open(ctx)?;
        let pp = PingPong::start(ctx, self.spec.name, lat, bw, chunk, &cpu)?;
        Ok(Box::new(PingPongRun {
            pp,
            latency,
            bandwidth,
        }))
    }
}
