//! Tests of the sample reader: stacks past the cap, late mappings, and
//! samples read before their exec record.

use super::*;
use crate::diagnose::profile::live::stacks::add_stack;

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

#[test]
fn samples_read_before_their_exec_record_go_to_the_program_not_tunelab() {
    let mut r = Reader {
        out: Collected::default(),
        spaces: HashMap::new(),
        comm_of_pid: HashMap::new(),
        comm_index: HashMap::new(),
        off: None,
        holders: Holders::default(),
        me: 1,
        own_exe: Some("/usr/bin/tunelab".into()),
        execed: HashSet::new(),
        pending: Vec::new(),
    };
    // Both linked at 0x400000: the fork's mappings (tunelab's) are known
    // first; the program's exec record sits in another CPU's buffer.
    let tunelab = r.out.files.intern("/usr/bin/tunelab");
    for pid in [9, 10] {
        let sp = r.spaces.entry(pid).or_default();
        sp.proc_read = true;
        sp.add(Mapping {
            start: 0x40_0000,
            end: 0x90_0000,
            pgoff: 0,
            file: tunelab,
        });
    }
    let raw = vec![(0x40_1000, false)];
    let frames = r.frames(9, &raw);
    assert!(r.before_exec(9, &frames));
    for pid in [9, 10] {
        r.pending.push(Pending {
            pid,
            raw: raw.clone(),
            return_address: None,
            leaf_kernel: false,
        });
    }
    // Then the exec of pid 9 is read: its new image at the same address.
    r.execed.insert(9);
    let spin = r.out.files.intern("/wl/spin");
    let sp = r.spaces.get_mut(&9).unwrap();
    sp.clear();
    sp.add(Mapping {
        start: 0x40_0000,
        end: 0x48_0000,
        pgoff: 0,
        file: spin,
    });
    let c = r.comm_id("spin");
    r.comm_of_pid.insert(9, c);
    r.settle_pending();
    // pid 10 never exec'd: tunelab's own fork.
    assert_eq!(r.out.own_samples, 1);
    assert_eq!(r.out.stacks.len(), 1, "{:?}", r.out.stacks);
    assert_eq!(
        r.out.stacks[&(c, vec![FrameKey::User(spin, 0x1000)])],
        (1, 0)
    );
    assert!(r.pending.is_empty());
}
