//! Knobs `tune` can turn: vm sysctls, block queue attributes, the cpufreq
//! governor, mount options, and the wake-up latency knobs (real-time
//! throttling, the CPU affinity of one IRQ). A `KnobGuard` journals the original value
//! before the first change, refuses to overwrite a value someone else set
//! meanwhile, and restores the original when dropped.

use rustix::io::Errno;
use std::fs;
use std::path::{Path, PathBuf};

use crate::safety::journal::{self, remount_options, Entry, FileState, Saved};
use crate::safety::sysmount::{self, MountMode};
use crate::system::device::{active_choice, device_for_path};
use crate::system::mount_for_path;
use crate::{Error, Result};

mod live;
use live::mount_group;

/// Knob names accepted by `tune`, for help and errors.
pub(crate) const NAMES: &[&str] = &[
    "read_ahead_kb",
    "scheduler",
    "nr_requests",
    "vm.dirty_ratio",
    "vm.dirty_background_ratio",
    "vm.dirty_bytes",
    "vm.dirty_background_bytes",
    "vm.dirty_expire_centisecs",
    "vm.swappiness",
    "governor",
    "mount",
    "kernel.sched_rt_runtime_us",
    "irq.N.affinity",
];

/// Whether `name` is a knob `tune` knows (`irq.N.affinity` for any IRQ number N).
pub(crate) fn is_known(name: &str) -> bool {
    NAMES.contains(&name) || irq_of(name).is_some()
}

/// The IRQ number of an `irq.N.affinity` knob name.
fn irq_of(name: &str) -> Option<u32> {
    name.strip_prefix("irq.")?
        .strip_suffix(".affinity")?
        .parse()
        .ok()
}

/// A CPU list as /proc/irq/N/smp_affinity_list takes it ("0", "2-3", "0,2"):
/// `tune --values` separates values by commas, so a list is written "0+2".
fn cpu_list(value: &str) -> Option<String> {
    let ok = value.split('+').all(|part| {
        let mut ends = part.splitn(2, '-');
        ends.all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    });
    (ok && !value.is_empty()).then(|| value.replace('+', ","))
}

const MOUNT_VALUES: &[&str] = &[
    "noatime",
    "relatime",
    "strictatime",
    "lazytime",
    "nolazytime",
    "sync",
    "async",
];

#[derive(Debug, Clone)]
enum Kind {
    /// Numeric or word values written to every file (the first one is read).
    Files {
        numeric: bool,
        choices: Option<PathBuf>,
    },
    Mount {
        mount_point: PathBuf,
    },
}

#[derive(Debug, Clone)]
pub(crate) struct Knob {
    pub(crate) name: String,
    kind: Kind,
    /// Files written by `set`; `state` also includes partners that the kernel
    /// changes as a side effect (dirty_ratio ⇄ dirty_bytes).
    files: Vec<PathBuf>,
    state: Vec<PathBuf>,
}

fn vm(name: &str) -> PathBuf {
    crate::system::proc::path("sys/vm").join(name)
}

