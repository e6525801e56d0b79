//! Mounts and loop devices through the kernel interface, without the
//! `mount`, `umount` and `losetup` programs (a busybox board may lack them,
//! and util-linux's remount does not always clear `noatime`).
//!
//! Remounts pass the *whole* per-mount flag set to mount(2) (MS_REMOUNT
//! replaces every user-settable per-mount flag: nosuid, nodev, noexec, ro,
//! nodiratime, nosymfollow and the atime mode), then read
//! /proc/self/mountinfo back and fail when it does not show exactly what
//! was asked.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::system::mounts::unescape_mount as unescape;
use crate::{Error, Result};

use rustix::io::Errno;
use rustix::ioctl::{NoArg, Opcode};
use rustix::mount::{MountFlags, UnmountFlags};

/// One line of /proc/self/mountinfo, unescaped.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct MountLine {
    pub(crate) mount_point: PathBuf,
    /// Per-mount options (field 6): rw/ro, nosuid, relatime, …
    pub(crate) mount_opts: Vec<String>,
    pub(crate) fs_type: String,
    pub(crate) source: String,
    /// Per-superblock options (last field): rw, sync, lazytime, fs options.
    pub(crate) super_opts: Vec<String>,
}

impl MountLine {
    fn has(&self, o: &str) -> bool {
        self.mount_opts
            .iter()
            .chain(&self.super_opts)
            .any(|x| x == o)
    }
}

/// Parse mountinfo text.
pub(crate) fn parse_mountinfo(text: &str) -> Vec<MountLine> {
    let split = |s: &str| s.split(',').map(str::to_string).collect::<Vec<_>>();
    text.lines()
        .filter_map(|l| {
            let (head, tail) = l.split_once(" - ")?;
            let h: Vec<&str> = head.split(' ').collect();
            let t: Vec<&str> = tail.split(' ').collect();
            Some(MountLine {
                mount_point: PathBuf::from(unescape(h.get(4)?)),
                mount_opts: split(h.get(5)?),
                fs_type: t.first()?.to_string(),
                source: unescape(t.get(1)?),
                super_opts: split(t.get(2).unwrap_or(&"")),
            })
        })
        .collect()
}

/// The visible mount exactly at `mount_point` (the last one stacked there).
pub(crate) fn mount_at(mount_point: &Path) -> Option<MountLine> {
    let text = crate::system::proc::read("self/mountinfo").ok()?;
    parse_mountinfo(&text)
        .into_iter()
        .rev()
        .find(|m| m.mount_point == mount_point)
}

/// Mount points strictly inside `dir`.
pub(crate) fn mounts_under(dir: &Path) -> Vec<PathBuf> {
    let text = crate::system::proc::read("self/mountinfo").unwrap_or_default();
    parse_mountinfo(&text)
        .into_iter()
        .map(|m| m.mount_point)
        .filter(|mp| mp.starts_with(dir) && mp != dir)
        .collect()
}

/// Loop devices bound to `image` (from sysfs), for a lab killed before it
/// journalled the device it had attached.
pub(crate) fn loops_backed_by(image: &Path) -> Vec<PathBuf> {
    let Ok(dir) = std::fs::read_dir("/sys/block") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let dev = PathBuf::from(format!("/dev/{name}"));
            let b = loop_backing_file(&dev)?;
            let b = b.to_string_lossy();
            let b = b.strip_suffix(" (deleted)").unwrap_or(&b);
            (name.starts_with("loop") && Path::new(b) == image).then_some(dev)
        })
        .collect()
}

/// The access-time mode and the other options `tune mount` changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MountMode {
    /// "noatime", "relatime" or "strictatime".
    pub(crate) atime: &'static str,
    pub(crate) sync: bool,
    pub(crate) lazytime: bool,
}

