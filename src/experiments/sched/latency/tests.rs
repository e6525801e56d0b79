//! Tests of `sched.latency`'s CPU sets and cause notes.

use super::threads::parse_cpus;
use super::*;
use crate::experiments::common::child::usable_cpus;
use crate::experiments::common::latency_cause::{Cause, Culprit};

#[test]
fn cpu_sets_parse_against_the_usable_cpus() {
    let usable = usable_cpus();
    assert_eq!(parse_cpus("all").unwrap(), usable);
    let first = usable[0];
    assert_eq!(parse_cpus(&first.to_string()).unwrap(), vec![first]);
    assert!(parse_cpus("x").unwrap_err().to_string().contains("'x'"));
    assert!(parse_cpus("3-1").is_err());
    assert!(parse_cpus("100000")
        .unwrap_err()
        .to_string()
        .contains("not online"));
}

#[test]
fn cause_notes_round_trip() {
    let c = |cpu, lat, culprit: Culprit| Cause {
        cpu,
        due_ns: 1,
        latency_ns: lat,
        culprit,
        share: 0.97,
        irq_context: "2x IRQ 24 (virtio0)".into(),
    };
    let spinner = Culprit::Thread {
        comm: "spinner".into(),
        pid: 42,
        tid: 43,
        sched: "FIFO 99".into(),
    };
    let notes = cause_notes(
        &[
            c(0, 5_000_000, spinner.clone()),
            c(0, 4_000_000, spinner),
            c(1, 900_000, Culprit::Idle),
        ],
        "perf-switch",
    );
    assert_eq!(notes.len(), 2);
    let n = parse_cause_note(&notes[0]).unwrap();
    assert_eq!((n.cpu, n.spikes, n.max.as_str()), (0, 2, "5.00 ms"));
    assert_eq!(n.culprit, "thread 'spinner' pid 42 tid 43 (FIFO 99)");
    assert_eq!(n.method, "perf-switch");
    assert!(n.knob.starts_with("thread priority"), "{}", n.knob);
    let idle = parse_cause_note(&notes[1]).unwrap();
    assert!(idle.knob.contains("/dev/cpu_dma_latency"));
    assert_eq!(parse_cause_note("something else"), None);
}

#[test]
fn untraced_spikes_get_one_note_that_advise_does_not_read_as_a_cause() {
    let c = |cpu, lat, culprit| Cause {
        cpu,
        due_ns: 1,
        latency_ns: lat,
        culprit,
        share: 0.0,
        irq_context: String::new(),
    };
    let notes = cause_notes(
        &[
            c(1, 2_000_000, Culprit::Untraced),
            c(0, 900_000, Culprit::Idle),
            c(0, 3_000_000, Culprit::Untraced),
            c(1, 1_000_000, Culprit::Untraced),
        ],
        "perf-switch",
    );
    assert_eq!(notes.len(), 2, "{notes:#?}");
    assert_eq!(
        parse_cause_note(&notes[0]).unwrap().culprit,
        "idle CPU (C-state exit)"
    );
    assert_eq!(parse_cause_note(&notes[1]), None);
    assert!(
        notes[1].starts_with(
            "3 spike(s) (max 3.00 ms, CPU 0 1) came while the switch tracer was disarmed"
        ),
        "{}",
        notes[1]
    );
}
