//! Plain terminal tables (comfy-table), no colour, one rule under the
//! header only; UTF-8 only when the locale is.
//!
//! A cell is never squeezed below a readable width (docs/board.md, "Tables
//! on a serial console"): a column is at least as wide as its longest word,
//! so run ids and names stay whole on one line. Off a terminal the table
//! keeps its natural width (Markdown, for `grep` and files). On a terminal
//! whose width is unknown — a serial console reports 0 columns — the width
//! is taken as 80, like `less` and `vi` do. When the columns cannot fit,
//! long words with natural break points (paths, comma lists) are split
//! there; a first column that names groups of rows goes on a line above
//! its group ([`grouped`]); only when even that does not fit is each row printed as a record,
//! one `field  value` line per column, wrapped between words.
//!
//! How the terminal shows text (its width, whether it takes UTF-8, cursor
//! movement) is decided once by the CLI at start-up, a [`Terminal`] value
//! handed down to what lays text out; a lower layer never reads the
//! environment for it.

use std::borrow::Cow;

use comfy_table::{presets, ColumnConstraint, ContentArrangement, Table, Width};

/// How the terminal shows text: whether tables go to a terminal (UTF-8
/// borders, laid out to its width) or to a pipe or file (Markdown), its
/// width, whether it takes UTF-8, whether cursor movement and colour may be
/// sent. The CLI decides it once at start-up ([`Terminal::detect`]) and
/// hands it to whatever lays text out; a lower layer never asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Terminal {
    tty: bool,
    /// Columns (0: unknown).
    width: usize,
    /// The locale is not UTF-8: every glyph is replaced by ASCII.
    ascii: bool,
    /// A tty, TERM not dumb, no NO_COLOR.
    escapes: bool,
}

/// The width assumed on a terminal that does not say (serial consoles).
pub(crate) const FALLBACK_WIDTH: usize = 80;
/// A column holding text that can wrap is never narrower than this (or its
/// widest word, or its natural width when that is smaller).
const READABLE: usize = 12;
/// A rule under the header and nothing else: a rule between every row
/// doubled the height of tables on a 25-line console.
const HEADER_RULE_UTF8: &str = "     ──            ";
const HEADER_RULE_ASCII: &str = "     --            ";

impl Terminal {
    /// A pipe or a file: Markdown tables at their natural width, UTF-8,
    /// no escapes.
    #[cfg(test)]
    pub(crate) const PIPE: Terminal = Terminal {
        tty: false,
        width: 0,
        ascii: false,
        escapes: false,
    };

    /// What the CLI found at start-up: `tty` when stdout is a terminal (its
    /// width is then read: `COLUMNS`, else the window size), `ascii` when
    /// the locale is not UTF-8, `escapes` when cursor movement and colour
    /// may be sent.
    pub(crate) fn detect(tty: bool, ascii: bool, escapes: bool) -> Terminal {
        Terminal {
            tty,
            width: if tty { terminal_width() } else { 0 },
            ascii,
            escapes,
        }
    }

    /// Whether output must be ASCII (a locale that is not UTF-8).
    pub(crate) fn ascii(&self) -> bool {
        self.ascii
    }

    /// Whether cursor movement and colour may be sent.
    pub(crate) fn escapes(&self) -> bool {
        self.escapes
    }

    /// The columns a line may take: the terminal's width, 80 when it
    /// reports none or output is not a terminal (scrolling views such as
    /// `monitor`).
    pub(crate) fn width(&self) -> usize {
        match self.width {
            0 => FALLBACK_WIDTH,
            w => w,
        }
    }

