//! A scratch filesystem on a loop device: a sparse image file inside a
//! tunelab scratch directory, attached through the kernel interface
//! (`/dev/loop-control` LOOP_CTL_GET_FREE, then LOOP_CONFIGURE — or
//! LOOP_SET_FD + LOOP_SET_STATUS64 on kernels before 5.8), formatted with
//! `mkfs.<fstype>` (the one external program: it says so when missing),
//! mounted with mount(2) on a directory inside the same scratch directory.
//! Dropping the `LoopFs` unmounts, detaches and removes the image and mount
//! point — also after errors half-way through.
//!
//! The device is configured with the kernel's autoclear flag and tunelab
//! closes its own descriptor once the filesystem is mounted, so the device
//! frees itself when the filesystem is unmounted. The mount and the device
//! are journalled (like knobs) before they exist: after a SIGKILL the next
//! tunelab command, or `tunelab restore`, unmounts and releases them.
//! Needs root.

use std::fs::{self, File};
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use rustix::io::Errno;
use rustix::ioctl::{IntegerSetter, Ioctl, IoctlOutput, NoArg, Opcode, Setter};

use crate::safety::journal::{self, Entry, Saved};
use crate::safety::sysmount::{
    self, LOOP_CONFIGURE, LOOP_CTL_GET_FREE, LOOP_SET_FD, LOOP_SET_STATUS64, LO_FLAGS_AUTOCLEAR,
};
use crate::{Error, Result};

/// How to build the loop filesystem.
#[derive(Debug, Clone)]
pub struct LoopFsOptions {
    /// Image size in bytes (sparse: only written blocks use space).
    pub size: u64,
    /// `mkfs.<fs_type>`, e.g. "ext4".
    pub fs_type: String,
    /// Extra mkfs arguments (before the device), e.g. `["-b", "4096"]`.
    pub mkfs_args: Vec<String>,
    /// `mount -o` options, e.g. "noatime" (empty for defaults).
    pub mount_options: String,
    /// Mount read-only.
    pub read_only: bool,
}

impl Default for LoopFsOptions {
    fn default() -> Self {
        LoopFsOptions {
            size: 64 << 20,
            fs_type: "ext4".into(),
            mkfs_args: Vec::new(),
            mount_options: String::new(),
            read_only: false,
        }
    }
}

/// A mounted loop filesystem; unmounted, detached and removed on drop.
#[derive(Debug)]
pub struct LoopFs {
    image: PathBuf,
    mount_point: PathBuf,
    device: Option<PathBuf>,
    /// Our descriptor of the loop device until the mount holds it (with
    /// autoclear, closing the last one detaches the device).
    loop_file: Option<File>,
    major: u32,
    minor: u32,
    mounted: bool,
    /// The journal entry naming this lab mount.
    journal_key: Option<String>,
}

/// `struct loop_info64` of <linux/loop.h>.
#[repr(C)]
#[derive(Clone, Copy)]
struct LoopInfo64 {
    lo_device: u64,
    lo_inode: u64,
    lo_rdevice: u64,
    lo_offset: u64,
    lo_sizelimit: u64,
    lo_number: u32,
    lo_encrypt_type: u32,
    lo_encrypt_key_size: u32,
    lo_flags: u32,
    lo_file_name: [u8; 64],
    lo_crypt_name: [u8; 64],
    lo_encrypt_key: [u8; 32],
    lo_init: [u64; 2],
}

/// `struct loop_config` of <linux/loop.h> (LOOP_CONFIGURE, Linux 5.8).
#[repr(C)]
struct LoopConfig {
    fd: u32,
    block_size: u32,
    info: LoopInfo64,
    reserved: [u64; 8],
}

fn loop_info(image: &Path, read_only: bool) -> LoopInfo64 {
    // SAFETY: all-zero is a valid loop_info64.
    let mut info: LoopInfo64 = unsafe { std::mem::zeroed() };
    info.lo_flags = LO_FLAGS_AUTOCLEAR | u32::from(read_only);
    let name = image.as_os_str().as_bytes();
    let n = name.len().min(63);
    info.lo_file_name[..n].copy_from_slice(&name[..n]);
    info
}

