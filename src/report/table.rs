//! Plain terminal tables (comfy-table), no colour, UTF-8 borders only on a terminal.
//!
//! A cell is never squeezed below a readable width (docs/board.md, "Tables
//! on a serial console"): a column is at least as wide as its longest word,
//! so run ids and paths stay whole on one line. Off a terminal the table
//! keeps its natural width (Markdown, for `grep` and files). On a terminal
//! whose width is unknown — a serial console reports 0 columns — the width
//! is taken as 80, like `less` and `vi` do. When the columns cannot fit the
//! width even at their floors, each row is printed as a record, one
//! `field  value` line per column, with long values wrapped between words.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use comfy_table::{presets, ColumnConstraint, ContentArrangement, Table, Width};

/// Whether tables go to a terminal (UTF-8 borders) or to a pipe or file
/// (Markdown). The CLI says so once at start-up; a lower layer never asks.
static TERMINAL: AtomicBool = AtomicBool::new(false);
/// The terminal's width in columns (0: unknown), set with [`set_terminal`].
static WIDTH: AtomicUsize = AtomicUsize::new(0);

/// The width assumed on a terminal that does not say (serial consoles).
pub const FALLBACK_WIDTH: usize = 80;
/// A column holding text that can wrap is never narrower than this (or its
/// widest word, or its natural width when that is smaller).
const READABLE: usize = 12;

/// Set by the CLI from whether stdout is a terminal, and its width in
/// columns (0 when the terminal does not report one).
pub fn set_terminal(yes: bool) {
    TERMINAL.store(yes, Ordering::Relaxed);
    WIDTH.store(if yes { terminal_width() } else { 0 }, Ordering::Relaxed);
}

/// Columns of the terminal on stdout: `COLUMNS` when set to a positive
/// number, else the window size the tty reports (0 when it reports none).
fn terminal_width() -> usize {
    if let Some(c) = std::env::var("COLUMNS")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|c| *c > 0)
    {
        return c;
    }
    // SAFETY: TIOCGWINSZ fills a winsize struct we own; a failure leaves it zeroed.
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    let ok = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut ws) } == 0;
    if ok {
        ws.ws_col as usize
    } else {
        0
    }
}

pub fn render(header: &[&str], rows: Vec<Vec<String>>) -> String {
    if TERMINAL.load(Ordering::Relaxed) {
        let w = WIDTH.load(Ordering::Relaxed);
        layout(header, rows, if w == 0 { FALLBACK_WIDTH } else { w })
    } else {
        natural(header, rows, presets::ASCII_MARKDOWN)
    }
}

/// `head` then `items`, one line off a terminal; on a terminal the items
/// are wrapped whole (an item is never split) onto lines indented by
/// `indent` so that no line passes the width (80 when unknown).
pub fn run_on(head: &str, items: &[String], indent: usize) -> String {
    let width = if TERMINAL.load(Ordering::Relaxed) {
        match WIDTH.load(Ordering::Relaxed) {
            0 => FALLBACK_WIDTH,
            w => w,
        }
    } else {
        usize::MAX
    };
    run_on_at(head, items, indent, width)
}

fn run_on_at(head: &str, items: &[String], indent: usize, width: usize) -> String {
    // The head's leading spaces are kept; its words wrap like the items.
    let trimmed = head.trim_start();
    let mut s = head[..head.len() - trimmed.len()].to_string();
    let mut col = text_width(&s);
    let words = trimmed.split_whitespace().map(String::from);
    for item in words.chain(items.iter().cloned()) {
        let item = &item;
        let w = text_width(item);
        if col > indent && col + 1 + w > width {
            s.push('\n');
            s.push_str(&" ".repeat(indent));
            col = indent;
        } else if col > 0 && !s.ends_with(' ') {
            s.push(' ');
            col += 1;
        }
        s.push_str(item);
        col += w;
    }
    s.push('\n');
    s
}

/// Free text after `head`, broken between words like [`run_on`]: notes,
/// signs and warnings stay readable on a serial console.
pub fn para(head: &str, text: &str, indent: usize) -> String {
    let words: Vec<String> = text.split_whitespace().map(String::from).collect();
    run_on(head, &words, indent)
}