impl MountMode {
    /// The mode an option list (mountinfo's, or with tune's tokens applied)
    /// asks for. mountinfo shows strict atime as neither noatime nor relatime.
    pub(crate) fn of(opts: &[String]) -> MountMode {
        let has = |o: &str| opts.iter().any(|x| x == o);
        MountMode {
            atime: if has("noatime") {
                "noatime"
            } else if has("relatime") {
                "relatime"
            } else {
                "strictatime"
            },
            sync: has("sync"),
            lazytime: has("lazytime"),
        }
    }

    fn of_line(m: &MountLine) -> MountMode {
        let all: Vec<String> = m.mount_opts.iter().chain(&m.super_opts).cloned().collect();
        MountMode::of(&all)
    }

    /// As `mount -o` would spell it.
    pub(crate) fn options(&self) -> String {
        format!(
            "{},{},{}",
            self.atime,
            if self.sync { "sync" } else { "async" },
            if self.lazytime {
                "lazytime"
            } else {
                "nolazytime"
            }
        )
    }
}

/// mount(2) flags for a remount of `m` to `want`: the per-mount flags it
/// has now, with the atime mode, sync and lazytime set explicitly
/// (MS_REMOUNT itself is added by `mount_remount`).
pub(crate) fn remount_flags(m: &MountLine, want: MountMode) -> MountFlags {
    let mut f = MountFlags::empty();
    for (opt, flag) in [
        ("nosuid", MountFlags::NOSUID),
        ("nodev", MountFlags::NODEV),
        ("noexec", MountFlags::NOEXEC),
        ("nodiratime", MountFlags::NODIRATIME),
        ("nosymfollow", MountFlags::NOSYMFOLLOW),
    ] {
        if m.mount_opts.iter().any(|o| o == opt) {
            f |= flag;
        }
    }
    if m.has("ro") {
        f |= MountFlags::RDONLY;
    }
    if m.has("dirsync") {
        f |= MountFlags::DIRSYNC;
    }
    f |= match want.atime {
        "noatime" => MountFlags::NOATIME,
        "relatime" => MountFlags::RELATIME,
        _ => MountFlags::STRICTATIME,
    };
    if want.sync {
        f |= MountFlags::SYNCHRONOUS;
    }
    if want.lazytime {
        f |= MountFlags::LAZYTIME;
    }
    f
}

fn cpath(p: &Path) -> Result<CString> {
    CString::new(p.as_os_str().as_bytes())
        .map_err(|_| Error::usage(format!("path contains a NUL byte: {}", p.display())))
}

/// Remount `mount_point` to exactly `want` and verify it in mountinfo.
pub(crate) fn set_mode(mount_point: &Path, want: MountMode) -> Result<()> {
    let m = mount_at(mount_point).ok_or_else(|| {
        Error::environment(format!(
            "{} is not a mount point in /proc/self/mountinfo",
            mount_point.display()
        ))
    })?;
    let flags = remount_flags(&m, want);
    let target = cpath(mount_point)?;
    // Empty data: fs-specific options stay as they are.
    if let Err(e) = rustix::mount::mount_remount(&target, flags, c"") {
        return Err(Error::environment(format!(
            "remount of {} with {} failed: {e}",
            mount_point.display(),
            want.options()
        )));
    }
    verify(mount_point, want)
}

/// Fail unless mountinfo shows `want` at `mount_point`.
pub(crate) fn verify(mount_point: &Path, want: MountMode) -> Result<()> {
    let now = mount_at(mount_point).map(|m| MountMode::of_line(&m));
    if now == Some(want) {
        return Ok(());
    }
    Err(Error::environment(format!(
        "{} should be mounted {} but /proc/self/mountinfo shows {}",
        mount_point.display(),
        want.options(),
        now.map_or("no such mount".to_string(), |n| n.options())
    )))
}

