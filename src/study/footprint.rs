//! What a study will cost the machine before it starts: the bytes it writes
//! to the target (flash wear) and the memory it needs at its peak, summed
//! from each key issue's points as the experiments size them for the room
//! the machine has now (`Experiment::footprint`).

use std::path::Path;

use crate::engine::Room;
use crate::units::format_size;

use super::Profile;

/// The estimate for a whole profile.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct StudyFootprint {
    /// Bytes written to the target, at least.
    pub(crate) written: u64,
    /// Some experiments repeat writing until a timing lasts long enough,
    /// so a fast device gets more than `written`.
    pub(crate) repeats: bool,
    /// Largest data memory of one point (points run one at a time).
    pub(crate) peak_memory: u64,
    /// The key issue that needs `peak_memory`.
    pub(crate) peak_issue: String,
    /// tunelab's own resident memory now.
    pub(crate) own_rss: Option<u64>,
    /// Where the memory budget came from.
    pub(crate) memory_why: String,
    /// Free space of the target.
    pub(crate) disk_free: Option<u64>,
    /// The target keeps its files in RAM (tmpfs, ramfs, zram): what backs
    /// it. `peak_memory` then includes the files a point keeps there.
    pub(crate) ram: Option<String>,
    /// Key issues that do not fit the room now, with the reason: the
    /// study skips them (checked again when each is about to start).
    pub(crate) skips: Vec<(String, String)>,
}

/// Sum the footprints of every key issue's points: writes are the setup
/// plus (warm-up + trials) × per-trial bytes, with the issue's trial count,
/// else `trials` (the command line), else the experiment's maximum.
pub(crate) fn estimate(
    profile: &Profile,
    target: Option<&Path>,
    trials: Option<usize>,
) -> StudyFootprint {
    let dir = crate::safety::scratch::target_or_temp(target);
    estimate_in(profile, &Room::read(Some(&dir)), trials)
}

/// `estimate` for a given room (tests use a fixed one).
pub(crate) fn estimate_in(profile: &Profile, room: &Room, trials: Option<usize>) -> StudyFootprint {
    let mut out = StudyFootprint {
        own_rss: crate::observe::procmem::read_proc(std::process::id())
            .ok()
            .map(|m| m.rss),
        memory_why: room.memory_why.clone(),
        disk_free: room.disk_free,
        ram: room.ram.clone(),
        ..Default::default()
    };
    for issue in &profile.issues {
        if let Some(why) = super::fit::skip_reason(&super::fit::need(issue, room), room) {
            out.skips.push((issue.name.clone(), why));
            continue;
        }
        let exp = issue.experiment.as_ref();
        let d = exp.defaults();
        let n = issue.trials.or(trials).unwrap_or(d.max_trials) + d.warmup;
        for p in &issue.points {
            let f = exp.footprint(p, room);
            out.written = out
                .written
                .saturating_add(f.setup_written)
                .saturating_add(f.trial_written.saturating_mul(n as u64));
            out.repeats |= f.repeats && f.trial_written > 0;
            // Files on a RAM-backed target are memory while the point runs.
            let memory = if room.ram.is_some() {
                f.peak_memory.saturating_add(f.stored)
            } else {
                f.peak_memory
            };
            if memory > out.peak_memory {
                out.peak_memory = memory;
                out.peak_issue = format!("{} ({})", issue.name, exp.name());
            }
        }
    }
    out
}

