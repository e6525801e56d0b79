//! The Markdown report. Markdown cannot embed SVG, so every chart is a
//! separate `.svg` file in an assets directory next to the Markdown file
//! (`report.md` → `report-assets/01-….svg`), referenced by a relative link.

use super::document::{slug, Block, Document, Table};

/// Escape a table cell: pipes and line breaks would end the cell.
fn cell(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('|', "\\|")
        .replace('\n', " ")
}

/// Escape running text where Markdown/HTML syntax could change it.
fn text(s: &str) -> String {
    s.replace('<', "&lt;").replace('>', "&gt;")
}

fn table(t: &Table) -> String {
    let mut s = String::from("|");
    for h in &t.header {
        s.push_str(&format!(" {} |", cell(h)));
    }
    s.push_str("\n|");
    for _ in &t.header {
        s.push_str("---|");
    }
    s.push('\n');
    for r in &t.rows {
        s.push('|');
        for c in r {
            let v = cell(&c.text);
            match c.class {
                Some("pass") | Some("fail") => s.push_str(&format!(" **{v}** |")),
                _ => s.push_str(&format!(" {v} |")),
            }
        }
        s.push('\n');
    }
    s.push('\n');
    s
}

/// The Markdown text and the chart files (name inside `assets_dir`, SVG).
/// `assets_dir` is the directory name as seen from the Markdown file.
pub(crate) fn render(doc: &Document, assets_dir: &str) -> (String, Vec<(String, String)>) {
    let mut files = Vec::new();
    let mut s = format!("# {}\n\n", text(&doc.title));
    s.push_str(&table(&Table {
        header: vec!["".into(), "".into()],
        rows: doc
            .facts
            .iter()
            .map(|(k, v)| vec![k.as_str().into(), v.as_str().into()])
            .collect(),
    }));
    for sec in &doc.sections {
        s.push_str(&format!("## {}\n\n", text(&sec.title)));
        blocks(&sec.blocks, assets_dir, &mut s, &mut files);
    }
    (s, files)
}

/// The Markdown text alone, for an export to one file: charts are left out
/// (their numbers are in the tables).
pub(crate) fn render_text(doc: &Document) -> String {
    fn strip(bs: &[Block]) -> Vec<Block> {
        bs.iter()
            .filter(|b| !matches!(b, Block::Figure(_)))
            .map(|b| match b {
                Block::Collapsed(s, inner) => Block::Collapsed(s.clone(), strip(inner)),
                b => b.clone(),
            })
            .collect()
    }
    let mut doc = doc.clone();
    for s in &mut doc.sections {
        s.blocks = strip(&s.blocks);
    }
    render(&doc, "").0
}

/// Blocks as Markdown; figures become files in `assets_dir`.
fn blocks(bs: &[Block], assets_dir: &str, s: &mut String, files: &mut Vec<(String, String)>) {
    for b in bs {
        match b {
            Block::Heading(h) => s.push_str(&format!("### {}\n\n", text(h))),
            Block::Text(t) => s.push_str(&format!("{}\n\n", text(t))),
            Block::Table(t) => s.push_str(&table(t)),
            Block::Figure(f) => match &f.svg {
                Ok(svg) => {
                    let name = format!("{:02}-{}.svg", files.len() + 1, slug(&f.title));
                    s.push_str(&format!(
                        "![{}]({}/{})\n\n",
                        cell(&f.title).replace(['[', ']'], ""),
                        assets_dir,
                        name
                    ));
                    files.push((name, svg.clone()));
                }
                Err(e) => s.push_str(&format!(
                    "*Chart \"{}\" not drawn: {}*\n\n",
                    text(&f.title),
                    text(e)
                )),
            },
            Block::Notes(n) => {
                for i in n {
                    s.push_str(&format!("> {}\n>\n", text(i)));
                }
                s.push('\n');
            }
            Block::Collapsed(summary, inner) => {
                s.push_str(&format!("### {}\n\n", text(summary)));
                blocks(inner, assets_dir, s, files);
            }
            Block::Warnings(w) => {
                for i in w {
                    s.push_str(&format!("- ⚠ {}\n", text(i)));
                }
                s.push('\n');
            }
        }
    }
}
