//! Block I/O throttling with a cgroup: a private cgroup
//! (`tunelab-<pid>[-n]`) with a bytes/s (and optionally IOPS) limit on one
//! device, and processes moved into it. Dropping the guard moves every
//! process back where it came from and removes the cgroup. The cgroup is
//! journalled before it exists, so a SIGKILLed run's cgroup is removed by
//! `tunelab restore` and by the next tunelab command.
//!
//! cgroup v1 (`/sys/fs/cgroup/blkio`, `blkio.throttle.{read,write}_bps_device`)
//! is the well-tested path; cgroup v2 (`io.max`) is best effort.
//!
//! Caveat: cgroup v1 throttles I/O at submission by the process itself.
//! Buffered writes are written back later by kernel flusher threads, which
//! are not in the cgroup, so **only direct I/O (and reads that miss the
//! cache) are throttled reliably**; buffered writes escape the limit. On v2,
//! writeback is attributed to the cgroup but still lags behind write().

use rustix::io::Errno;
use std::fs;
use std::path::{Path, PathBuf};

use crate::safety::journal::{self, Entry, Saved};
use crate::{Error, Result};

const V1_ROOT: &str = "/sys/fs/cgroup/blkio";
const V2_ROOT: &str = "/sys/fs/cgroup";

/// Limits on one device; `None` means unlimited.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ThrottleLimits {
    pub read_bps: Option<u64>,
    pub write_bps: Option<u64>,
    pub read_iops: Option<u64>,
    pub write_iops: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupVersion {
    V1,
    V2,
}

/// A throttling cgroup; removed on drop.
#[derive(Debug)]
pub struct IoThrottle {
    dir: PathBuf,
    version: CgroupVersion,
    /// Where our own process was before `enter()`, to go back on `leave()`.
    home: Option<PathBuf>,
}

fn write_file(path: &Path, value: &str) -> Result<()> {
    fs::write(path, value).map_err(|e| {
        let msg = format!("cannot write '{value}' to {}: {e}", path.display());
        match Errno::from_io_error(&e) {
            Some(Errno::ACCESS) | Some(Errno::PERM) => Error::privilege(msg),
            _ => Error::environment(msg),
        }
    })
}

/// Which cgroup hierarchy can throttle block I/O here.
pub fn detect() -> Option<CgroupVersion> {
    if Path::new(V1_ROOT)
        .join("blkio.throttle.write_bps_device")
        .exists()
    {
        Some(CgroupVersion::V1)
    } else if Path::new(V2_ROOT).join("cgroup.controllers").exists()
        && fs::read_to_string(Path::new(V2_ROOT).join("cgroup.controllers"))
            .is_ok_and(|s| s.split_whitespace().any(|c| c == "io"))
    {
        Some(CgroupVersion::V2)
    } else {
        None
    }
}

/// The cgroup directory of `pid` in the hierarchy of `version`.
fn cgroup_of(pid: &str, version: CgroupVersion) -> Option<PathBuf> {
    let s = crate::system::proc::read_pid(pid, "cgroup").ok()?;
    for line in s.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, ctrls, path) = (parts.next()?, parts.next()?, parts.next()?);
        let hit = match version {
            CgroupVersion::V1 => ctrls.split(',').any(|c| c == "blkio"),
            CgroupVersion::V2 => ctrls.is_empty(),
        };
        if hit {
            let root = if version == CgroupVersion::V1 {
                V1_ROOT
            } else {
                V2_ROOT
            };
            return Some(Path::new(root).join(path.trim_start_matches('/')));
        }
    }
    None
}

