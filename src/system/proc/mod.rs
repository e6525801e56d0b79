//! The one place that knows the layout of /proc. Callers ask for a file by
//! what it is (a process's `stat`, a sysctl, `meminfo`) and get a path or
//! its text; the parsers of the formats tunelab reads sit beside them
//! (`stat`, `keyed`) or come from `procfs` (re-exported below), each with a
//! from-text entry so tests feed fixtures instead of a live /proc. Readers
//! run on fixture trees take a [`Root`], which knows where each file sits;
//! the free functions below are calls on [`Root::live`].

pub(crate) mod cpu;
pub(crate) mod keyed;
mod root;
pub(crate) mod stat;

use std::ffi::CStr;
use std::fmt::Display;
use std::io;
use std::path::{Path, PathBuf};

/// Fixtures parse through procfs's readers of text.
#[cfg(test)]
pub(crate) use procfs::FromBufRead;
pub(crate) use procfs::{
    current_system_info, diskstats, page_size, process, ticks_per_second, CpuInfo, Current,
    CurrentSI, DiskStat, FromReadSI, KernelStats, Meminfo, ProcError, VmStat,
};
pub(crate) use root::Root;
pub(crate) use stat::Stat;

/// A /proc path as a `&'static str` (for constants and labels):
/// `proc_path!("self/exe")` is `"/proc/self/exe"`.
macro_rules! proc_path {
    ($rel:literal) => {
        concat!("/proc/", $rel)
    };
}
pub(crate) use proc_path;

/// Where procfs is mounted.
pub(crate) const ROOT: &str = "/proc";
/// This program's own executable (re-exec'd for helpers and the no-op).
pub(crate) const SELF_EXE: &str = proc_path!("self/exe");
/// The exec helper reads its argv here (a C string: it runs after fork).
pub(crate) const SELF_CMDLINE: &CStr = c"/proc/self/cmdline";

/// `/proc/<rel>` ("meminfo", "pressure/cpu", "sys/vm/dirty_ratio").
pub(crate) fn path(rel: &str) -> PathBuf {
    Root::live().file(rel)
}

/// `/proc/<rel>` as text, for messages and sources that name the file.
pub(crate) fn name(rel: &str) -> String {
    path(rel).to_string_lossy().into_owned()
}

/// The directory of a process: `who` is a pid, "self" or "thread-self".
pub(crate) fn pid_dir(who: impl Display) -> PathBuf {
    Root::live().pid_dir(who)
}

/// `/proc/<who>/<file>`: `who` is a pid, "self" or "thread-self".
pub(crate) fn pid_path(who: impl Display, file: &str) -> PathBuf {
    Root::live().pid_file(who, file)
}

/// Write `/proc/<pid>/[task/<tid>/]stat` into `buf` (see
/// [`Root::stat_path_into`]).
pub(crate) fn stat_path_into(buf: &mut String, pid: i32, tid: Option<i32>) {
    Root::live().stat_path_into(buf, pid, tid)
}

/// The file of a sysctl, dotted ("vm.dirty_ratio") or slashed
/// ("vm/dirty_ratio"), as an absolute path text (`/proc/sys/vm/dirty_ratio`).
pub(crate) fn sysctl_name(key: &str) -> String {
    sysctl_path(key).to_string_lossy().into_owned()
}

/// The dotted key of a sysctl file below any /proc ("/proc/sys/vm/dirty_ratio"
/// → "vm.dirty_ratio"), or None when the path is not a sysctl's.
pub(crate) fn sysctl_key(path: &Path) -> Option<String> {
    let s = path.to_string_lossy();
    s.split_once("proc/sys/")
        .map(|(_, rest)| rest.replace('/', "."))
}

/// The file of a sysctl (see [`sysctl_name`]).
pub(crate) fn sysctl_path(key: &str) -> PathBuf {
    Root::live().sysctl_file(key)
}

/// `/proc/<rel>` read whole.
pub(crate) fn read(rel: &str) -> io::Result<String> {
    Root::live().read(rel)
}

/// `/proc/<who>/<file>` read whole.
pub(crate) fn read_pid(who: impl Display, file: &str) -> io::Result<String> {
    Root::live().read_pid(who, file)
}

/// A sysctl's text, trimmed.
pub(crate) fn read_sysctl(key: &str) -> io::Result<String> {
    std::fs::read_to_string(sysctl_path(key)).map(|s| s.trim().to_string())
}

/// A numeric sysctl; None when missing or not a number.
pub(crate) fn sysctl_u64(key: &str) -> Option<u64> {
    read_sysctl(key).ok()?.parse().ok()
}

/// Write a sysctl (the caller journals and restores it).
pub(crate) fn write_sysctl(key: &str, value: &str) -> io::Result<()> {
    std::fs::write(sysctl_path(key), value)
}

/// The numeric entries of a /proc-style directory (pids, tids), in
/// directory order; empty when it cannot be listed.
pub(crate) fn numeric_entries(dir: &Path) -> Vec<i32> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    rd.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect()
}

/// The pids now.
pub(crate) fn pids() -> Vec<i32> {
    Root::live().pids()
}

/// The thread ids of `pid` now; Err as the listing failed (NotFound: no
/// such process).
pub(crate) fn tids(pid: i32) -> io::Result<Vec<i32>> {
    Root::live().tasks(pid)
}

/// A procfs error as an io::Error.
pub(crate) fn to_io(e: ProcError) -> io::Error {
    io::Error::other(e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_follow_procs_layout() {
        assert_eq!(SELF_EXE, "/proc/self/exe");
        assert_eq!(SELF_CMDLINE.to_str(), Ok("/proc/self/cmdline"));
        assert_eq!(path("meminfo"), Path::new("/proc/meminfo"));
        assert_eq!(name("pressure/cpu"), "/proc/pressure/cpu");
        assert_eq!(pid_path(7, "io"), Path::new("/proc/7/io"));
        assert_eq!(
            pid_path("thread-self", "io"),
            Path::new("/proc/thread-self/io")
        );
        assert_eq!(pid_dir(7), Path::new("/proc/7"));
        assert_eq!(sysctl_name("vm.dirty_ratio"), "/proc/sys/vm/dirty_ratio");
        assert_eq!(
            sysctl_path("kernel/pid_max"),
            Path::new("/proc/sys/kernel/pid_max")
        );
        let mut b = String::from("junk");
        stat_path_into(&mut b, 3, Some(4));
        assert_eq!(b, "/proc/3/task/4/stat");
        stat_path_into(&mut b, 3, None);
        assert_eq!(b, "/proc/3/stat");
    }

    #[test]
    fn numeric_entries_skip_names() {
        let d = tempfile::tempdir().unwrap();
        for n in ["1", "22", "self", "sys"] {
            std::fs::create_dir(d.path().join(n)).unwrap();
        }
        let mut v = numeric_entries(d.path());
        v.sort();
        assert_eq!(v, [1, 22]);
        assert!(numeric_entries(&d.path().join("none")).is_empty());
    }

    #[test]
    fn this_process_is_listed() {
        let me = std::process::id() as i32;
        assert!(pids().contains(&me));
        assert!(tids(me).unwrap().contains(&me));
        assert!(read_pid("self", "stat").is_ok());
    }
}
