//! Studies: a profile of key issues (experiments, parameters, pass
//! criteria) run in one go, with a verdict per key issue.

pub(crate) mod advice;
pub(crate) mod criterion;
pub(crate) mod fit;
pub(crate) mod footprint;
pub(crate) mod plan;
pub(crate) mod profile;
pub(crate) mod run;
pub(crate) mod verdict;

pub(crate) use profile::{load, Profile};

use crate::model::run::StudySummary;
use crate::report::table;

/// The closing table: key issue, result, verdict, conclusion.
pub(crate) fn summary_table(s: &StudySummary, term: table::Terminal) -> String {
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
        term.render(&["key issue", "result", "verdict", "conclusion"], rows)
    )
}

/// How long each key issue took and the total, one line (None when the run
/// recorded no times).
pub(crate) fn step_times(s: &StudySummary, term: table::Terminal) -> Option<String> {
    let times: Vec<(&str, f64)> = s
        .issues
        .iter()
        .filter_map(|i| i.seconds.map(|t| (i.name.as_str(), t)))
        .collect();
    if times.is_empty() {
        return None;
    }
    let total: f64 = times.iter().map(|t| t.1).sum();
    // Whole items, so a serial console wraps between issues, not inside one.
    let mut items: Vec<String> = times
        .iter()
        .map(|(n, t)| format!("{n} {t:.1} s ·"))
        .collect();
    items.push(format!("total {total:.1} s"));
    Some(term.run_on("time per key issue:", &items, 2))
}

#[cfg(test)]
mod step_time_tests {
    use super::*;
    use crate::model::run::IssueVerdict;
    use crate::report::table::Terminal;

    #[test]
    fn step_times_name_each_issue_and_the_total() {
        let issue = |name: &str, seconds| IssueVerdict {
            name: name.into(),
            question: String::new(),
            result: String::new(),
            verdict: "info".into(),
            conclusion: String::new(),
            suspect: vec![],
            seconds,
        };
        let mut s = StudySummary {
            profile: "quick".into(),
            title: "Quick".into(),
            issues: vec![issue("Storage", Some(6.04)), issue("Memory", Some(2.5))],
        };
        assert_eq!(
            step_times(&s, Terminal::PIPE).unwrap(),
            "time per key issue: Storage 6.0 s · Memory 2.5 s · total 8.5 s\n"
        );
        s.issues.iter_mut().for_each(|i| i.seconds = None);
        assert_eq!(step_times(&s, Terminal::PIPE), None);
    }
}
