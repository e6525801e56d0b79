//! `ipc.pipe`: pipe round-trip latency (1-byte ping-pong between two
//! processes over two pipes, as `perf bench sched pipe` and lmbench
//! `lat_pipe`) and pipe bandwidth (64 KiB writes from a child, lmbench
//! `bw_pipe`).

use crate::engine::Spec;
use crate::experiments::common::pingpong::{pair_metrics, PAIR_SPEC};

pub(crate) static SPEC: Spec = Spec {
    name: "ipc.pipe",
    summary: "pipe round-trip latency and bandwidth between two processes (perf bench sched pipe, lmbench lat_pipe/bw_pipe)",
    method: "Latency: tunelab forks a child once per point; the two processes are connected by two \
         pipes. One round trip = tunelab write()s 1 byte into the first pipe, the child read()s \
         it and write()s it back into the second, tunelab read()s it (blocking I/O, so every \
         round trip includes two wake-ups and, on one CPU, two context switches). This is one \
         'op' of `perf bench sched pipe` (which sends a 4-byte int; the size makes no \
         measurable difference). A trial times batches of 256 round trips until the trial time (200 ms by \
         default) has passed (monotonic clock) and reports seconds per round trip; every round trip is also \
         recorded in an HDR histogram. Bandwidth, like lmbench bw_pipe: a second child write()s \
         `chunk`-byte pieces (64 KiB) of random data into a pipe continuously; tunelab read()s \
         them with `chunk`-byte reads for the trial time; bytes counted once, as received, in \
         B/s. (An earlier version asked the writer for ~1 MiB batches and let the pipe drain \
         between them: that handshake cost up to a third of the figure when the two processes \
         ran on different CPUs and no reference tool has it, so it was removed.) Placement: \
         cpu=same (default) pins both processes to the first CPU tunelab may use: \
         reproducible, possible on a one-CPU board, and the pure cost of the pipe plus two \
         context switches; cpu=split pins them to two different CPUs: cross-CPU wake-ups, much \
         slower on a VM with an idle vCPU; cpu=any lets the scheduler place them, as perf bench \
         does (bench/micro_vs_reference.sh compares that with perf). Every trial records where \
         the two sides ran (tunelab: sched_getcpu; the child reports its own sched_getcpu into a \
         shared page every 16 round trips or writes; sampled every 10 ms, untimed: reading the \
         child's /proc/PID/stat instead cost ~9% of cross-CPU bandwidth) as rt_same_cpu / \
         bw_same_cpu (share of samples on one CPU) and rt_migrations / bw_migrations (se.nr_migrations of both, from /proc/PID/sched); the \
         notes list the CPUs and flag a run whose trials split between the two placements \
         (bimodal). test=both measures the round trips first, then the stream, in each trial; \
         the writer is blocked on its full pipe during the round trips, so they match \
         test=latency.",
    metrics: &pair_metrics(
        "time of one 1-byte round trip between two processes over two pipes",
        "bytes moved through one pipe per second, counted once",
    ),
    ..PAIR_SPEC
};
