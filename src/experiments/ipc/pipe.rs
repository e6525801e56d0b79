//! `ipc.pipe`: pipe round-trip latency (1-byte ping-pong between two
//! processes over two pipes, as `perf bench sched pipe` and lmbench
//! `lat_pipe`) and pipe bandwidth (64 KiB writes from a child, lmbench
//! `bw_pipe`).

use crate::engine::{Ctx, Experiment, MetricSpec, ParamSpec, Point, PointRun, RunDefaults};
use crate::Result;

use super::pingpong::{pair_params, placement, prepare_pair, Channel, PAIR_DEFAULTS};

pub struct Pipe;

impl Experiment for Pipe {
    fn name(&self) -> &'static str {
        "ipc.pipe"
    }
    fn summary(&self) -> &'static str {
        "pipe round-trip latency and bandwidth between two processes (perf bench sched pipe, lmbench lat_pipe/bw_pipe)"
    }
    fn method(&self) -> &'static str {
        "Latency: tunelab forks a child once per point; the two processes are connected by two \
         pipes. One round trip = tunelab write()s 1 byte into the first pipe, the child read()s \
         it and write()s it back into the second, tunelab read()s it (blocking I/O, so every \
         round trip includes two wake-ups and, on one CPU, two context switches). This is one \
         'op' of `perf bench sched pipe` (which sends a 4-byte int; the size makes no \
         measurable difference). A trial times a batch of round trips lasting at least 200 ms \
         (monotonic clock) and reports seconds per round trip; every round trip is also \
         recorded in an HDR histogram. Bandwidth: a second child write()s `chunk`-byte pieces \
         of random data into a pipe as fast as it can; tunelab read()s them with `chunk`-byte \
         reads; bytes are counted once, as received, over a batch of at least 200 ms, in B/s. \
         cpu=any lets the scheduler place both processes (as perf bench does); same pins both \
         to one CPU; split pins them to two different CPUs. perf bench sched pipe times a \
         whole run (forking and reaping its two workers included, well under 1% of a run of \
         >= 30000 loops) and prints the mean; tunelab's trial is likewise a mean over a batch, \
         so the two agree when compared over runs of similar length on the same machine \
         (bench/micro_vs_reference.sh). With cpu=any the result depends on where the scheduler \
         puts the two processes: same CPU ~ two context switches per round trip, different \
         CPUs = two cross-CPU wake-ups, much slower on a VM with an idle vCPU."
    }
    fn params(&self) -> Vec<ParamSpec> {
        pair_params()
    }
    fn metrics(&self) -> Vec<MetricSpec> {
        vec![
            MetricSpec::lower(
                "round_trip",
                "s",
                "time of one 1-byte round trip between two processes over two pipes",
            ),
            MetricSpec::higher(
                "bandwidth",
                "B/s",
                "bytes moved through one pipe per second, counted once",
            ),
        ]
    }
    fn defaults(&self) -> RunDefaults {
        PAIR_DEFAULTS
    }
    fn validate(&self, p: &Point) -> Result<()> {
        placement(p.text("cpu")?).map(|_| ())
    }
    fn prepare(&self, ctx: &Ctx, p: &Point) -> Result<Box<dyn PointRun>> {
        prepare_pair(ctx, p, "ipc.pipe", Channel::pipes)
    }
}
