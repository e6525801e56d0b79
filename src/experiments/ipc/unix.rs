//! `ipc.unix`: AF_UNIX stream socket round-trip latency (1-byte ping-pong,
//! lmbench `lat_unix`) and bandwidth (lmbench `bw_unix`).

use crate::engine::Spec;
use crate::experiments::common::pingpong::{pair_metrics, PAIR_SPEC};

pub(crate) static SPEC: Spec = Spec {
    name: "ipc.unix",
    summary: "AF_UNIX stream socket round-trip latency and bandwidth (lmbench lat_unix/bw_unix)",
    method: "Like ipc.pipe, over a socketpair(AF_UNIX, SOCK_STREAM) per child instead of two pipes. \
         Latency: tunelab write()s 1 byte, the forked child read()s it and writes it back; a \
         trial times batches of round trips until the trial time (200 ms by default) has passed and reports seconds per \
         round trip (every round trip also goes into an HDR histogram). Bandwidth, like lmbench \
         bw_unix: a second child write()s `chunk`-byte pieces of random data continuously, \
         tunelab read()s them for the trial time; bytes counted once, as received, in B/s. \
         cpu=same (default)|split|any and the placement metrics and notes as in ipc.pipe. An \
         AF_UNIX round trip costs about twice a pipe round trip on the same CPU (socket buffers \
         are allocated and freed per message). Placement dominates everything else: when the \
         two processes run on different CPUs every message is a cross-CPU wake-up, and on a VM \
         whose other vCPU is idle that means waking a halted vCPU through the hypervisor (on \
         the 2-vCPU development VM a plain C ping-pong pinned to two CPUs took 130-165 us per \
         round trip, pipes and sockets alike, against 5-20 us on one CPU); under load it can \
         reach milliseconds. cpu=any reports whatever the scheduler chose, which is why its \
         trials can be bimodal (the notes say so); compare cpu=same and cpu=split to separate \
         the two costs.",
    metrics: &pair_metrics(
        "time of one 1-byte round trip over an AF_UNIX stream socket",
        "bytes moved through the socket per second, counted once",
    ),
    ..PAIR_SPEC
};
