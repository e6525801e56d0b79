//! Tests of `mem.latency`'s chains, probe sizes and memory region.

use super::*;

#[test]
fn levels_are_probed_inside_their_plateau() {
    assert_eq!(probe_size(0, 32 << 10), 16 << 10);
    let l2 = probe_size(32 << 10, 1 << 20);
    assert!(l2 > 32 << 10 && l2 < 1 << 20 && l2 == 185363, "{l2}");
    let l3 = probe_size(1 << 20, 32 << 20);
    assert!(l3 > 5 << 20 && l3 < 6 << 20, "{l3}");
}

#[test]
fn page_cycling_chain_changes_page_every_load_and_visits_every_line_once() {
    assert_eq!(bit_reversed(8), vec![0, 4, 2, 6, 1, 5, 3, 7]);
    let max = 16 * PAGE;
    let region = Region::new(max, false).unwrap();
    let (pin, cpu) = crate::experiments::mem::pin_here(false).unwrap();
    let mut run = LatencyRun {
        base: region.ptr,
        region,
        max,
        min: 1024,
        per_doubling: 1,
        stride: 64,
        curve: false,
        caches: vec![],
        levels: vec![],
        mem_loads: 0,
        stride_loads: 0,
        thp: false,
        pages: true,
        fitted: None,
        fit_note: None,
        _pin: pin,
        cpu,
    };
    run.build_chain(max / LINE, RANDOM_WORD, 5);
    let base = run.base as usize;
    let mut seen = std::collections::HashSet::new();
    let mut p = base;
    for _ in 0..max / LINE {
        // SAFETY: the chain was just built inside the region.
        let next = unsafe { *(p as *const usize) };
        assert_ne!(
            (next - base) / PAGE,
            (p - base) / PAGE,
            "same page twice in a row"
        );
        assert_eq!((next - base) % LINE, 0);
        assert!(seen.insert(next), "line visited twice");
        p = next;
    }
    // One cycle through every line, back where it started.
    assert_eq!(p, base);
    assert_eq!(seen.len(), max / LINE);
}
