//! Studies: a profile of key issues (experiments, parameters, pass
//! criteria) run in one go, with a verdict per key issue.

pub mod footprint;
pub mod profile;
pub mod verdict;

pub use profile::{load, Profile};

use crate::engine::model::StudySummary;
use crate::report::table;

/// The closing table: key issue, result, verdict, conclusion.
pub fn summary_table(s: &StudySummary) -> String {
    let rows = s
        .issues
        .iter()
        .map(|i| {
            vec![
                i.name.clone(),
                i.result.clone(),
                i.label(),
                i.conclusion.clone(),
            ]
        })
        .collect();
    format!(
        "\n{} — {}\n{}",
        s.profile,
        s.title,
        table::render(&["key issue", "result", "verdict", "conclusion"], rows)
    )
}