/// A terminal table for `width` columns (see the module comment).
pub fn layout(header: &[&str], rows: Vec<Vec<String>>, width: usize) -> String {
    let preset = presets::UTF8_HORIZONTAL_ONLY;
    let full = natural(header, rows.clone(), preset);
    if widest_line(&full) <= width {
        return full;
    }
    let ncol = header
        .len()
        .max(rows.iter().map(Vec::len).max().unwrap_or(0));
    let natural_w: Vec<usize> = (0..ncol)
        .map(|c| column_width(header, &rows, c, text_width))
        .collect();
    let floors: Vec<usize> = (0..ncol)
        .map(|c| {
            let word = column_width(header, &rows, c, longest_word);
            word.max(READABLE.min(natural_w[c]))
        })
        .collect();
    // Borders and padding cost what the natural layout spends beyond its cells.
    let overhead = widest_line(&full).saturating_sub(natural_w.iter().sum::<usize>());
    if floors.iter().sum::<usize>() + overhead > width {
        return records(header, &rows, width);
    }
    let mut t = Table::new();
    t.load_preset(preset)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_width(width.min(u16::MAX as usize) as u16)
        .set_header(header.to_vec());
    for r in rows {
        t.add_row(r);
    }
    compact(&mut t, preset);
    for (c, f) in floors.iter().enumerate() {
        if let Some(col) = t.column_mut(c) {
            col.set_constraint(ColumnConstraint::LowerBoundary(Width::Fixed(
                (*f).min(u16::MAX as usize) as u16,
            )));
        }
    }
    let mut s = t.to_string();
    s.push('\n');
    s
}

/// The table at its natural width: no column is wrapped or shrunk.
fn natural(header: &[&str], rows: Vec<Vec<String>>, preset: &str) -> String {
    let mut t = Table::new();
    t.load_preset(preset)
        .set_content_arrangement(ContentArrangement::Disabled)
        .set_header(header.to_vec());
    for r in rows {
        t.add_row(r);
    }
    compact(&mut t, preset);
    let mut s = t.to_string();
    s.push('\n');
    s
}

/// On a terminal, columns are set apart by their blank separator and one
/// space of padding on the right (two spaces in all) instead of a space on
/// each side (three): 80 columns then hold a few more characters of data.
fn compact(t: &mut Table, preset: &str) {
    if preset == presets::UTF8_HORIZONTAL_ONLY {
        for col in t.column_iter_mut() {
            col.set_padding((0, 1));
        }
    }
}

/// Each row as a record: `field  value` lines, a blank line between rows;
/// values longer than the width wrap between words, never inside one.
fn records(header: &[&str], rows: &[Vec<String>], width: usize) -> String {
    let key_w = header.iter().map(|h| text_width(h)).max().unwrap_or(0);
    let room = width.saturating_sub(key_w + 2).max(READABLE);
    let mut s = String::new();
    for (i, row) in rows.iter().enumerate() {
        if i > 0 {
            s.push('\n');
        }
        for (c, cell) in row.iter().enumerate() {
            let key = header.get(c).copied().unwrap_or("");
            let mut first = true;
            for line in cell.lines().flat_map(|l| wrap(l, room)) {
                let k = if first { key } else { "" };
                s.push_str(format!("{k:<key_w$}  {line}").trim_end());
                s.push('\n');
                first = false;
            }
            if first {
                s.push_str(key);
                s.push('\n');
            }
        }
    }
    s
}

/// `line` broken between words into pieces of at most `room` columns (a
/// word longer than that is one piece of its own, whole).
fn wrap(line: &str, room: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for word in line.split_whitespace() {
        if !cur.is_empty() && text_width(&cur) + 1 + text_width(word) > room {
            out.push(std::mem::take(&mut cur));
        }
        if !cur.is_empty() {
            cur.push(' ');
        }
        cur.push_str(word);
    }
    if !cur.is_empty() || out.is_empty() {
        out.push(cur);
    }
    out
}