/// Standard mount options that are flags, not filesystem data.
fn flag_of(opt: &str) -> Option<MountFlags> {
    Some(match opt {
        "ro" => MountFlags::RDONLY,
        "rw" | "async" | "nolazytime" | "defaults" => MountFlags::empty(),
        "nosuid" => MountFlags::NOSUID,
        "nodev" => MountFlags::NODEV,
        "noexec" => MountFlags::NOEXEC,
        "sync" => MountFlags::SYNCHRONOUS,
        "dirsync" => MountFlags::DIRSYNC,
        "noatime" => MountFlags::NOATIME,
        "relatime" => MountFlags::RELATIME,
        "strictatime" => MountFlags::STRICTATIME,
        "nodiratime" => MountFlags::NODIRATIME,
        "lazytime" => MountFlags::LAZYTIME,
        _ => return None,
    })
}

/// Split `mount -o` text into mount(2) flags and the filesystem's data string.
pub(crate) fn split_options(options: &str) -> (MountFlags, String) {
    let mut flags = MountFlags::empty();
    let mut data = Vec::new();
    for o in options.split(',').filter(|o| !o.is_empty()) {
        match flag_of(o) {
            Some(f) => flags |= f,
            None => data.push(o),
        }
    }
    (flags, data.join(","))
}

/// mount(2) `device` on `mount_point` as `fs_type` with `mount -o` options.
pub(crate) fn mount(device: &Path, mount_point: &Path, fs_type: &str, options: &str) -> Result<()> {
    let (flags, data) = split_options(options);
    let (src, tgt) = (cpath(device)?, cpath(mount_point)?);
    let ty = CString::new(fs_type).map_err(|_| Error::usage("bad file system type"))?;
    let data_c = CString::new(data.clone()).map_err(|_| Error::usage("bad mount options"))?;
    let data_arg = if data.is_empty() {
        None
    } else {
        Some(data_c.as_c_str())
    };
    if let Err(e) = rustix::mount::mount(&src, &tgt, &ty, flags, data_arg) {
        let hint = match e {
            Errno::NODEV => {
                format!(" (the kernel has no {fs_type} support: load its module or build it in)")
            }
            Errno::INVAL => " (an option is not valid for this file system?)".into(),
            _ => String::new(),
        };
        return Err(Error::environment(format!(
            "cannot mount {} ({fs_type}, options '{options}') on {}: {e}{hint}",
            device.display(),
            mount_point.display()
        )));
    }
    Ok(())
}

/// umount2(2); `lazy` = MNT_DETACH (works while files are still open).
pub(crate) fn umount(mount_point: &Path, lazy: bool) -> std::io::Result<()> {
    let tgt = CString::new(mount_point.as_os_str().as_bytes())?;
    let flags = if lazy {
        UnmountFlags::DETACH
    } else {
        UnmountFlags::empty()
    };
    Ok(rustix::mount::unmount(&tgt, flags)?)
}

/// Unmount, lazily when busy. Ok when it is not mounted (any more).
pub(crate) fn unmount(mount_point: &Path) -> std::io::Result<()> {
    if mount_at(mount_point).is_none() {
        return Ok(());
    }
    match umount(mount_point, false) {
        Ok(()) => Ok(()),
        Err(e) if e.raw_os_error() == Some(Errno::BUSY.raw_os_error()) => umount(mount_point, true),
        Err(e)
            if e.raw_os_error() == Some(Errno::INVAL.raw_os_error())
                && mount_at(mount_point).is_none() =>
        {
            Ok(())
        }
        Err(e) => Err(e),
    }
}

pub(crate) const LOOP_SET_FD: Opcode = 0x4C00;
pub(crate) const LOOP_CLR_FD: Opcode = 0x4C01;
pub(crate) const LOOP_SET_STATUS64: Opcode = 0x4C04;
pub(crate) const LOOP_CONFIGURE: Opcode = 0x4C0A;
pub(crate) const LOOP_CTL_GET_FREE: Opcode = 0x4C82;
pub(crate) const LO_FLAGS_AUTOCLEAR: u32 = 4;

