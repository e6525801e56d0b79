//! The layers of docs/architecture.md, checked on the source: every import
//! of `src/` points down, and no two top-level modules import each other
//! (directly or round a longer cycle). The graph is built from the text:
//! `use` trees and every `crate::…`, `super::…` and `self::…` path, with
//! comments and string literals removed first.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// Layer of each top-level module, higher imports lower (docs/architecture.md).
const LAYERS: &[(&str, u8)] = &[
    ("cli", 5),
    ("study", 4),
    ("advise", 4),
    ("tune", 4),
    ("experiments", 3),
    ("engine", 2),
    ("store", 1),
    ("report", 1),
    // Beside report, which renders what it computes: analysis never imports
    // report (the cycle test below fails if it does).
    ("analysis", 1),
    ("lab", 1),
    // The profiler reads the machine only (model, observe, safety, units):
    // the engine's diagnose session runs it.
    ("diagnose", 1),
    // ssh fan-out and inventories, on safety and system only: the engine's
    // remote session runs it.
    ("fleet", 1),
    ("safety", 0),
    ("observe", 0),
    ("system", 0),
    ("stats", 0),
    ("units", 0),
    ("model", 0),
    ("error", 0),
];

/// Known edges that point up, each with who removes it. (file, target layer)
const ALLOWED: &[(&str, &str, &str)] = &[];

/// What `src/cli/` may import: it parses, calls the engine (or the study,
/// the sweep, the analysis of stored runs, the store it opens and the
/// store's selections) and prints (docs/architecture.md,
/// "The CLI").
const CLI_IMPORTS: &[&str] = &[
    "cli", "engine", "study", "tune", "analysis", "report", "store", "model", "units", "error",
];

/// CLI imports beyond that list that are known, each with why and who
/// removes it: (file, module). Any other one fails, and so does one of
/// these once it is gone (so the list only shrinks).
const CLI_KNOWN: &[(&str, &str, &str)] = &[];

/// File-level cycles inside one top-level module that are known and not yet
/// broken, each with who owns the files. Any other cycle fails the test, and
/// so does one of these once it is gone (so the list only shrinks).
const KNOWN_FILE_CYCLES: &[(&[&str], &str)] = &[];

/// One module of the crate: its path segments and the file it lives in.
struct Module {
    file: PathBuf,
    /// e.g. ["experiments", "io", "burst"]; empty for lib.rs.
    path: Vec<String>,
}

