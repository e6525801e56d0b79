//! Judging a `cpu.sustained` recording: when throughput dropped (below
//! `DROP_BELOW` of its start for `DROP_ROWS` rows) and why, strongest
//! evidence first.

use super::record::{mean, median, Row};
use super::{DROP_BELOW, DROP_ROWS};

/// What the recording shows.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Verdict {
    pub(crate) start: f64,
    pub(crate) end: f64,
    /// Seconds from the start of the load to the drop, and its causes.
    pub(crate) drop: Option<(f64, Vec<String>)>,
    pub(crate) temp_at_drop: Option<f64>,
    pub(crate) peak_temp: Option<f64>,
    pub(crate) text: String,
}

/// Judge a recording (rows in time order). Needs at least 4 rows.
pub(crate) fn analyse(rows: &[Row]) -> Option<Verdict> {
    if rows.len() < 4 {
        return None;
    }
    // The first row holds thread start-up; the start is the next few.
    let base_rows = &rows[1..(1 + (rows.len() / 4).clamp(1, 5)).min(rows.len())];
    let start = median(base_rows.iter().map(|r| r.throughput).collect())?;
    let q = rows.len() - (rows.len() / 4).max(1);
    let end = median(rows[q..].iter().map(|r| r.throughput).collect())?;
    let peak_temp = rows.iter().filter_map(Row::max_temp).reduce(f64::max);
    let from = 1 + base_rows.len();
    let at = (from..rows.len().saturating_sub(DROP_ROWS - 1)).find(|&i| {
        rows[i..i + DROP_ROWS]
            .iter()
            .all(|r| r.throughput < DROP_BELOW * start)
    });
    let fmt = |v: f64| crate::units::human(v, "ops/s");
    let Some(i) = at else {
        let temp = peak_temp
            .map(|t| format!(", peak {t:.1} °C"))
            .unwrap_or_else(|| ", no temperature sensor exposed".into());
        return Some(Verdict {
            start,
            end,
            drop: None,
            temp_at_drop: None,
            peak_temp,
            text: format!(
                "no throttling: {} at the start, {} at the end ({:.0}%) over {:.0} s{temp}",
                fmt(start),
                fmt(end),
                end * 100.0 / start.max(1e-12),
                rows.last().map_or(0.0, |r| r.t)
            ),
        });
    };
    let causes = with_largest_fall(rows, i);
    let when = rows[i].t - rows[i].dt;
    let low = median(rows[i..].iter().map(|r| r.throughput).collect()).unwrap_or(end);
    let temp_at_drop = rows[i].max_temp();
    let at_temp = temp_at_drop
        .map(|t| format!(" at {t:.1} °C"))
        .unwrap_or_else(|| " (no temperature sensor exposed)".into());
    let text = format!(
        "throttled: from {} to {} after {when:.0} s{at_temp} — cause: {}",
        fmt(start),
        fmt(low),
        causes.join("; ")
    );
    Some(Verdict {
        start,
        end,
        drop: Some((when, causes)),
        temp_at_drop,
        peak_temp,
        text,
    })
}

/// The causes of the drop first seen at row `i`, and of the largest fall
/// of the recording when that is elsewhere and shows a cause the first
/// does not: on a noisy machine throughput can sag below the line for no
/// visible reason seconds before the quota (or clock) really falls, and
/// both are true. The later cause is named with its time.
fn with_largest_fall(rows: &[Row], i: usize) -> Vec<String> {
    let at = |i: usize| {
        let before = &rows[i.saturating_sub(3).max(1)..i];
        let after = &rows[i..(i + 3).min(rows.len())];
        causes(&rows[1..i], before, after)
    };
    let mut out = at(i);
    let Some(k) = largest_fall(rows).filter(|&k| k.abs_diff(i) >= 2) else {
        return out;
    };
    let kind = |c: &str| c.split(" (").next().unwrap_or(c).to_string();
    let seen: Vec<String> = out.iter().map(|c| kind(c)).collect();
    let t = rows[k].t - rows[k].dt;
    let extra: Vec<String> = at(k)
        .into_iter()
        .filter(|c| !c.starts_with(UNEXPLAINED) && !seen.contains(&kind(c)))
        .map(|c| format!("{c} at {t:.0} s"))
        .collect();
    if extra.is_empty() {
        return out;
    }
    if out.len() == 1 && out[0].starts_with(UNEXPLAINED) {
        // The explained fall leads; the earlier sag stays on record.
        let first = rows[i].t - rows[i].dt;
        out = vec![format!("{} for the first fall at {first:.0} s", out[0])];
        return extra.into_iter().chain(out).collect();
    }
    out.extend(extra);
    out
}

