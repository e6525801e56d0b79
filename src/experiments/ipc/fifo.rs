//! `ipc.fifo`: named-FIFO round-trip latency (lmbench `lat_fifo`): two FIFOs
//! created with mkfifo in the scratch directory, 1-byte ping-pong.

use std::os::fd::{AsRawFd, OwnedFd};

use crate::engine::{Ctx, Experiment, MetricSpec, Needs, ParamSpec, Point, PointRun, RunDefaults};
use crate::{Error, Result};

use super::pingpong::{cpu_param, placement, placement_metrics, Channel, PingPong, PingPongRun};

pub struct Fifo;

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

impl Experiment for Fifo {
    fn name(&self) -> &'static str {
        "ipc.fifo"
    }
    fn summary(&self) -> &'static str {
        "named-FIFO round-trip latency between two processes (lmbench lat_fifo)"
    }
    fn method(&self) -> &'static str {
        "Creates two FIFOs with mkfifo in the scratch directory and opens them (O_RDWR) before \
         forking one child. One round trip = tunelab write()s 1 byte into the first FIFO, the \
         child read()s it and writes it into the second, tunelab read()s it. A trial times a \
         batch of round trips lasting at least the trial time (200 ms by default) and reports seconds per round trip; \
         every round trip also goes into an HDR histogram. cpu=same (default)|split|any and the \
         placement metrics as in ipc.pipe."
    }
    fn params(&self) -> Vec<ParamSpec> {
        vec![cpu_param()]
    }
    fn metrics(&self) -> Vec<MetricSpec> {
        let mut v = vec![MetricSpec::lower(
            "round_trip",
            "s",
            "time of one 1-byte round trip over two named FIFOs",
        )];
        v.extend(placement_metrics(false));
        v
    }
    fn needs(&self) -> Needs {
        Needs::SCRATCH
    }
    fn defaults(&self) -> RunDefaults {
        RunDefaults {
            warmup: 1,
            min_trials: 5,
            max_trials: 20,
            budget: 20.0,
        }
    }
    fn validate(&self, p: &Point) -> Result<()> {
        placement(p.text("cpu")?).map(|_| ())
    }
    fn prepare(&self, ctx: &Ctx, p: &Point) -> Result<Box<dyn PointRun>> {
        let a = make_fifo(ctx, "ping.fifo")?;
        let b = make_fifo(ctx, "pong.fifo")?;
        let ch = Channel {
            to_child: a.as_raw_fd(),
            child_in: a.as_raw_fd(),
            child_out: b.as_raw_fd(),
            from_child: b.as_raw_fd(),
            keep: vec![a, b],
            child_only: vec![],
        };
        let pp = PingPong::start(ctx, "ipc.fifo", ch, None, 1, p.text("cpu")?)?;
        Ok(Box::new(PingPongRun {
            pp,
            latency: true,
            bandwidth: false,
        }))
    }
}