    /// `s` for the terminal: unchanged in a UTF-8 locale, else every
    /// non-ASCII character replaced by its ASCII spelling (µ → u, … → ...,
    /// → → ->).
    pub(crate) fn plain<'a>(&self, s: &'a str) -> Cow<'a, str> {
        if self.ascii {
            Cow::Owned(crate::units::to_ascii(s))
        } else {
            Cow::Borrowed(s)
        }
    }

    /// The table for this output: laid out to the width on a terminal,
    /// Markdown at its natural width elsewhere.
    pub(crate) fn render(&self, header: &[&str], rows: Vec<Vec<String>>) -> String {
        // Markdown (off a terminal) keeps its backticks: they mark code there.
        let cell = |s: &str| {
            if self.tty {
                self.cell(s)
            } else {
                self.plain(s).into_owned()
            }
        };
        let header: Vec<String> = header.iter().map(|h| cell(h)).collect();
        let header: Vec<&str> = header.iter().map(String::as_str).collect();
        let rows: Vec<Vec<String>> = rows
            .into_iter()
            .map(|r| r.iter().map(|c| cell(c)).collect())
            .collect();
        if self.tty {
            self.layout(&header, fold(rows), self.width())
        } else {
            natural(&header, rows, presets::ASCII_MARKDOWN, 1)
        }
    }

    /// Whether the table fits the terminal at its natural width (always off
    /// a terminal): a verb can then choose fewer columns for a narrow screen.
    pub(crate) fn fits(&self, header: &[&str], rows: &[Vec<String>]) -> bool {
        if !self.tty {
            return true;
        }
        let rows = rows
            .iter()
            .map(|r| r.iter().map(|c| self.cell(c)).collect())
            .collect();
        widest_line(&natural(header, rows, HEADER_RULE_UTF8, 1)) <= self.width()
    }

    /// A cell as the terminal shows it: ASCII when the locale wants it, and
    /// without the backticks that mark commands in Markdown and HTML.
    fn cell(&self, s: &str) -> String {
        self.plain(s).replace('`', "")
    }

    /// `head` then `items`, one line off a terminal; on a terminal the items
    /// are wrapped whole (an item is never split) onto lines indented by
    /// `indent` so that no line passes the width (80 when unknown).
    pub(crate) fn run_on(&self, head: &str, items: &[String], indent: usize) -> String {
        let width = if self.tty { self.width() } else { usize::MAX };
        run_on_at(head, items, indent, width)
    }

    /// Messages for a terminal: each line longer than the width (80 when
    /// unknown) broken between words, continued `indent` columns in.
    pub(crate) fn wrap_lines(&self, text: &str, indent: usize) -> String {
        let w = self.width();
        let mut s = String::new();
        for line in text.lines() {
            if text_width(line) <= w {
                s.push_str(line);
                s.push('\n');
            } else {
                s.push_str(&run_on_at(line, &[], indent, w));
            }
        }
        s.pop();
        s
    }

    /// Free text after `head`, broken between words like
    /// [`Terminal::run_on`]: notes, signs and warnings stay readable on a
    /// serial console.
    pub(crate) fn para(&self, head: &str, text: &str, indent: usize) -> String {
        let words: Vec<String> = text.split_whitespace().map(String::from).collect();
        self.run_on(head, &words, indent)
    }
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
    rustix::termios::tcgetwinsize(std::io::stdout()).map_or(0, |ws| ws.ws_col as usize)
}