impl Knob {
    /// Resolve a knob name for the file system holding `target` (block
    /// knobs act on its disk, or on `device` when given).
    pub(crate) fn resolve(name: &str, target: &Path, device: Option<&str>) -> Result<Knob> {
        let numeric = |files: Vec<PathBuf>, state: Vec<PathBuf>| Knob {
            name: name.to_string(),
            kind: Kind::Files {
                numeric: true,
                choices: None,
            },
            files,
            state,
        };
        // One file holding a word (validated by `choices`, or by the knob's
        // own rule in `validate`).
        let word = |f: PathBuf, choices: Option<PathBuf>| Knob {
            name: name.to_string(),
            kind: Kind::Files {
                numeric: false,
                choices,
            },
            files: vec![f.clone()],
            state: vec![f],
        };
        let disk = || -> Result<String> {
            match device {
                Some(d) => Ok(d.trim_start_matches("/dev/").to_string()),
                None => device_for_path(target).map(|d| d.disk).ok_or_else(|| {
                    Error::environment(format!(
                        "{} is not on a block device, so {name} has no device to act on (give --device NAME)",
                        target.display()
                    ))
                }),
            }
        };
        let knob = match name {
            "vm.dirty_ratio" | "vm.dirty_bytes" => {
                let own = vm(name.trim_start_matches("vm."));
                numeric(vec![own], vec![vm("dirty_ratio"), vm("dirty_bytes")])
            }
            "vm.dirty_background_ratio" | "vm.dirty_background_bytes" => {
                let own = vm(name.trim_start_matches("vm."));
                numeric(
                    vec![own],
                    vec![vm("dirty_background_ratio"), vm("dirty_background_bytes")],
                )
            }
            "vm.dirty_expire_centisecs" | "vm.swappiness" => {
                let f = vm(name.trim_start_matches("vm."));
                numeric(vec![f.clone()], vec![f])
            }
            "read_ahead_kb" | "nr_requests" => {
                let f = PathBuf::from(format!("/sys/block/{}/queue/{name}", disk()?));
                numeric(vec![f.clone()], vec![f])
            }
            "scheduler" => {
                let f = PathBuf::from(format!("/sys/block/{}/queue/scheduler", disk()?));
                word(f.clone(), Some(f))
            }
            "governor" => {
                let files: Vec<PathBuf> = (0..)
                    .map(|i| {
                        PathBuf::from(format!(
                            "/sys/devices/system/cpu/cpu{i}/cpufreq/scaling_governor"
                        ))
                    })
                    .take_while(|p| p.exists())
                    .collect();
                if files.is_empty() {
                    return Err(Error::environment(
                        "this machine exposes no cpufreq governor (no /sys/devices/system/cpu/cpu0/cpufreq)",
                    ));
                }
                let choices = Some(PathBuf::from(
                    "/sys/devices/system/cpu/cpu0/cpufreq/scaling_available_governors",
                ));
                Knob {
                    name: name.into(),
                    kind: Kind::Files {
                        numeric: false,
                        choices,
                    },
                    state: files.clone(),
                    files,
                }
            }
            "kernel.sched_rt_runtime_us" => {
                // -1 (no real-time throttling) is a legal value here.
                word(
                    crate::system::proc::sysctl_path("kernel.sched_rt_runtime_us"),
                    None,
                )
            }
            _ if let Some(irq) = irq_of(name) => {
                let f = crate::system::proc::path(&format!("irq/{irq}/smp_affinity_list"));
                if !f.exists() {
                    return Err(Error::environment(format!(
                        "IRQ {irq} does not exist here (no {}); /proc/interrupts lists the IRQs",
                        f.display()
                    )));
                }
                word(f, None)
            }
            "mount" => {
                let m = mount_for_path(target).ok_or_else(|| {
                    Error::environment(format!("cannot find the mount of {}", target.display()))
                })?;
                Knob {
                    name: name.into(),
                    kind: Kind::Mount {
                        mount_point: m.mount_point,
                    },
                    files: vec![],
                    state: vec![],
                }
            }
            other => {
                return Err(Error::usage(format!(
                    "unknown knob '{other}' (knobs: {})",
                    NAMES.join(", ")
                )));
            }
        };
        for f in &knob.state {
            if !f.exists() {
                return Err(Error::environment(format!(
                    "{} does not exist on this machine",
                    f.display()
                )));
            }
        }
        Ok(knob)
    }

    /// A knob of files (not a mount): its live value is one of its values.
    pub(crate) fn is_file(&self) -> bool {
        matches!(self.kind, Kind::Files { .. })
    }