/// An import found in the source.
#[derive(Debug, Clone)]
struct Edge {
    file: String,
    line: usize,
    from: Vec<String>,
    to: Vec<String>,
    text: String,
}

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn collect(dir: &Path, out: &mut Vec<Module>) {
    let mut entries: Vec<_> = fs::read_dir(dir).unwrap().flatten().collect();
    entries.sort_by_key(|e| e.path());
    for e in entries {
        let p = e.path();
        if p.is_dir() {
            collect(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            let rel = p.strip_prefix(src_dir()).unwrap();
            let mut path: Vec<String> = rel
                .with_extension("")
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if path == ["main"] {
                continue; // the binary, above everything
            }
            if path.last().is_some_and(|l| l == "mod" || l == "lib") {
                path.pop();
            }
            out.push(Module { file: p, path });
        }
    }
}

/// The source with comments, strings and char literals blanked (newlines kept).
fn strip(src: &str) -> String {
    let b: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < b.len() && b[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == '/' && b.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if b[i] == '*' && b.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(b[i]));
                    i += 1;
                }
            }
        } else if (c == 'r' || (c == 'b' && next == Some('r')))
            && !prev_is_ident(&b, i)
            && raw_string_start(&b, i + if c == 'b' { 2 } else { 1 }).is_some()
        {
            let start = i + if c == 'b' { 2 } else { 1 };
            let hashes = raw_string_start(&b, start).unwrap();
            let close: Vec<char> = std::iter::once('"')
                .chain(std::iter::repeat_n('#', hashes))
                .collect();
            let mut j = start + hashes + 1;
            while j < b.len() && !b[j..].starts_with(&close) {
                j += 1;
            }
            let end = (j + close.len()).min(b.len());
            for &ch in &b[i..end] {
                out.push(blank(ch));
            }
            i = end;
        } else if c == '"' {
            out.push(' ');
            i += 1;
            while i < b.len() && b[i] != '"' {
                if b[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if i < b.len() {
                    out.push(blank(b[i]));
                    i += 1;
                }
            }
            out.push(' ');
            i += 1;
        } else if c == '\''
            && (!prev_is_ident(&b, i) || (b[i - 1] == 'b' && !prev_is_ident(&b, i - 1)))
        {
            // A char literal ('x', '\n', '\u{..}') or a lifetime ('a).
            if next == Some('\\') {
                let mut j = i + 2;
                while j < b.len() && b[j] != '\'' {
                    j += 1;
                }
                for _ in i..=j.min(b.len() - 1) {
                    out.push(' ');
                }
                i = j + 1;
            } else if b.get(i + 2) == Some(&'\'') {
                out.push_str("   ");
                i += 3;
            } else {
                out.push(c);
                i += 1;
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

fn prev_is_ident(b: &[char], i: usize) -> bool {
    i > 0 && (b[i - 1].is_alphanumeric() || b[i - 1] == '_')
}

/// At `i`: `"` or `#…#"` opening a raw string; returns the number of `#`.
fn raw_string_start(b: &[char], i: usize) -> Option<usize> {
    let mut n = 0;
    while b.get(i + n) == Some(&'#') {
        n += 1;
    }
    (b.get(i + n) == Some(&'"')).then_some(n)
}

/// Expand a `use` tree (`a::{b, c::{d, e}}`) into paths.
fn expand_use(tree: &str) -> Vec<Vec<String>> {
    fn go(prefix: &[String], s: &str, out: &mut Vec<Vec<String>>) {
        let s = s.trim();
        if s.is_empty() {
            return;
        }
        if let Some(open) = s.find('{') {
            let head = s[..open].trim().trim_end_matches("::");
            let mut p = prefix.to_vec();
            p.extend(segments(head));
            let inner = &s[open + 1..s.rfind('}').unwrap_or(s.len())];
            for part in split_top(inner) {
                go(&p, part, out);
            }
        } else {
            let s = s.split(" as ").next().unwrap().trim();
            let mut p = prefix.to_vec();
            p.extend(segments(s));
            out.push(p);
        }
    }
    let mut out = Vec::new();
    go(&[], tree, &mut out);
    out
}

fn segments(s: &str) -> Vec<String> {
    s.split("::")
        .map(|x| x.trim().to_string())
        .filter(|x| !x.is_empty() && x != "*")
        .collect()
}

fn split_top(s: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in s.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    parts
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Every path of one file: (line, path as written, inline-module nesting).
fn paths_in(text: &str) -> Vec<(usize, Vec<String>, Vec<String>)> {
    let mut found = Vec::new();
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let line_of = |byte: usize| text[..byte].matches('\n').count() + 1;
    // Inline `mod name {` blocks shift what `super` and `self` mean.
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut k = 0;
    while k < chars.len() {
        let (pos, c) = chars[k];
        let rest = &text[pos..];
        let at_word = k == 0 || !is_ident(chars[k - 1].1);
        if c == '{' {
            depth += 1;
        } else if c == '}' {
            depth = depth.saturating_sub(1);
            if inline.last().is_some_and(|(_, d)| *d == depth) {
                inline.pop();
            }
        } else if at_word && rest.starts_with("mod ") {
            let after = &rest[4..];
            let name: String = after
                .trim_start()
                .chars()
                .take_while(|c| is_ident(*c))
                .collect();
            let tail = after.trim_start()[name.len()..].trim_start();
            if tail.starts_with('{') {
                inline.push((name, depth));
            }
        } else if at_word && rest.starts_with("use ") {
            let end = rest.find(';').unwrap_or(rest.len());
            let nest: Vec<String> = inline.iter().map(|(n, _)| n.clone()).collect();
            for p in expand_use(&rest[4..end]) {
                found.push((line_of(pos), p, nest.clone()));
            }
            let skip = rest[..end].chars().count();
            k += skip;
            continue;
        } else if at_word
            && (rest.starts_with("crate::")
                || rest.starts_with("super::")
                || rest.starts_with("self::"))
        {
            let len = rest
                .find(|c: char| !(is_ident(c) || c == ':'))
                .unwrap_or(rest.len());
            let nest: Vec<String> = inline.iter().map(|(n, _)| n.clone()).collect();
            found.push((line_of(pos), segments(&rest[..len]), nest));
            k += rest[..len].chars().count();
            continue;
        }
        k += 1;
    }
    found
}

/// The module a path names: the longest known module prefix, made absolute.
fn resolve(
    from: &[String],
    nest: &[String],
    path: &[String],
    modules: &BTreeSet<Vec<String>>,
) -> Option<Vec<String>> {
    let mut here: Vec<String> = from.iter().chain(nest).cloned().collect();
    let mut rest = path;
    match rest.first().map(String::as_str) {
        Some("crate") => {
            here.clear();
            rest = &rest[1..];
        }
        Some("super") | Some("self") => {
            while let Some(s) = rest.first() {
                match s.as_str() {
                    "super" => {
                        here.pop()?;
                    }
                    "self" => {}
                    _ => break,
                }
                rest = &rest[1..];
            }
        }
        Some(first) => {
            // A relative `use child::…` in a parent module; anything else
            // (std, serde, a local item) is not a module of this crate.
            let mut child = here.clone();
            child.push(first.to_string());
            if !modules.contains(&child) {
                return None;
            }
        }
        None => return None,
    }
    let mut abs = here;
    abs.extend(rest.iter().cloned());
    // `crate::Error` and `crate::Result` are re-exports of `error`.
    if abs.len() == 1 && (abs[0] == "Error" || abs[0] == "Result") {
        return Some(vec!["error".into()]);
    }
    while !abs.is_empty() && !modules.contains(&abs) {
        abs.pop();
    }
    (!abs.is_empty()).then_some(abs)
}

fn graph() -> Vec<Edge> {
    let mut mods = Vec::new();
    collect(&src_dir(), &mut mods);
    let known: BTreeSet<Vec<String>> = mods.iter().map(|m| m.path.clone()).collect();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut edges = Vec::new();
    for m in &mods {
        if m.path.is_empty() {
            continue; // lib.rs declares the modules, it imports none
        }
        let text = strip(&fs::read_to_string(&m.file).unwrap());
        let file = m.file.strip_prefix(root).unwrap().display().to_string();
        for (line, p, nest) in paths_in(&text) {
            if let Some(to) = resolve(&m.path, &nest, &p, &known) {
                if to != m.path {
                    edges.push(Edge {
                        file: file.clone(),
                        line,
                        from: m.path.clone(),
                        to,
                        text: p.join("::"),
                    });
                }
            }
        }
    }
    edges
}

fn layer(top: &str) -> Option<u8> {
    LAYERS.iter().find(|(n, _)| *n == top).map(|(_, l)| *l)
}

fn allowed(e: &Edge) -> bool {
    ALLOWED
        .iter()
        .any(|(f, to, _)| e.file == *f && e.to[0] == *to)
}

/// Strongly connected components with more than one member (Tarjan).
fn cycles(nodes: &BTreeSet<String>, adj: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct T<'a> {
        adj: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<String, usize>,
        low: BTreeMap<String, usize>,
        stack: Vec<String>,
        on: BTreeSet<String>,
        next: usize,
        out: Vec<Vec<String>>,
    }
    fn visit(t: &mut T, v: &str) {
        t.index.insert(v.into(), t.next);
        t.low.insert(v.into(), t.next);
        t.next += 1;
        t.stack.push(v.into());
        t.on.insert(v.into());
        let succ: Vec<String> = t.adj.get(v).into_iter().flatten().cloned().collect();
        for w in succ {
            if !t.index.contains_key(&w) {
                visit(t, &w);
                let l = t.low[&w].min(t.low[v]);
                t.low.insert(v.into(), l);
            } else if t.on.contains(&w) {
                let l = t.index[&w].min(t.low[v]);
                t.low.insert(v.into(), l);
            }
        }
        if t.low[v] == t.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = t.stack.pop() {
                t.on.remove(&w);
                let done = w == v;
                comp.push(w);
                if done {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                t.out.push(comp);
            }
        }
    }
    let mut t = T {
        adj,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        next: 0,
        out: Vec::new(),
    };
    for n in nodes {
        if !t.index.contains_key(n) {
            visit(&mut t, n);
        }
    }
    t.out
}

/// Edges between the members of a cycle, for the failure message.
fn explain(comp: &[String], edges: &[&Edge], key: impl Fn(&Edge) -> (String, String)) -> String {
    let mut lines = BTreeMap::new();
    for e in edges {
        let (a, b) = key(e);
        if comp.contains(&a) && comp.contains(&b) {
            lines
                .entry((a.clone(), b.clone()))
                .or_insert_with(|| format!("    {a} -> {b}  ({}:{} {})", e.file, e.line, e.text));
        }
    }
    lines.into_values().collect::<Vec<_>>().join("\n")
}

#[test]
fn imports_point_down_the_layers() {
    let edges = graph();
    assert!(
        edges.len() > 200,
        "the graph found only {} imports",
        edges.len()
    );
    let mut problems = Vec::new();
    for e in &edges {
        let (a, b) = (&e.from[0], &e.to[0]);
        let (Some(la), Some(lb)) = (layer(a), layer(b)) else {
            problems.push(format!(
                "{}:{}: module '{}' or '{}' has no layer in tests/architecture.rs LAYERS",
                e.file, e.line, a, b
            ));
            continue;
        };
        if lb > la && !allowed(e) {
            problems.push(format!(
                "{}:{}: {a} (layer {la}) imports {b} (layer {lb}) upwards: {}",
                e.file, e.line, e.text
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "imports pointing up (docs/architecture.md, Layers):\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_cli_imports_only_its_list() {
    let edges = graph();
    let mut found = BTreeSet::new();
    let mut problems = Vec::new();
    for e in edges.iter().filter(|e| e.from[0] == "cli") {
        let to = e.to[0].as_str();
        if CLI_IMPORTS.contains(&to) {
            continue;
        }
        if CLI_KNOWN.iter().any(|(f, m, _)| *f == e.file && *m == to) {
            found.insert((e.file.clone(), to.to_string()));
            continue;
        }
        problems.push(format!(
            "{}:{}: the CLI imports '{to}' ({}); it may import only {} — \
             call an engine (or study/tune/analysis) function instead",
            e.file,
            e.line,
            e.text,
            CLI_IMPORTS.join(", ")
        ));
    }
    for (f, m, _) in CLI_KNOWN {
        if !found.contains(&(f.to_string(), m.to_string())) {
            problems.push(format!(
                "{f} no longer imports '{m}': remove it from CLI_KNOWN in tests/architecture.rs"
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "imports of src/cli/ outside its list (docs/architecture.md, The CLI):\n{}",
        problems.join("\n")
    );
}

/// The source of `file` with comments and strings blanked and its test
/// code blanked too (a test-only file, see [`test_only_files`], is all
/// blank; elsewhere every `#[cfg(test)]` item, see [`test_items`]). Lines
/// keep their numbers.
fn code_of(file: &Path) -> String {
    static TESTS: std::sync::OnceLock<BTreeSet<PathBuf>> = std::sync::OnceLock::new();
    let tests = TESTS.get_or_init(|| {
        let mut modules = Vec::new();
        collect(&src_dir(), &mut modules);
        test_only_files(&modules)
    });
    if tests.contains(file) {
        return String::new();
    }
    without_tests(&strip(&fs::read_to_string(file).unwrap()))
}

/// `text` (already stripped) with the lines of its `#[cfg(test)]` items
/// blanked: the one way every rule here leaves test code out.
fn without_tests(text: &str) -> String {
    let skip = test_items(text);
    text.split('\n')
        .enumerate()
        .map(|(i, l)| {
            let n = i + 1;
            if skip.iter().any(|&(a, b)| a <= n && n <= b) {
                " ".repeat(l.chars().count())
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `file`'s path below `src/`, as the messages name it.
fn rel(file: &Path) -> String {
    file.strip_prefix(src_dir()).unwrap().display().to_string()
}

/// Every `.rs` file under `src/<dir>` (all of `src/` for "").
fn files_under(dir: &str) -> Vec<PathBuf> {
    let mut modules = Vec::new();
    collect(&src_dir(), &mut modules);
    let root = src_dir().join(dir);
    let mut files: Vec<PathBuf> = modules
        .into_iter()
        .map(|m| m.file)
        .filter(|f| f.starts_with(&root))
        .collect();
    files.sort();
    files
}

/// The Store methods the CLI may call: a run by the reference the user
/// typed, the list and a subject's runs as stored, where the store is.
/// Any other question (which runs, which changes) is asked in
/// `store/select.rs`, where it can be tested without the CLI.
const CLI_STORE_CALLS: &[&str] = &[
    "load",
    "list",
    "runs_about",
    "location",
    // Handing the store this build's parameter kinds as it is opened.
    "learning_kinds",
    // The Option<Store> a verb holds (--no-store), not a question to it.
    "as_ref",
    "as_mut",
    "is_none",
    "is_some",
];

/// The CLI parses, calls and prints (docs/architecture.md, "The CLI"):
/// no root check (each verb's plan makes it, through
/// `safety::require_root`), no store query beyond `CLI_STORE_CALLS`, no
/// rewrite of the process environment.
#[test]
fn the_cli_checks_no_root_queries_no_store_and_keeps_the_environment() {
    let mut problems = Vec::new();
    for f in files_under("cli") {
        let code = code_of(&f);
        for (n, line) in code.lines().enumerate() {
            let at = format!("{}:{}", f.display(), n + 1);
            for word in ["is_root", "require_root", "geteuid", "getuid"] {
                if line.contains(word) {
                    problems.push(format!(
                        "{at}: a root check ({word}) in the CLI: make it in the verb's plan"
                    ));
                }
            }
            for word in ["set_var", "remove_var"] {
                if line.contains(word) {
                    problems.push(format!("{at}: the CLI rewrites the environment ({word})"));
                }
            }
            let mut rest = line;
            while let Some(i) = rest.find("store.") {
                let call: String = rest[i + 6..]
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                let is_call = rest[i + 6 + call.len()..].starts_with('(');
                if is_call && !CLI_STORE_CALLS.contains(&call.as_str()) {
                    problems.push(format!(
                        "{at}: the CLI queries the store (store.{call}): ask in store/select.rs"
                    ));
                }
                rest = &rest[i + 6..];
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Inputs decided once: the temp-directory default for a missing
/// `--target` in one function (`safety::scratch::target_or_temp`), the
/// target checked in one (`safety::scratch::check_target`), a refusal
/// for want of root in one (`safety::require_root`; elsewhere `is_root`
/// only informs: what a report may show, how to word an error).
#[test]
fn each_input_is_decided_in_one_place() {
    let mut problems = Vec::new();
    for f in files_under("") {
        let code = code_of(&f);
        let name = rel(&f);
        for (n, line) in code.lines().enumerate() {
            let at = format!("{name}:{}", n + 1);
            if line.contains("temp_dir") && name != "safety/scratch.rs" {
                problems.push(format!(
                    "{at}: the temp-directory default outside safety::scratch::target_or_temp"
                ));
            }
            let refusal = line.contains("!crate::safety::is_root()")
                || line.contains("!is_root()")
                || line.contains("!rustix::process::geteuid().is_root()");
            if refusal && !name.starts_with("safety/") {
                problems.push(format!("{at}: a root check outside safety::require_root"));
            }
            if line.contains("fn check_target") && name != "safety/scratch.rs" {
                problems.push(format!("{at}: a second target check"));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn top_level_modules_form_no_cycle() {
    let edges = graph();
    let kept: Vec<&Edge> = edges.iter().filter(|e| !allowed(e)).collect();
    let mut nodes = BTreeSet::new();
    let mut adj: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for e in &kept {
        let (a, b) = (e.from[0].clone(), e.to[0].clone());
        nodes.insert(a.clone());
        nodes.insert(b.clone());
        if a != b {
            adj.entry(a).or_default().insert(b);
        }
    }
    let found = cycles(&nodes, &adj);
    let report: Vec<String> = found
        .iter()
        .map(|c| {
            format!(
                "  cycle {{{}}}:\n{}",
                c.join(", "),
                explain(c, &kept, |e| (e.from[0].clone(), e.to[0].clone()))
            )
        })
        .collect();
    assert!(
        found.is_empty(),
        "top-level modules import each other:\n{}",
        report.join("\n")
    );
}

#[test]
fn files_form_no_cycle() {
    // A parent module re-exporting its children is structure, not an
    // import; every other edge between two files must not go round.
    let edges = graph();
    let kept: Vec<&Edge> = edges
        .iter()
        .filter(|e| !allowed(e) && !e.to.starts_with(&e.from))
        .collect();
    let name = |p: &[String]| p.join("::");
    let mut nodes = BTreeSet::new();
    let mut adj: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for e in &kept {
        nodes.insert(name(&e.from));
        nodes.insert(name(&e.to));
        adj.entry(name(&e.from)).or_default().insert(name(&e.to));
    }
    let found = cycles(&nodes, &adj);
    let known = |c: &Vec<String>| KNOWN_FILE_CYCLES.iter().any(|(k, _)| c == k);
    let report: Vec<String> = found
        .iter()
        .filter(|c| !known(c))
        .map(|c| {
            format!(
                "  cycle {{{}}}:\n{}",
                c.join(", "),
                explain(c, &kept, |e| (name(&e.from), name(&e.to)))
            )
        })
        .collect();
    assert!(
        report.is_empty(),
        "modules import each other:\n{}",
        report.join("\n")
    );
    let gone: Vec<String> = KNOWN_FILE_CYCLES
        .iter()
        .filter(|(k, _)| !found.iter().any(|c| c == k))
        .map(|(k, why)| format!("  {{{}}} ({why})", k.join(", ")))
        .collect();
    assert!(
        gone.is_empty(),
        "known cycles no longer found: remove them from KNOWN_FILE_CYCLES:\n{}",
        gone.join("\n")
    );
}

/// Small rooms (issue 30): a file over 600 lines is split by what it does
/// (a helper to `common/`, tests to `tests.rs`) before it grows further.
#[test]
fn no_source_file_is_over_600_lines() {
    let mut modules = Vec::new();
    collect(&src_dir(), &mut modules);
    let mut big: Vec<String> = modules
        .iter()
        .filter_map(|m| {
            let n = fs::read_to_string(&m.file).unwrap().lines().count();
            (n > 600).then(|| format!("{} ({n} lines)", m.file.display()))
        })
        .collect();
    big.sort();
    assert!(big.is_empty(), "over 600 lines: {}", big.join(", "));
}

#[test]
fn the_parser_sees_what_it_must() {
    let t = strip("let s = \"crate::cli\"; // crate::cli\nuse crate::{a::{b, c}, d as e};\n");
    assert!(!t.contains("crate::cli"));
    let p = paths_in(&t);
    let got: Vec<String> = p.iter().map(|(_, p, _)| p.join("::")).collect();
    assert_eq!(got, ["crate::a::b", "crate::a::c", "crate::d"]);
    assert_eq!(p[0].0, 2);
    let known: BTreeSet<Vec<String>> = [vec!["a".to_string()], vec!["a".into(), "b".into()]]
        .into_iter()
        .collect();
    let from = vec!["a".to_string(), "b".to_string()];
    let sup = vec!["super".to_string(), "X".to_string()];
    assert_eq!(
        resolve(&from, &[], &sup, &known),
        Some(vec!["a".to_string()])
    );
    // `use super::*` inside `mod tests` in a.b names a.b itself.
    assert_eq!(
        resolve(&from, &["tests".into()], &["super".into()], &known),
        Some(from.clone())
    );
    let t = strip("fn f<'a>(x: &'a str) -> char { '{' }\nmod tests {\n use super::*;\n}\n");
    let p = paths_in(&t);
    assert_eq!(p.len(), 1);
    assert_eq!(p[0].2, vec!["tests".to_string()]);
}

/// Where `src` reads a point's parameter by name (`p.u64("size")`,
/// `point.0.get("command")`) outside a function named `parse` and outside
/// `#[cfg(test)]` code ([`without_tests`]): (line, the enclosing function or "" at the top).
/// Comments and strings are blanked first (`strip` keeps every char in
/// place), so the name literal is looked up in the original text.
fn by_name_reads_outside_parse(src: &str) -> Vec<(usize, String)> {
    const ACCESSORS: &[&str] = &[".u64(", ".usize(", ".f64(", ".text(", ".bool(", ".0.get("];
    let raw: Vec<char> = src.chars().collect();
    let t: Vec<char> = without_tests(&strip(src)).chars().collect();
    assert_eq!(raw.len(), t.len(), "strip keeps every char in place");
    // Open braces: the function they open (if any).
    let mut scopes: Vec<Option<String>> = Vec::new();
    let mut pending_fn = None::<String>;
    let mut nest = 0i32; // ( and [ depth, where `;` ends no item
    let mut out = Vec::new();
    let mut line = 1;
    let mut i = 0;
    let starts = |at: usize, s: &str| {
        s.chars()
            .enumerate()
            .all(|(k, c)| t.get(at + k) == Some(&c))
    };
    while i < t.len() {
        let c = t[i];
        if c == '\n' {
            line += 1;
        } else if starts(i, "fn ") && (i == 0 || !is_ident(t[i - 1])) {
            let name: String = t[i + 3..].iter().take_while(|c| is_ident(**c)).collect();
            pending_fn = Some(name);
        } else if c == '(' || c == '[' {
            nest += 1;
        } else if c == ')' || c == ']' {
            nest -= 1;
        } else if c == ';' && nest == 0 {
            pending_fn = None;
        } else if c == '{' {
            let func = pending_fn
                .take()
                .or_else(|| scopes.last().cloned().flatten());
            scopes.push(func);
        } else if c == '}' {
            scopes.pop();
        } else if c == '.' {
            let call = ACCESSORS.iter().find(|a| starts(i, a));
            let after = call.map(|a| i + a.chars().count());
            let literal = after.and_then(|j| raw[j..].iter().find(|c| !c.is_whitespace()));
            if literal == Some(&'"') {
                let func = scopes.last().cloned().flatten();
                if func.as_deref() != Some("parse") {
                    out.push((line, func.unwrap_or_default()));
                }
            }
        }
        i += 1;
    }
    out
}

/// Issue 43: an experiment reads its parameters by name in one place, its
/// `parse` (into its own typed struct), and hands the struct on; a metric
/// handle is made only in a `const` item, where the compiler checks the
/// name against the Spec (`Spec::emits`), never at run time.
#[test]
fn experiments_read_parameters_only_in_parse_and_name_metrics_in_consts() {
    // The scanner finds what it must, and only that.
    let sample = "struct P { a: u64 }\nimpl P {\n    fn parse(p: &Point) -> Result<P> {\n        \
                  Ok(P { a: p.u64(\"a\")? })\n    }\n}\nfn validate(p: &Point, v: [u8; 2]) -> \
                  Result<()> {\n    let n = p.u64(\"size\")?; // p.u64(\"x\")\n    let s = \
                  \"p.text(\\\"y\\\")\";\n    let t = point.0.get(\"command\");\n    Ok(())\n}\n\
                  #[cfg(test)]\nmod tests {\n    fn t() { p.u64(\"size\").unwrap(); }\n}\n";
    let got = by_name_reads_outside_parse(sample);
    assert_eq!(
        got,
        [(8, "validate".to_string()), (10, "validate".to_string())]
    );

    let mut modules = Vec::new();
    collect(&src_dir(), &mut modules);
    let tests = test_only_files(&modules);
    let mut bad = Vec::new();
    let mut runtime_handles = Vec::new();
    for m in &modules {
        let src = fs::read_to_string(&m.file).unwrap();
        let rel = rel(&m.file);
        let test_file = tests.contains(&m.file);
        if m.path.first().is_some_and(|p| p == "experiments") && !test_file {
            for (line, func) in by_name_reads_outside_parse(&src) {
                bad.push(format!("{rel}:{line} (in fn {func})"));
            }
        }
        if rel == "engine/spec.rs" {
            continue; // where `emits` and `metric_in` are defined
        }
        // Every `emits(` / `metric_in(` call sits in a `const` item.
        let t = strip(&src);
        for pat in [".emits(", "metric_in("] {
            for (at, _) in t.match_indices(pat) {
                if pat == "metric_in(" && t[..at].ends_with("fn ") {
                    continue;
                }
                let item_start = t[..at].rfind([';', '{', '}']).map_or(0, |k| k + 1);
                let item = t[item_start..at].trim_start();
                let item = item
                    .strip_prefix("pub(crate) ")
                    .or_else(|| item.strip_prefix("pub "))
                    .unwrap_or(item);
                if !item.starts_with("const ") {
                    let line = t[..at].lines().count();
                    runtime_handles.push(format!("{rel}:{line}"));
                }
            }
        }
    }
    assert!(
        bad.is_empty(),
        "parameters read by name outside the experiment's `parse` (read them once in \
         `Params::parse` and pass the struct on): {}",
        bad.join(", ")
    );
    assert!(
        runtime_handles.is_empty(),
        "a metric handle made outside a `const` item is checked only at run time (and \
         panics): declare `const NAME: Metric = SPEC.emits(\"name\");` instead: {}",
        runtime_handles.join(", ")
    );
}

/// The files of `#[cfg(test)] mod name;` declarations: test-only modules
/// (`tests.rs`, `test_support.rs`) that may name /proc files as fixtures.
fn test_only_files(modules: &[Module]) -> BTreeSet<PathBuf> {
    let mut out = BTreeSet::new();
    for m in modules {
        let text = strip(&fs::read_to_string(&m.file).unwrap());
        let dir = match m.file.file_name().and_then(|n| n.to_str()) {
            Some("mod.rs" | "lib.rs") => m.file.parent().unwrap().to_path_buf(),
            _ => m.file.with_extension(""),
        };
        let words: Vec<&str> = text.split_whitespace().collect();
        for (i, w) in words.iter().enumerate() {
            if *w != "#[cfg(test)]" {
                continue;
            }
            // An optional visibility, then `mod name;`.
            let at = i + 1 + words.get(i + 1).is_some_and(|v| v.starts_with("pub")) as usize;
            if let (Some(&"mod"), Some(name)) = (words.get(at), words.get(at + 1)) {
                if let Some(name) = name.strip_suffix(';') {
                    out.insert(dir.join(format!("{name}.rs")));
                    out.insert(dir.join(name).join("mod.rs"));
                }
            }
        }
    }
    out
}

/// Line ranges (1-based, inclusive) of every `#[cfg(test)]` item in `src`
/// (comments and strings blanked or not): an inline `mod tests { … }`, a
/// test-only `fn`, `impl`, `use` or `const`, from the attribute to the end
/// of its block or `;`. A `#[cfg(test)] mod name;` declaration is one
/// line; its file is in [`test_only_files`].
fn test_items(src: &str) -> Vec<(usize, usize)> {
    let text = strip(src);
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(at) = text[from..].find("#[cfg(test)]") {
        let start = from + at;
        from = start + 1;
        // The item ends at the first `;` outside brackets, or with the
        // block its first `{` opens.
        let mut nest = 0i32;
        let mut end = None;
        let mut i = start + 12;
        while i < b.len() {
            match b[i] {
                b'(' | b'[' => nest += 1,
                b')' | b']' => nest -= 1,
                b';' if nest == 0 => {
                    end = Some(i);
                    break;
                }
                b'{' if nest == 0 => {
                    let mut depth = 0;
                    for (k, &c) in b.iter().enumerate().skip(i) {
                        depth += (c == b'{') as i32 - (c == b'}') as i32;
                        if depth == 0 {
                            end = Some(k);
                            break;
                        }
                    }
                    break;
                }
                _ => {}
            }
            i += 1;
        }
        let Some(end) = end else { continue };
        let line = |pos: usize| text[..pos].matches('\n').count() + 1;
        out.push((line(start), line(end)));
    }
    out
}

/// One place knows /proc's layout (docs/architecture.md, "The /proc
/// layer"): outside `system/proc/` the string `"/proc/` appears only in test
/// code, where fixtures may name the files, and `procfs` is reached only
/// through the layer.
#[test]
fn proc_paths_are_named_only_in_the_proc_layer() {
    let found: Vec<String> = code_lines_outside_the_proc_layer()
        .into_iter()
        .filter(|(_, _, l)| {
            let comment = l.trim_start().starts_with("//");
            !comment && (l.contains("\"/proc/") || l.contains("procfs::"))
        })
        .map(|(file, n, l)| format!("src/{file}:{n}: {}", l.trim()))
        .collect();
    assert!(
        found.is_empty(),
        "/proc paths or procfs outside src/system/proc/ (go through the layer):\n{}",
        found.join("\n")
    );
}

#[test]
fn test_code_is_found_wherever_it_sits() {
    let src = "fn a() {}\n#[cfg(test)]\nmod tests {\n    fn b() { let s = \"}\"; }\n}\nfn c() {}\n";
    assert_eq!(test_items(src), [(2, 5)]);
    assert_eq!(test_items("#[cfg(test)]\nmod tests;\n"), [(1, 2)]);
    let src = "#[cfg(test)]\npub(crate) mod testing {\n}\n";
    assert_eq!(test_items(src), [(1, 3)]);
    // A test-only function in the middle of a file hides only itself.
    let src = "fn a() {}\n#[cfg(test)]\npub(crate) fn f(x: [u8; 2]) -> u8 {\n    x[0]\n}\nfn c() { is_root() }\n";
    assert_eq!(test_items(src), [(2, 5)]);
    assert!(without_tests(&strip(src))
        .lines()
        .nth(5)
        .unwrap()
        .contains("is_root"));
    assert!(!without_tests(&strip(src)).contains("x[0]"));
    let src = "#[cfg(test)]\nuse super::thing;\nfn g() {}\n";
    assert_eq!(test_items(src), [(1, 2)]);
}

/// `libc::NAME`s used in `text` (comments and strings already blanked).
fn libc_names(text: &str) -> BTreeSet<String> {
    let b: Vec<char> = text.chars().collect();
    let pat: Vec<char> = "libc::".chars().collect();
    let mut out = BTreeSet::new();
    for i in 0..b.len() {
        if b[i..].starts_with(&pat) && !prev_is_ident(&b, i) {
            let name: String = b[i + pat.len()..]
                .iter()
                .take_while(|c| is_ident(**c))
                .collect();
            if !name.is_empty() {
                out.insert(name);
            }
        }
    }
    out
}

/// The names a file's `//! libc: a, b (why), c (why)` lines declare.
fn declared_libc(src: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in src.lines() {
        let Some(rest) = line.trim_start().strip_prefix("//! libc:") else {
            continue;
        };
        // Reasons are in parentheses; the names are what is outside them.
        let mut depth = 0;
        let names: String = rest
            .chars()
            .map(|c| {
                match c {
                    '(' => depth += 1,
                    ')' => depth -= 1,
                    _ => {}
                }
                if depth > 0 || c == ')' {
                    ' '
                } else {
                    c
                }
            })
            .collect();
        out.extend(
            names
                .split(|c: char| c == ',' || c.is_whitespace())
                .filter(|w| !w.is_empty())
                .map(str::to_string),
        );
    }
    out
}

/// rustix is the syscall layer: a file that still calls through `libc::`
/// (a forked child, the exec helper, a call rustix lacks) names every
/// `libc::` item it uses in its `//! libc:` module-doc lines, with why, and
/// names nothing it no longer uses.
#[test]
fn every_libc_use_is_declared_with_its_reason() {
    let mut modules = Vec::new();
    collect(&src_dir(), &mut modules);
    let mut bad = Vec::new();
    for m in &modules {
        let src = fs::read_to_string(&m.file).unwrap();
        let used = libc_names(&strip(&src));
        let declared = declared_libc(&src);
        let rel = rel(&m.file);
        let undeclared: Vec<&String> = used.difference(&declared).collect();
        if !undeclared.is_empty() {
            bad.push(format!(
                "{rel} uses libc::{undeclared:?} without a `//! libc:` line"
            ));
        }
        let stale: Vec<&String> = declared.difference(&used).collect();
        if !stale.is_empty() {
            bad.push(format!("{rel} declares libc {stale:?} it does not use"));
        }
    }
    assert!(
        bad.is_empty(),
        "use rustix, or say why not:\n{}",
        bad.join("\n")
    );
}

#[test]
fn libc_declarations_are_parsed() {
    let src = "//! Doc.\n//! libc: fork, _exit (async-signal-safe, child)\n//! libc: SIGKILL\n\
               fn f() { unsafe { libc::fork(); libc::_exit(0) } } // libc::getpid\n\
               const S: &str = \"libc::kill\"; fn g(x: mylibc::T) {}\n";
    let used = libc_names(&strip(src));
    assert_eq!(used.into_iter().collect::<Vec<_>>(), ["_exit", "fork"]);
    let d = declared_libc(src);
    assert_eq!(
        d.into_iter().collect::<Vec<_>>(),
        ["SIGKILL", "_exit", "fork"]
    );
}

/// Verb modules not in the shape yet, with why (none: every verb plans,
/// then measures).
const VERB_SHAPE_KNOWN: &[(&str, &str)] = &[];

/// What `code` (a verb module, comments and strings blanked) lacks of the
/// verb shape: a `pub fn plan`, a `pub struct Planned` and, in an `impl`
/// of `Planned`, a `pub fn measure` (each `pub` or `pub(crate)`).
fn verb_shape_gaps(code: &str) -> Vec<&'static str> {
    let word_after = |text: &str, at: usize, len: usize| {
        !text[at + len..]
            .chars()
            .next()
            .is_some_and(|c| c.is_alphanumeric() || c == '_')
    };
    // `pub` or `pub(crate)` (the crate's default visibility).
    let has = |item: &str, text: &str| {
        ["pub ", "pub(crate) "].iter().any(|vis| {
            let needle = format!("{vis}{item}");
            text.match_indices(&needle)
                .any(|(i, _)| word_after(text, i, needle.len()))
        })
    };
    let mut gaps = Vec::new();
    if !has("fn plan", code) {
        gaps.push("no `pub fn plan`");
    }
    if !has("struct Planned", code) {
        gaps.push("no `pub struct Planned`");
    }
    // Each `impl … Planned … {` block, by its braces.
    let mut measured = false;
    for (i, _) in code.match_indices("impl") {
        let Some(open) = code[i..].find('{').map(|o| i + o) else {
            continue;
        };
        let head = &code[i..open];
        let names_planned = head
            .match_indices("Planned")
            .any(|(j, _)| word_after(head, j, "Planned".len()))
            && !head.contains(" for ");
        if !names_planned {
            continue;
        }
        let mut depth = 0usize;
        let mut end = code.len();
        for (k, c) in code[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + k;
                        break;
                    }
                }
                _ => {}
            }
        }
        measured |= has("fn measure", &code[open..end]);
    }
    if !measured {
        gaps.push("no `pub fn measure` on `Planned`");
    }
    gaps
}

/// The `src/…rs` files the verb-shape table of docs/architecture.md
/// names (its "### Verb shapes" section), below `src/`.
fn verb_table_files() -> BTreeSet<String> {
    let doc =
        fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/architecture.md"))
            .unwrap();
    let section = doc
        .split("\n### Verb shapes")
        .nth(1)
        .expect("docs/architecture.md has a \"### Verb shapes\" section")
        .split("\n#")
        .next()
        .unwrap_or_default();
    section
        .lines()
        .filter(|l| l.starts_with('|'))
        .flat_map(|l| l.split('`'))
        .filter_map(|w| w.strip_prefix("src/"))
        .filter(|w| w.ends_with(".rs"))
        .map(str::to_string)
        .collect()
}

/// Every verb is request → `plan` → `Planned::measure`
/// (docs/architecture.md, "Verb shapes"): each module in
/// src/engine/verbs/ (a file, or a folder's mod.rs) and each module the
/// verb-shape table names has a `pub fn plan`, a `pub struct Planned`
/// and `Planned::measure`; the table names every module of
/// src/engine/verbs/; `VERB_SHAPE_KNOWN` is empty.
#[test]
fn every_verb_plans_then_measures() {
    let verbs_dir = src_dir().join("engine/verbs");
    let mut verbs: BTreeSet<String> = files_under("engine/verbs")
        .into_iter()
        .filter(|f| {
            let name = f.file_name().unwrap();
            let parent = f.parent().unwrap();
            if parent == verbs_dir {
                name != "mod.rs"
            } else {
                name == "mod.rs" && parent.parent() == Some(verbs_dir.as_path())
            }
        })
        .map(|f| rel(&f))
        .collect();
    let table = verb_table_files();
    let mut problems: Vec<String> = verbs
        .difference(&table)
        .map(|v| {
            format!(
                "src/{v}: a verb module the verb-shape table of docs/architecture.md does not name"
            )
        })
        .collect();
    verbs.extend(table);
    for v in &verbs {
        let file = src_dir().join(v);
        if !file.is_file() {
            problems.push(format!(
                "src/{v}: named in the verb-shape table, but no such file"
            ));
            continue;
        }
        let gaps = verb_shape_gaps(&code_of(&file));
        let known = VERB_SHAPE_KNOWN.iter().any(|(k, _)| k == v);
        if !gaps.is_empty() && !known {
            problems.push(format!("src/{v}: {}", gaps.join(", ")));
        }
        if gaps.is_empty() && known {
            problems.push(format!(
                "src/{v} is in shape: take it out of VERB_SHAPE_KNOWN"
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "every verb is request → plan → Planned::measure (docs/architecture.md, Verb shapes):\n{}",
        problems.join("\n")
    );
    assert!(
        VERB_SHAPE_KNOWN.is_empty(),
        "VERB_SHAPE_KNOWN must stay empty"
    );
}

/// The shape rule sees a module out of shape (an injected violation) and
/// the forms a real one takes (generics, lifetimes, `impl Trait for`).
#[test]
fn the_verb_shape_rule_sees_violations() {
    let good = "pub struct Request<'a> { x: &'a str }\n\
                pub struct Planned<'a> { x: &'a str }\n\
                pub fn plan<'a>(r: &Request<'a>) -> Result<Planned<'a>> { todo!() }\n\
                impl Planned<'_> {\n    fn helper(&self) { if true { } }\n    \
                pub fn measure(&self) -> Finished { todo!() }\n}\n";
    assert!(verb_shape_gaps(&strip(good)).is_empty());
    let crate_wide = "pub(crate) struct Planned { x: u32 }\n\
                      pub(crate) fn plan(r: Request) -> Result<Planned> { todo!() }\n\
                      impl Planned { pub(crate) fn measure(self) -> Booted { todo!() } }\n";
    assert!(verb_shape_gaps(&strip(crate_wide)).is_empty());
    // The old one-call shape: `run` does everything.
    let old =
        "pub struct Request { x: u32 }\npub fn run(r: Request) -> Result<Timed> { todo!() }\n";
    assert_eq!(
        verb_shape_gaps(&strip(old)),
        [
            "no `pub fn plan`",
            "no `pub struct Planned`",
            "no `pub fn measure` on `Planned`"
        ]
    );
    // Near misses: names that only start alike, `measure` outside the impl,
    // a trait's impl for Planned, and the words in comments and strings.
    let near = "pub fn planned() {}\nfn plan() {}\npub struct PlannedApply;\n\
                impl Planned { fn other(&self) {} }\npub fn measure() {}\n\
                impl Drop for Planned { pub fn measure(&mut self) {} }\n\
                // pub fn plan(\nconst S: &str = \"pub struct Planned {}\";\n";
    assert_eq!(
        verb_shape_gaps(&strip(near)),
        [
            "no `pub fn plan`",
            "no `pub struct Planned`",
            "no `pub fn measure` on `Planned`"
        ]
    );
}

/// What in `line` (code, not a comment) spells /proc's layout relative to a
/// root — procfs below a filesystem root (`"proc/…"`, `join("proc")`), a
/// path joined onto a /proc root (`proc_.join(…)`), a process directory's
/// layout (`"{pid}/…"`, `"{}/task"`, `"task/{tid}"`) or a file only /proc
/// has joined onto a path (`join("children")`) — or None. Names that sysfs
/// shares (stat, status, io, latency) are not matched alone: no false hits.
fn proc_layout_in(line: &str) -> Option<&'static str> {
    const PATTERNS: &[(&str, &str)] = &[
        ("\"proc/", "a /proc path below a root"),
        (".join(\"proc\")", "a /proc path below a root"),
        ("{pid}/", "a process directory's layout"),
        ("{tid}/", "a process directory's layout"),
        ("{}/task", "a process directory's layout"),
        ("task/{", "a process directory's layout"),
    ];
    const PROC_ONLY: &[&str] = &[
        "task",
        "children",
        "cmdline",
        "comm",
        "wchan",
        "schedstat",
        "smaps_rollup",
        "mountinfo",
    ];
    if line.trim_start().starts_with("//") {
        return None;
    }
    if let Some((_, why)) = PATTERNS.iter().find(|(p, _)| line.contains(p)) {
        return Some(why);
    }
    let b: Vec<char> = line.chars().collect();
    let joined_on_root = ["proc.join(", "proc_.join("].iter().any(|p| {
        let pat: Vec<char> = p.chars().collect();
        (0..b.len()).any(|i| b[i..].starts_with(&pat) && !prev_is_ident(&b, i))
    });
    if joined_on_root {
        return Some("a path joined onto a /proc root");
    }
    PROC_ONLY
        .iter()
        .any(|f| line.contains(&format!(".join(\"{f}\")")))
        .then_some("a file only /proc has")
}

/// Every line of `src/` outside the /proc layer and outside test code
/// (test-only files, `#[cfg(test)]` items): (file below src/, line, text).
fn code_lines_outside_the_proc_layer() -> Vec<(String, usize, String)> {
    let mut modules = Vec::new();
    collect(&src_dir(), &mut modules);
    let tests = test_only_files(&modules);
    let layer = src_dir().join("system").join("proc");
    let mut out = Vec::new();
    for m in &modules {
        if m.file.starts_with(&layer) || tests.contains(&m.file) {
            continue;
        }
        let src = fs::read_to_string(&m.file).unwrap();
        let skip = test_items(&src);
        for (i, l) in src.lines().enumerate() {
            let n = i + 1;
            if !skip.iter().any(|&(a, b)| a <= n && n <= b) {
                out.push((rel(&m.file), n, l.to_string()));
            }
        }
    }
    out
}

/// Non-test lines of `src/` outside the /proc layer that spell /proc's
/// layout, as (file, "file:line: why: text").
fn proc_layout_outside_the_layer() -> Vec<(String, String)> {
    code_lines_outside_the_proc_layer()
        .into_iter()
        .filter_map(|(file, n, l)| {
            let why = proc_layout_in(&l)?;
            Some((file.clone(), format!("src/{file}:{n}: {why}: {}", l.trim())))
        })
        .collect()
}

/// Readers that tests feed fixture trees take a `proc::Root` (or a root
/// directory they hand to `proc::Root::under`) and ask it for files by
/// what they are: outside `system/proc/` no code spells /proc's layout
/// relative to a root either (docs/architecture.md, "The /proc layer").
#[test]
fn proc_layout_below_a_root_is_known_only_to_the_proc_layer() {
    let bad: Vec<String> = proc_layout_outside_the_layer()
        .into_iter()
        .map(|(_, at)| at)
        .collect();
    assert!(
        bad.is_empty(),
        "/proc layout spelled outside src/system/proc/ (ask a proc::Root for the file):\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_proc_layout_rule_hits_layout_and_nothing_else() {
    let hits = [
        "let s = fs::read_to_string(root.join(\"proc/meminfo\"));",
        "for pid in numeric_dirs(&root.join(\"proc\")) {",
        "let s = std::fs::read_to_string(proc_.join(\"stat\")).ok()?;",
        "cpu: read(&self.roots.proc_.join(\"stat\")),",
        "let p = proc.join(\"diskstats\");",
        "proc_.join(format!(\"{pid}/io\"))",
        "let base = format!(\"{pid}/task/{tid}\");",
        ".join(format!(\"{}/task/{}/children\", roots.pid, roots.pid))",
        "let dir = crate::system::proc::name(&format!(\"{}/task\", pid));",
        ".filter_map(|t| std::fs::read_to_string(t.path().join(\"children\")).ok())",
        "match s.split_once(\"proc/sys/\") {",
    ];
    for h in hits {
        assert!(proc_layout_in(h).is_some(), "missed: {h}");
    }
    let clean = [
        "assert_eq!(m.fs_type, \"proc\");",
        "let lat = fs::read_to_string(d.join(\"latency\")).unwrap_or_default();",
        "let s = read(root, &format!(\"sys/block/{disk}/stat\"));",
        "let text = proc_.read_pid(pid, \"io\").ok()?;",
        "let kids = roots.proc_.children(pid);",
        "let p = my_proc_.join(\"x\");",
        "crate::system::proc::path(\"sys/vm\").join(name)",
        "// was: proc_.join(format!(\"{pid}/stat\"))",
        "f.add(\"board\", \"board.model\", model, format!(\"{base}/model\"));",
    ];
    for c in clean {
        assert_eq!(proc_layout_in(c), None, "false hit: {c}");
    }
}
