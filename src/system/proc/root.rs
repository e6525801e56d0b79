//! [`Root`]: a /proc tree — the live one, or a fixture directory laid out
//! like it — and the one place that knows where each file sits in it. The
//! live free functions of the layer are calls on [`Root::live`].

use std::borrow::Cow;
use std::fmt::Display;
use std::io;
use std::path::{Path, PathBuf};

use super::{Stat, ROOT};

/// A /proc tree. Readers that tests feed fixtures take one of these instead
/// of a directory, so no reader builds a /proc path itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Root(Cow<'static, Path>);

impl Root {
    /// The live /proc (allocates nothing: the hot scans build one per task).
    pub(crate) fn live() -> Root {
        Root(Cow::Borrowed(Path::new(ROOT)))
    }

    /// A directory laid out like /proc (a fixture).
    pub(crate) fn at(dir: impl Into<PathBuf>) -> Root {
        Root(Cow::Owned(dir.into()))
    }

    /// The /proc of the system whose `/` is `fs_root` (readers that also
    /// read /sys and cgroup mounts below one fixture root).
    pub(crate) fn under(fs_root: &Path) -> Root {
        Root::at(fs_root.join(ROOT.trim_start_matches('/')))
    }

    /// The tree's directory.
    pub(crate) fn dir(&self) -> &Path {
        &self.0
    }

    /// `<root>/<rel>` ("meminfo", "pressure/cpu", "device-tree").
    pub(crate) fn file(&self, rel: &str) -> PathBuf {
        self.0.join(rel)
    }

    /// `<root>/<rel>` read whole.
    pub(crate) fn read(&self, rel: &str) -> io::Result<String> {
        std::fs::read_to_string(self.file(rel))
    }

    /// The directory of a process: `who` is a pid, "self" or "thread-self".
    pub(crate) fn pid_dir(&self, who: impl Display) -> PathBuf {
        self.0.join(who.to_string())
    }

    /// `<root>/<who>/<name>`.
    pub(crate) fn pid_file(&self, who: impl Display, name: &str) -> PathBuf {
        let mut p = self.pid_dir(who);
        p.push(name);
        p
    }

    /// `<root>/<who>/<name>` read whole.
    pub(crate) fn read_pid(&self, who: impl Display, name: &str) -> io::Result<String> {
        std::fs::read_to_string(self.pid_file(who, name))
    }

    /// `<root>/<pid>/task/<tid>/<name>`.
    pub(crate) fn task_file(&self, pid: impl Display, tid: impl Display, name: &str) -> PathBuf {
        let mut p = self.pid_file(pid, "task");
        p.push(tid.to_string());
        p.push(name);
        p
    }

    /// `f` of `who`'s stat line, parsed by the layer's [`Stat`] (which
    /// borrows the text, hence the closure); None when unreadable or garbled.
    pub(crate) fn stat<T>(
        &self,
        who: impl Display,
        f: impl FnOnce(Stat<'_>) -> Option<T>,
    ) -> Option<T> {
        let text = self.read_pid(who, "stat").ok()?;
        f(Stat::parse(&text)?)
    }

    /// Write `<root>/<pid>/[task/<tid>/]stat` into `buf` (reused: a scan over
    /// every task allocates no path per task).
    pub(crate) fn stat_path_into(&self, buf: &mut String, pid: i32, tid: Option<i32>) {
        use std::fmt::Write;
        buf.clear();
        let dir = self.dir().display();
        let _ = match tid {
            Some(t) => write!(buf, "{dir}/{pid}/task/{t}/stat"),
            None => write!(buf, "{dir}/{pid}/stat"),
        };
    }

    /// The pids in the tree, in directory order.
    pub(crate) fn pids(&self) -> Vec<i32> {
        super::numeric_entries(self.dir())
    }

    /// The thread ids of `pid`; Err as the listing failed (NotFound: no
    /// such process).
    pub(crate) fn tasks(&self, pid: impl Display) -> io::Result<Vec<i32>> {
        Ok(std::fs::read_dir(self.pid_file(pid, "task"))?
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse().ok())
            .collect())
    }

    /// The child pids of every thread of `pid` (`task/TID/children`, which
    /// needs CONFIG_PROC_CHILDREN); empty when none can be read.
    pub(crate) fn children(&self, pid: impl Display) -> Vec<u32> {
        let pid = pid.to_string();
        let tids = self.tasks(&pid).unwrap_or_default();
        tids.into_iter()
            .filter_map(|t| std::fs::read_to_string(self.task_file(&pid, t, "children")).ok())
            .flat_map(|s| {
                s.split_whitespace()
                    .filter_map(|p| p.parse().ok())
                    .collect::<Vec<u32>>()
            })
            .collect()
    }

    /// The file of a sysctl, dotted ("vm.dirty_ratio") or slashed
    /// ("vm/dirty_ratio").
    pub(crate) fn sysctl_file(&self, key: &str) -> PathBuf {
        let mut p = self.0.join("sys");
        p.push(key.replace('.', "/"));
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(dir: &Path, rel: &str, text: &str) {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    #[test]
    fn a_fixture_tree_is_read_with_procs_layout() {
        let d = tempfile::tempdir().unwrap();
        let r = Root::under(d.path());
        assert_eq!(r.dir(), d.path().join("proc"));
        let p = r.dir();
        put(p, "meminfo", "MemTotal: 1 kB\n");
        put(p, "7/stat", "7 (a b) S 1 7 7 0 -1 0 0 0 0 0 3 4 0 0\n");
        put(p, "7/task/7/children", "8 9 ");
        put(p, "7/task/10/children", "11");
        put(p, "sys/vm/dirty_ratio", "20\n");
        std::fs::create_dir(p.join("self")).unwrap();
        assert_eq!(r.read("meminfo").unwrap(), "MemTotal: 1 kB\n");
        assert_eq!(r.pid_file(7, "io"), p.join("7/io"));
        assert_eq!(r.task_file(7, 10, "stat"), p.join("7/task/10/stat"));
        assert_eq!(r.stat(7, |s| s.utime()), Some(3));
        assert_eq!(
            r.stat(7, |s| Some(s.comm.to_string())).as_deref(),
            Some("a b")
        );
        assert_eq!(r.stat(8, |s| s.utime()), None, "no such process");
        let mut tids = r.tasks(7).unwrap();
        tids.sort();
        assert_eq!(tids, [7, 10]);
        assert_eq!(r.tasks(8).unwrap_err().kind(), io::ErrorKind::NotFound);
        let mut kids = r.children(7);
        kids.sort();
        assert_eq!(kids, [8, 9, 11]);
        assert!(r.children(8).is_empty());
        assert_eq!(r.pids(), [7]);
        assert_eq!(
            r.sysctl_file("vm.dirty_ratio"),
            p.join("sys/vm/dirty_ratio")
        );
        let mut b = String::new();
        r.stat_path_into(&mut b, 7, Some(10));
        assert_eq!(Path::new(&b), p.join("7/task/10/stat"));
    }

    #[test]
    fn the_live_root_is_slash_proc() {
        assert_eq!(Root::live().dir(), Path::new("/proc"));
        assert_eq!(Root::under(Path::new("/")), Root::live());
        let me = std::process::id();
        assert!(Root::live().stat(me, |s| s.starttime()).is_some());
    }
}