/// The file backing loop device `dev` (`/dev/loopN`), from sysfs.
pub(crate) fn loop_backing_file(dev: &Path) -> Option<PathBuf> {
    let name = dev.file_name()?.to_string_lossy().into_owned();
    let s = std::fs::read_to_string(format!("/sys/block/{name}/loop/backing_file")).ok()?;
    Some(PathBuf::from(s.trim_end_matches('\n')))
}

/// Detach `dev` when it is still bound to `image` (never someone else's).
pub(crate) fn loop_detach_if_ours(dev: &Path, image: &Path) -> Result<bool> {
    let backing = loop_backing_file(dev);
    // The kernel shows a deleted backing file with " (deleted)".
    let ours = backing.as_ref().is_some_and(|b| {
        b == image
            || b.to_string_lossy()
                .strip_suffix(" (deleted)")
                .is_some_and(|s| Path::new(s) == image)
    });
    if !ours {
        return Ok(false);
    }
    let f = std::fs::OpenOptions::new()
        .read(true)
        .open(dev)
        .map_err(|e| Error::io("cannot open", dev, e))?;
    // SAFETY: LOOP_CLR_FD takes no argument.
    if let Err(e) = unsafe { rustix::ioctl::ioctl(&f, NoArg::<LOOP_CLR_FD>::new()) } {
        // EBUSY with autoclear set: it detaches when its last user closes it.
        if e != Errno::NXIO {
            return Err(Error::environment(format!(
                "cannot detach {}: {e}",
                dev.display()
            )));
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    const INFO: &str = "\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw,errors=remount-ro
40 22 7:3 / /tmp/lab\\040dir rw,nosuid,nodev,noatime,nodiratime shared:9 - ext4 /dev/loop3 rw,sync,lazytime
41 22 7:4 / /mnt/strict ro,noexec - vfat /dev/loop4 ro,fmask=0022
";

    #[test]
    fn mountinfo_parses_and_unescapes() {
        let m = parse_mountinfo(INFO);
        assert_eq!(m.len(), 3);
        assert_eq!(m[1].mount_point, Path::new("/tmp/lab dir"));
        assert_eq!(m[1].source, "/dev/loop3");
        assert_eq!(
            MountMode::of_line(&m[1]),
            MountMode {
                atime: "noatime",
                sync: true,
                lazytime: true
            }
        );
        assert_eq!(MountMode::of_line(&m[2]).atime, "strictatime");
        assert_eq!(
            MountMode::of_line(&m[0]).options(),
            "relatime,async,nolazytime"
        );
    }

    #[test]
    fn remount_keeps_other_flags_and_sets_the_whole_atime_set() {
        let m = parse_mountinfo(INFO);
        let want = MountMode {
            atime: "relatime",
            sync: false,
            lazytime: false,
        };
        let f = remount_flags(&m[1], want);
        // noatime must be gone; relatime, nosuid, nodev, nodiratime kept/set.
        assert!(!f.contains(MountFlags::NOATIME));
        assert!(f.contains(MountFlags::RELATIME));
        assert!(!f.contains(MountFlags::SYNCHRONOUS));
        assert!(!f.contains(MountFlags::LAZYTIME));
        for flag in [
            MountFlags::NOSUID,
            MountFlags::NODEV,
            MountFlags::NODIRATIME,
        ] {
            assert!(f.contains(flag));
        }
        let strict = remount_flags(
            &m[2],
            MountMode {
                atime: "strictatime",
                sync: true,
                lazytime: false,
            },
        );
        assert!(strict.contains(MountFlags::STRICTATIME));
        assert!(strict.contains(MountFlags::RDONLY));
        assert!(strict.contains(MountFlags::NOEXEC));
        assert!(strict.contains(MountFlags::SYNCHRONOUS));
    }

    #[test]
    fn options_split_into_flags_and_data() {
        let (f, d) = split_options("noatime,data=writeback,commit=60,ro");
        assert_eq!(f, MountFlags::NOATIME | MountFlags::RDONLY);
        assert_eq!(d, "data=writeback,commit=60");
    }
}
