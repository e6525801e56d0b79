//! Whether a key issue fits the room the machine has when it is about to
//! start: the experiments size their points to the room first (fewer and
//! smaller files, fewer workers); a point that still needs more memory or
//! space than there is — or could not be sized at all — makes the issue
//! skipped with its reason, never started into the out-of-memory killer.

use crate::engine::{Footprint, Room};
use crate::units::format_size;

use super::profile::KeyIssue;

/// What one key issue needs at its largest point, once sized to the room.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Need {
    /// Peak data memory of one point; on a RAM-backed target its files too.
    pub(crate) memory: u64,
    /// Bytes of files one point keeps on the target at its peak.
    pub(crate) stored: u64,
    /// A point whose footprint collapsed to nothing in this room while it
    /// needs something in an unbounded one: it could not be sized down.
    pub(crate) cannot_size: bool,
}

/// The largest need over the issue's points in `room`.
pub(crate) fn need(issue: &KeyIssue, room: &Room) -> Need {
    let exp = issue.experiment.as_ref();
    let open = Room {
        memory: None,
        disk_free: None,
        ..room.clone()
    };
    let mut out = Need::default();
    for p in &issue.points {
        let f = exp.footprint(p, room);
        out = merge(out, point_need(&f, room.ram.is_some()));
        out.cannot_size |= is_empty(&f) && !is_empty(&exp.footprint(p, &open));
    }
    out
}

fn is_empty(f: &Footprint) -> bool {
    f.peak_memory == 0 && f.stored == 0 && f.setup_written == 0 && f.trial_written == 0
}

/// One point's need: on a RAM-backed target the files it keeps are memory.
pub(crate) fn point_need(f: &Footprint, ram: bool) -> Need {
    Need {
        memory: if ram {
            f.peak_memory.saturating_add(f.stored)
        } else {
            f.peak_memory
        },
        stored: f.stored,
        cannot_size: false,
    }
}

fn merge(a: Need, b: Need) -> Need {
    Need {
        memory: a.memory.max(b.memory),
        stored: a.stored.max(b.stored),
        cannot_size: a.cannot_size || b.cannot_size,
    }
}

/// How far a point may pass the budget and still start: experiments fit
/// their main data to the budget and keep small buffers beside it (a
/// 64 KiB read chunk, a 1 MiB record), and the budget itself leaves a
/// quarter of the memory available and tunelab's own reserve. Without it the
/// 64 MiB board skipped "Cached file reads" for 6.3 MiB against 6.3 MiB.
pub(crate) const SLACK: u64 = 1 << 20;

/// Why an issue needing `need` cannot start in `room` (None: it fits).
pub(crate) fn skip_reason(need: &Need, room: &Room) -> Option<String> {
    if need.cannot_size {
        return Some(format!(
            "skipped: it cannot be sized down to the room there is (memory budget {}, {} free \
             on the target; {}) — free memory or space, or give a larger --target",
            room.memory.map_or("unknown".into(), format_size),
            room.disk_free.map_or("unknown".into(), format_size),
            room.memory_why
        ));
    }
    if let Some(budget) = room
        .memory
        .filter(|b| need.memory > b.saturating_add(SLACK))
    {
        return Some(format!(
            "skipped: it needs {} of memory at its peak{} but the budget is {} ({}); started, \
             it would meet the out-of-memory killer — free memory or use a disk-backed --target",
            format_size(need.memory),
            match &room.ram {
                Some(r) => format!(" (its files on the {r} target count as memory)"),
                None => String::new(),
            },
            format_size(budget),
            room.memory_why
        ));
    }
    if let Some(free) = room.disk_free.filter(|f| need.stored > *f) {
        return Some(format!(
            "skipped: it keeps {} of files on the target but only {} is free — free space \
             or give a larger --target",
            format_size(need.stored),
            format_size(free)
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn room(memory: u64, disk: u64, ram: bool) -> Room {
        Room {
            ram: ram.then(|| "tmpfs".to_string()),
            ..Room::fixture(memory, Some(disk))
        }
    }

    #[test]
    fn a_need_within_the_room_runs() {
        let n = Need {
            memory: 4 << 20,
            stored: 2 << 20,
            cannot_size: false,
        };
        assert_eq!(skip_reason(&n, &room(8 << 20, 16 << 20, false)), None);
        assert_eq!(skip_reason(&n, &Room::default()), None, "unknown room");
        // A buffer beside data fitted to the budget is not a reason.
        let n = Need {
            memory: (8 << 20) + (64 << 10),
            ..n
        };
        assert_eq!(skip_reason(&n, &room(8 << 20, 16 << 20, false)), None);
    }

    #[test]
    fn too_much_memory_or_space_is_skipped_with_the_figures() {
        let n = Need {
            memory: 12 << 20,
            stored: 1 << 20,
            cannot_size: false,
        };
        let why = skip_reason(&n, &room(3 << 20, 100 << 20, true)).unwrap();
        assert!(why.contains("needs 12 MiB of memory"), "{why}");
        assert!(why.contains("budget is 3 MiB"), "{why}");
        assert!(why.contains("tmpfs target count as memory"), "{why}");
        let n = Need {
            memory: 0,
            stored: 20 << 20,
            cannot_size: false,
        };
        let why = skip_reason(&n, &room(1 << 30, 5 << 20, false)).unwrap();
        assert!(
            why.contains("keeps 20 MiB") && why.contains("5 MiB is free"),
            "{why}"
        );
    }

    #[test]
    fn files_on_a_ram_target_are_memory() {
        let f = Footprint {
            peak_memory: 1 << 20,
            stored: 3 << 20,
            ..Footprint::default()
        };
        assert_eq!(point_need(&f, true).memory, 4 << 20);
        assert_eq!(point_need(&f, false).memory, 1 << 20);
    }

    #[test]
    fn quick_issues_are_sized_or_skipped_on_a_small_tmpfs_board() {
        // The 64 MiB board of issue 44: a 16 MiB tmpfs /data, about 1 MiB
        // of memory budget left. Every issue either fits once sized or says
        // why not; none is started beyond the budget.
        let p = crate::study::load("quick", &[]).unwrap();
        let small = room(1 << 20, 1 << 20, true);
        for issue in &p.issues {
            let n = need(issue, &small);
            match skip_reason(&n, &small) {
                None => assert!(n.memory <= (1 << 20) + SLACK, "{}: {n:?}", issue.name),
                Some(why) => assert!(why.starts_with("skipped: "), "{why}"),
            }
        }
        // With room, the quick profile runs whole.
        let big = room(4 << 30, 100 << 30, false);
        for issue in &p.issues {
            assert_eq!(
                skip_reason(&need(issue, &big), &big),
                None,
                "{}",
                issue.name
            );
        }
    }

    #[test]
    fn a_point_that_cannot_be_sized_is_skipped() {
        let n = Need {
            cannot_size: true,
            ..Need::default()
        };
        let why = skip_reason(&n, &room(1 << 20, 1 << 20, true)).unwrap();
        assert!(why.contains("cannot be sized down"), "{why}");
    }
}
