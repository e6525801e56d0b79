//! A sweep's figures as `tune` prints them: one row per value (the live
//! one marked), its median and 95% CI of the deciding metric.

use crate::model::run::PointResult;
use crate::report::table;
use crate::units::{human, human_range};

/// The table of `metric` per value of `knob`; `live` lists the live value
/// of each lab file system (", "-separated, as the run stores it).
pub(crate) fn summary(
    knob: &str,
    results: &[PointResult],
    metric: &str,
    live: Option<&str>,
    term: table::Terminal,
) -> String {
    let rows = results
        .iter()
        .filter_map(|r| {
            let m = r.metric(metric)?;
            let s = &m.summary;
            let fs = r
                .params
                .get("fs")
                .map(|f| format!(" fs={f}"))
                .unwrap_or_default();
            let v = r.params.get(knob)?.to_string();
            let is_live = live.is_some_and(|l| l.split(", ").any(|l| l == v));
            Some(vec![
                format!("{v}{}{fs}", if is_live { " (live)" } else { "" }),
                human(s.median, &m.unit),
                human_range(s.ci95_low, s.ci95_high, &m.unit),
                s.n.to_string(),
            ])
        })
        .collect();
    format!(
        "\n{knob} → {metric}\n{}",
        term.render(&[knob, "median", "95% CI", "n"], rows)
    )
}
