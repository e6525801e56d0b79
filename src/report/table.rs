//! Plain terminal tables (comfy-table), no colour, UTF-8 borders only on a terminal.

use std::sync::atomic::{AtomicBool, Ordering};

use comfy_table::{presets, ContentArrangement, Table};

/// Whether tables go to a terminal (UTF-8 borders) or to a pipe or file
/// (Markdown). The CLI says so once at start-up; a lower layer never asks.
static TERMINAL: AtomicBool = AtomicBool::new(false);

/// Set by the CLI from whether stdout is a terminal.
pub fn set_terminal(yes: bool) {
    TERMINAL.store(yes, Ordering::Relaxed);
}

pub fn render(header: &[&str], rows: Vec<Vec<String>>) -> String {
    let mut t = Table::new();
    let preset = if TERMINAL.load(Ordering::Relaxed) {
        presets::UTF8_HORIZONTAL_ONLY
    } else {
        presets::ASCII_MARKDOWN
    };
    t.load_preset(preset)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_header(header.to_vec());
    for r in rows {
        t.add_row(r);
    }
    let mut s = t.to_string();
    s.push('\n');
    s
}
