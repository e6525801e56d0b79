//! The measurement engine shared by `ipc.pipe`, `ipc.unix` and `ipc.fifo`:
//! a forked echo child for round-trip latency and a forked writer child for
//! stream bandwidth, over whatever pair of file descriptors the experiment
//! provides.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::time::Instant;

use super::child::{self, Children, CpuSet, PinGuard};
use crate::engine::{Ctx, ParamKind, ParamSpec, PointExtras, PointRun, TrialValues};
use crate::experiments::util::MIN_TRIAL;
use crate::safety::AlignedBuf;
use crate::stats::LatencyRecorder;
use crate::{Error, Result};

/// One bidirectional channel between tunelab and a child.
pub(crate) struct Channel {
    /// tunelab writes here, the child reads `child_in`.
    pub to_child: RawFd,
    pub child_in: RawFd,
    /// The child writes `child_out`, tunelab reads here.
    pub child_out: RawFd,
    pub from_child: RawFd,
    /// Descriptors tunelab keeps (held only to keep them open).
    #[allow(dead_code)]
    pub keep: Vec<OwnedFd>,
    /// Descriptors only the child needs: closed in tunelab after the fork.
    pub child_only: Vec<OwnedFd>,
}

impl Channel {
    /// Two pipes: parent -> child and child -> parent.
    pub fn pipes() -> Result<Self> {
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
    pub fn unix_stream() -> Result<Self> {
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

pub(crate) fn pipe() -> Result<(OwnedFd, OwnedFd)> {
    rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
        .map_err(|e| Error::environment(format!("pipe: {e} (too many open files?)")))
}

/// Parameters every ping-pong experiment shares.
pub(crate) fn cpu_param() -> ParamSpec {
    ParamSpec::new(
        "cpu",
        ParamKind::Choice(&["any", "same", "split"]),
        "any",
        "placement: any (scheduler decides, like perf bench), same (both on one CPU: \
         pure context switches), split (tunelab and the child on different CPUs)",
    )
}

/// CPUs for tunelab and the child under placement `mode`.
pub(crate) fn placement(mode: &str) -> Result<(Option<usize>, Option<usize>)> {
    let cpus = child::usable_cpus();
    Ok(match mode {
        "same" => (Some(cpus[0]), Some(cpus[0])),
        "split" => {
            if cpus.len() < 2 {
                return Err(Error::usage(
                    "cpu=split needs two usable CPUs but this process may use only one; \
                     use cpu=same or cpu=any",
                ));
            }
            (Some(cpus[0]), Some(cpus[1]))
        }
        _ => (None, None),
    })
}

pub(crate) struct PingPong {
    kids: Children,
    lat: Channel,
    bw: Option<Channel>,
    buf: AlignedBuf,
    chunk: usize,
    round_trips: u64,
    chunks: u64,
    hist: LatencyRecorder,
    _pin: PinGuard,
    what: &'static str,
}

impl PingPong {
    /// Start the echo child on `lat` and, with `bw`, a writer child sending
    /// `chunk`-byte writes on it; calibrate batch sizes.
    pub fn start(
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
        kids.spawn(move || {
            if let Some(s) = &child_set {
                child::pin_self(s);
            }
            let mut b = [0u8; 1];
            loop {
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
                let (cin, cout) = (ch.child_in, ch.child_out);
                kids.spawn(move || {
                    if let Some(s) = &child_set {
                        child::pin_self(s);
                    }
                    let data = &src.as_slice()[..chunk];
                    let mut cmd = [0u8; 8];
                    loop {
                        if !child::read_exact(cin, &mut cmd) {
                            return 0;
                        }
                        for _ in 0..u64::from_ne_bytes(cmd) {
                            if !child::write_all(cout, data) {
                                return 1;
                            }
                        }
                    }
                })?;
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
            chunks: 0,
            hist: LatencyRecorder::new(),
            _pin: pin,
            what,
        };
        // Wake both children up and fault everything in.
        pp.ping(ctx, 200, false)?;
        if pp.bw.is_some() {
            pp.stream(ctx, 4)?;
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

    /// Ask the writer for `n` chunks and read them; seconds taken.
    fn stream(&mut self, ctx: &Ctx, n: u64) -> Result<f64> {
        let PingPong {
            bw,
            buf,
            chunk,
            kids,
            what,
            ..
        } = self;
        let Some(bw) = bw else {
            return Ok(0.0);
        };
        let want = n * *chunk as u64;
        let buf = &mut buf.as_mut_slice()[..*chunk];
        let start = Instant::now();
        if !child::write_all(bw.to_child, &n.to_ne_bytes()) {
            return Err(broken(what));
        }
        let mut got = 0u64;
        let mut calls = 0u32;
        while got < want {
            let k = child::read_some(bw.from_child, buf);
            if k == 0 {
                return Err(broken(what));
            }
            got += k as u64;
            calls = calls.wrapping_add(1);
            if calls % 4096 == 0 {
                if let Err(e) = ctx.check_cancel() {
                    // The writer would stay blocked on a full pipe: stop it now.
                    kids.kill_all();
                    return Err(e);
                }
            }
        }
        std::hint::black_box(&buf);
        Ok(start.elapsed().as_secs_f64())
    }

    fn broken(&self) -> Error {
        broken(self.what)
    }

    /// Round trips in blocks of 256 until at least `MIN_TRIAL` has passed:
    /// (count, seconds).
    fn ping_for_min_trial(&mut self, ctx: &Ctx) -> Result<(u64, f64)> {
        let start = Instant::now();
        let mut n = 0u64;
        loop {
            self.ping(ctx, 256, true)?;
            n += 256;
            let t = start.elapsed();
            if t >= MIN_TRIAL {
                return Ok((n, t.as_secs_f64()));
            }
        }
    }

    /// Requests of about 1 MiB until at least `MIN_TRIAL` has passed:
    /// (chunks, seconds).
    fn stream_for_min_trial(&mut self, ctx: &Ctx) -> Result<(u64, f64)> {
        let per = ((1u64 << 20) / self.chunk as u64).max(1);
        let start = Instant::now();
        let mut n = 0u64;
        loop {
            self.stream(ctx, per)?;
            n += per;
            let t = start.elapsed();
            if t >= MIN_TRIAL {
                return Ok((n, t.as_secs_f64()));
            }
        }
    }

    pub fn trial(&mut self, ctx: &Ctx, latency: bool, bandwidth: bool) -> Result<TrialValues> {
        let mut v = TrialValues::new();
        if latency {
            let (n, t) = self.ping_for_min_trial(ctx)?;
            self.round_trips = n;
            v.set("round_trip", t / n as f64);
        }
        if bandwidth && self.bw.is_some() {
            let (n, t) = self.stream_for_min_trial(ctx)?;
            self.chunks = n;
            v.set("bandwidth", (n * self.chunk as u64) as f64 / t);
        }
        Ok(v)
    }

    pub fn extras(&self) -> PointExtras {
        let mut notes = vec![format!(
            "batches of 256 round trips until a trial lasts 200 ms ({} in the last trial; 1 byte each way, blocking read/write, \
             two processes); histogram = every round trip of every trial",
            self.round_trips
        )];
        if self.bw.is_some() {
            notes.push(format!(
                "requests of ~1 MiB until a trial lasts 200 ms ({} writes of {} B in the last trial), bytes counted once (as received)",
                self.chunks, self.chunk
            ));
        }
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
    pub pp: PingPong,
    pub latency: bool,
    pub bandwidth: bool,
}

impl PointRun for PingPongRun {
    fn trial(&mut self, ctx: &Ctx) -> Result<TrialValues> {
        self.pp.trial(ctx, self.latency, self.bandwidth)
    }
    fn finish(&mut self, _ctx: &Ctx) -> Result<PointExtras> {
        Ok(self.pp.extras())
    }
}

/// Parameters shared by the two-process ping-pong experiments (ipc.pipe, ipc.unix).
pub(crate) fn pair_params() -> Vec<ParamSpec> {
    vec![
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
        cpu_param(),
    ]
}

pub(crate) const PAIR_DEFAULTS: crate::engine::RunDefaults = crate::engine::RunDefaults {
    warmup: 1,
    min_trials: 5,
    max_trials: 20,
    budget: 30.0,
};

/// Fork the latency child (and the bandwidth child when asked) on channels
/// made by `make`: pipes or an AF_UNIX socket pair.
pub(crate) fn prepare_pair(
    ctx: &Ctx,
    p: &crate::engine::Point,
    name: &'static str,
    make: fn() -> Result<Channel>,
) -> Result<Box<dyn PointRun>> {
    let test = p.text("test")?;
    let (latency, bandwidth) = (test != "bandwidth", test != "latency");
    let bw = if bandwidth { Some(make()?) } else { None };
    let pp = PingPong::start(ctx, name, make()?, bw, p.usize("chunk")?, p.text("cpu")?)?;
    Ok(Box::new(PingPongRun {
        pp,
        latency,
        bandwidth,
    }))
}