    /// Where the knob lives (its first file, or the mount point).
    pub(crate) fn location(&self) -> String {
        match &self.kind {
            Kind::Mount { mount_point } => format!("mount options of {}", mount_point.display()),
            Kind::Files { .. } => self
                .files
                .iter()
                .map(|f| f.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
        }
    }

    /// The live value now (first file; mount options), read only.
    pub(crate) fn current(&self) -> Result<String> {
        match self.snapshot()? {
            Saved::Mount { original, .. } => Ok(remount_options(&original)),
            Saved::Files { files } => Ok(files
                .iter()
                .find(|f| self.files.first() == Some(&f.path))
                .map(|f| f.original.clone())
                .unwrap_or_default()),
            _ => Ok(String::new()),
        }
    }

    /// Check a value before anything is changed.
    pub(crate) fn validate(&self, value: &str) -> Result<()> {
        let bad = |why: String| {
            Err(Error::usage(format!(
                "{}: value '{value}' {why}",
                self.name
            )))
        };
        match &self.kind {
            Kind::Files { numeric: true, .. } if value.parse::<u64>().is_err() => {
                bad("is not a whole number".into())
            }
            _ if self.name == "kernel.sched_rt_runtime_us"
                && value != "-1"
                && value.parse::<u32>().is_err() =>
            {
                bad("is not microseconds per period (a whole number, or -1 for no limit)".into())
            }
            _ if irq_of(&self.name).is_some() && cpu_list(value).is_none() => bad(
                "is not a CPU list (e.g. 0, 2-3, or 0+2 for CPUs 0 and 2: commas separate values)"
                    .into(),
            ),
            Kind::Files {
                numeric: false,
                choices: Some(c),
            } => {
                let avail = fs::read_to_string(c).unwrap_or_default();
                let names: Vec<&str> = avail
                    .split_whitespace()
                    .map(|s| s.trim_matches(['[', ']']))
                    .collect();
                if names.contains(&value) {
                    Ok(())
                } else {
                    bad(format!(
                        "is not available here (available: {})",
                        names.join(", ")
                    ))
                }
            }
            Kind::Mount { .. } => {
                if value.split('+').all(|t| MOUNT_VALUES.contains(&t)) {
                    Ok(())
                } else {
                    bad(format!(
                        "is not a mount option tune can set ({}; combine with +)",
                        MOUNT_VALUES.join(", ")
                    ))
                }
            }
            _ => Ok(()),
        }
    }

    /// What the journal must remember now (current values as originals).
    fn snapshot(&self) -> Result<Saved> {
        match &self.kind {
            Kind::Mount { mount_point } => {
                let m = mount_for_path(mount_point).ok_or_else(|| {
                    Error::environment(format!(
                        "cannot read the mount of {}",
                        mount_point.display()
                    ))
                })?;
                Ok(Saved::Mount {
                    mount_point: mount_point.clone(),
                    original: m.options,
                    applied: None,
                })
            }
            Kind::Files { .. } => {
                let files = self
                    .state
                    .iter()
                    .map(|p| {
                        Ok(FileState {
                            path: p.clone(),
                            original: read(p)?,
                            applied: None,
                            pending: None,
                        })
                    })
                    .collect::<Result<Vec<_>>>()?;
                Ok(Saved::Files { files })
            }
        }
    }

    fn write(&self, value: &str, saved: &Saved) -> Result<()> {
        match (&self.kind, saved) {
            (Kind::Mount { mount_point }, Saved::Mount { original, .. }) => {
                // The whole flag set, explicitly, verified in mountinfo: a
                // point is never measured under the previous point's atime.
                sysmount::set_mode(
                    mount_point,
                    MountMode::of(&apply_mount_tokens(original, value)),
                )
            }
            _ => {
                let value = match irq_of(&self.name) {
                    Some(_) => cpu_list(value).unwrap_or_else(|| value.to_string()),
                    None => value.to_string(),
                };
                let value = value.as_str();
                for f in &self.files {
                    fs::write(f, value).map_err(|e| match Errno::from_io_error(&e) {
                        Some(Errno::INVAL) => Error::usage(format!(
                            "{}: the kernel rejected '{value}' for {}",
                            self.name,
                            f.display()
                        )),
                        _ => Error::io("cannot write", f, e),
                    })?;
                }
                Ok(())
            }
        }
    }
}

fn read(p: &Path) -> Result<String> {
    let raw = fs::read_to_string(p).map_err(|e| Error::io("cannot read", p, e))?;
    let raw = raw.trim();
    Ok(active_choice(raw).unwrap_or_else(|| raw.to_string()))
}

/// The original options with `value`'s tokens (e.g. `noatime+sync`) applied.
pub(crate) fn apply_mount_tokens(original: &[String], value: &str) -> Vec<String> {
    let mut opts: Vec<String> = original.to_vec();
    for t in value.split('+') {
        let group = mount_group(t).0;
        opts.retain(|o| !group.contains(&o.as_str()));
        opts.push(t.to_string());
    }
    opts
}

/// Holds a knob changed: journalled before the first change, restored on drop.
pub(crate) struct KnobGuard {
    knob: Knob,
    entry: Entry,
    /// What happened at restore, for the report.
    pub(crate) restore_message: Option<String>,
}

impl KnobGuard {
    pub(crate) fn new(knob: Knob) -> Result<KnobGuard> {
        crate::safety::require_root(|| {
            format!("changing {} needs root (run with sudo)", knob.name)
        })?;
        let entry = Entry::new(&knob.name, knob.snapshot()?);
        // Refuses when another tunelab holds this setting (its original
        // would be lost).
        journal::claim(entry.clone())?;
        Ok(KnobGuard {
            knob,
            entry,
            restore_message: None,
        })
    }

    /// The original value (first file) for display.
    pub(crate) fn original(&self) -> String {
        match &self.entry.saved {
            Saved::Files { files } => {
                let own = files
                    .iter()
                    .find(|f| self.knob.files.first() == Some(&f.path));
                own.map(|f| f.original.clone()).unwrap_or_default()
            }
            Saved::Mount { original, .. } => remount_options(original),
            _ => String::new(),
        }
    }

    /// The value the kernel held after the last `set`, read back (file
    /// knobs; None for mounts and before the first set).
    pub(crate) fn applied(&self) -> Option<String> {
        match &self.entry.saved {
            Saved::Files { files } => files
                .iter()
                .find(|f| self.knob.files.first() == Some(&f.path))
                .and_then(|f| f.applied.clone()),
            _ => None,
        }
    }