fn ioctl_err(what: &str, dev: &Path, e: Errno) -> Error {
    Error::environment(format!("{what} on {}: {e}", dev.display()))
}

/// LOOP_CTL_GET_FREE: no argument, the free device's number is the
/// ioctl's return value (rustix's `NoArg` discards it).
struct GetFree;

// SAFETY: no argument is passed; the output is the syscall's return value.
unsafe impl Ioctl for GetFree {
    type Output = i32;
    const IS_MUTATING: bool = false;
    fn opcode(&self) -> Opcode {
        LOOP_CTL_GET_FREE
    }
    fn as_ptr(&mut self) -> *mut std::ffi::c_void {
        std::ptr::null_mut()
    }
    unsafe fn output_from_ptr(
        out: IoctlOutput,
        _: *mut std::ffi::c_void,
    ) -> rustix::io::Result<i32> {
        Ok(out)
    }
}

/// The node of loop device `n`, created when /dev is static (no devtmpfs).
fn loop_node(n: i32) -> Result<PathBuf> {
    let dev = PathBuf::from(format!("/dev/loop{n}"));
    if !dev.exists() {
        let c = std::ffi::CString::new(dev.as_os_str().as_bytes())
            .map_err(|_| Error::environment("bad loop device path"))?;
        let r = rustix::fs::mknodat(
            rustix::fs::CWD,
            &c,
            rustix::fs::FileType::BlockDevice,
            rustix::fs::Mode::from_raw_mode(0o600),
            rustix::fs::makedev(7, n as u32),
        );
        if let Err(e) = r {
            if !dev.exists() {
                return Err(ioctl_err("cannot create the device node", &dev, e));
            }
        }
    }
    Ok(dev)
}

/// Attach `image` to a free loop device with autoclear. Returns the device
/// and our open descriptor of it (the device detaches when the last
/// descriptor closes and nothing is mounted from it).
pub(crate) fn attach(image: &Path, read_only: bool) -> Result<(PathBuf, File)> {
    let ctl_path = Path::new("/dev/loop-control");
    let ctl = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(ctl_path)
        .map_err(|e| {
            Error::environment(format!(
                "cannot open {}: {e} (the kernel needs loop device support, CONFIG_BLK_DEV_LOOP)",
                ctl_path.display()
            ))
        })?;
    let backing = fs::OpenOptions::new()
        .read(true)
        .write(!read_only)
        .open(image)
        .map_err(|e| Error::io("cannot open loop image", image, e))?;
    // Another process may take the free device between GET_FREE and our
    // configure (EBUSY): ask again.
    for _ in 0..16 {
        // SAFETY: LOOP_CTL_GET_FREE takes no argument.
        let n = unsafe { rustix::ioctl::ioctl(&ctl, GetFree) }
            .map_err(|e| ioctl_err("LOOP_CTL_GET_FREE", ctl_path, e))?;
        let dev = loop_node(n)?;
        let f = fs::OpenOptions::new()
            .read(true)
            .write(!read_only)
            .open(&dev)
            .map_err(|e| Error::io("cannot open", &dev, e))?;
        let cfg = LoopConfig {
            fd: backing.as_raw_fd() as u32,
            block_size: 0,
            info: loop_info(image, read_only),
            reserved: [0; 8],
        };
        // SAFETY: LOOP_CONFIGURE reads a struct loop_config.
        let r = unsafe { rustix::ioctl::ioctl(&f, Setter::<LOOP_CONFIGURE, _>::new(cfg)) };
        let err = match r {
            Ok(()) => return Ok((dev, f)),
            Err(e) => e,
        };
        match err {
            Errno::BUSY => continue,
            // Kernels before 5.8 do not know LOOP_CONFIGURE.
            Errno::INVAL | Errno::NOTTY => {
                let fd = backing.as_raw_fd() as usize;
                // SAFETY: LOOP_SET_FD takes the backing descriptor as an integer.
                let r = unsafe {
                    rustix::ioctl::ioctl(&f, IntegerSetter::<LOOP_SET_FD>::new_usize(fd))
                };
                match r {
                    Ok(()) => {}
                    Err(Errno::BUSY) => continue,
                    Err(e) => return Err(ioctl_err("LOOP_SET_FD", &dev, e)),
                }
                let info = loop_info(image, read_only);
                // SAFETY: LOOP_SET_STATUS64 reads a struct loop_info64.
                let r =
                    unsafe { rustix::ioctl::ioctl(&f, Setter::<LOOP_SET_STATUS64, _>::new(info)) };
                if let Err(e) = r {
                    let e = ioctl_err("LOOP_SET_STATUS64", &dev, e);
                    // SAFETY: undo the LOOP_SET_FD above; LOOP_CLR_FD takes no argument.
                    let _ = unsafe {
                        rustix::ioctl::ioctl(&f, NoArg::<{ sysmount::LOOP_CLR_FD }>::new())
                    };
                    return Err(e);
                }
                return Ok((dev, f));
            }
            e => return Err(ioctl_err("LOOP_CONFIGURE", &dev, e)),
        }
    }
    Err(Error::environment(
        "no free loop device could be claimed (others kept taking them)",
    ))
}

