//! The `Finding` builder: its default, and that rules use it.

use super::{Finding, Severity, NOT_STATED};
use std::path::{Path, PathBuf};

/// Where `text` builds a finding as a struct literal (`Finding` followed by
/// `{`), as 1-based line numbers. Written without that pair of tokens in a
/// row so this file does not match itself.
fn literal_lines(text: &str) -> Vec<usize> {
    let name = "Finding";
    let mut lines = Vec::new();
    for (at, _) in text.match_indices(name) {
        let before = text[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        if text[at + name.len()..].trim_start().starts_with('{') {
            lines.push(text[..at].matches('\n').count() + 1);
        }
    }
    lines
}

fn rule_files() -> Vec<PathBuf> {
    let advise = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/advise");
    let mut files = vec![advise.join("rules.rs")];
    let mut dirs = vec![advise.join("rules")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("read src/advise/rules") {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files
}

#[test]
fn rules_build_findings_through_the_builder_only() {
    let mut literals = Vec::new();
    let mut built = 0;
    for path in rule_files() {
        let text = std::fs::read_to_string(&path).expect("read a rule file");
        built += text.matches("Finding::new(").count();
        for line in literal_lines(&text) {
            literals.push(format!("{}:{line}", path.display()));
        }
    }
    assert!(
        literals.is_empty(),
        "build findings with Finding::new(..) and its methods, not a struct literal: {literals:?}"
    );
    // The scan saw the rules (35 findings are built today).
    assert!(built >= 35, "only {built} Finding::new calls found");
}

#[test]
fn the_scan_catches_a_literal_in_any_spacing() {
    let name = "Finding";
    let text = format!("a\nlet f = {name} {{\n id: \"x\" }};\nlet g = {name}{{}};\nimpl From<{name}> for X {{}}\nMy{name} {{}}\n");
    assert_eq!(literal_lines(&text), vec![2, 4]);
}

#[test]
fn fields_a_rule_leaves_out_read_not_stated() {
    let f = Finding::new("t.id", Severity::Info, "title").why("because");
    assert_eq!(f.why, "because");
    assert_eq!(f.evidence, vec![NOT_STATED.to_string()]);
    assert_eq!(
        (f.command.as_str(), f.risk.as_str(), f.verify.as_str()),
        (NOT_STATED, NOT_STATED, NOT_STATED)
    );
    let f = f
        .evidence(vec!["e".into()])
        .fix("cmd", "risk")
        .verify("check");
    assert_eq!(
        (f.id, f.severity, f.title.as_str(), f.evidence.as_slice()),
        (
            "t.id",
            Severity::Info,
            "title",
            ["e".to_string()].as_slice()
        )
    );
    assert_eq!(
        (f.command.as_str(), f.risk.as_str(), f.verify.as_str()),
        ("cmd", "risk", "check")
    );
}