/// Runs of identical leading cells shown once: a row's cell is blanked when
/// it and every cell to its left equal the row above ("section filesystem"
/// once, not on each of its facts).
fn fold(rows: Vec<Vec<String>>) -> Vec<Vec<String>> {
    let mut out = rows.clone();
    for i in 1..rows.len() {
        for c in 0..rows[i].len().saturating_sub(1) {
            let same = rows[i - 1].get(..=c) == rows[i].get(..=c);
            if !same {
                break;
            }
            if !rows[i][c].is_empty() {
                out[i][c] = String::new();
            }
        }
    }
    out
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

/// A terminal table for `width` columns (see the module comment). What
/// is tried, in order, until the columns fit at their floors: columns with
/// one value in every row move to a line above the table; a first column
/// naming groups of rows moves onto a line above each group; the gap between
/// columns goes from two spaces to one; long words are split at their
/// break points, shorter and shorter. Records only when nothing fits.
impl Terminal {
    pub(crate) fn layout(&self, header: &[&str], rows: Vec<Vec<String>>, width: usize) -> String {
        let preset = if self.ascii {
            HEADER_RULE_ASCII
        } else {
            HEADER_RULE_UTF8
        };
        let full = natural(header, rows.clone(), preset, 1);
        if widest_line(&full) <= width {
            return full;
        }
        let (header, rows, same) = self.constant_columns(header, rows);
        let header: Vec<&str> = header.iter().map(String::as_str).collect();
        if let Some(t) = grouped::grouped(&header, &rows, width, preset) {
            return same + &t;
        }
        let ncol = header.len();
        for piece in [usize::MAX, 32, 24, 18, READABLE] {
            let rows: Vec<Vec<String>> = rows
                .iter()
                .map(|r| r.iter().map(|c| split_long(c, piece)).collect())
                .collect();
            let natural_w: Vec<usize> = (0..ncol)
                .map(|c| column_width(&header, &rows, c, text_width))
                .collect();
            let floors: Vec<usize> = (0..ncol)
                .map(|c| {
                    let word = column_width(&header, &rows, c, longest_word);
                    word.max(READABLE.min(natural_w[c]))
                })
                .collect();
            for pad in [1, 0] {
                // Gaps cost what the natural layout spends beyond its cells.
                let tight = natural(&header, rows.clone(), preset, pad);
                let overhead = widest_line(&tight).saturating_sub(natural_w.iter().sum::<usize>());
                if floors.iter().sum::<usize>() + overhead > width {
                    continue;
                }
                if widest_line(&tight) <= width {
                    return same + &tight;
                }
                let mut t = Table::new();
                t.load_preset(preset)
                    .set_content_arrangement(ContentArrangement::Dynamic)
                    .set_width(width.min(u16::MAX as usize) as u16)
                    .set_header(header.clone());
                for r in rows {
                    t.add_row(r);
                }
                compact(&mut t, preset, pad);
                for (c, f) in floors.iter().enumerate() {
                    if let Some(col) = t.column_mut(c) {
                        col.set_constraint(ColumnConstraint::LowerBoundary(Width::Fixed(
                            // The boundary holds the padding too: without it a
                            // column got one less than its longest word and
                            // split it ("bandwidt h").
                            (*f + pad as usize).min(u16::MAX as usize) as u16,
                        )));
                    }
                }
                return format!("{same}{t}\n");
            }
        }
        same + &records(&header, &rows, width)
    }

    /// Columns whose every row holds one value (two rows or more), taken out
    /// of the table and said once on a line: ("n 2 · stopped by fixed").
    fn constant_columns(
        &self,
        header: &[&str],
        rows: Vec<Vec<String>>,
    ) -> (Vec<String>, Vec<Vec<String>>, String) {
        let ncol = header.len();
        let constant = |c: usize| {
            rows.len() >= 2
                && rows
                    .iter()
                    .all(|r| r.len() == ncol && r[c] == rows[0][c] && !r[c].contains('\n'))
        };
        // The first column names the rows; it stays.
        let out: Vec<usize> = (1..ncol).filter(|&c| constant(c)).collect();
        if out.is_empty() || out.len() + 1 >= ncol {
            return (
                header.iter().map(|h| h.to_string()).collect(),
                rows,
                String::new(),
            );
        }
        let items: Vec<String> = out
            .iter()
            .map(|&c| {
                let v = &rows[0][c];
                format!("{} {}", header[c], if v.is_empty() { "-" } else { v })
            })
            .collect();
        let sep = if self.ascii { ", " } else { " · " };
        let same = self.para("in every row:", &items.join(sep), 2);
        let keep = |c: &usize| !out.contains(c);
        let header = (0..ncol)
            .filter(keep)
            .map(|c| header[c].to_string())
            .collect();
        let rows = rows
            .into_iter()
            .map(|r| {
                r.into_iter()
                    .enumerate()
                    .filter(|(c, _)| keep(c))
                    .map(|(_, v)| v)
                    .collect()
            })
            .collect();
        (header, rows, same)
    }
}

/// `cell` with every word longer than `max` broken onto lines after one of
/// its break characters (a path after `/`, a list after `,`), each piece
/// at most `max` when the word allows; a word without one stays whole.
fn split_long(cell: &str, max: usize) -> String {
    let lines: Vec<String> = cell
        .lines()
        .map(|line| {
            line.split(' ')
                .map(|w| split_word(w, max).join("\n"))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    lines.join("\n")
}

fn split_word(word: &str, max: usize) -> Vec<String> {
    let chars: Vec<char> = word.chars().collect();
    if chars.len() <= max {
        return vec![word.to_string()];
    }
    let mut out = Vec::new();
    let mut start = 0;
    while chars.len() - start > max {
        // The last break character that keeps the piece within `max`.
        let cut = (start + 1..=start + max).rev().find(|&i| {
            matches!(chars[i - 1], '/' | ',' | ':' | ';' | '=' | '&' | '|')
                    // An ISO date and time: after the T that joins them.
                    || (chars[i - 1] == 'T'
                        && i >= 2
                        && i < chars.len()
                        && chars[i - 2].is_ascii_digit()
                        && chars[i].is_ascii_digit()
                        && chars[i..].contains(&':'))
        });
        match cut {
            Some(i) if i < chars.len() => {
                out.push(chars[start..i].iter().collect());
                start = i;
            }
            _ => break,
        }
    }
    out.push(chars[start..].iter().collect());
    out
}

/// The table at its natural width: no column is wrapped or shrunk.
fn natural(header: &[&str], rows: Vec<Vec<String>>, preset: &str, pad: u16) -> String {
    let mut t = Table::new();
    t.load_preset(preset)
        .set_content_arrangement(ContentArrangement::Disabled)
        .set_header(header.to_vec());
    for r in rows {
        t.add_row(r);
    }
    compact(&mut t, preset, pad);
    let mut s = t.to_string();
    s.push('\n');
    s
}

/// On a terminal, columns are set apart by their blank separator and one
/// space of padding on the right (two spaces in all) instead of a space on
/// each side (three): 80 columns then hold a few more characters of data;
/// `pad` 0 leaves the separator alone when even that does not fit.
fn compact(t: &mut Table, preset: &str, pad: u16) {
    if preset != presets::ASCII_MARKDOWN {
        for col in t.column_iter_mut() {
            col.set_padding((0, pad));
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

mod grouped;
#[cfg(test)]
mod tests;
