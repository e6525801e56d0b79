//! What `apply` and `unapply` print: the plan (live values, files, the
//! fstab line, how to take it back), for a dry run and, with the value the
//! kernel kept, after the change.

use std::path::PathBuf;

use crate::model::applied::AppliedChange;

/// The apply plan of `change`: `live` files with their value now, the
/// `partners` the kernel zeroes; `new` is the value written (the planned
/// one for a dry run, the one read back after). `takes` says how long.
pub(crate) fn apply_plan(
    change: &AppliedChange,
    live: &[(PathBuf, String)],
    partners: &[(PathBuf, String)],
    new: &str,
    dry_run: bool,
    takes: &str,
) -> String {
    let mut s = String::new();
    if dry_run {
        s.push_str("apply — dry run: nothing is changed\n");
    }
    s.push_str(&format!("verdict:  {}\n", change.verdict));
    for (p, old) in live {
        s.push_str(&format!(
            "live:     {} {old} → {new} (written now, read back)\n",
            p.display()
        ));
    }
    for (p, v) in partners {
        s.push_str(&format!(
            "          {} is {v} (the kernel zeroes it; unapply restores it)\n",
            p.display()
        ));
    }
    for f in &change.files {
        s.push_str(&format!("file:     {} (new, tunelab's)\n", f.path));
    }
    if let Some(l) = &change.fstab_line {
        s.push_str(&format!("fstab:    {l}\n"));
    }
    s.push_str(&format!(
        "restore:  'tunelab unapply {}' removes the file(s) and writes {} back\n",
        change.knob, change.old
    ));
    s.push_str(&format!("how long: {takes}\n"));
    s
}

/// The lines of one unapply: each live value restored (path, now, to) and
/// each file removed.
pub(crate) fn unapply_plan(restore: &[(PathBuf, String, String)], remove: &[PathBuf]) -> String {
    let mut s = String::new();
    for (p, now, to) in restore {
        s.push_str(&format!("live:     {} {now} → {to}\n", p.display()));
    }
    for p in remove {
        s.push_str(&format!("remove:   {}\n", p.display()));
    }
    s
}

/// The table of applied changes (`tunelab applied`).
pub(crate) fn applied_table(list: &[AppliedChange], term: super::table::Terminal) -> String {
    let rows = list
        .iter()
        .map(|c| {
            vec![
                c.id.clone(),
                c.state.clone(),
                format!("{} → {}", c.old, c.new),
                c.run_id.clone(),
                c.applied_at.clone(),
                c.files
                    .iter()
                    .map(|f| f.path.clone())
                    .chain(c.fstab_line.iter().map(|_| "fstab line".to_string()))
                    .collect::<Vec<_>>()
                    .join(", "),
            ]
        })
        .collect();
    term.render(&["knob", "state", "value", "run", "applied", "files"], rows)
}
