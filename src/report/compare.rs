//! Two runs compared (`analysis::compare`) as terminal text: the
//! environment differences first, then per metric the ratio with its CI.

use super::table::Terminal;
use crate::analysis::compare::RunComparison;
use crate::units::{human, sig};

pub(crate) fn render(c: &RunComparison, term: Terminal) -> String {
    // Free text is broken between words on a terminal (80 columns on a
    // serial console); tables lay themselves out.
    let mut s = term.para(
        "compare",
        &format!(
            "{} (base) → {} (new), noise threshold ±{}%",
            c.base,
            c.new,
            sig(c.noise * 100.0)
        ),
        2,
    );
    s.push_str(&term.para("method:", &c.method, 2));
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
        s.push_str(&term.render(&["fact", "base", "new"], rows));
    }
    let mut rows = Vec::new();
    let mut bases: Vec<String> = Vec::new();
    for p in &c.pairs {
        let params = p.params();
        for m in &p.metrics {
            let x = m.comparison();
            // Each distinct basis once, numbered, so rows stay one line.
            let basis = &m.calibrated.basis;
            let k = match bases.iter().position(|b| b == basis) {
                Some(k) => k,
                None => {
                    bases.push(basis.clone());
                    bases.len() - 1
                }
            };
            rows.push(vec![
                format!("{} {params}", p.experiment),
                m.name.clone(),
                human(m.base_median, &m.unit),
                human(m.new_median, &m.unit),
                times(x.ratio),
                if x.ci95_low.is_finite() && x.ci95_high.is_finite() {
                    // The unit once, as in every range: "0.799 … 1.04×".
                    format!("{} … {}", sig(x.ci95_low), times(x.ci95_high))
                } else {
                    "–".to_string()
                },
                m.verdict_label(),
                format!("[{}]", k + 1),
            ]);
        }
    }
    s.push('\n');
    s.push_str(&term.render(
        &[
            "result", "metric", "base", "new", "new/base", "95% CI", "verdict", "rests on",
        ],
        rows,
    ));
    for (k, b) in bases.iter().enumerate() {
        s.push_str(&term.para(&format!("[{}]", k + 1), b, 4));
    }
    for p in c.pairs.iter().filter(|p| !p.suspect.is_empty()) {
        s.push_str(&term.para(
            &format!("suspect: {} {}:", p.experiment, p.params()),
            &p.suspect.join("; "),
            4,
        ));
    }
    for u in &c.unpaired {
        s.push_str(&term.para("", u, 2));
    }
    let mut last = format!("{} regression(s)", c.regressions);
    if c.suspect_regressions > 0 {
        last.push_str(&format!(
            ", and {} more on trials the validity guard flagged (suspect)",
            c.suspect_regressions
        ));
    }
    s.push_str(&term.para("", &last, 2));
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