impl StudyFootprint {
    /// One paragraph for the start of a study, and a line per key issue
    /// that will be skipped.
    pub(crate) fn describe(&self) -> String {
        let skips: String = self
            .skips
            .iter()
            .map(|(name, why)| format!("\n{name}: {why}"))
            .collect();
        let head = format!(
            "footprint: writes at least {} to the target{}{}; needs {} of memory for data at \
             its peak{}{}{} (memory: {})",
            format_size(self.written),
            match self.disk_free {
                Some(f) => format!(" ({} free)", format_size(f)),
                None => String::new(),
            },
            if self.repeats {
                " — more on a fast device, where storage trials repeat passes until a timing \
                 lasts long enough"
            } else {
                ""
            },
            format_size(self.peak_memory),
            if self.peak_issue.is_empty() {
                String::new()
            } else {
                format!(", in {}", self.peak_issue)
            },
            match &self.ram {
                Some(r) => format!(" (the target is {r}: its files count as memory)"),
                None => String::new(),
            },
            match self.own_rss {
                Some(r) => format!(", besides tunelab's own {} resident", format_size(r)),
                None => String::new(),
            },
            self.memory_why
        );
        format!("{head}{skips}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn room(memory: u64, disk: u64) -> Room {
        Room::fixture(memory, Some(disk))
    }

    /// `room` with the target on tmpfs.
    fn tmpfs_room(memory: u64, disk: u64) -> Room {
        Room {
            ram: Some("tmpfs".into()),
            ..room(memory, disk)
        }
    }

    #[test]
    fn quick_profile_fits_a_64_mib_board() {
        let p = crate::study::load("quick", &[]).unwrap();
        let big = estimate_in(&p, &room(16 << 30, 100 << 30), None);
        // mem.bandwidth copy: 2 x 64 MiB arrays, the largest data of the profile.
        assert_eq!(big.peak_memory, 128 << 20, "{big:?}");
        assert!(big.peak_issue.contains("mem.bandwidth"), "{big:?}");
        assert!(big.repeats);
        // Each io.record-size issue writes its file at least (fill +
        // calibration + 1 warm-up + 3 trials) times.
        assert!(big.written >= 6 * (16 << 20) + 6 * (8 << 20), "{big:?}");
        // A 64 MiB cgroup leaves about 30 MiB of budget, a small flash 24 MiB
        // free: everything shrinks to them.
        let small = estimate_in(&p, &room(30 << 20, 24 << 20), None);
        assert!(small.peak_memory <= 30 << 20, "{small:?}");
        assert!(small.written < big.written, "{small:?} vs {big:?}");
        let d = small.describe();
        assert!(
            d.contains("writes at least") && d.contains("24 MiB free"),
            "{d}"
        );
        assert!(d.contains("fixture"), "{d}");
    }

    #[test]
    fn issues_that_cannot_fit_are_named_before_the_study_starts() {
        let p = crate::study::load("quick", &[]).unwrap();
        // 1 MiB of memory on a 1 MiB tmpfs: whatever cannot be sized down
        // that far is said up front, with its reason, and not counted.
        let f = estimate_in(&p, &tmpfs_room(1 << 20, 1 << 20), None);
        assert!(!f.skips.is_empty(), "{f:?}");
        let d = f.describe();
        for (name, why) in &f.skips {
            assert!(d.contains(&format!("\n{name}: skipped: ")), "{d}");
            assert!(why.starts_with("skipped: "), "{why}");
        }
        assert!(
            f.peak_memory <= (1 << 20) + super::super::fit::SLACK,
            "{f:?}"
        );
        let big = estimate_in(&p, &room(16 << 30, 100 << 30), None);
        assert!(big.skips.is_empty(), "{big:?}");
    }

    #[test]
    fn files_on_a_ram_target_count_as_memory() {
        let p = crate::study::load("quick", &[]).unwrap();
        let disk = estimate_in(&p, &room(30 << 20, 24 << 20), None);
        let ram = estimate_in(&p, &tmpfs_room(30 << 20, 24 << 20), None);
        // The same points, but the io.record-size file is memory too.
        assert!(ram.peak_memory >= disk.peak_memory, "{ram:?} vs {disk:?}");
        let d = ram.describe();
        assert!(
            d.contains("the target is tmpfs: its files count as memory"),
            "{d}"
        );
        // A 16 MiB file kept on tmpfs with 1 MiB records: 17 MiB at the peak.
        let big = estimate_in(&p, &tmpfs_room(16 << 30, 100 << 30), None);
        assert!(big.peak_memory >= 128 << 20, "{big:?}");
    }
}
