//! Swapping: `pswpin`/`pswpout` in /proc/vmstat moving during a trial.

use super::{flag, Reading, TrialCheck};

/// Flag pages swapped in or out.
pub(super) fn check(before: &Reading, after: &Reading, c: &mut TrialCheck) {
    if let (Some(b), Some(a)) = (before.swap, after.swap) {
        let pages = a.saturating_sub(b);
        c.swap_pages = Some(pages);
        if pages > 0 {
            flag(c, "swap", format!("{pages} pages swapped in or out"));
        }
    }
}

/// pswpin + pswpout.
pub(super) fn parse_swap(vmstat: &str) -> Option<u64> {
    let mut found = false;
    let mut sum = 0;
    for l in vmstat.lines() {
        let mut it = l.split_whitespace();
        if let (Some("pswpin" | "pswpout"), Some(v)) = (it.next(), it.next()) {
            sum += v.parse::<u64>().ok()?;
            found = true;
        }
    }
    found.then_some(sum)
}
