//! The docs say what the code does: the worked example of
//! docs/writing-an-experiment.md is the compiled declaration of
//! `test.scripted`, and every output block of README.md and docs/ comes from
//! a script in this tree, so a pasted figure cannot go stale.

use std::path::Path;

#[test]
fn the_worked_example_is_the_scripted_experiments_code() {
    let root = env!("CARGO_MANIFEST_DIR");
    let src = std::fs::read_to_string(format!("{root}/src/experiments/test/scripted.rs")).unwrap();
    let doc = std::fs::read_to_string(format!("{root}/docs/writing-an-experiment.md")).unwrap();
    let code = src
        .split_once("// doc:begin\n")
        .and_then(|(_, rest)| rest.split_once("// doc:end"))
        .map(|(code, _)| code.trim_end())
        .expect("doc: markers in scripted.rs");
    let block = doc
        .split_once("```rust\n")
        .and_then(|(_, rest)| rest.split_once("\n```"))
        .map(|(block, _)| block.trim_end())
        .expect("a rust block in the doc");
    assert_eq!(
        block, code,
        "docs/writing-an-experiment.md's example differs from src/experiments/test/scripted.rs"
    );
}

// The rule for fenced blocks (```INFO … ```), by the first word of INFO:
//
// - `sh`, `bash`, `shell`: what to type. No line may look like output: none
//   starts with `$ ` (a transcript belongs in a generated block), `|` (a
//   table) or a digit.
// - `console`: commands only: every line starts with `$ ` or `# `, or
//   continues the line before it (which ends in `\`).
// - `rust`, `toml`, `c`, `yaml`, `ini`: source or configuration a reader
//   writes (the rust example is checked against the code above).
// - anything else (`text`, untagged): output or a diagram. It passes when it
//   is inside a generated block (`<!-- NAME:begin -->` … `<!-- NAME:end -->`,
//   written by bench/lib/docblock.sh or the script that names NAME), or when
//   the script that prints it is named right above it: on one of the 3 lines
//   above the fence, or in the paragraph that introduces it (the lines up to
//   the blank line before), as a path under scripts/, bench/ or lab/ that
//   exists. Otherwise it must hold no figure at all: no number that stands
//   alone (a digit not glued to a letter, digit, `_`, `-`, `.` or `/`), so a
//   diagram or a directory tree passes and a pasted run does not.
//
// An indented code block (4 spaces after a blank line, outside a list
// item) is refused: fence it, so the rule above can read its kind.
//
// Generated blocks: every `<!-- NAME:begin -->` is closed by its own
// `<!-- NAME:end -->` before another block begins, no end stands alone, a
// page holds each NAME once, and NAME occurs in a script under bench/, lab/
// or scripts/ (the one that writes the block).

/// README.md and every docs/*.md, with their text.
fn pages(root: &Path) -> Vec<(String, String)> {
    let mut names: Vec<String> = std::fs::read_dir(root.join("docs"))
        .expect("docs/")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md"))
        .map(|n| format!("docs/{n}"))
        .collect();
    names.sort();
    names.insert(0, "README.md".into());
    names
        .into_iter()
        .map(|n| {
            let text = std::fs::read_to_string(root.join(&n)).unwrap();
            (n, text)
        })
        .collect()
}

/// A fence opens or closes a block (inside a list item it is indented).
fn is_fence(line: &str) -> bool {
    line.trim_start().starts_with("```")
}

/// `- x`, `* x`, `+ x`, `12. x`.
fn is_list_item(line: &str) -> bool {
    let digits = line.trim_start_matches(|c: char| c.is_ascii_digit());
    ["- ", "* ", "+ "].iter().any(|m| line.starts_with(m))
        || (digits.len() < line.len() && digits.starts_with(". "))
}

/// `<!-- NAME:begin -->` → (NAME, true); `<!-- NAME:end -->` → (NAME, false).
fn marker(line: &str) -> Option<(&str, bool)> {
    let inner = line.trim().strip_prefix("<!-- ")?.strip_suffix(" -->")?;
    let (name, what) = inner.rsplit_once(':')?;
    let ok = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c));
    match what {
        "begin" if ok => Some((name, true)),
        "end" if ok => Some((name, false)),
        _ => None,
    }
}

