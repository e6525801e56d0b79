//! Built-in profiles: every pass criterion states the need it encodes, and
//! every key issue judged on a confidence interval runs enough trials for
//! one (a verdict on a 2- or 3-trial interval is MARGINAL by construction
//! and the runner cannot recognise warm-up trials with fewer than 5).

use std::path::Path;

fn profiles() -> Vec<(String, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("profiles");
    let mut v: Vec<(String, String)> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "toml"))
        .map(|e| {
            (
                e.file_name().to_string_lossy().to_string(),
                std::fs::read_to_string(e.path()).unwrap(),
            )
        })
        .collect();
    v.sort();
    assert!(v.len() >= 5, "built-in profiles found in {}", dir.display());
    v
}

/// The text of each `[[issue]]` block.
fn issues(text: &str) -> Vec<&str> {
    text.split("[[issue]]").skip(1).collect()
}

#[test]
fn every_criterion_says_which_need_it_encodes() {
    for (file, text) in profiles() {
        for issue in issues(&text) {
            let criteria = issue.matches("[[issue.criteria]]").count();
            if criteria == 0 {
                continue;
            }
            let before_first = &issue[..issue.find("[[issue.criteria]]").unwrap()];
            assert!(
                before_first.contains("# Need:"),
                "{file}: a key issue with criteria has no '# Need:' justification:\n{issue}"
            );
        }
    }
}

#[test]
fn judged_issues_run_enough_trials_for_an_interval() {
    for (file, text) in profiles() {
        for issue in issues(&text) {
            if !issue.contains("[[issue.criteria]]") {
                continue;
            }
            let trials = issue
                .lines()
                .find_map(|l| l.trim().strip_prefix("trials = "))
                .map(|v| v.trim().parse::<usize>().unwrap());
            // None: the experiment's default (at least 5 trials, adaptive).
            // 1: one long recording, judged on the binomial interval of
            // its misses (`events`) or on its value ("no interval").
            if let Some(n) = trials {
                assert!(
                    n == 1 || n >= 5,
                    "{file}: {n} trials give no usable 95% CI for a verdict:\n{issue}"
                );
            }
        }
    }
}