impl IoThrottle {
    /// Create a cgroup limiting device `major:minor` to `limits`. Needs root.
    pub fn create(major: u32, minor: u32, limits: ThrottleLimits) -> Result<IoThrottle> {
        crate::safety::require_root(|| {
            "throttling block I/O needs root (it creates a cgroup); run with sudo".into()
        })?;
        let version = detect().ok_or_else(|| {
            Error::environment(
                "no cgroup hierarchy with block I/O throttling (cgroup v1 blkio or v2 io) is mounted",
            )
        })?;
        // The pid and a random decimal tag name it (the journal accepts
        // only `tunelab-PID-DIGITS`): unique without a counter kept for the
        // whole process (mkdir below fails rather than reuse one).
        let name = format!("tunelab-{}-{}", std::process::id(), rand::random::<u32>());
        let root = if version == CgroupVersion::V1 {
            V1_ROOT
        } else {
            V2_ROOT
        };
        let dir = Path::new(root).join(name);
        if version == CgroupVersion::V2 {
            // Best effort: the io controller must be enabled for children.
            let _ = fs::write(Path::new(V2_ROOT).join("cgroup.subtree_control"), "+io");
        }
        // In the journal before it exists: after a SIGKILL, `restore` and
        // the next tunelab remove it (and the limit it carries).
        let key = format!("cgroup {}", dir.display());
        journal::claim(Entry::new(&key, Saved::Cgroup { path: dir.clone() }))?;
        if let Err(e) = fs::create_dir(&dir) {
            let _ = journal::remove(&key, std::process::id());
            return Err(Error::io("cannot create cgroup", &dir, e));
        }
        let t = IoThrottle {
            dir,
            version,
            home: None,
        };
        let dev = format!("{major}:{minor}");
        match version {
            CgroupVersion::V1 => {
                let set = |file: &str, v: Option<u64>| -> Result<()> {
                    match v {
                        Some(v) => write_file(&t.dir.join(file), &format!("{dev} {v}")),
                        None => Ok(()),
                    }
                };
                set("blkio.throttle.read_bps_device", limits.read_bps)?;
                set("blkio.throttle.write_bps_device", limits.write_bps)?;
                set("blkio.throttle.read_iops_device", limits.read_iops)?;
                set("blkio.throttle.write_iops_device", limits.write_iops)?;
            }
            CgroupVersion::V2 => {
                let f = |k: &str, v: Option<u64>| {
                    format!("{k}={}", v.map(|x| x.to_string()).unwrap_or("max".into()))
                };
                let line = format!(
                    "{dev} {} {} {} {}",
                    f("rbps", limits.read_bps),
                    f("wbps", limits.write_bps),
                    f("riops", limits.read_iops),
                    f("wiops", limits.write_iops)
                );
                write_file(&t.dir.join("io.max"), &line)?;
            }
        }
        Ok(t)
    }

    /// Move process `pid` (all its threads) into the cgroup. Processes it
    /// forks afterwards are born inside.
    pub(crate) fn add_process(&self, pid: u32) -> Result<()> {
        write_file(&self.dir.join("cgroup.procs"), &pid.to_string())
    }

    /// Move the calling process into the cgroup (children spawned from now
    /// on inherit it) until `leave()` or drop.
    pub fn enter(&mut self) -> Result<()> {
        if self.home.is_none() {
            self.home = cgroup_of("self", self.version);
        }
        self.add_process(std::process::id())
    }

    /// Move the calling process back where it was.
    pub fn leave(&mut self) -> Result<()> {
        if let Some(home) = self.home.take() {
            write_file(&home.join("cgroup.procs"), &std::process::id().to_string())?;
        }
        Ok(())
    }
}

impl Drop for IoThrottle {
    fn drop(&mut self) {
        let _ = self.leave();
        let root = if self.version == CgroupVersion::V1 {
            V1_ROOT
        } else {
            V2_ROOT
        };
        let parent = self
            .dir
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or(root.into());
        for _ in 0..50 {
            if let Ok(procs) = fs::read_to_string(self.dir.join("cgroup.procs")) {
                for pid in procs.split_whitespace() {
                    let _ = fs::write(parent.join("cgroup.procs"), pid);
                }
            }
            if fs::remove_dir(&self.dir).is_ok() || !self.dir.exists() {
                let key = format!("cgroup {}", self.dir.display());
                let _ = journal::remove(&key, std::process::id());
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}