/// The scripts a line names: words that are paths under scripts/, bench/
/// or lab/ of a file in the tree.
fn named_scripts(root: &Path, line: &str) -> Vec<String> {
    line.split(|c: char| c.is_whitespace() || "`'\"()[],;:=".contains(c))
        .map(|w| w.trim_end_matches('.'))
        .filter(|w| {
            ["scripts/", "bench/", "lab/"]
                .iter()
                .any(|d| w.starts_with(d))
        })
        .filter(|w| root.join(w).is_file())
        .map(String::from)
        .collect()
}

/// A number standing alone in a line: a figure (not `do_syscall_64`,
/// `kmalloc-512`, `x86_64`, `v1.2` or a path like `/dev/sda1`).
fn has_figure(line: &str) -> bool {
    let mut prev: Option<char> = None;
    for c in line.chars() {
        if c.is_ascii_digit() {
            let glued = prev.is_some_and(|p| p.is_alphanumeric() || "_-./".contains(p));
            if !glued {
                return true;
            }
        }
        prev = Some(c);
    }
    false
}

/// What is wrong with the fenced block that opens at `lines[open]` (whose
/// body is `body`), or None.
fn block_problem(root: &Path, lines: &[&str], open: usize, body: &[&str]) -> Option<String> {
    let info = lines[open].trim_start().trim_start_matches('`').trim();
    let lang = info.split_whitespace().next().unwrap_or("");
    match lang {
        "sh" | "bash" | "shell" => body
            .iter()
            .map(|l| l.trim_start())
            .find(|l| {
                l.starts_with("$ ")
                    || l.starts_with('|')
                    || l.starts_with(|c: char| c.is_ascii_digit())
            })
            .map(|l| format!("a line of a command block looks like output: {l:?}")),
        "console" => {
            let mut continued = false;
            for l in body.iter().map(|l| l.trim_start()) {
                if !continued && !l.is_empty() && !l.starts_with("$ ") && !l.starts_with("# ") {
                    return Some(format!(
                        "a console block holds output, not only commands: {l:?}"
                    ));
                }
                continued = l.ends_with('\\');
            }
            None
        }
        "rust" | "toml" | "c" | "yaml" | "ini" => None,
        _ => {
            let above = &lines[open.saturating_sub(3)..open];
            let mut intro: Vec<&str> = Vec::new();
            let mut i = open;
            while i > 0 && lines[i - 1].trim().is_empty() {
                i -= 1;
            }
            while i > 0 && !lines[i - 1].trim().is_empty() && !is_fence(lines[i - 1]) {
                intro.push(lines[i - 1]);
                i -= 1;
            }
            let named = above
                .iter()
                .chain(intro.iter())
                .any(|l| !named_scripts(root, l).is_empty());
            if named {
                return None;
            }
            body.iter().find(|l| has_figure(l)).map(|l| {
                format!(
                    "an output block with figures that no script is named for: {l:?}; \
                     put it between <!-- NAME:begin/end --> markers its script writes, \
                     name the script that prints it right above, or say in words what it showed"
                )
            })
        }
    }
}

/// Every problem of one page: its generated markers and its fenced blocks.
fn page_problems(root: &Path, page: &str, text: &str, scripts: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut problems = Vec::new();
    let mut open_block: Option<(&str, usize)> = None;
    let mut seen: Vec<&str> = Vec::new();
    // An indented code block: 4 spaces after a blank line, outside a list.
    let mut in_list = false;
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if !line.trim().is_empty() && !line.starts_with(' ') {
            in_list = is_list_item(line);
        }
        if line.starts_with("    ") && i > 0 && lines[i - 1].trim().is_empty() && !in_list {
            problems.push(format!(
                "{page}:{}: an indented code block: fence it (```sh for commands) so this rule can check it",
                i + 1
            ));
        }
        if let Some((name, begin)) = marker(line) {
            match (begin, open_block) {
                (true, Some((other, at))) => problems.push(format!(
                    "{page}:{}: {name} begins inside {other} (line {})",
                    i + 1,
                    at + 1
                )),
                (true, None) => {
                    if seen.contains(&name) {
                        problems.push(format!("{page}:{}: a second {name} block", i + 1));
                    }
                    if !scripts.contains(name) {
                        problems.push(format!(
                            "{page}:{}: no script under bench/, lab/ or scripts/ writes {name}",
                            i + 1
                        ));
                    }
                    seen.push(name);
                    open_block = Some((name, i));
                }
                (false, Some((other, _))) if other == name => open_block = None,
                (false, _) => {
                    problems.push(format!("{page}:{}: {name}:end without its begin", i + 1))
                }
            }
        } else if is_fence(line) {
            let open = i;
            i += 1;
            while i < lines.len() && !is_fence(lines[i]) {
                i += 1;
            }
            if i == lines.len() {
                problems.push(format!(
                    "{page}:{}: a fenced block that is never closed",
                    open + 1
                ));
            } else if open_block.is_none() {
                if let Some(p) = block_problem(root, &lines, open, &lines[open + 1..i]) {
                    problems.push(format!("{page}:{}: {p}", open + 1));
                }
            }
        }
        i += 1;
    }
    if let Some((name, at)) = open_block {
        problems.push(format!("{page}:{}: {name}:begin is never ended", at + 1));
    }
    problems
}

