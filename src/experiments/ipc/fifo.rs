//! `ipc.fifo`: named-FIFO round-trip latency (lmbench `lat_fifo`): two FIFOs
//! created with mkfifo in the scratch directory, 1-byte ping-pong.

use crate::engine::{MetricSpec, Needs, RunDefaults, Spec};

use crate::experiments::common::pingpong::{CPU_PARAM, RT_MIGRATIONS, RT_SAME_CPU};

pub(crate) static SPEC: Spec = Spec {
    name: "ipc.fifo",
    summary: "named-FIFO round-trip latency between two processes (lmbench lat_fifo)",
    method: "Creates two FIFOs with mkfifo in the scratch directory and opens them (O_RDWR) before \
         forking one child. One round trip = tunelab write()s 1 byte into the first FIFO, the \
         child read()s it and writes it into the second, tunelab read()s it. A trial times a \
         batch of round trips lasting at least the trial time (200 ms by default) and reports seconds per round trip; \
         every round trip also goes into an HDR histogram. cpu=same (default)|split|any and the \
         placement metrics as in ipc.pipe.",
    params: &[CPU_PARAM],
    metrics: &[
        MetricSpec::lower(
            "round_trip",
            "s",
            "time of one 1-byte round trip over two named FIFOs",
        ),
        RT_SAME_CPU,
        RT_MIGRATIONS,
    ],
    needs: Needs::SCRATCH,
    defaults: RunDefaults::new(1, 5, 20, 20.0),
    hidden: false,
};
