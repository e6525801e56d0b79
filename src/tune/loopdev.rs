//! A scratch filesystem on a loop device: a sparse image file inside a
//! tunelab scratch directory, attached with `losetup --find --show`,
//! formatted with `mkfs.<fstype> -q`, mounted on a directory inside the
//! same scratch directory. Dropping the `LoopFs` unmounts, detaches and
//! removes the image and mount point — also after errors half-way through.
//!
//! Right after mounting, the loop device is also detached "lazily"
//! (`losetup -d` on a busy device sets the kernel's autoclear flag), so
//! even if tunelab is killed the device frees itself once the filesystem
//! is unmounted. Needs root.

use std::fs;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::process::Command;

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
    major: u32,
    minor: u32,
    mounted: bool,
    /// Detach requested already (autoclear after unmount).
    lazy_detached: bool,
}

/// Run a command, returning its trimmed stdout, or an error that names the
/// command and quotes its stderr.
fn run(cmd: &str, args: &[&str]) -> Result<String> {
    let out = Command::new(cmd).args(args).output().map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            Error::environment(format!(
                "{cmd} is not installed (needed for a loop filesystem)"
            ))
        } else {
            Error::environment(format!("cannot run {cmd}: {e}"))
        }
    })?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(Error::environment(format!(
            "{cmd} {} failed: {}",
            args.join(" "),
            err.trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

impl LoopFs {
    /// Create the image `<dir>/<name>.img`, attach, format and mount it on
    /// `<dir>/<name>`. `dir` must be a directory tunelab owns (a scratch
    /// directory); both paths must not exist yet.
    pub fn create(dir: &Path, name: &str, opts: &LoopFsOptions) -> Result<LoopFs> {
        if !crate::safety::is_root() {
            return Err(Error::privilege(
                "a loop filesystem needs root (losetup, mkfs and mount); run with sudo",
            ));
        }
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
            major: 0,
            minor: 0,
            mounted: false,
            lazy_detached: false,
        };
        f.set_len(opts.size)
            .map_err(|e| Error::io("cannot size loop image", &lfs.image, e))?;
        drop(f);
        let img = lfs.image.to_string_lossy().into_owned();
        let dev = run("losetup", &["--find", "--show", &img])?;
        if !dev.starts_with("/dev/") {
            return Err(Error::environment(format!(
                "losetup returned an unexpected device '{dev}'"
            )));
        }
        lfs.device = Some(PathBuf::from(&dev));
        let st = rustix::fs::stat(dev.as_str())
            .map_err(|e| Error::io("cannot stat", Path::new(&dev), e.into()))?;
        lfs.major = rustix::fs::major(st.st_rdev);
        lfs.minor = rustix::fs::minor(st.st_rdev);
        let mkfs = format!("mkfs.{}", opts.fs_type);
        let mut args: Vec<&str> = vec!["-q"];
        if opts.fs_type.starts_with("ext") {
            args.push("-F");
        }
        args.extend(opts.mkfs_args.iter().map(|s| s.as_str()));
        args.push(&dev);
        run(&mkfs, &args)?;
        fs::create_dir(&lfs.mount_point)
            .map_err(|e| Error::io("cannot create mount point", &lfs.mount_point, e))?;
        lfs.mount(&opts.mount_options, opts.read_only)?;
        // Autoclear: the device detaches itself when the fs is unmounted.
        if run("losetup", &["-d", &dev]).is_ok() {
            lfs.lazy_detached = true;
        }
        // A second Ctrl-C exits without running Drop: let it unmount.
        let keep = (!lfs.lazy_detached).then_some(Path::new(&dev));
        crate::safety::signals::register_mount(&lfs.mount_point, keep);
        Ok(lfs)
    }

    fn mount(&mut self, options: &str, read_only: bool) -> Result<()> {
        let dev = self.device_path()?.to_string_lossy().into_owned();
        let mp = self.mount_point.to_string_lossy().into_owned();
        let mut o = options.to_string();
        if read_only {
            o = if o.is_empty() {
                "ro".into()
            } else {
                format!("ro,{o}")
            };
        }
        let mut args = vec![];
        if !o.is_empty() {
            args.extend(["-o", o.as_str()]);
        }
        args.extend([dev.as_str(), mp.as_str()]);
        run("mount", &args)?;
        self.mounted = true;
        Ok(())
    }

    /// Change mount options in place (`mount -o remount,<options>`).
    pub fn remount(&mut self, options: &str) -> Result<()> {
        let mp = self.mount_point.to_string_lossy().into_owned();
        run("mount", &["-o", &format!("remount,{options}"), &mp])?;
        Ok(())
    }

    /// Where the filesystem is mounted (create files only under here).
    pub fn mount_point(&self) -> &Path {
        &self.mount_point
    }

    /// The loop device node, e.g. `/dev/loop3`.
    pub fn device_path(&self) -> Result<&Path> {
        self.device
            .as_deref()
            .ok_or_else(|| Error::measurement("internal: loop device not attached"))
    }

    /// Device numbers (for cgroup throttling, `/sys/dev/block/MAJ:MIN`).
    pub fn major_minor(&self) -> (u32, u32) {
        (self.major, self.minor)
    }

    /// Kernel name, e.g. `loop3` (for `/sys/block/<name>`, diskstats).
    pub fn kernel_name(&self) -> Option<String> {
        self.device
            .as_ref()
            .and_then(|d| d.file_name())
            .map(|n| n.to_string_lossy().into_owned())
    }
}

impl Drop for LoopFs {
    fn drop(&mut self) {
        let mp = self.mount_point.to_string_lossy().into_owned();
        if self.mounted {
            if run("umount", &[&mp]).is_err() {
                // Busy (a child still has a file open?): detach lazily so it
                // goes away as soon as it is no longer used.
                let _ = run("umount", &["-l", &mp]);
            }
            self.mounted = false;
            crate::safety::signals::unregister_mount(&self.mount_point);
        }
        if let Some(dev) = self.device.take() {
            // With autoclear already set the device is gone after umount;
            // a second detach of a free device is harmless, but only do it
            // when it is still bound to our image.
            let img = self.image.to_string_lossy().into_owned();
            let bound = run("losetup", &["-j", &img]).unwrap_or_default();
            let d = dev.to_string_lossy().into_owned();
            if bound.split(':').next() == Some(d.as_str()) || !self.lazy_detached {
                let _ = run("losetup", &["-d", &d]);
            }
        }
        if fs::symlink_metadata(&self.mount_point).is_ok_and(|m| m.is_dir()) {
            let _ = fs::remove_dir(&self.mount_point);
        }
        if fs::symlink_metadata(&self.image).is_ok_and(|m| !m.file_type().is_block_device()) {
            let _ = fs::remove_file(&self.image);
        }
    }
}
