//! `tunelab runs`: stored runs, newest first, with the machine each ran on.

use super::Out;
use crate::store::Store;
use crate::Result;

#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// Show at most N runs.
    #[arg(long, short = 'n', value_name = "N")]
    pub(crate) limit: Option<usize>,
}

pub(crate) fn exec(args: &Args, out: &Out, store: &Store) -> Result<i32> {
    let mut runs = store.list()?;
    if let Some(n) = args.limit {
        runs.truncate(n);
    }
    if out.json {
        out.json_data(&runs)?;
    } else if runs.is_empty() {
        out.info(&format!(
            "no runs stored in {} yet (try 'tunelab run io.file-read')",
            store.location()
        ));
    } else {
        let rows = runs
            .into_iter()
            .map(|r| {
                vec![
                    r.id,
                    r.started,
                    cell(&machine(&r.machine, &r.machine_id)),
                    cell(&r.label),
                    r.status,
                    r.experiments.join(" "),
                    r.results.to_string(),
                ]
            })
            .collect();
        out.data(&out.table(
            &[
                "id",
                "started",
                "machine",
                "label",
                "status",
                "experiments",
                "points",
            ],
            rows,
        ))?;
    }
    Ok(0)
}

/// The machine column: the host name, with the first 8 hex digits of the
/// machine id when the name does not tell boards apart (busybox boards are
/// all "(none)", many images "localhost").
pub(crate) fn machine(host: &str, id: &str) -> String {
    let generic = matches!(
        host.trim(),
        "" | "(none)" | "localhost" | "localhost.localdomain" | "buildroot" | "OpenWrt"
    );
    match id.get(..8) {
        Some(short) if generic => format!(
            "{} #{short}",
            clean(if host.is_empty() { "?" } else { host })
        ),
        _ => clean(host),
    }
}

/// A text cell of the runs table: made safe by [`clean`], cut at the
/// label limit (runs stored before it existed may be longer; a cell is no
/// place for megabytes), and `|` escaped so the column stays one column
/// in the Markdown-style table printed off a terminal.
pub(crate) fn cell(s: &str) -> String {
    let max = crate::engine::import::MAX_LABEL_CHARS;
    let cut = match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    };
    clean(&cut).replace('|', "\\|")
}

/// Text from a run (label, host name) made safe to print on a terminal:
/// control characters — escape sequences, newlines, tabs — become visible
/// `\u{…}` escapes instead of acting on the terminal or breaking the table.
pub(crate) fn clean(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::clean;

    #[test]
    fn boards_without_a_host_name_are_told_apart_by_their_id() {
        use super::machine;
        assert_eq!(machine("(none)", "3f9a2c1b00112233"), "(none) #3f9a2c1b");
        assert_eq!(machine("(none)", "77aa01cc00112233"), "(none) #77aa01cc");
        assert_eq!(machine("", "77aa01cc00112233"), "? #77aa01cc");
        assert_eq!(machine("stb-1", "3f9a2c1b00112233"), "stb-1");
        assert_eq!(machine("(none)", ""), "(none)");
    }

    #[test]
    fn cells_are_cut_and_keep_their_column() {
        use super::cell;
        assert_eq!(cell("a|b"), "a\\|b");
        let max = crate::engine::import::MAX_LABEL_CHARS;
        let long = "x".repeat(max * 10);
        assert_eq!(cell(&long).chars().count(), max + 1);
        assert_eq!(cell(&"y".repeat(max)), "y".repeat(max));
    }

    #[test]
    fn control_characters_are_shown_not_obeyed() {
        assert_eq!(clean("before noatime"), "before noatime");
        assert_eq!(clean("a\u{1b}[2Jb"), "a\\u{1b}[2Jb");
        assert_eq!(clean("one\ntwo\tthree\r"), "one\\ntwo\\tthree\\r");
        assert_eq!(clean("\u{9b}31m"), "\\u{9b}31m");
        assert_eq!(clean("größe µs"), "größe µs");
    }
}
