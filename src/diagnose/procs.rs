//! Which processes a section looks at: every process, or one process and
//! its descendants (a command's workers are its children).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Scope {
    System,
    /// This pid and all its descendants.
    Tree(i32),
}

/// One line of /proc/PID/stat: (comm, state, ppid).
pub(crate) fn parse_stat(text: &str) -> Option<(String, char, i32)> {
    let s = crate::system::proc::Stat::parse(text)?;
    Some((s.comm.to_string(), s.state()?, s.ppid()?))
}

/// Whether `pid` exists and is not a zombie.
pub(crate) fn alive(root: &Path, pid: i32) -> bool {
    crate::system::proc::Root::under(root)
        .read_pid(pid, "stat")
        .ok()
        .and_then(|s| parse_stat(&s))
        .is_some_and(|(_, st, _)| st != 'Z' && st != 'X')
}

/// Numeric entries of a /proc directory.
pub(crate) fn numeric_dirs(dir: &Path) -> Vec<i32> {
    crate::system::proc::numeric_entries(dir)
}

/// The processes in `scope` now, with their names; tunelab itself is left
/// out of the whole-system view.
pub(crate) fn processes(root: &Path, scope: &Scope) -> BTreeMap<i32, String> {
    if let Scope::Tree(top) = scope {
        if let Some(t) = tree_by_children(root, *top) {
            return t;
        }
    }
    let me = std::process::id() as i32;
    let mut all = BTreeMap::new();
    let mut children: BTreeMap<i32, Vec<i32>> = BTreeMap::new();
    for pid in crate::system::proc::Root::under(root).pids() {
        if let Some((comm, _, ppid)) = crate::system::proc::Root::under(root)
            .read_pid(pid, "stat")
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

/// A tree walked down from its top through each thread's `children` file
/// (CONFIG_PROC_CHILDREN): a few reads per process of the tree, where a
/// scan reads every process of the machine (the readers run several times
/// a second). None when the kernel has no such file: scan instead.
fn tree_by_children(root: &Path, top: i32) -> Option<BTreeMap<i32, String>> {
    let mut out = BTreeMap::new();
    let mut todo = vec![top];
    while let Some(pid) = todo.pop() {
        let Some((comm, _, _)) = crate::system::proc::Root::under(root)
            .read_pid(pid, "stat")
            .ok()
            .and_then(|s| parse_stat(&s))
        else {
            continue;
        };
        if out.insert(pid, comm).is_some() {
            continue;
        }
        let mut files = 0;
        for tid in tasks(root, pid) {
            if let Ok(text) = std::fs::read_to_string(
                crate::system::proc::Root::under(root).task_file(pid, tid, "children"),
            ) {
                files += 1;
                todo.extend(
                    text.split_whitespace()
                        .filter_map(|w| w.parse::<i32>().ok()),
                );
            }
        }
        // The top, alive, with no children file to read: no such files here.
        if pid == top && files == 0 {
            return None;
        }
    }
    Some(out)
}

/// Thread ids of a process.
pub(crate) fn tasks(root: &Path, pid: i32) -> Vec<i32> {
    crate::system::proc::Root::under(root)
        .tasks(pid)
        .unwrap_or_default()
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

    #[test]
    fn a_tree_is_walked_down_its_children_files_when_they_exist() {
        let d = tempfile::tempdir().unwrap();
        // 10 has threads 10 and 13; 13 forked 11, which forked 12; 20 is
        // not in the tree; 14 is listed but already gone.
        let proc_of = |pid: i32, ppid: i32| {
            let p = d.path().join(format!("proc/{pid}"));
            std::fs::create_dir_all(&p).unwrap();
            std::fs::write(p.join("stat"), format!("{pid} (w{pid}) S {ppid} 0 0")).unwrap();
        };
        let children = |pid: i32, tid: i32, kids: &str| {
            let t = d.path().join(format!("proc/{pid}/task/{tid}"));
            std::fs::create_dir_all(&t).unwrap();
            std::fs::write(t.join("children"), kids).unwrap();
        };
        for (pid, ppid) in [(10, 1), (11, 10), (12, 11), (20, 1)] {
            proc_of(pid, ppid);
        }
        children(10, 10, "");
        children(10, 13, "11 14 ");
        children(11, 11, "12 ");
        children(12, 12, "");
        children(20, 20, "");
        let t = processes(d.path(), &Scope::Tree(10));
        assert_eq!(t.keys().copied().collect::<Vec<_>>(), vec![10, 11, 12]);
        assert_eq!(t[&12], "w12");
        // Without the files (CONFIG_PROC_CHILDREN off): the scan.
        assert!(tree_by_children(d.path(), 20).is_some());
        for tid in [10, 13] {
            std::fs::remove_file(d.path().join(format!("proc/10/task/{tid}/children"))).unwrap();
        }
        assert!(tree_by_children(d.path(), 10).is_none());
        assert_eq!(processes(d.path(), &Scope::Tree(10)).len(), 3);
    }
}
