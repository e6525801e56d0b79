//! How much memory this process may really use: MemAvailable and the memory
//! cgroup (v1 or v2) it runs in, whichever is tighter. A board, a container
//! or a CI job with a 64 MiB cgroup limit sees the host's MemAvailable in
//! /proc/meminfo, so sizing by MemAvailable alone gets a process OOM-killed.
//!
//! MemAvailable also counts most of the reclaimable kernel memory
//! (KReclaimable: dentry and inode slab) as free for the taking, and the
//! kernel cannot always take it: on the 64 MiB aarch64 lab guest (Debian's
//! 6.1 kernel, whose tracefs holds an inode and a dentry for every trace
//! event file) 9.5 MiB of its 10.4 MiB MemAvailable at boot was such slab,
//! and `study quick` was OOM-killed with the slab still at 9.6 MiB and
//! tunelab at 4.8 MiB. So that share is left out here, and what tunelab's
//! own code keeps resident is reserved from what remains.
//!
//! Everything is read below a root directory (`/` on a live system, a fixture
//! tree in tests): meminfo, self/cgroup and self/mountinfo of its /proc
//! (through [`proc::Root::under`]) and the cgroup files under the mount
//! points mountinfo names.

use std::fs;
use std::path::{Path, PathBuf};

use crate::system::mounts::unescape_mount as unescape;
use crate::system::proc;
use crate::units::format_size;

/// A limit at or above this is "no limit" (cgroup v1 writes
/// PAGE_COUNTER_MAX × page size, 0x7ffffffffffff000 on 4 KiB pages).
const UNLIMITED: u64 = 1 << 60;

/// Memory set aside for tunelab itself (its binary, results, the store)
/// before data buffers are sized from what is available, when its own
/// resident code cannot be read — and at most, when it can (`reserve`).
pub(crate) const RESERVE: u64 = 8 << 20;

/// What tunelab may still grow by (heap, sample vectors, thread stacks)
/// beside the code it keeps resident: its anonymous memory is 0.4-1.4 MiB
/// through a study (the static build on the VM, /proc/self/status).
const GROWTH: u64 = 1 << 20;

/// One memory cgroup level with a limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CgroupMemory {
    /// 1 or 2.
    pub(crate) version: u8,
    /// The cgroup's directory (under its mount point).
    pub(crate) dir: PathBuf,
    pub(crate) limit: u64,
    pub(crate) usage: u64,
    /// Clean file-backed page cache charged to the cgroup (inactive_file +
    /// active_file less dirty and writeback pages): the kernel reclaims it
    /// before it kills anyone. Dirty pages must be written first, and a
    /// cgroup v1 limit does not throttle the writer, so they count as used.
    /// (tmpfs/shmem pages sit on the anon lists: never in this figure.)
    pub(crate) file_cache: u64,
}

impl CgroupMemory {
    /// limit − (usage − reclaimable file cache).
    pub(crate) fn headroom(&self) -> u64 {
        let used = self.usage.saturating_sub(self.file_cache);
        self.limit.saturating_sub(used)
    }
}

/// What this process may use, as read at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct MemoryLimits {
    /// /proc/meminfo MemAvailable (kernel ≥ 3.14), bytes.
    pub(crate) mem_available: Option<u64>,
    /// The part of MemAvailable that is reclaimable kernel memory: as the
    /// kernel computes it, KReclaimable less the smaller of its half and
    /// the zones' low watermarks (all of KReclaimable when the watermarks
    /// cannot be read). Not counted as available.
    pub(crate) kernel_reclaimable: u64,
    /// This process's resident file pages (RssFile: mostly its own code,
    /// which must stay in memory for it to run without faulting it back).
    pub(crate) own_code: Option<u64>,
    /// The tightest limited memory cgroup among this process's cgroup and
    /// its ancestors (None: no memory cgroup, or no limit).
    pub(crate) cgroup: Option<CgroupMemory>,
}