    /// Set a value, first checking nobody changed the knob since our last write.
    pub(crate) fn set(&mut self, value: &str) -> Result<()> {
        self.check_untouched()?;
        // Journal the intended value first: a crash right after the write
        // must still recognise it as ours.
        if let Saved::Files { files } = &mut self.entry.saved {
            for f in files.iter_mut() {
                // Partners the kernel zeroes as a side effect (dirty_ratio ⇄ dirty_bytes).
                let own = self.knob.files.contains(&f.path);
                f.pending = Some(if own {
                    value.to_string()
                } else {
                    "0".to_string()
                });
            }
            journal::put(self.entry.clone())?;
        }
        self.knob.write(value, &self.entry.saved)?;
        match &mut self.entry.saved {
            Saved::Files { files } => {
                for f in files.iter_mut() {
                    f.applied = Some(read(&f.path)?);
                    f.pending = None;
                }
            }
            Saved::Mount {
                mount_point,
                applied,
                ..
            } => {
                *applied = mount_for_path(mount_point).map(|m| m.options);
            }
            _ => {}
        }
        journal::put(self.entry.clone())
    }

    fn check_untouched(&self) -> Result<()> {
        let changed = match &self.entry.saved {
            Saved::Files { files } => files.iter().any(|f| {
                let expect = f.applied.as_ref().unwrap_or(&f.original);
                read(&f.path).ok().as_ref() != Some(expect)
            }),
            Saved::Mount {
                mount_point,
                original,
                applied,
            } => {
                let now = mount_for_path(mount_point)
                    .map(|m| m.options)
                    .unwrap_or_default();
                MountMode::of(&now) != MountMode::of(applied.as_ref().unwrap_or(original))
            }
            _ => false,
        };
        if changed {
            return Err(Error::environment(format!(
                "{} was changed outside tunelab during the sweep (another tool such as tuned, or a user): \
                 stopping without overwriting their value",
                self.knob.name
            )));
        }
        Ok(())
    }

    /// Restore now and report (also done by Drop).
    pub(crate) fn restore(&mut self) -> String {
        if let Some(m) = &self.restore_message {
            return m.clone();
        }
        let msg = match journal::restore_entry(&self.entry) {
            Ok(m) => {
                let _ = journal::remove(&self.entry.knob, self.entry.pid);
                m
            }
            Err(e) => format!(
                "could not restore {}: {e} (it stays in the journal; run 'tunelab restore')",
                self.knob.name
            ),
        };
        self.restore_message = Some(msg.clone());
        msg
    }
}

impl Drop for KnobGuard {
    fn drop(&mut self) {
        self.restore();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_tokens_replace_their_group() {
        let o: Vec<String> = "rw,relatime,sync".split(',').map(String::from).collect();
        let got = apply_mount_tokens(&o, "noatime+async");
        assert_eq!(remount_options(&got), "noatime,async,nolazytime");
    }

    #[test]
    fn unknown_knobs_and_bad_values_are_usage_errors() {
        let e = Knob::resolve("vm.colour", Path::new("/"), None).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        let k = Knob::resolve("vm.dirty_ratio", Path::new("/"), None).unwrap();
        assert_eq!(k.validate("ten").unwrap_err().exit_code(), 2);
        assert!(k.validate("10").is_ok());
    }

    #[test]
    fn irq_affinity_knobs_take_cpu_lists() {
        assert!(is_known("irq.17.affinity"));
        assert!(!is_known("irq.x.affinity"));
        assert!(!is_known("irq.17"));
        assert_eq!(irq_of("irq.17.affinity"), Some(17));
        assert_eq!(irq_of("irq.17"), None);
        assert_eq!(cpu_list("0+2-3").as_deref(), Some("0,2-3"));
        assert_eq!(cpu_list("1").as_deref(), Some("1"));
        for bad in ["", "a", "1-", "0++1", "0,1"] {
            assert_eq!(cpu_list(bad), None, "{bad}");
        }
        let e = Knob::resolve("irq.999999.affinity", Path::new("/"), None).unwrap_err();
        assert!(e.to_string().contains("IRQ 999999 does not exist"), "{e}");
    }

    #[test]
    fn rt_runtime_takes_microseconds_or_minus_one() {
        let Ok(k) = Knob::resolve("kernel.sched_rt_runtime_us", Path::new("/"), None) else {
            return; // a kernel without RT group scheduling knobs
        };
        assert!(k.validate("-1").is_ok());
        assert!(k.validate("950000").is_ok());
        assert_eq!(k.validate("-2").unwrap_err().exit_code(), 2);
        assert_eq!(k.validate("lots").unwrap_err().exit_code(), 2);
    }
}
