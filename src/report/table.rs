//! Plain terminal tables (comfy-table), no colour, UTF-8 borders only on a terminal.

use comfy_table::{presets, ContentArrangement, Table};

pub fn render(header: &[&str], rows: Vec<Vec<String>>) -> String {
    let mut t = Table::new();
    let preset = if crate::cli::output_is_terminal() {
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