impl MemoryLimits {
    /// The live system.
    pub(crate) fn read() -> Self {
        Self::read_from(Path::new("/"))
    }

    /// The system whose /proc and /sys trees are under `root`.
    pub(crate) fn read_from(root: &Path) -> Self {
        let procs = proc::Root::under(root);
        let meminfo = procs.read("meminfo").unwrap_or_default();
        let status = procs.read("self/status").unwrap_or_default();
        let mem_available = kb_field(&meminfo, "MemAvailable").map(|k| k * 1024);
        let low = procs.read("zoneinfo").ok().and_then(|z| low_watermarks(&z));
        MemoryLimits {
            kernel_reclaimable: counted_reclaimable(&meminfo, low).min(mem_available.unwrap_or(0)),
            mem_available,
            own_code: kb_field(&status, "RssFile").map(|k| k * 1024),
            cgroup: tightest_cgroup(root),
        }
    }

    /// Bytes this process can still allocate without swapping or being
    /// killed: the smaller of MemAvailable (less the reclaimable kernel
    /// memory it counts) and the cgroup's headroom.
    pub(crate) fn available(&self) -> Option<u64> {
        let cg = self.cgroup.as_ref().map(CgroupMemory::headroom);
        let mem = self
            .mem_available
            .map(|a| a.saturating_sub(self.kernel_reclaimable));
        match (mem, cg) {
            (Some(a), Some(c)) => Some(a.min(c)),
            (a, c) => a.or(c),
        }
    }

    /// What tunelab keeps for itself: its resident code and `GROWTH`, at
    /// most `RESERVE` (the figure when the code cannot be read).
    pub(crate) fn reserve(&self) -> u64 {
        self.own_code.map_or(RESERVE, |c| (c + GROWTH).min(RESERVE))
    }

    /// Bytes an experiment may give its data buffers: three quarters of
    /// what is available less the `reserve` for tunelab (None when nothing
    /// could be read, e.g. no /proc).
    pub(crate) fn budget(&self) -> Option<u64> {
        self.available()
            .map(|a| a.saturating_sub(self.reserve()) / 4 * 3)
    }

    /// Where the figures came from, for notes: "MemAvailable 21 GiB; cgroup
    /// v1 /sys/fs/cgroup/memory/x: limit 64 MiB, usage 20 MiB (file cache
    /// 4 MiB) -> 48 MiB headroom".
    pub(crate) fn explain(&self) -> String {
        let mut parts = vec![match self.mem_available {
            Some(a) if self.kernel_reclaimable >= 1 << 20 => format!(
                "MemAvailable {}, {} of it reclaimable kernel memory (slab) not counted",
                format_size(a),
                format_size(self.kernel_reclaimable)
            ),
            Some(a) => format!("MemAvailable {}", format_size(a)),
            None => "MemAvailable unknown".to_string(),
        }];
        parts.push(match &self.cgroup {
            Some(c) => format!(
                "memory cgroup v{} {}: limit {}, usage {} (of which {} reclaimable file cache), \
                 headroom {}",
                c.version,
                c.dir.display(),
                format_size(c.limit),
                format_size(c.usage),
                format_size(c.file_cache),
                format_size(c.headroom())
            ),
            None => "no memory cgroup limit".to_string(),
        });
        parts.join("; ")
    }
}

