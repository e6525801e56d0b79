//! Tests of the spike explanations: switch histories, IRQ tables and
//! the causes they name.

use super::irq::{parse_irq_table, parse_steal};
use super::perf::Switch;
use super::*;

fn sw(t: u64, prev: u32, next: u32) -> Switch {
    Switch {
        t,
        prev,
        next,
        next_pid: next,
    }
}

#[test]
fn occupancy_sums_who_held_the_cpu() {
    // idle until 100, spinner 7 from 100 to 5100, then us (9).
    let s = [sw(10, 3, 0), sw(100, 0, 7), sw(5100, 7, 9)];
    let occ = occupancy(&s, 50, 5100).unwrap();
    assert_eq!(occ, vec![(7, 7, 5000), (0, 0, 50)]);
    // The history must reach back before the window.
    assert_eq!(occupancy(&s, 5, 100), None);
}

#[test]
fn parses_proc_interrupts_and_softirqs() {
    let t = "           CPU0       CPU1\n  0:         22          0   IO-APIC   2-edge      timer\n\
                 LOC:     123456     654321   Local timer interrupts\n 24:  5  7  PCI-MSI 1-edge virtio0-input.0\n";
    let rows = parse_irq_table(t);
    assert_eq!(rows.len(), 3);
    assert_eq!(rows[0].counts, vec![22, 0]);
    assert_eq!(rows[0].device, "IO-APIC 2-edge timer");
    assert_eq!(rows[2].name, "24");
    let mut newer = rows.clone();
    newer[2].counts[1] = 10;
    newer[1].counts[1] += 100; // LOC is our own timer: never a culprit
    let g = grown(&rows, &newer, 1);
    assert_eq!(g.len(), 1);
    assert_eq!((g[0].0.name.as_str(), g[0].1), ("24", 3));
    let s = parse_irq_table("  CPU0 CPU1\n  HI: 1 2\n  NET_RX: 5 6\n");
    assert_eq!(s[1].name, "NET_RX");
    assert_eq!(s[1].counts, vec![5, 6]);
}

#[test]
fn steal_per_cpu() {
    let st =
        "cpu  1 2 3 4 5 6 7 80 0 0\ncpu0 1 2 3 4 5 6 7 30 0 0\ncpu1 1 2 3 4 5 6 7 50 0 0\nintr 5\n";
    assert_eq!(parse_steal(st), vec![30, 50]);
}

#[test]
fn spike_board_hands_over_without_allocating() {
    let b = SpikeBoard::default();
    b.push(1, 5);
    assert_eq!((b.len(), b.get(0)), (1, (1, 5)));
    for _ in 0..SPIKES_PER_TRIAL {
        b.push(2, 3);
    }
    assert_eq!(b.len(), SPIKES_PER_TRIAL);
    assert_eq!(b.dropped.load(Ordering::Relaxed), 1);
    b.reset();
    assert_eq!(b.len(), 0);
}
