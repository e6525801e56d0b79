//! Relevance before measuring: does the experiment exercise the knob at
//! all? Read-ahead on a file that is read from the page cache, a dirty-page
//! limit under O_DIRECT writes, a disk the workload never touches: a sweep
//! of such a knob measures noise, and a "winner" would be applied for
//! nothing. What each experiment's I/O does is declared once, below, from
//! its method (the spec's text says the same in words); experiments that
//! need no scratch directory do no file I/O on the target at all.

use std::path::Path;

use crate::engine::{Experiment, Point};

/// Environment key: the warnings of this check, recorded with the run
/// (`apply` refuses such a run unless forced).
pub(crate) const ENV_RELEVANCE: &str = "tune.relevance";

/// How one direction of an experiment's file I/O meets the storage stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Io {
    /// None in the timed trials.
    No,
    /// Served from (reads) or left in (writes, never synced) the page cache:
    /// reads never reach the device; writes are dirty pages.
    Cached,
    /// Through the page cache to the device: cold reads (read-ahead runs),
    /// buffered writes written back or synced.
    Buffered,
    /// Past the page cache: O_DIRECT (or O_SYNC writes, each on the device
    /// before it returns).
    Direct,
}

/// One experiment's I/O, for the points whose parameters match `when`.
struct Decl {
    exp: &'static str,
    when: &'static [(&'static str, &'static str)],
    reads: Io,
    writes: Io,
    /// Its files live on the target's mount (false: its own loop mount).
    on_target: bool,
}

const fn decl(
    exp: &'static str,
    when: &'static [(&'static str, &'static str)],
    reads: Io,
    writes: Io,
) -> Decl {
    Decl {
        exp,
        when,
        reads,
        writes,
        on_target: true,
    }
}

use Io::{Buffered, Cached, Direct, No};

/// First match wins; an experiment with scratch files but no row here is
/// not judged (nothing is claimed about it).
const DECLARED: &[Decl] = &[
    decl("io.file-read", &[], Cached, No),
    decl("mem.mmap-read", &[], Cached, No),
    decl("io.api", &[], Cached, Cached),
    decl("io.atime", &[("atime", "current")], Cached, No),
    Decl {
        on_target: false,
        ..decl("io.atime", &[], Cached, No)
    },
    decl("io.burst", &[], No, Cached),
    decl("io.cache", &[], No, Buffered),
    decl("io.device-read", &[], Buffered, No),
    decl("io.metadata", &[], No, Buffered),
    decl("io.pregrow", &[], No, Buffered),
    decl("io.stream", &[("direct", "yes")], Direct, Direct),
    decl("io.stream", &[], Buffered, Buffered),
    decl(
        "io.random",
        &[("mode", "direct"), ("rw", "randread")],
        Direct,
        No,
    ),
    decl(
        "io.random",
        &[("mode", "direct"), ("rw", "randwrite")],
        No,
        Direct,
    ),
    decl("io.random", &[("mode", "direct")], Direct, Direct),
    decl("io.random", &[("rw", "randread")], Buffered, No),
    decl("io.random", &[("rw", "randwrite")], No, Buffered),
    decl("io.random", &[], Buffered, Buffered),
    decl("io.record-size", &[("mode", "direct")], Direct, Direct),
    decl("io.record-size", &[("mode", "sync")], Buffered, Direct),
    decl("io.record-size", &[], Buffered, Buffered),
];

/// What the check knows of the experiment point's I/O: declared, or none
/// at all when it uses no scratch directory; None when not declared.
fn io_of(exp: &dyn Experiment, point: &Point) -> Option<(Io, Io, bool)> {
    if !exp.needs().scratch {
        return Some((No, No, false));
    }
    DECLARED
        .iter()
        .find(|d| {
            d.exp == exp.name()
                && d.when
                    .iter()
                    .all(|(k, v)| point.0.get(*k).is_some_and(|p| p.to_string() == *v))
        })
        .map(|d| (d.reads, d.writes, d.on_target))
}

/// What the sweep acts on and where the experiment works.
pub struct Setting<'a> {
    pub knob: &'a str,
    pub exp: &'a dyn Experiment,
    pub point: &'a Point,
    pub target: &'a Path,
    /// The disk a block knob acts on (--device, or the target's).
    pub knob_device: Option<&'a str>,
    /// The disk under the target (None: not a block device).
    pub target_disk: Option<&'a str>,
    /// Is there active swap (/proc/swaps lists a device or file)?
    pub swap: bool,
}

