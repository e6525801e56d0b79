//! The classic vmstat warning signs, as pure rules over a window of rows.
//!
//! - processes blocked on I/O (`b` > 0) while the CPU sits idle: the machine
//!   waits for the disk (or NFS), more CPU would not help;
//! - context switches far above the number of runnable processes: many
//!   short sleeps and wake-ups (lock contention, chatty IPC, a timer storm);
//! - sustained iowait: several consecutive intervals with a large `wa`;
//! - swapping (`si`/`so` > 0): memory is short.
//!
//! The thresholds are constants below so that the report can quote them.

use super::vmstat::VmstatRow;

/// `b` ≥ 1 together with at least this % idle.
pub(crate) const BLOCKED_IDLE_PCT: f64 = 20.0;
/// Context switches per second above this many per runnable process...
pub(crate) const CS_PER_RUNNABLE: f64 = 5000.0;
/// ...and above this absolute rate.
pub(crate) const CS_MIN: f64 = 10_000.0;
/// `wa` at or above this %...
pub(crate) const IOWAIT_PCT: f64 = 20.0;
/// ...for this many consecutive intervals.
pub(crate) const IOWAIT_INTERVALS: usize = 3;

/// Which warning sign fired (for counting them over a run).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Sign {
    BlockedWhileIdle,
    ContextSwitchStorm,
    SustainedIowait,
    Swapping,
}

impl Sign {
    pub(crate) fn describe(&self) -> &'static str {
        match self {
            Sign::BlockedWhileIdle => {
                "processes blocked on I/O while the CPU is idle: the bottleneck is I/O, not CPU"
            }
            Sign::ContextSwitchStorm => {
                "context switches far above the number of runnable processes: \
                 many short sleeps/wake-ups (lock contention, chatty IPC, timers)"
            }
            Sign::SustainedIowait => "sustained iowait: CPUs repeatedly idle waiting for disk I/O",
            Sign::Swapping => "swapping: memory is short",
        }
    }
}

/// The signs shown by the newest row of `window` (oldest first); the iowait
/// rule looks back over the window.
pub(crate) fn vmstat_signs(window: &[VmstatRow]) -> Vec<(Sign, String)> {
    let Some(r) = window.last() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    if r.b >= 1 && r.id >= BLOCKED_IDLE_PCT {
        out.push((
            Sign::BlockedWhileIdle,
            format!(
                "{} blocked process(es) with {:.0}% idle CPU — {}",
                r.b,
                r.id,
                Sign::BlockedWhileIdle.describe()
            ),
        ));
    }
    let runnable = (r.r.max(1)) as f64;
    if r.cs_s >= CS_MIN && r.cs_s > CS_PER_RUNNABLE * runnable {
        out.push((
            Sign::ContextSwitchStorm,
            format!(
                "{:.0} context switches/s with {} runnable — {}",
                r.cs_s,
                r.r,
                Sign::ContextSwitchStorm.describe()
            ),
        ));
    }
    if window.len() >= IOWAIT_INTERVALS
        && window[window.len() - IOWAIT_INTERVALS..]
            .iter()
            .all(|w| w.wa >= IOWAIT_PCT)
    {
        out.push((
            Sign::SustainedIowait,
            format!(
                "iowait ≥ {IOWAIT_PCT:.0}% for {IOWAIT_INTERVALS} intervals (now {:.0}%) — {}",
                r.wa,
                Sign::SustainedIowait.describe()
            ),
        ));
    }
    if r.si > 0.0 || r.so > 0.0 {
        out.push((
            Sign::Swapping,
            format!(
                "swap-in {:.0} KiB/s, swap-out {:.0} KiB/s — {}",
                r.si,
                r.so,
                Sign::Swapping.describe()
            ),
        ));
    }
    out
}

/// How many intervals of `rows` showed each sign (for a run summary).
pub(crate) fn count_signs(rows: &[VmstatRow]) -> Vec<(Sign, usize)> {
    let mut counts: Vec<(Sign, usize)> = Vec::new();
    for i in 0..rows.len() {
        let lo = (i + 1).saturating_sub(IOWAIT_INTERVALS);
        for (s, _) in vmstat_signs(&rows[lo..=i]) {
            match counts.iter_mut().find(|(k, _)| *k == s) {
                Some((_, n)) => *n += 1,
                None => counts.push((s, 1)),
            }
        }
    }
    counts.sort();
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row() -> VmstatRow {
        VmstatRow {
            r: 1,
            id: 90.0,
            us: 5.0,
            sy: 5.0,
            cs_s: 500.0,
            ..Default::default()
        }
    }

    #[test]
    fn quiet_machine_has_no_signs() {
        assert!(vmstat_signs(&[row(), row(), row()]).is_empty());
        assert!(vmstat_signs(&[]).is_empty());
    }

    #[test]
    fn blocked_with_idle_cpu() {
        let mut r = row();
        r.b = 2;
        r.id = 60.0;
        let s = vmstat_signs(&[r.clone()]);
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].0, Sign::BlockedWhileIdle);
        r.id = 5.0; // CPU busy too: not this sign
        assert!(vmstat_signs(&[r]).is_empty());
    }

    #[test]
    fn context_switch_storm() {
        let mut r = row();
        r.cs_s = 40_000.0;
        r.r = 2; // 20k per runnable
        assert_eq!(vmstat_signs(&[r.clone()])[0].0, Sign::ContextSwitchStorm);
        r.r = 10; // 4k per runnable: plausible for a busy machine
        assert!(vmstat_signs(&[r]).is_empty());
    }

    #[test]
    fn iowait_must_be_sustained() {
        let mut w = row();
        w.wa = 35.0;
        assert!(vmstat_signs(&[row(), w.clone(), w.clone()]).is_empty());
        let s = vmstat_signs(&[w.clone(), w.clone(), w.clone()]);
        assert_eq!(s[0].0, Sign::SustainedIowait);
        let counts = count_signs(&[w.clone(), w.clone(), w.clone(), w.clone(), row()]);
        assert_eq!(counts, vec![(Sign::SustainedIowait, 2)]);
    }

    #[test]
    fn swapping() {
        let mut r = row();
        r.so = 400.0;
        assert_eq!(vmstat_signs(&[r])[0].0, Sign::Swapping);
    }
}