/// The arguments of `mkfs.<fs_type>` for `target`: each mkfs's own quiet
/// and force flags, then `extra`, then the target. There is no common set:
/// mkfs.vfat (dosfstools and busybox) and mkfs.exfat (exfatprogs) reject
/// `-q`, and only some need forcing over an old signature.
pub fn mkfs_args(fs_type: &str, extra: &[String], target: &str) -> Vec<String> {
    let own: &[&str] = match fs_type {
        "ext2" => &["-q", "-F"],
        // Inode tables and journal zeroed now, not by a kernel thread
        // after mount: those writes would land inside the measurement
        // (and its write-amplification count).
        "ext3" | "ext4" => &["-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0"],
        "xfs" | "btrfs" | "f2fs" => &["-q", "-f"],
        // Quiet by default; no quiet flag to give.
        "vfat" | "fat" | "msdos" | "exfat" => &[],
        // Unknown mkfs: pass nothing we cannot be sure it accepts.
        _ => &[],
    };
    own.iter()
        .map(|s| s.to_string())
        .chain(extra.iter().cloned())
        .chain([target.to_string()])
        .collect()
}

/// Run mkfs, returning an error that names it and quotes its stderr.
fn mkfs(fs_type: &str, args: &[&str]) -> Result<()> {
    let cmd = format!("mkfs.{fs_type}");
    let out = Command::new(&cmd).args(args).output().map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            Error::environment(format!(
                "{cmd} is not installed: a {fs_type} loop file system needs it (install the \
                 package with {cmd}, or choose a file system whose mkfs this system has)"
            ))
        } else {
            Error::environment(format!("cannot run {cmd}: {e}"))
        }
    })?;
    if !out.status.success() {
        return Err(Error::environment(format!(
            "{cmd} {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(())
}

impl LoopFs {
    /// Create the image `<dir>/<name>.img`, attach, format and mount it on
    /// `<dir>/<name>`. `dir` must be a directory tunelab owns (a scratch
    /// directory); both paths must not exist yet.
    pub fn create(dir: &Path, name: &str, opts: &LoopFsOptions) -> Result<LoopFs> {
        crate::safety::require_root(|| {
            "a loop filesystem needs root (loop devices and mount); run with sudo".into()
        })?;
        if name.contains('/') || name.is_empty() {
            return Err(Error::usage(format!("bad loop filesystem name '{name}'")));
        }
        let image = dir.join(format!("{name}.img"));
        let mount_point = dir.join(name);
        let f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&image)
            .map_err(|e| Error::io("cannot create loop image", &image, e))?;
        let mut lfs = LoopFs {
            image,
            mount_point,
            device: None,
            loop_file: None,
            major: 0,
            minor: 0,
            mounted: false,
            journal_key: None,
        };
        f.set_len(opts.size)
            .map_err(|e| Error::io("cannot size loop image", &lfs.image, e))?;
        drop(f);
        // Journal before the device exists, so a SIGKILL at any later
        // point leaves an entry the next run acts on.
        let key = format!("lab {}", lfs.mount_point.display());
        let mut entry = Entry::new(&key, lfs.saved(dir));
        journal::claim(entry.clone())?;
        lfs.journal_key = Some(key);
        let (dev, file) = attach(&lfs.image, opts.read_only)?;
        lfs.device = Some(dev.clone());
        lfs.loop_file = Some(file);
        entry.saved = lfs.saved(dir);
        journal::put(entry)?;
        let st = rustix::fs::stat(&dev).map_err(|e| Error::io("cannot stat", &dev, e.into()))?;
        lfs.major = rustix::fs::major(st.st_rdev);
        lfs.minor = rustix::fs::minor(st.st_rdev);
        let dev_s = dev.to_string_lossy().into_owned();
        let args = mkfs_args(&opts.fs_type, &opts.mkfs_args, &dev_s);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        mkfs(&opts.fs_type, &args)?;
        fs::create_dir(&lfs.mount_point)
            .map_err(|e| Error::io("cannot create mount point", &lfs.mount_point, e))?;
        let mut o = opts.mount_options.clone();
        if opts.read_only {
            o = if o.is_empty() {
                "ro".into()
            } else {
                format!("ro,{o}")
            };
        }
        sysmount::mount(&dev, &lfs.mount_point, &opts.fs_type, &o)?;
        lfs.mounted = true;
        // The mount holds the device now; with autoclear it goes when the
        // file system is unmounted.
        lfs.loop_file = None;
        // A second Ctrl-C exits without running Drop: let it unmount.
        crate::safety::signals::register_mount(&lfs.mount_point, None);
        Ok(lfs)
    }

    fn saved(&self, scratch: &Path) -> Saved {
        Saved::Lab {
            mount_point: self.mount_point.clone(),
            image: self.image.clone(),
            device: self.device.clone(),
            scratch: Some(scratch.to_path_buf()),
        }
    }

    /// Where the filesystem is mounted (create files only under here).
    pub fn mount_point(&self) -> &Path {
        &self.mount_point
    }

    /// Device numbers (for cgroup throttling, `/sys/dev/block/MAJ:MIN`).
    pub fn major_minor(&self) -> (u32, u32) {
        (self.major, self.minor)
    }
}

impl Drop for LoopFs {
    fn drop(&mut self) {
        let mut clean = true;
        if self.mounted {
            // Busy (a child still has a file open?): detached lazily, it
            // goes away as soon as it is no longer used.
            clean &= sysmount::unmount(&self.mount_point).is_ok();
            self.mounted = false;
            crate::safety::signals::unregister_mount(&self.mount_point);
        }
        // Closing our descriptor detaches an unmounted autoclear device.
        self.loop_file = None;
        if let Some(dev) = self.device.take() {
            // Only when it is still bound to our image (never someone else's).
            clean &= sysmount::loop_detach_if_ours(&dev, &self.image).is_ok();
        }
        if fs::symlink_metadata(&self.mount_point).is_ok_and(|m| m.is_dir()) {
            let _ = fs::remove_dir(&self.mount_point);
        }
        if fs::symlink_metadata(&self.image).is_ok_and(|m| !m.file_type().is_block_device()) {
            let _ = fs::remove_file(&self.image);
        }
        if let (Some(k), true) = (self.journal_key.take(), clean) {
            let _ = journal::remove(&k, std::process::id());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::mkfs_args;

    #[test]
    fn each_mkfs_gets_only_flags_it_accepts() {
        let a = |fs: &str| mkfs_args(fs, &["-L".into(), "x".into()], "/dev/loop7");
        // mkfs.vfat and mkfs.exfat reject -q: the old code passed it to all.
        assert_eq!(a("vfat"), ["-L", "x", "/dev/loop7"]);
        assert_eq!(a("exfat"), ["-L", "x", "/dev/loop7"]);
        assert_eq!(a("ext2"), ["-q", "-F", "-L", "x", "/dev/loop7"]);
        assert_eq!(
            a("ext4"),
            [
                "-q",
                "-F",
                "-E",
                "lazy_itable_init=0,lazy_journal_init=0",
                "-L",
                "x",
                "/dev/loop7"
            ]
        );
        assert_eq!(a("f2fs"), ["-q", "-f", "-L", "x", "/dev/loop7"]);
        assert_eq!(a("xfs"), ["-q", "-f", "-L", "x", "/dev/loop7"]);
        assert_eq!(a("nilfs2"), ["-L", "x", "/dev/loop7"]);
    }
}