/// The text of every file under bench/, lab/ and scripts/ (where generated
/// blocks' writers live).
fn script_text(root: &Path) -> String {
    fn walk(dir: &Path, out: &mut String) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                if p.file_name().is_some_and(|n| n != "target") {
                    walk(&p, out);
                }
            } else if let Ok(t) = std::fs::read_to_string(&p) {
                out.push_str(&t);
            }
        }
    }
    let mut out = String::new();
    for d in ["bench", "lab", "scripts"] {
        walk(&root.join(d), &mut out);
    }
    out
}

#[test]
fn every_output_block_in_the_docs_comes_from_a_script() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let scripts = script_text(root);
    let problems: Vec<String> = pages(root)
        .iter()
        .flat_map(|(page, text)| page_problems(root, page, text, &scripts))
        .collect();
    assert!(
        problems.is_empty(),
        "figures in the docs must come from a script:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_rule_catches_a_pasted_run_and_unpaired_markers() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let scripts = "bench/x.sh writes tbl";
    let check = |text: &str| page_problems(root, "t.md", text, scripts);
    // A pasted run: caught; the same named by its script, or generated: passes.
    let pasted = "Output on this VM:\n\n```text\nround trip 5.39 µs\n```\n";
    assert_eq!(check(pasted).len(), 1, "{:?}", check(pasted));
    let named = "Printed by `bench/random_vs_fio.sh`:\n\n```text\nround trip 5.39 µs\n```\n";
    assert!(check(named).is_empty(), "{:?}", check(named));
    let gone = "Printed by `bench/no_such_script.sh`:\n\n```text\n5.39 µs\n```\n";
    assert_eq!(
        check(gone).len(),
        1,
        "a script that does not exist names nothing"
    );
    let generated = "<!-- tbl:begin -->\n```text\n5.39 µs\n```\n<!-- tbl:end -->\n";
    assert!(check(generated).is_empty(), "{:?}", check(generated));
    // A diagram or tree without figures passes; commands pass, output in them does not.
    assert!(check("```\nsrc/cli/   one file per verb\nx86_64 v1.2\n```\n").is_empty());
    assert!(check("```sh\ntunelab run io.random -p depth=32  # QD 32\n```\n").is_empty());
    assert_eq!(check("```sh\n$ tunelab list\n| a | b |\n```\n").len(), 1);
    assert!(check("```console\n$ tunelab run x \\\n    -p a=1\n```\n").is_empty());
    assert_eq!(check("```console\n$ tunelab run x\n12 ms\n```\n").len(), 1);
    assert_eq!(
        check("Output:\n\n    5.39 µs\n").len(),
        1,
        "an indented block"
    );
    assert!(check("- item\n\n    more of the item\n").is_empty());
    // Markers pair up, are written by a script, and stand once per page.
    assert_eq!(check("<!-- tbl:begin -->\ntext\n").len(), 1);
    assert_eq!(check("<!-- tbl:end -->\n").len(), 1);
    assert_eq!(check("<!-- other:begin -->\n<!-- other:end -->\n").len(), 1);
    assert_eq!(
        check("<!-- tbl:begin -->\n<!-- tbl:end -->\n<!-- tbl:begin -->\n<!-- tbl:end -->\n").len(),
        1
    );
}
