//! Tests of the sample reader: stacks past the cap.

use super::*;

#[test]
fn stacks_past_the_cap_keep_their_leaf_and_every_sample_counts() {
    let mut out = Collected::default();
    let st = |leaf: u64| vec![FrameKey::Kernel(leaf), FrameKey::User(0, 0x10)];
    add_stack(&mut out, 0, st(1), true, 2);
    add_stack(&mut out, 0, st(2), false, 2);
    // At the cap: a known stack still counts in full…
    add_stack(&mut out, 0, st(1), true, 2);
    // …a new one is cut to its leaf.
    add_stack(&mut out, 0, st(3), false, 2);
    add_stack(&mut out, 0, st(3), false, 2);
    assert_eq!(out.truncated, 2);
    assert_eq!(out.stacks[&(0, st(1))], (2, 2));
    assert_eq!(out.stacks[&(0, vec![FrameKey::Kernel(3)])], (2, 0));
    assert_eq!(out.stacks.values().map(|v| v.0).sum::<u64>(), 5);
}

#[test]
fn addresses_unmapped_when_read_resolve_from_later_mmap_records() {
    let mut out = Collected::default();
    let libc = out.files.intern("/usr/lib/libc.so.6");
    let early = vec![FrameKey::Unmapped(7, 0x7f00_0000_12ad), FrameKey::Kernel(1)];
    let known = vec![FrameKey::User(libc, 0xf82ad), FrameKey::Kernel(1)];
    out.stacks.insert((0, early), (3, 0));
    out.stacks.insert((0, known.clone()), (5, 0));
    out.stacks
        .insert((0, vec![FrameKey::Unmapped(8, 0x1234)]), (1, 0));
    let mut spaces: HashMap<u32, AddressSpace> = HashMap::new();
    spaces.entry(7).or_default().add(Mapping {
        start: 0x7f00_0000_0000,
        end: 0x7f00_0010_0000,
        pgoff: 0xf7000,
        file: libc,
    });
    resolve_late(&mut out, &spaces);
    // Merged with the stack that resolved at once; pid 8 has no mapping.
    assert_eq!(out.stacks[&(0, known)], (8, 0));
    assert_eq!(
        out.stacks[&(0, vec![FrameKey::Unmapped(8, 0x1234)])],
        (1, 0)
    );
    assert_eq!(out.stacks.len(), 2);
}
