//! Two runs compared (`analysis::compare`) as terminal text: the
//! environment differences first, then per metric the ratio with its CI.

use super::table::render as table;
use crate::analysis::compare::RunComparison;
use crate::units::{human, sig};

pub fn render(c: &RunComparison) -> String {
    let mut s = format!(
        "compare {} (base) → {} (new), noise threshold ±{}%\n",
        c.base,
        c.new,
        sig(c.noise * 100.0)
    );
    if c.environment_diff.is_empty() {
        s.push_str("\nenvironment: identical\n");
    } else {
        s.push_str("\nenvironment differences (check these before trusting the numbers):\n");
        let rows = c
            .environment_diff
            .iter()
            .map(|d| {
                vec![
                    d.key.clone(),
                    d.base.clone().unwrap_or_else(|| "–".into()),
                    d.new.clone().unwrap_or_else(|| "–".into()),
                ]
            })
            .collect();
        s.push_str(&table(&["fact", "base", "new"], rows));
    }
    let mut rows = Vec::new();
    for p in &c.pairs {
        let params = p.params();
        for m in &p.metrics {
            let x = &m.comparison;
            rows.push(vec![
                format!("{} {params}", p.experiment),
                m.name.clone(),
                human(m.base_median, &m.unit),
                human(m.new_median, &m.unit),
                times(x.ratio),
                if x.ci95_low.is_finite() && x.ci95_high.is_finite() {
                    format!("{} … {}", times(x.ci95_low), times(x.ci95_high))
                } else {
                    "–".to_string()
                },
                x.verdict.as_str().to_string(),
            ]);
        }
    }
    s.push('\n');
    s.push_str(&table(
        &[
            "result", "metric", "base", "new", "new/base", "95% CI", "verdict",
        ],
        rows,
    ));
    for u in &c.unpaired {
        s.push_str(&format!("{u}\n"));
    }
    s.push_str(&format!("{} regression(s)\n", c.regressions));
    s
}

/// A ratio for display; an undefined one (0/0, x/0) is "–", never NaN×.
fn times(v: f64) -> String {
    if v.is_finite() {
        format!("{}×", sig(v))
    } else {
        "–".to_string()
    }
}
