//! What the reader does with stacks: counts them under a cap, puts
//! scanned callers in place, and looks late-mapped addresses up again.

use std::collections::HashMap;

use super::super::collected::{Collected, FrameKey};
use super::super::maps::AddressSpace;

/// Put the scanned callers right after the leaf user frame.
pub(super) fn splice_scanned(frames: &mut Vec<FrameKey>, found: Vec<FrameKey>) {
    if found.is_empty() {
        return;
    }
    let at = frames
        .iter()
        .position(|f| !matches!(f, FrameKey::Kernel(_)))
        .map_or(frames.len(), |i| i + 1);
    frames.splice(at..at, found);
}

/// Count one sample. Memory stays bounded on a long system-wide run: past
/// `cap` distinct stacks, new ones keep only their leaf frame (the flat
/// profile stays exact, the call graph loses those callers).
pub(super) fn add_stack(
    out: &mut Collected,
    comm: u32,
    mut frames: Vec<FrameKey>,
    kernel: bool,
    cap: usize,
) {
    if out.stacks.len() >= cap
        && frames.len() > 1
        && !out.stacks.contains_key(&(comm, frames.clone()))
    {
        frames.truncate(1);
        out.truncated += 1;
    }
    let e = out.stacks.entry((comm, frames)).or_default();
    e.0 += 1;
    if kernel {
        e.1 += 1;
    }
}

/// Look unmapped user addresses up again in the final address spaces: a
/// process that moved to another CPU right after an mmap or exec has samples
/// in one ring buffer and the MMAP2 record in another, and the buffers are
/// drained one after the other.
pub(super) fn resolve_late(out: &mut Collected, spaces: &HashMap<u32, AddressSpace>) {
    let has_unmapped =
        |k: &(u32, Vec<FrameKey>)| k.1.iter().any(|f| matches!(f, FrameKey::Unmapped(..)));
    if !out.stacks.keys().any(has_unmapped) {
        return;
    }
    let remap = |frames: Vec<FrameKey>| -> Vec<FrameKey> {
        frames
            .into_iter()
            .map(|f| match f {
                FrameKey::Unmapped(pid, addr) => spaces
                    .get(&pid)
                    .and_then(|sp| sp.lookup(addr))
                    .map_or(f, |(file, off)| FrameKey::User(file, off)),
                other => other,
            })
            .collect()
    };
    let old = std::mem::take(&mut out.stacks);
    for ((comm, frames), (n, k)) in old {
        let e = out.stacks.entry((comm, remap(frames))).or_default();
        e.0 += n;
        e.1 += k;
    }
    let old = std::mem::take(&mut out.waits);
    for ((comm, frames), w) in old {
        out.waits.entry((comm, remap(frames))).or_default().merge(w);
    }
    let old = std::mem::take(&mut out.wait_tids);
    for ((comm, frames), tids) in old {
        let e = out.wait_tids.entry((comm, remap(frames))).or_default();
        for t in tids {
            if !e.contains(&t) {
                e.push(t);
            }
        }
    }
}
