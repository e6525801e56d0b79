//! The study section of a report: each issue of the profile with its
//! verdict (PASS / FAIL / MARGINAL on the 95% CI).

use super::{Block, Cell, Section, Table};

pub(super) fn study_section(st: &crate::model::run::StudySummary) -> Section {
    // The verdict next to the issue's name: what a reader came for.
    let mut t = Table::new(&["key issue", "verdict", "result", "conclusion", "question"]);
    for i in &st.issues {
        let class = match i.verdict.as_str() {
            "pass" => Some("pass"),
            "fail" => Some("fail"),
            _ => Some("warn"),
        };
        t.rows.push(vec![
            i.name.as_str().into(),
            Cell {
                text: i.label().to_lowercase(),
                class,
            },
            i.result.as_str().into(),
            i.conclusion.as_str().into(),
            i.question.as_str().into(),
        ]);
    }
    let pass = st.issues.iter().filter(|i| i.verdict == "pass").count();
    let fail = st.issues.iter().filter(|i| i.verdict == "fail").count();
    let marginal = st.issues.iter().filter(|i| i.verdict == "marginal").count();
    let suspect = st.issues.iter().filter(|i| !i.suspect.is_empty()).count();
    Section {
        id: "study".into(),
        title: "Study summary: verdicts".into(),
        blocks: vec![
            Block::Text(format!(
                "Profile {}: {} — {pass} passed, {fail} failed, {marginal} marginal (the 95% CI \
                 straddles the need), {} informational or unknown; {suspect} on suspect data.",
                st.profile,
                st.title,
                st.issues.len() - pass - fail - marginal
            )),
            Block::Table(t),
        ],
    }
}
