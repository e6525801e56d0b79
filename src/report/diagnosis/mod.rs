//! A stored diagnosis (`Run::diagnosis`) as text for `show` and as report
//! sections for `report --html`/Markdown. One description of each section
//! (`parts`) feeds both. The flame graph is drawn by a function the caller
//! passes in (the CLI hands in the profiler's renderer): report never
//! reaches up into diagnose/.
//!
//! Here the format-neutral `Part` and its two renderings; `parts` builds
//! every section in order, `workload` the workload's own ones (its figures,
//! off-CPU waits, profiles), `findings` the findings section.

mod findings;
mod parts;
mod workload;

pub(crate) use findings::{findings_section, FindingText};
pub(crate) use parts::parts;

use super::document::{Block, Cell, Figure as DocFigure, Section as DocSection, Table};
use crate::model::diagnosis::{Diagnosis, Figure, Overhead, Section};
use crate::model::profile::FoldedStack;
use crate::units::{human, seconds, si, sig};

/// Draws folded stacks as an SVG flame graph (title) or says why not.
pub(crate) type Flame<'a> = &'a dyn Fn(&[FoldedStack], &str) -> Result<String, String>;

/// Rows shown per table.
const ROWS: usize = 12;

/// One section, format-neutral.
pub(crate) struct Part {
    pub(crate) id: &'static str,
    pub(crate) title: String,
    pub(crate) text: Vec<String>,
    pub(crate) tables: Vec<(Vec<String>, Vec<Vec<String>>)>,
    /// Folded stacks for a flame graph, with its title.
    pub(crate) flame: Option<(Vec<FoldedStack>, String)>,
    pub(crate) notes: Vec<String>,
}

impl Part {
    fn new(id: &'static str, title: &str) -> Part {
        Part {
            id,
            title: title.into(),
            text: Vec::new(),
            tables: Vec::new(),
            flame: None,
            notes: Vec::new(),
        }
    }

    fn table(&mut self, header: &[&str], rows: Vec<Vec<String>>) {
        if !rows.is_empty() {
            self.tables
                .push((header.iter().map(|s| s.to_string()).collect(), rows));
        }
    }

    /// The first `ROWS` of `items` as a table, or `none` in the text when
    /// there are none.
    fn top_table<T>(
        &mut self,
        header: &[&str],
        items: &[T],
        none: &str,
        row: impl Fn(&T) -> Vec<String>,
    ) {
        if items.is_empty() {
            self.text.push(none.into());
        }
        self.table(header, items.iter().take(ROWS).map(row).collect());
    }
}

/// A figure with its unit, for a person.
pub(crate) fn figure(f: &Figure) -> String {
    match f.unit.as_str() {
        "%" => format!("{}%", sig(f.value)),
        "B/s" => human(f.value, "B/s"),
        "s" => seconds(f.value),
        "/s" => format!("{}/s", si(f.value)),
        "count" => si(f.value),
        u => format!("{} {u}", sig(f.value)),
    }
}

fn figures(v: &[Figure]) -> String {
    v.iter()
        .map(|f| format!("{} {}", f.name, figure(f)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// "1234 sshd", or "tunelab ×400 (from pid 1234)" for summed workers.
fn who(pid: i32, comm: &str, processes: u32) -> String {
    if processes > 1 {
        format!("{comm} ×{processes} (from pid {pid})")
    } else {
        format!("{pid} {comm}")
    }
}

fn overhead_line(o: &Overhead) -> String {
    format!("overhead: {}", o.words)
}

/// Present data with the overhead noted, or the skip reason as the only text.
fn present<'a, T>(p: &mut Part, s: &'a Section<T>) -> Option<&'a T> {
    match s {
        Section::Present { data, overhead } => {
            // A section that states no cost of its own prints no empty line.
            if !overhead.words.trim().is_empty() {
                p.notes.push(overhead_line(overhead));
            }
            Some(data)
        }
        Section::Skipped { reason } => {
            p.text.push(format!("skipped: {reason}"));
            None
        }
    }
}

/// The diagnosis as terminal text (`show`, and `diagnose` itself).
pub(crate) fn text(d: &Diagnosis, term: super::table::Terminal) -> String {
    let mut s = String::new();
    for p in parts(d) {
        s.push_str(&format!("\n== {} ==\n", p.title));
        for t in &p.text {
            s.push_str(t);
            s.push('\n');
        }
        for (h, rows) in &p.tables {
            let h: Vec<&str> = h.iter().map(String::as_str).collect();
            s.push_str(&term.render(&h, rows.clone()));
        }
        if p.flame.is_some() {
            s.push_str("(flame graph in `tunelab report RUN -o diagnosis.html`)\n");
        }
        for n in &p.notes {
            s.push_str(&format!("  {n}\n"));
        }
    }
    s
}

/// Report sections of a diagnosis; flame graphs drawn by `flame`.
pub(crate) fn sections(d: &Diagnosis, flame: Flame) -> Vec<DocSection> {
    parts(d)
        .into_iter()
        .map(|p| {
            let mut blocks: Vec<Block> = p.text.into_iter().map(Block::Text).collect();
            for (header, rows) in p.tables {
                blocks.push(Block::Table(Table {
                    header,
                    rows: rows
                        .into_iter()
                        .map(|r| r.into_iter().map(Cell::from).collect())
                        .collect(),
                }));
            }
            if let Some((stacks, title)) = p.flame {
                blocks.push(Block::Figure(DocFigure {
                    svg: flame(&stacks, &title),
                    title,
                }));
            }
            if !p.notes.is_empty() {
                blocks.push(Block::Notes(p.notes));
            }
            DocSection {
                id: p.id.into(),
                title: p.title,
                blocks,
            }
        })
        .collect()
}
