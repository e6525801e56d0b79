//! `tunelab time`'s table: per command and metric the median with its
//! 95% CI, how each command's runs ended, and each command's wall time
//! relative to the first.

use crate::model::run::Run;
use crate::model::ParamValue;
use crate::report::table::Terminal;
use crate::stats::summary::relative_half_width;
use crate::units::{human, human_range, pct};

/// `exits`: per command, its label and the distinct ways its runs ended
/// ("exit 0", "signal 15"), sorted.
pub(crate) fn render(
    run: &Run,
    exits: &[(&str, Vec<String>)],
    comparisons: &[serde_json::Value],
    term: Terminal,
) -> String {
    let mut rows = Vec::new();
    for r in &run.results {
        let label = match r.params.get("command") {
            Some(ParamValue::Text(t)) => t.clone(),
            _ => String::new(),
        };
        for m in &r.metrics {
            let s = &m.summary;
            rows.push(vec![
                label.clone(),
                m.name.clone(),
                human(s.mean, &m.unit),
                human(s.median, &m.unit),
                human_range(s.ci95_low, s.ci95_high, &m.unit),
                format!("±{}", pct(relative_half_width(s))),
                human(s.min, &m.unit),
                human(s.max, &m.unit),
                s.n.to_string(),
            ]);
        }
    }
    let mut s = format!(
        "run {} app.time ({} command(s), interleaved; stopped by {})\n",
        run.id,
        exits.len(),
        run.results
            .first()
            .and_then(|r| r.metrics.first())
            .map_or("", |m| m.summary.stop_reason_str())
    );
    s.push_str(&term.render(
        &[
            "command",
            "metric",
            "mean",
            "median",
            "95% CI of median",
            "±CI",
            "min",
            "max",
            "n",
        ],
        rows,
    ));
    for (label, codes) in exits {
        s.push_str(&format!("  {label}: {}\n", codes.join(", ")));
    }
    if !comparisons.is_empty() {
        let rows = comparisons
            .iter()
            .map(|c| {
                let w = &c["wall_time"];
                vec![
                    c["command"].as_str().unwrap_or("").to_string(),
                    c["base"].as_str().unwrap_or("").to_string(),
                    format!("{:.3}×", w["ratio"].as_f64().unwrap_or(f64::NAN)),
                    format!(
                        "{:.3}× … {:.3}×",
                        w["ci95_low"].as_f64().unwrap_or(f64::NAN),
                        w["ci95_high"].as_f64().unwrap_or(f64::NAN)
                    ),
                    w["verdict"].as_str().unwrap_or("").replace('_', " "),
                ]
            })
            .collect();
        s.push_str("\nwall time relative to the first command\n");
        s.push_str(&term.render(
            &["command", "vs", "ratio of medians", "95% CI", "verdict"],
            rows,
        ));
    }
    s
}
