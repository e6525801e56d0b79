//! Which processes a section looks at: every process, or one process and
//! its descendants (a command's workers are its children).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    System,
    /// This pid and all its descendants.
    Tree(i32),
}

/// One line of /proc/PID/stat: (comm, state, ppid).
pub fn parse_stat(text: &str) -> Option<(String, char, i32)> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let comm = text.get(open + 1..close)?.to_string();
    let mut rest = text.get(close + 1..)?.split_whitespace();
    let state = rest.next()?.chars().next()?;
    let ppid = rest.next()?.parse().ok()?;
    Some((comm, state, ppid))
}

/// Whether `pid` exists and is not a zombie.
pub fn alive(root: &Path, pid: i32) -> bool {
    super::read(root, &format!("proc/{pid}/stat"))
        .ok()
        .and_then(|s| parse_stat(&s))
        .is_some_and(|(_, st, _)| st != 'Z' && st != 'X')
}

/// Numeric entries of a /proc directory.
pub fn numeric_dirs(dir: &Path) -> Vec<i32> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    rd.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect()
}

/// The processes in `scope` now, with their names; tunelab itself is left
/// out of the whole-system view.
pub fn processes(root: &Path, scope: &Scope) -> BTreeMap<i32, String> {
    let me = std::process::id() as i32;
    let mut all = BTreeMap::new();
    let mut children: BTreeMap<i32, Vec<i32>> = BTreeMap::new();
    for pid in numeric_dirs(&root.join("proc")) {
        if let Some((comm, _, ppid)) = super::read(root, &format!("proc/{pid}/stat"))
            .ok()
            .and_then(|s| parse_stat(&s))
        {
            all.insert(pid, comm);
            children.entry(ppid).or_default().push(pid);
        }
    }
    match scope {
        Scope::System => {
            all.remove(&me);
            all
        }
        Scope::Tree(top) => {
            let mut keep = BTreeSet::new();
            let mut todo = vec![*top];
            while let Some(p) = todo.pop() {
                if keep.insert(p) {
                    todo.extend(children.get(&p).into_iter().flatten().copied());
                }
            }
            all.retain(|p, _| keep.contains(p));
            all
        }
    }
}

/// Thread ids of a process.
pub fn tasks(root: &Path, pid: i32) -> Vec<i32> {
    numeric_dirs(&root.join(format!("proc/{pid}/task")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_with_spaces_and_parens_in_the_name() {
        let (c, s, pp) = parse_stat("42 (a (b) c) S 7 42 42 0 -1").unwrap();
        assert_eq!((c.as_str(), s, pp), ("a (b) c", 'S', 7));
    }

    #[test]
    fn tree_holds_descendants_only() {
        let d = tempfile::tempdir().unwrap();
        for (pid, ppid) in [(10, 1), (11, 10), (12, 11), (20, 1)] {
            let p = d.path().join(format!("proc/{pid}"));
            std::fs::create_dir_all(&p).unwrap();
            std::fs::write(p.join("stat"), format!("{pid} (w{pid}) S {ppid} 0 0")).unwrap();
        }
        let t = processes(d.path(), &Scope::Tree(10));
        assert_eq!(t.keys().copied().collect::<Vec<_>>(), vec![10, 11, 12]);
        assert_eq!(processes(d.path(), &Scope::System).len(), 4);
    }
}