/// [`check`] for a sweep of `knob` in `target`, a block knob acting on
/// `device` when given, else on the target's disk.
pub(crate) fn check_at(
    knob: &str,
    exp: &dyn Experiment,
    point: &Point,
    target: &Path,
    device: Option<&str>,
) -> Vec<String> {
    let disk = crate::system::device::device_for_path(target).map(|d| d.disk);
    let block = matches!(knob, "read_ahead_kb" | "nr_requests" | "scheduler");
    let knob_device = block
        .then(|| {
            device
                .map(|d| d.trim_start_matches("/dev/").to_string())
                .or_else(|| disk.clone())
        })
        .flatten();
    check(&Setting {
        knob,
        exp,
        point,
        target,
        knob_device: knob_device.as_deref(),
        target_disk: disk.as_deref(),
        swap: swap_active(),
    })
}

/// Whether swap is active here.
pub(crate) fn swap_active() -> bool {
    crate::system::proc::read("swaps")
        .is_ok_and(|s| s.lines().skip(1).any(|l| !l.trim().is_empty()))
}

/// The reasons the experiment cannot exercise the knob (empty: none known).
pub fn check(s: &Setting) -> Vec<String> {
    let mut why = Vec::new();
    let exp = s.exp.name();
    let knob = s.knob;
    let io = io_of(s.exp, s.point);
    match knob {
        "read_ahead_kb" | "nr_requests" | "scheduler" => {
            if let Some(dev) = s.knob_device {
                match s.target_disk {
                    Some(d) if d != dev => why.push(format!(
                        "{knob} acts on {dev}, but {exp} works in {} on {d}: none of its I/O \
                         reaches {dev} (give --target a directory on {dev}, or --device {d})",
                        s.target.display()
                    )),
                    None => why.push(format!(
                        "{knob} acts on {dev}, but {} is not on a block device: none of {exp}'s \
                         I/O reaches {dev} (give --target a directory on {dev})",
                        s.target.display()
                    )),
                    _ => {}
                }
            }
            let dev = s.knob_device.unwrap_or("the disk");
            match (knob, io) {
                ("read_ahead_kb", Some((Cached, ..))) => why.push(format!(
                    "{exp}'s reads come from the page cache (its file is read into memory before \
                     the trials): they never reach {dev}, so read-ahead cannot change them"
                )),
                ("read_ahead_kb", Some((Direct, ..))) => why.push(format!(
                    "{exp} reads with O_DIRECT here, which bypasses read-ahead"
                )),
                ("read_ahead_kb", Some((No, ..))) => why.push(format!(
                    "{exp} reads no file in its trials: read-ahead has nothing to act on"
                )),
                (_, Some((r, w, _))) if matches!(r, No | Cached) && matches!(w, No | Cached) => why
                    .push(format!(
                        "{exp}'s I/O stays in the page cache during its trials: no request \
                         reaches {dev}'s queue, so {knob} cannot change it"
                    )),
                _ => {}
            }
        }
        k if k.starts_with("vm.dirty") => match io {
            Some((_, No, _)) => why.push(format!(
                "{exp} writes nothing through the page cache in its trials: the dirty-page \
                 settings never apply"
            )),
            Some((_, Direct, _)) => why.push(format!(
                "{exp}'s writes are O_DIRECT or O_SYNC here: they do not wait in the page cache, \
                 so the dirty-page settings barely apply"
            )),
            _ => {}
        },
        "vm.swappiness" if !s.swap => why.push(
            "no swap is active here (/proc/swaps lists none): anonymous memory cannot be \
             swapped out, so vm.swappiness has nothing to weigh"
                .to_string(),
        ),
        "mount" => match io {
            Some((_, _, false)) if !s.exp.needs().scratch => why.push(format!(
                "{exp} uses no files on the target: its mount options cannot change it"
            )),
            Some((_, _, false)) => why.push(format!(
                "{exp} works on a file system it mounts itself for this point, not on the \
                 target's mount: the target's mount options do not apply"
            )),
            _ => {}
        },
        _ => {}
    }
    why
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_declaration_names_an_experiment_with_scratch_files() {
        for d in DECLARED {
            let e = crate::experiments::registry::find(d.exp)
                .unwrap_or_else(|e| panic!("{}: {e}", d.exp));
            assert!(e.needs().scratch, "{}", d.exp);
            for (k, _) in d.when {
                assert!(e.spec().param(k).is_some(), "{}: no parameter {k}", d.exp);
            }
        }
    }
}