/// The row where the recording's largest fall begins: the split into a
/// before and an after (two rows each at least, start-up row left out)
/// with the smallest squared error around the two means, if the after is
/// lower.
fn largest_fall(rows: &[Row]) -> Option<usize> {
    let x: Vec<f64> = rows.iter().skip(1).map(|r| r.throughput).collect();
    let avg = |v: &[f64]| mean(v.iter().copied()).unwrap_or(0.0);
    let sse = |v: &[f64]| {
        let m = avg(v);
        v.iter().map(|a| (a - m) * (a - m)).sum::<f64>()
    };
    (2..x.len().saturating_sub(1))
        .filter(|&k| avg(&x[k..]) < avg(&x[..k]))
        .map(|k| (k, sse(&x[..k]) + sse(&x[k..])))
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(k, _)| k + 1)
}

const UNEXPLAINED: &str = "unexplained";

/// One share (0..1) of the machine a reading saw, e.g. its steal.
type Share = fn(&Row) -> f64;

/// Why throughput fell between `before` and `after`, strongest evidence
/// first; `since_start` is every reading before the drop.
fn causes(since_start: &[Row], before: &[Row], after: &[Row]) -> Vec<String> {
    let m = |rows: &[Row], f: &dyn Fn(&Row) -> Option<f64>| mean(rows.iter().filter_map(f));
    let mut out = Vec::new();
    // The highest quota at any time before the drop and the lowest after:
    // on a loaded machine the drop can be confirmed readings after the
    // quota changed (or one early, on a noisy ramp), so a window of a few
    // readings may see the new quota on both sides.
    let qb = since_start
        .iter()
        .filter_map(|r| r.quota_cpus)
        .reduce(f64::max);
    let qa = after.iter().filter_map(|r| r.quota_cpus).reduce(f64::min);
    let thr_b = m(before, &|r| Some(r.nr_throttled as f64)).unwrap_or(0.0);
    let thr_a = m(after, &|r| Some(r.nr_throttled as f64)).unwrap_or(0.0);
    match (qb, qa) {
        (Some(b), Some(a)) if a < b * 0.95 => out.push(format!(
            "CPU quota (cgroup quota lowered from {b:.2} to {a:.2} CPUs; throttled periods {thr_b:.0} -> {thr_a:.0} per interval)"
        )),
        (None, Some(a)) => out.push(format!(
            "CPU quota (cgroup quota set to {a:.2} CPUs; throttled periods {thr_b:.0} -> {thr_a:.0} per interval)"
        )),
        _ if thr_a > thr_b + 1.0 => out.push(format!(
            "CPU quota (cgroup throttled periods {thr_b:.0} -> {thr_a:.0} per interval)"
        )),
        _ => {}
    }
    let mut thermal = Vec::new();
    let cool_b = before.last().map_or(0, Row::cooling_sum);
    let cool_a = after.iter().map(Row::cooling_sum).max().unwrap_or(0);
    if cool_a > cool_b {
        thermal.push(format!("cooling state {cool_b} -> {cool_a}"));
    }
    let events: u64 = after.iter().map(|r| r.throttle_events).sum();
    if events > 0 {
        thermal.push(format!("{events} throttle events"));
    }
    for (what, f) in [
        ("cpufreq", &Row::mean_cur as &dyn Fn(&Row) -> Option<f64>),
        ("measured clock", &Row::mean_clock),
    ] {
        if let (Some(b), Some(a)) = (m(before, f), m(after, f)) {
            if a < 0.95 * b {
                thermal.push(format!("{what} {:.0} -> {:.0} MHz", b / 1e6, a / 1e6));
            }
        }
    }
    if !thermal.is_empty() {
        let tb = m(before, &Row::max_temp);
        let ta = after.iter().filter_map(Row::max_temp).reduce(f64::max);
        let temp = match (tb, ta) {
            (Some(b), Some(a)) => format!(", temperature {b:.1} -> {a:.1} °C"),
            _ => ", no temperature exposed".into(),
        };
        let kind = if cool_a > cool_b || events > 0 || ta.is_some_and(|a| tb.is_some_and(|b| a > b))
        {
            "thermal"
        } else {
            "clock lowered (governor, firmware or power limit; no thermal evidence)"
        };
        out.push(format!("{kind} ({}{temp})", thermal.join(", ")));
    }
    // Shares of the machine someone else took: a cause when one grew by
    // more than 5 points.
    let taken: [(Share, &str); 2] = [
        (|r| r.steal, "steal (hypervisor took"),
        (|r| r.other, "another process (busy outside tunelab"),
    ];
    for (share, what) in taken {
        let b = m(before, &|r| Some(share(r))).unwrap_or(0.0);
        let a = m(after, &|r| Some(share(r))).unwrap_or(0.0);
        if a > b + 0.05 {
            out.push(format!(
                "{what} {:.0}% -> {:.0}% of the machine)",
                b * 100.0,
                a * 100.0
            ));
        }
    }
    if out.is_empty() {
        out.push(format!(
            "{UNEXPLAINED} (no quota, thermal, clock, steal or other-process change seen)"
        ));
    }
    out
}
