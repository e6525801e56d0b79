//! Work sized to the machine's speed: a short probe of an experiment's own
//! operation (create a file, send a message) says how many operations a
//! trial of the planned trial time holds, so a slow board does not spend
//! seconds a trial on work a fast host does in milliseconds. The figure
//! measured is a rate, so fewer operations change how long a trial lasts,
//! not what it measures.

/// Operations a trial of `target` seconds holds, from a probe that did
/// `probe_ops` in `probe_secs`: never more than `asked` (a fast machine
/// keeps the work asked for), never fewer than `floor` (a rate needs enough
/// operations to be timed), rounded down to a multiple of `step`.
pub(crate) fn ops_for(
    asked: u64,
    floor: u64,
    step: u64,
    probe_ops: u64,
    probe_secs: f64,
    target: f64,
) -> u64 {
    let step = step.max(1);
    let floor = floor.min(asked).max(1);
    if probe_ops == 0 || probe_secs.is_nan() || probe_secs <= 0.0 {
        return asked;
    }
    let rate = probe_ops as f64 / probe_secs;
    let fits = (rate * target.max(0.0)) as u64 / step * step;
    fits.clamp(floor, asked)
}

/// The note a point keeps when its work was cut: what, from what, and why.
pub(crate) fn note(what: &str, used: u64, asked: u64, rate: &str, target: f64) -> String {
    format!(
        "sized to this machine's speed: {used} {what} a trial instead of {asked} — a probe ran \
         at {rate}, so {asked} would take longer than the trial time of {} (a longer \
         --trial-time or a profile's trial_time keeps more)",
        crate::units::human(target, "s")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slow_machines_get_fewer_operations_fast_ones_keep_theirs() {
        // 500 files/s, 0.2 s trials: 100 files, not 2000.
        assert_eq!(ops_for(2000, 50, 10, 100, 0.2, 0.2), 100);
        // 50,000 files/s: the 2000 asked for take 40 ms.
        assert_eq!(ops_for(2000, 50, 10, 100, 0.002, 0.2), 2000);
        // Very slow: never below the floor, nor above what was asked.
        assert_eq!(ops_for(2000, 50, 10, 100, 100.0, 0.2), 50);
        assert_eq!(ops_for(20, 50, 10, 100, 100.0, 0.2), 20);
        // Whole steps; no probe (0 s): the work asked for.
        assert_eq!(ops_for(2000, 50, 100, 1000, 1.0, 0.25), 200);
        assert_eq!(ops_for(2000, 50, 10, 100, 0.0, 0.2), 2000);
    }

    #[test]
    fn the_note_says_what_was_cut_and_why() {
        let n = note("files", 100, 2000, "500 ops/s", 0.2);
        assert!(n.contains("100 files a trial instead of 2000"), "{n}");
        assert!(n.contains("200 ms"), "{n}");
    }
}
