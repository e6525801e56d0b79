//! A table whose first column names groups of rows (a point's parameters
//! over its metrics, a comparison's result over its rows): when the whole
//! table is too wide, the group name goes on a line of its own above its
//! rows and the other columns keep their natural width, or, when even they
//! do not fit, wrap where that costs the fewest lines ([`wrapped`]). On an
//! 80-column console that reads like the wide table — one or two lines a
//! row — where the record layout took eight.

use comfy_table::{ColumnConstraint, ContentArrangement, Table, Width};

use super::{
    column_width, compact, longest_word, natural, run_on_at, text_width, widest_line, wrap,
};

/// The grouped layout of `header`/`rows` (already folded: a blank first
/// cell continues the group above) within `width`, or `None` when the first
/// column names no group of two rows or more, or the other columns cannot
/// fit even wrapped down to their longest words.
pub(super) fn grouped(
    header: &[&str],
    rows: &[Vec<String>],
    width: usize,
    preset: &str,
) -> Option<String> {
    if header.len() < 2
        || rows
            .iter()
            .all(|r| r.first().is_some_and(|c| !c.is_empty()))
    {
        return None;
    }
    let rest_header: Vec<&str> = header[1..].to_vec();
    let rest: Vec<Vec<String>> = rows
        .iter()
        .map(|r| r.iter().skip(1).cloned().collect())
        .collect();
    for (indent, pad) in [(2usize, 1u16), (0, 1), (0, 0)] {
        let table = natural(&rest_header, rest.clone(), preset, pad);
        if widest_line(&table) + indent > width {
            continue;
        }
        let lines: Vec<&str> = table.lines().collect();
        // Header and its rule, then each row as tall as its tallest cell.
        let mut out = String::new();
        let lead = " ".repeat(indent);
        for l in lines.iter().take(2) {
            out.push_str(&lead);
            out.push_str(l.trim_end());
            out.push('\n');
        }
        let mut at = 2;
        for (row, cells) in rows.iter().zip(&rest) {
            let name = row.first().map(String::as_str).unwrap_or("");
            if !name.is_empty() {
                out.push_str(&run_on_at(name, &[], 2, width));
            }
            let tall = cells
                .iter()
                .map(|c| c.lines().count().max(1))
                .max()
                .unwrap_or(1);
            for l in lines.iter().skip(at).take(tall) {
                out.push_str(&lead);
                out.push_str(l.trim_end());
                out.push('\n');
            }
            at += tall;
        }
        if at != lines.len() || out.lines().any(|l| text_width(l) > width) {
            // The rendering did not map one row to its lines as expected:
            // say nothing rather than misplace a group's name.
            return None;
        }
        return Some(out);
    }
    wrapped(&rest_header, rows, &rest, width, preset)
}

/// The grouped layout when the other columns must wrap: widths shared out
/// by taking from the column with the most room above its longest word,
/// then the header and each row drawn with those widths, so every row
/// lines up under the header and a group's name sits above its own row.
fn wrapped(
    header: &[&str],
    rows: &[Vec<String>],
    rest: &[Vec<String>],
    width: usize,
    preset: &str,
) -> Option<String> {
    let n = header.len();
    let mut w: Vec<usize> = (0..n)
        .map(|c| column_width(header, rest, c, text_width))
        .collect();
    let floor: Vec<usize> = (0..n)
        .map(|c| column_width(header, rest, c, longest_word).max(1))
        .collect();
    // A blank separator and a space of padding between columns, and the
    // last column's padding.
    let gaps = 2 * (n - 1) + 1;
    // Lines a column's cells take at a width (header included).
    let tall = |c: usize, cw: usize| -> usize {
        let cells = rest.iter().filter_map(|r| r.get(c)).map(String::as_str);
        std::iter::once(header[c])
            .chain(cells)
            .map(|cell| {
                cell.lines()
                    .map(|l| wrap(l, cw).len())
                    .sum::<usize>()
                    .max(1)
            })
            .sum()
    };
    // Narrow, a column at a time, the one that costs the fewest new lines
    // (a verdict that wraps only where it says "(suspect)" before every
    // row's number); among equals, the one with the most room to give.
    while w.iter().sum::<usize>() + gaps > width {
        let c = (0..n).filter(|&c| w[c] > floor[c]).min_by_key(|&c| {
            let cost = tall(c, w[c] - 1).saturating_sub(tall(c, w[c]));
            (cost, std::cmp::Reverse(w[c] - floor[c]))
        })?;
        w[c] -= 1;
    }
    let draw = |cells: Option<&[&str]>, row: Option<&Vec<String>>| -> String {
        let mut t = Table::new();
        t.load_preset(preset)
            .set_content_arrangement(ContentArrangement::Dynamic)
            .set_width(width.min(u16::MAX as usize) as u16);
        match (cells, row) {
            (Some(h), _) => {
                t.set_header(h.to_vec());
            }
            (_, Some(r)) => {
                t.add_row(r.clone());
            }
            _ => {}
        }
        compact(&mut t, preset, 1);
        for (c, cw) in w.iter().enumerate() {
            if let Some(col) = t.column_mut(c) {
                let fixed = (cw + 1).min(u16::MAX as usize) as u16;
                col.set_constraint(ColumnConstraint::Absolute(Width::Fixed(fixed)));
            }
        }
        let mut s = String::new();
        for l in t.to_string().lines() {
            // The rule under the header spans the padding too: cut to fit.
            let l: String = if l.chars().all(|c| c == '─' || c == '-' || c == ' ') {
                l.chars().take(width).collect()
            } else {
                l.to_string()
            };
            s.push_str(l.trim_end());
            s.push('\n');
        }
        s
    };
    let mut out = draw(Some(header), None);
    for (row, cells) in rows.iter().zip(rest) {
        let name = row.first().map(String::as_str).unwrap_or("");
        if !name.is_empty() {
            out.push_str(&run_on_at(name, &[], 2, width));
        }
        out.push_str(&draw(None, Some(cells)));
    }
    if out.lines().any(|l| text_width(l) > width) {
        return None;
    }
    Some(out)
}