/// A `Key:   123 kB` field of /proc/meminfo or /proc/PID/status, in kB.
fn kb_field(text: &str, key: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The reclaimable kernel memory MemAvailable counts (the kernel's
/// si_mem_available: KReclaimable − min(KReclaimable / 2, low watermarks)),
/// in bytes; all of KReclaimable when `low` is unknown. Kernels before 4.20
/// have no KReclaimable line: SReclaimable then.
fn counted_reclaimable(meminfo: &str, low: Option<u64>) -> u64 {
    let Some(kr) = kb_field(meminfo, "KReclaimable")
        .or_else(|| kb_field(meminfo, "SReclaimable"))
        .map(|k| k * 1024)
    else {
        return 0;
    };
    kr - low.map_or(0, |l| l.min(kr / 2))
}

/// The sum of every zone's low watermark in /proc/zoneinfo, in bytes.
fn low_watermarks(zoneinfo: &str) -> Option<u64> {
    let pages: u64 = zoneinfo
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("low "))
        .filter_map(|v| v.trim().parse::<u64>().ok())
        .sum();
    (pages > 0).then(|| pages * proc::page_size())
}

/// A `key value` field of a cgroup memory.stat.
fn stat_field(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok())?
    })
}

fn read_u64(path: &Path) -> Option<u64> {
    let s = fs::read_to_string(path).ok()?;
    let s = s.trim();
    if s == "max" {
        return Some(u64::MAX);
    }
    s.parse().ok()
}

/// A cgroup mount from mountinfo: (root inside the hierarchy, mount point).
#[derive(Debug)]
struct CgroupMount {
    root: String,
    mount_point: PathBuf,
}

/// The v1 mount carrying the memory controller, and the v2 mount.
fn cgroup_mounts(mountinfo: &str) -> (Option<CgroupMount>, Option<CgroupMount>) {
    let (mut v1, mut v2) = (None, None);
    for line in mountinfo.lines() {
        // id parent major:minor root mount-point options [optional…] - fstype source super-options
        let Some((pre, post)) = line.split_once(" - ") else {
            continue;
        };
        let f: Vec<&str> = pre.split_whitespace().collect();
        let g: Vec<&str> = post.split_whitespace().collect();
        if f.len() < 5 || g.is_empty() {
            continue;
        }
        let m = CgroupMount {
            root: unescape(f[3]),
            mount_point: PathBuf::from(unescape(f[4])),
        };
        match g[0] {
            "cgroup"
                if g.get(2)
                    .is_some_and(|o| o.split(',').any(|x| x == "memory")) =>
            {
                v1.get_or_insert(m);
            }
            "cgroup2" => {
                v2.get_or_insert(m);
            }
            _ => {}
        }
    }
    (v1, v2)
}

/// The directory of cgroup `path` (as /proc/self/cgroup gives it) on `m`.
fn cgroup_dir(root: &Path, m: &CgroupMount, path: &str) -> PathBuf {
    // Inside a container the mount's root is the container's cgroup and
    // /proc/self/cgroup may show the full path or "/".
    let rel = if m.root != "/" {
        path.strip_prefix(m.root.as_str()).unwrap_or(path)
    } else {
        path
    };
    let mp = m.mount_point.strip_prefix("/").unwrap_or(&m.mount_point);
    root.join(mp).join(rel.trim_start_matches('/'))
}

/// Read one level; None when it has no limit or its files are missing.
fn read_level(dir: &Path, version: u8) -> Option<CgroupMemory> {
    let (limit, usage, stat) = if version == 1 {
        (
            read_u64(&dir.join("memory.limit_in_bytes"))?,
            read_u64(&dir.join("memory.usage_in_bytes"))?,
            fs::read_to_string(dir.join("memory.stat")).unwrap_or_default(),
        )
    } else {
        (
            read_u64(&dir.join("memory.max"))?,
            read_u64(&dir.join("memory.current"))?,
            fs::read_to_string(dir.join("memory.stat")).unwrap_or_default(),
        )
    };
    if limit >= UNLIMITED {
        return None;
    }
    // v1 counts the whole subtree as total_*; v2's memory.stat is hierarchical.
    let v1 = |k: &str| stat_field(&stat, &format!("total_{k}")).or_else(|| stat_field(&stat, k));
    let field = |v1_key: &str, v2_key: &str| {
        if version == 1 {
            v1(v1_key)
        } else {
            stat_field(&stat, v2_key)
        }
    };
    let file = field("inactive_file", "inactive_file").unwrap_or(0)
        + field("active_file", "active_file").unwrap_or(0);
    let unclean = field("dirty", "file_dirty").unwrap_or(0)
        + field("writeback", "file_writeback").unwrap_or(0);
    Some(CgroupMemory {
        version,
        dir: dir.to_path_buf(),
        limit,
        usage,
        file_cache: file.saturating_sub(unclean),
    })
}

