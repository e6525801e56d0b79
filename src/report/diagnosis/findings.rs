//! The findings section of a diagnosis report, from findings the CLI has
//! turned into text.

use super::super::document::{Block, Cell, Section as DocSection, Table};

/// A finding as the report shows it (the CLI converts advise's findings:
/// report does not reach up into advise/).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct FindingText {
    pub(crate) severity: String,
    pub(crate) id: String,
    pub(crate) title: String,
    pub(crate) evidence: Vec<String>,
    pub(crate) why: String,
    pub(crate) fix: String,
    pub(crate) verify: String,
}

/// The findings as a report section (first, before the sections).
pub(crate) fn findings_section(findings: &[FindingText]) -> DocSection {
    let mut blocks = Vec::new();
    if findings.is_empty() {
        blocks.push(Block::Text(
            "no finding: nothing in this diagnosis crosses a rule's threshold".into(),
        ));
    } else {
        blocks.push(Block::Table(Table {
            header: vec!["severity".into(), "finding".into(), "fix".into()],
            rows: findings
                .iter()
                .map(|f| {
                    vec![
                        Cell::from(f.severity.clone()),
                        Cell::from(f.title.clone()),
                        Cell::from(f.fix.clone()),
                    ]
                })
                .collect(),
        }));
        for f in findings {
            let mut notes = vec![format!("{} [{}] {}", f.id, f.severity, f.title)];
            notes.extend(f.evidence.iter().map(|e| format!("evidence: {e}")));
            notes.push(format!("why: {}", f.why));
            notes.push(format!("fix: {}", f.fix));
            notes.push(format!("verify: {}", f.verify));
            blocks.push(Block::Notes(notes));
        }
    }
    DocSection {
        id: "diag-findings".into(),
        title: "Findings".into(),
        blocks,
    }
}