/// Display columns of `s` (one per character: tables hold ASCII, units and
/// a few symbols such as ≤ and ×, all one column wide).
fn text_width(s: &str) -> usize {
    s.lines().map(|l| l.chars().count()).max().unwrap_or(0)
}

/// The longest run of non-space characters in `s` (an id, a path, a number
/// with its unit): the least a column can be without splitting it.
fn longest_word(s: &str) -> usize {
    s.split_whitespace()
        .map(|w| w.chars().count())
        .max()
        .unwrap_or(0)
}

fn column_width(
    header: &[&str],
    rows: &[Vec<String>],
    c: usize,
    measure: fn(&str) -> usize,
) -> usize {
    let h = header.get(c).map_or(0, |h| measure(h));
    rows.iter()
        .filter_map(|r| r.get(c))
        .map(|s| measure(s))
        .fold(h, usize::max)
}

fn widest_line(s: &str) -> usize {
    s.lines().map(|l| l.chars().count()).max().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> (Vec<&'static str>, Vec<Vec<String>>) {
        let header = vec!["id", "machine", "experiments"];
        let rows = vec![
            vec![
                "20261125T114512-3f9a2c".to_string(),
                "board-1".to_string(),
                "io.record-size io.api mem.latency mem.bandwidth ipc.pipe sched.wakeup".to_string(),
            ],
            vec![
                "20261125T120001-77aa01".to_string(),
                "(none)".to_string(),
                "io.file-read".to_string(),
            ],
        ];
        (header, rows)
    }

    fn widest(s: &str) -> usize {
        widest_line(s)
    }

    #[test]
    fn a_table_that_fits_keeps_its_natural_layout() {
        let (h, r) = sample();
        let s = layout(&h, r.clone(), 500);
        assert_eq!(s, natural(&h, r, presets::UTF8_HORIZONTAL_ONLY));
    }

    #[test]
    fn at_80_columns_long_text_wraps_but_ids_stay_whole() {
        let (h, r) = sample();
        let s = layout(&h, r, 80);
        assert!(widest(&s) <= 80, "{s}");
        assert!(s.contains("20261125T114512-3f9a2c"), "{s}");
        assert!(s.contains("20261125T120001-77aa01"), "{s}");
        // The long experiment list was wrapped between names, not inside one.
        for name in ["io.record-size", "mem.bandwidth", "sched.wakeup"] {
            assert!(s.contains(name), "{name} split:\n{s}");
        }
    }

    #[test]
    fn too_narrow_for_the_columns_prints_records() {
        let (h, r) = sample();
        let s = layout(&h, r, 40);
        assert!(widest(&s) <= 40, "{s}");
        assert!(s.contains("id           20261125T114512-3f9a2c"), "{s}");
        assert!(s.contains("machine      (none)"), "{s}");
        assert!(s.contains("experiments  io.record-size io.api"), "{s}");
    }

    #[test]
    fn a_word_wider_than_the_screen_is_never_split() {
        let long = "/very/long/path/".repeat(6);
        let s = layout(&["path"], vec![vec![long.clone()]], 30);
        assert!(s.contains(&long), "{s}");
    }

    #[test]
    fn wrap_breaks_between_words_only() {
        assert_eq!(wrap("aa bb cc", 5), vec!["aa bb", "cc"]);
        assert_eq!(wrap("abcdefgh x", 3), vec!["abcdefgh", "x"]);
        assert_eq!(wrap("", 3), vec![""]);
    }

    #[test]
    fn run_on_keeps_items_whole_and_the_head_indent() {
        let items: Vec<String> = ["p50=6.28 µs", "p90=7.12 µs", "p99=9.40 µs"]
            .map(String::from)
            .to_vec();
        let s = run_on_at("  round_trip (9 samples):", &items, 4, 40);
        assert_eq!(
            s,
            "  round_trip (9 samples): p50=6.28 µs\n    p90=7.12 µs p99=9.40 µs\n"
        );
        // Off a terminal: one line, exactly as before.
        let s = run_on_at("x:", &items, 4, usize::MAX);
        assert_eq!(s, "x: p50=6.28 µs p90=7.12 µs p99=9.40 µs\n");
    }
}