/// The limited level with the least headroom, from this process's cgroup up
/// to the mount's root (a parent's limit binds its children too).
fn tightest_cgroup(root: &Path) -> Option<CgroupMemory> {
    let proc_ = proc::Root::under(root);
    let cgroups = proc_.read_pid("self", "cgroup").ok()?;
    let mountinfo = proc_.read_pid("self", "mountinfo").unwrap_or_default();
    let (v1, v2) = cgroup_mounts(&mountinfo);
    let mut v1_path = None;
    let mut v2_path = None;
    for line in cgroups.lines() {
        let mut it = line.splitn(3, ':');
        let (Some(id), Some(ctrl), Some(path)) = (it.next(), it.next(), it.next()) else {
            continue;
        };
        if id == "0" && ctrl.is_empty() {
            v2_path = Some(path.to_string());
        } else if ctrl.split(',').any(|c| c == "memory") {
            v1_path = Some(path.to_string());
        }
    }
    // A v1 memory controller takes the controller away from v2 (hybrid
    // layout); otherwise the unified hierarchy carries it.
    let (mount, path, version) = match (v1, v1_path, v2, v2_path) {
        (Some(m), Some(p), _, _) => (m, p, 1),
        (_, _, Some(m), Some(p)) => (m, p, 2),
        _ => return None,
    };
    let top = cgroup_dir(root, &mount, "/");
    let mut dir = cgroup_dir(root, &mount, &path);
    let mut best: Option<CgroupMemory> = None;
    loop {
        if let Some(level) = read_level(&dir, version) {
            if best
                .as_ref()
                .is_none_or(|b| level.headroom() < b.headroom())
            {
                best = Some(level);
            }
        }
        if dir == top || !dir.pop() || !dir.starts_with(&top) {
            break;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::system::test_support::{cgroup, put};

    const MEMINFO: &str = "MemTotal:       24683520 kB\nMemFree:        19397000 kB\n\
                           MemAvailable:   21985280 kB\nBuffers:          100 kB\n";

    /// A hybrid host as this one: v1 memory controller, v2 mounted without it.
    fn v1_tree(root: &Path, limit: &str) {
        put(root, "proc/meminfo", MEMINFO);
        cgroup(
            root,
            "9:name=systemd:/\n4:memory:/jobs/board\n0::/\n",
            "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n\
             35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n\
             41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n",
        );
        let cg = "sys/fs/cgroup/memory";
        put(
            root,
            &format!("{cg}/memory.limit_in_bytes"),
            "9223372036854771712\n",
        );
        put(root, &format!("{cg}/memory.usage_in_bytes"), "901193728\n");
        put(
            root,
            &format!("{cg}/jobs/memory.limit_in_bytes"),
            "9223372036854771712\n",
        );
        put(root, &format!("{cg}/jobs/memory.usage_in_bytes"), "1000\n");
        put(
            root,
            &format!("{cg}/jobs/board/memory.limit_in_bytes"),
            limit,
        );
        put(
            root,
            &format!("{cg}/jobs/board/memory.usage_in_bytes"),
            "20971520\n",
        );
        put(
            root,
            &format!("{cg}/jobs/board/memory.stat"),
            "cache 4194304\nrss 16777216\ninactive_file 1048576\nactive_file 1048576\n\
             total_cache 4194304\ntotal_inactive_file 3145728\ntotal_active_file 1048576\n",
        );
    }

    #[test]
    fn v1_limit_minus_usage_beats_mem_available() {
        let t = tempfile::tempdir().unwrap();
        v1_tree(t.path(), "67108864\n");
        let l = MemoryLimits::read_from(t.path());
        assert_eq!(l.mem_available, Some(21985280 * 1024));
        let c = l.cgroup.as_ref().expect("the 64 MiB level");
        assert_eq!(c.version, 1);
        assert!(c.dir.ends_with("sys/fs/cgroup/memory/jobs/board"), "{c:?}");
        assert_eq!(
            (c.limit, c.usage, c.file_cache),
            (64 << 20, 20 << 20, 4 << 20)
        );
        // 64 MiB − (20 MiB − 4 MiB of file cache) = 48 MiB.
        assert_eq!(l.available(), Some(48 << 20));
        assert_eq!(l.budget(), Some((40 << 20) / 4 * 3));
        let e = l.explain();
        assert!(
            e.contains("limit 64 MiB") && e.contains("headroom 48 MiB"),
            "{e}"
        );
    }

    #[test]
    fn dirty_page_cache_is_not_counted_as_reclaimable() {
        let t = tempfile::tempdir().unwrap();
        v1_tree(t.path(), "67108864\n");
        let stat = "sys/fs/cgroup/memory/jobs/board/memory.stat";
        put(
            t.path(),
            stat,
            "total_inactive_file 3145728\ntotal_active_file 1048576\n\
             total_dirty 2097152\ntotal_writeback 1048576\n",
        );
        let c = MemoryLimits::read_from(t.path()).cgroup.unwrap();
        // 4 MiB of file cache, 3 MiB of it dirty or under writeback.
        assert_eq!(c.file_cache, 1 << 20);
        assert_eq!(c.headroom(), (64 << 20) - (19 << 20));
    }

    #[test]
    fn v1_unlimited_is_no_limit() {
        let t = tempfile::tempdir().unwrap();
        v1_tree(t.path(), "9223372036854771712\n");
        let l = MemoryLimits::read_from(t.path());
        assert_eq!(l.cgroup, None);
        assert_eq!(l.available(), Some(21985280 * 1024));
        assert!(l.explain().contains("no memory cgroup limit"));
    }

    #[test]
    fn a_parents_limit_binds_the_child() {
        let t = tempfile::tempdir().unwrap();
        v1_tree(t.path(), "9223372036854771712\n");
        let cg = "sys/fs/cgroup/memory/jobs";
        put(
            t.path(),
            &format!("{cg}/memory.limit_in_bytes"),
            "33554432\n",
        );
        put(
            t.path(),
            &format!("{cg}/memory.usage_in_bytes"),
            "25165824\n",
        );
        let l = MemoryLimits::read_from(t.path());
        let c = l.cgroup.unwrap();
        assert!(c.dir.ends_with("memory/jobs"), "{c:?}");
        assert_eq!(c.headroom(), 8 << 20);
    }

    #[test]
    fn v2_max_current_and_stat() {
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        put(r, "proc/meminfo", MEMINFO);
        cgroup(r, "0::/user.slice/job.scope\n", "30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate\n");
        let cg = "sys/fs/cgroup/user.slice/job.scope";
        put(r, &format!("{cg}/memory.max"), "33554432\n");
        put(r, &format!("{cg}/memory.current"), "12582912\n");
        put(
            r,
            &format!("{cg}/memory.stat"),
            "anon 8388608\nfile 4194304\nactive_file 0\ninactive_file 4194304\n",
        );
        put(r, "sys/fs/cgroup/user.slice/memory.max", "max\n");
        put(r, "sys/fs/cgroup/user.slice/memory.current", "99999999\n");
        let l = MemoryLimits::read_from(r);
        let c = l.cgroup.clone().unwrap();
        assert_eq!(c.version, 2);
        assert_eq!(c.headroom(), 24 << 20);
        assert_eq!(l.available(), Some(24 << 20));
    }

    #[test]
    fn v2_in_a_container_with_a_mount_root() {
        // The container sees its own cgroup as the mount root and "0::/".
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        put(r, "proc/meminfo", MEMINFO);
        cgroup(
            r,
            "0::/\n",
            "700 690 0:26 /docker/abc /sys/fs/cgroup ro,nosuid - cgroup2 cgroup rw\n",
        );
        put(r, "sys/fs/cgroup/memory.max", "16777216\n");
        put(r, "sys/fs/cgroup/memory.current", "4194304\n");
        let l = MemoryLimits::read_from(r);
        assert_eq!(l.available(), Some(12 << 20));
    }

    #[test]
    fn nothing_readable_is_unknown_not_an_error() {
        let t = tempfile::tempdir().unwrap();
        let l = MemoryLimits::read_from(t.path());
        assert_eq!(l, MemoryLimits::default());
        assert_eq!(l.available(), None);
        assert_eq!(l.budget(), None);
        // Only meminfo (no cgroup files): MemAvailable decides.
        put(t.path(), "proc/meminfo", "MemAvailable:   65536 kB\n");
        put(t.path(), "proc/self/cgroup", "0::/\n");
        let l = MemoryLimits::read_from(t.path());
        assert_eq!(l.available(), Some(64 << 20));
        assert_eq!(l.budget(), Some((56 << 20) / 4 * 3));
    }

    /// The 64 MiB aarch64 lab guest at boot (its /proc/meminfo, and the low
    /// watermark of its one zone from the OOM report: 717 pages).
    #[test]
    fn reclaimable_slab_is_not_counted_and_tunelabs_code_is_reserved() {
        let t = tempfile::tempdir().unwrap();
        put(
            t.path(),
            "proc/meminfo",
            "MemTotal:          35620 kB\nMemFree:            3040 kB\n\
             MemAvailable:      10768 kB\nKReclaimable:       9548 kB\n\
             SReclaimable:       9548 kB\n",
        );
        put(t.path(), "proc/self/cgroup", "0::/\n");
        put(
            t.path(),
            "proc/zoneinfo",
            "Node 0, zone      DMA\n  pages free     760\n        boost    0\n\
             \x20       min      676\n        low      717\n        high     758\n",
        );
        put(
            t.path(),
            "proc/self/status",
            "VmRSS:\t    4788 kB\nRssAnon:\t     352 kB\nRssFile:\t    3072 kB\n",
        );
        let l = MemoryLimits::read_from(t.path());
        let low = 717 * proc::page_size();
        let slab = (9548u64 << 10) - low.min((9548u64 << 10) / 2);
        assert_eq!(l.kernel_reclaimable, slab);
        assert_eq!(l.available(), Some((10768u64 << 10) - slab));
        // Its code (3 MiB resident) and 1 MiB to grow, not the flat 8 MiB.
        assert_eq!(l.reserve(), 4 << 20);
        assert_eq!(
            l.budget(),
            Some(((10768u64 << 10) - slab).saturating_sub(4 << 20) / 4 * 3)
        );
        let e = l.explain();
        assert!(
            e.contains("MemAvailable 10.5 MiB")
                && e.contains("reclaimable kernel memory (slab) not counted"),
            "{e}"
        );
        // Without the watermarks all of it is left out; a build whose code
        // is larger than the flat reserve keeps the flat reserve.
        fs::remove_file(t.path().join("proc/zoneinfo")).unwrap();
        put(t.path(), "proc/self/status", "RssFile:\t   20480 kB\n");
        let l = MemoryLimits::read_from(t.path());
        assert_eq!(l.kernel_reclaimable, 9548 << 10);
        assert_eq!(l.reserve(), RESERVE);
    }

    #[test]
    fn mountinfo_escapes_are_undone() {
        assert_eq!(unescape("/mnt/a\\040b"), "/mnt/a b");
        assert_eq!(unescape("/plain"), "/plain");
    }
}
