//! The knob journal: before tunelab changes a system setting it writes the
//! original value to a journal on disk (fsynced), and removes the entry only
//! after restoring it. After SIGKILL or a crash, the next tunelab command (or
//! `tunelab restore`) finds entries of dead processes and puts them back —
//! unless someone else changed the setting meanwhile, in which case their
//! value is left alone and reported.
//!
//! Location: `$TUNELAB_STATE_DIR/journal.json`, else `/var/lib/tunelab` for
//! root, else `$XDG_STATE_HOME/tunelab` (`~/.local/state/tunelab`).

use std::fs;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::sysmount::{self, MountMode};
use crate::{Error, Result};

/// One file-backed setting (a sysctl or a sysfs attribute).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileState {
    pub path: PathBuf,
    pub original: String,
    /// What we last wrote (as read back); None until the first change.
    pub applied: Option<String>,
    /// What we are about to write: journalled before the write, so a crash
    /// between the write and the read-back still recognises our value.
    #[serde(default)]
    pub pending: Option<String>,
}

impl FileState {
    /// Whether `now` is a value tunelab put there (or the original).
    pub fn is_ours(&self, now: Option<&String>) -> bool {
        now == Some(&self.original) || now == self.applied.as_ref() || now == self.pending.as_ref()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Saved {
    /// Files that together form one knob (e.g. vm.dirty_ratio and
    /// vm.dirty_bytes, which reset each other).
    Files { files: Vec<FileState> },
    /// Mount options changed by remount.
    Mount {
        mount_point: PathBuf,
        original: Vec<String>,
        applied: Option<Vec<String>>,
    },
    /// A lab file system: a loop device on `image`, mounted on
    /// `mount_point`, inside the scratch directory `scratch`. Journalled
    /// before the loop device is set up; restoring unmounts, detaches and
    /// removes it.
    Lab {
        mount_point: PathBuf,
        image: PathBuf,
        device: Option<PathBuf>,
        scratch: Option<PathBuf>,
    },
    /// A private scratch directory (safety::scratch), journalled before
    /// mkdir; restoring removes it (only when its marker names the owner).
    Scratch { path: PathBuf },
    /// A block I/O throttling cgroup (lab::throttle), journalled before
    /// mkdir; restoring moves what is left in it to its parent and removes it.
    Cgroup { path: PathBuf },
    /// Files tunelab writes to keep a setting across boots (`tunelab apply`
    /// / `unapply`: a sysctl.d drop-in, a udev rule). Journalled before the
    /// first file changes; restoring puts each file back as it was
    /// (`before`: its content, or None when it did not exist) — but only a
    /// file still holding what tunelab wrote (`after`, None: removed).
    Persist { files: Vec<PersistFile> },
}

/// One persistent file in a [`Saved::Persist`] entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PersistFile {
    pub path: PathBuf,
    pub before: Option<String>,
    pub after: Option<String>,
}

impl Saved {
    /// What this entry changes, to detect two tunelabs on one setting.
    fn targets(&self) -> Vec<PathBuf> {
        match self {
            Saved::Files { files } => files.iter().map(|f| f.path.clone()).collect(),
            Saved::Mount { mount_point, .. } | Saved::Lab { mount_point, .. } => {
                vec![mount_point.clone()]
            }
            Saved::Persist { files } => files.iter().map(|f| f.path.clone()).collect(),
            Saved::Scratch { path } | Saved::Cgroup { path } => vec![path.clone()],
        }
    }

    /// Whether the process `pid` (the entry's writer) can have made this
    /// entry: a journal edited by hand, or by someone else, must not make
    /// `restore` write or delete anything tunelab does not own. `Err` says
    /// why not. New kinds add their own rule here.
    pub fn validate(&self, pid: u32) -> std::result::Result<(), String> {
        match self {
            Saved::Files { files } => {
                if files.is_empty() {
                    return Err("a setting with no files".into());
                }
                files.iter().try_for_each(|f| knob_path_ok(&f.path))
            }
            Saved::Mount { mount_point, .. } => {
                // Restoring only sets mount flags on what is mounted there.
                plain_absolute(mount_point)
            }
            Saved::Lab {
                mount_point,
                image,
                device,
                scratch,
            } => {
                plain_absolute(mount_point)?;
                plain_absolute(image)?;
                let dir = image.parent().unwrap_or(Path::new("/"));
                let dir_ok = dir
                    .file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| super::scratch_name::is_scratch_name(n, pid));
                if !dir_ok {
                    return Err(format!(
                        "{} is not in a scratch directory of tunelab pid {pid}",
                        image.display()
                    ));
                }
                let name = mount_point.file_name().and_then(|n| n.to_str());
                let paired = mount_point.parent() == Some(dir)
                    && name.is_some_and(|n| image.file_name() == Some(format!("{n}.img").as_ref()));
                if !paired {
                    return Err(format!(
                        "{} is not the mount point of the lab image {}",
                        mount_point.display(),
                        image.display()
                    ));
                }
                if scratch.as_deref().is_some_and(|s| s != dir) {
                    return Err(format!(
                        "{} is not the scratch of {}",
                        dir.display(),
                        image.display()
                    ));
                }
                if let Some(d) = device {
                    let n = d.to_str().and_then(|d| d.strip_prefix("/dev/loop"));
                    if !n.is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())) {
                        return Err(format!("{} is not a loop device", d.display()));
                    }
                }
                Ok(())
            }
            Saved::Scratch { path } => {
                plain_absolute(path)?;
                let ok = path
                    .file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| super::scratch_name::is_scratch_name(n, pid));
                if !ok {
                    return Err(format!(
                        "{} is not named as a scratch directory of tunelab pid {pid}",
                        path.display()
                    ));
                }
                Ok(())
            }
            Saved::Cgroup { path } => {
                let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
                let parent_ok = path.parent().is_some_and(|p| {
                    p == Path::new("/sys/fs/cgroup/blkio") || p == Path::new("/sys/fs/cgroup")
                });
                let seq = name.strip_prefix(&format!("tunelab-{pid}-"));
                if !parent_ok
                    || !seq.is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
                {
                    return Err(format!(
                        "{} is not a throttling cgroup of tunelab pid {pid}",
                        path.display()
                    ));
                }
                Ok(())
            }
            // `tunelab apply` owns only files it names itself: a
            // 90-tunelab-* drop-in or rule, or a file in a tunelab* tuned
            // profile directory (under a --root prefix in tests).
            Saved::Persist { files } => files.iter().try_for_each(|f| {
                plain_absolute(&f.path)?;
                let name = |p: Option<&Path>| {
                    p.and_then(|p| p.file_name())
                        .and_then(|n| n.to_str())
                        .unwrap_or("")
                        .to_string()
                };
                let file = name(Some(&f.path));
                let dir = name(f.path.parent());
                let owned = (file.starts_with("90-tunelab-")
                    && (dir == "sysctl.d" || dir == "rules.d"))
                    || dir.starts_with("tunelab");
                if owned {
                    Ok(())
                } else {
                    Err(format!(
                        "{} is not a file `tunelab apply` writes",
                        f.path.display()
                    ))
                }
            }),
        }
    }

    /// The commands that put this entry back by hand.
    fn by_hand(&self) -> Vec<String> {
        match self {
            Saved::Files { files } => {
                let all_zero = files.iter().all(|f| f.original == "0");
                files
                    .iter()
                    .filter(|f| all_zero || f.original != "0")
                    .map(|f| format!("echo {} > {}", f.original, f.path.display()))
                    .collect()
            }
            Saved::Mount {
                mount_point,
                original,
                ..
            } => vec![format!(
                "mount -o remount,{} {}",
                MountMode::of(original).options(),
                mount_point.display()
            )],
            Saved::Lab {
                mount_point,
                image,
                device,
                ..
            } => {
                let mut v = vec![format!("umount -l {}", mount_point.display())];
                if let Some(d) = device {
                    v.push(format!("losetup -d {}", d.display()));
                }
                v.push(format!("rm {}", image.display()));
                v
            }
            Saved::Scratch { path } => vec![format!("rm -r {}", path.display())],
            Saved::Cgroup { path } => vec![format!("rmdir {}", path.display())],
            Saved::Persist { files } => files
                .iter()
                .map(|f| match &f.before {
                    None => format!("rm -f {}", f.path.display()),
                    Some(_) => format!(
                        "# put back the previous content of {} (in the journal)",
                        f.path.display()
                    ),
                })
                .collect(),
        }
    }
}

/// An absolute path without `.` or `..` components.
fn plain_absolute(p: &Path) -> std::result::Result<(), String> {
    use std::path::Component;
    if !p.is_absolute()
        || p.components()
            .any(|c| matches!(c, Component::ParentDir | Component::CurDir))
    {
        return Err(format!("{} is not a plain absolute path", p.display()));
    }
    Ok(())
}

/// The file that marks a directory as a fake system root (`tunelab apply
/// --root DIR`, for tests): settings below its proc/sys and sys are knobs.
pub const FAKE_ROOT_MARKER: &str = ".tunelab-fake-root";

/// `p` is `ROOT/proc/sys/…` or `ROOT/sys/…` of a directory marked as a fake
/// root, also once symbolic links are resolved (they must stay inside it).
fn under_fake_root(p: &Path) -> bool {
    let mut dir = p.parent();
    while let Some(d) = dir {
        let rest = p.strip_prefix(d).unwrap_or(p);
        if (rest.starts_with("proc/sys") || rest.starts_with("sys"))
            && d.join(FAKE_ROOT_MARKER).is_file()
        {
            return match (fs::canonicalize(p), fs::canonicalize(d)) {
                (Ok(c), Ok(root)) => c.starts_with(root),
                (Err(_), _) => true,
                _ => false,
            };
        }
        dir = d.parent();
    }
    false
}

/// A knob file is under /proc/sys or /sys, also once symbolic links are
/// resolved (sysfs is full of them, all within /sys).
fn knob_path_ok(p: &Path) -> std::result::Result<(), String> {
    plain_absolute(p)?;
    let under = |q: &Path| q.starts_with("/proc/sys/") || q.starts_with("/sys/");
    let refused = || {
        Err(format!(
            "{} is not a setting under /proc/sys or /sys",
            p.display()
        ))
    };
    if !under(p) {
        return if under_fake_root(p) {
            Ok(())
        } else {
            refused()
        };
    }
    match fs::canonicalize(p) {
        Ok(c) if !under(&c) => refused(),
        _ => Ok(()),
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub knob: String,
    pub pid: u32,
    /// The process's start time (clock ticks after boot, /proc/PID/stat),
    /// so a recycled pid is not taken for the tunelab that wrote the entry.
    #[serde(default)]
    pub pid_start: Option<u64>,
    pub started: String,
    pub saved: Saved,
}

impl Entry {
    /// An entry of this process for `knob`.
    pub fn new(knob: &str, saved: Saved) -> Entry {
        let me = std::process::id();
        Entry {
            knob: knob.to_string(),
            pid: me,
            pid_start: start_ticks(me),
            started: crate::units::now_rfc3339_nanos(),
            saved,
        }
    }
}

pub fn dir() -> PathBuf {
    crate::system::state_dir()
}

pub fn path() -> PathBuf {
    dir().join("journal.json")
}

/// An exclusive flock(2) on `journal.lock` next to the journal: every
/// read-modify-write of the journal holds it, so two tunelabs never lose
/// each other's entries and a claim on a setting is atomic.
struct Lock(#[allow(dead_code)] fs::File);

fn lock(wait: bool) -> Result<Option<Lock>> {
    let d = dir();
    fs::create_dir_all(&d).map_err(|e| Error::io("cannot create the journal directory", &d, e))?;
    let p = d.join("journal.lock");
    let f = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&p)
        .map_err(|e| Error::io("cannot open the journal lock", &p, e))?;
    let op = if wait {
        libc::LOCK_EX
    } else {
        libc::LOCK_EX | libc::LOCK_NB
    };
    loop {
        // SAFETY: flock on an open descriptor.
        if unsafe { libc::flock(f.as_raw_fd(), op) } == 0 {
            return Ok(Some(Lock(f)));
        }
        let e = std::io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EWOULDBLOCK) if !wait => return Ok(None),
            _ => return Err(Error::io("cannot lock", &p, e)),
        }
    }
}

/// What an unreadable journal holds and how to restore by hand.
fn unreadable(p: &Path, bytes: &[u8], why: &str) -> Error {
    let text = String::from_utf8_lossy(bytes);
    let shown: String = text
        .chars()
        .take(4000)
        .map(|c| if c.is_control() && c != '\n' { '?' } else { c })
        .collect();
    let mut msg = format!(
        "the knob journal {} cannot be read ({why}); tunelab will not change any setting \
         until it is fixed, because the originals it holds would be lost.\n\
         It holds ({} bytes):\n{shown}{}\n",
        p.display(),
        bytes.len(),
        if text.chars().count() > 4000 {
            "\n…"
        } else {
            ""
        }
    );
    // A valid journal followed by garbage still names its entries.
    let salvaged = serde_json::Deserializer::from_slice(bytes)
        .into_iter::<Vec<Entry>>()
        .next()
        .and_then(|r| r.ok());
    match salvaged {
        Some(entries) if !entries.is_empty() => {
            msg.push_str("To restore by hand, as root:\n");
            for e in &entries {
                msg.push_str(&format!(
                    "  # {} (tunelab pid {}, started {})\n",
                    e.knob, e.pid, e.started
                ));
                for c in e.saved.by_hand() {
                    msg.push_str(&format!("  {c}\n"));
                }
            }
        }
        _ => msg.push_str(
            "To restore by hand: for each \"path\" with an \"original\" value, write it back \
             (echo ORIGINAL > PATH); for each \"mount_point\" with \"original\" options, \
             mount -o remount,OPTIONS MOUNT_POINT; unmount any lab mount_point (umount -l).\n",
        ),
    }
    msg.push_str(&format!("Then remove {}.", p.display()));
    Error::environment(msg)
}

/// The journal's entries; an unreadable journal is an error that says what
/// it holds (never "empty": its originals would be lost).
pub fn load() -> Result<Vec<Entry>> {
    let p = path();
    let bytes = match fs::read(&p) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(unreadable(&p, &[], &e.to_string())),
    };
    serde_json::from_slice(&bytes).map_err(|e| unreadable(&p, &bytes, &e.to_string()))
}

/// Write the journal atomically and durably (temp file, fsync, rename,
/// fsync of the directory). An empty journal is removed, never created.
fn store(entries: &[Entry]) -> Result<()> {
    let d = dir();
    let p = path();
    if entries.is_empty() {
        return match fs::remove_file(&p) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(Error::io("cannot remove the knob journal", &p, e))
            }
            _ => Ok(()),
        };
    }
    fs::create_dir_all(&d).map_err(|e| Error::io("cannot create the journal directory", &d, e))?;
    let tmp = d.join(format!("journal.json.{}", std::process::id()));
    let data = serde_json::to_vec_pretty(entries)?;
    let write = || -> std::io::Result<()> {
        let mut f = fs::File::create(&tmp)?;
        f.write_all(&data)?;
        f.sync_all()?;
        fs::rename(&tmp, &p)?;
        fs::File::open(&d)?.sync_all()
    };
    write().map_err(|e| {
        let _ = fs::remove_file(&tmp);
        Error::io("cannot write the knob journal", &p, e)
    })
}

/// System-wide claims on settings (sysctls, sysfs files, mount options):
/// one file per setting under /run/tunelab/claims, flocked while a tunelab
/// holds it, naming its pid and state directory. The journal's own check
/// sees only tunelabs sharing a state directory; this one sees all.
const CLAIMS: &str = "/run/tunelab/claims";

/// Claim files this process holds (their flock lives with the descriptor).
static HELD: std::sync::Mutex<Vec<(PathBuf, PathBuf, fs::File)>> =
    std::sync::Mutex::new(Vec::new());

fn claim_file(target: &Path) -> PathBuf {
    use std::os::unix::ffi::OsStrExt;
    let h = target
        .as_os_str()
        .as_bytes()
        .iter()
        .fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ *b as u64).wrapping_mul(0x0100_0000_01b3)
        });
    Path::new(CLAIMS).join(format!("{h:016x}"))
}

fn flock_now(f: &fs::File) -> bool {
    // SAFETY: flock on an open descriptor.
    unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) == 0 }
}

/// Whether the journal of state directory `dir` holds an entry on `target`
/// (unreadable: assume it does).
fn other_journal_holds(dir: &Path, target: &Path) -> bool {
    match fs::read(dir.join("journal.json")) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
        Err(_) => true,
        Ok(b) => serde_json::from_slice::<Vec<Entry>>(&b)
            .map(|es| {
                es.iter()
                    .any(|e| e.saved.targets().iter().any(|t| t == target))
            })
            .unwrap_or(true),
    }
}

/// Take the system-wide claim on every setting of `entry` (a no-op for
/// tunelab's own scratch, lab and cgroup paths, and where /run/tunelab
/// cannot be made: without root no setting can be changed anyway).
fn claim_system(entry: &Entry) -> Result<()> {
    if !matches!(entry.saved, Saved::Files { .. } | Saved::Mount { .. })
        || fs::create_dir_all(CLAIMS).is_err()
    {
        return Ok(());
    }
    let mut held = HELD.lock().unwrap_or_else(|e| e.into_inner());
    let mut taken = Vec::new();
    let result = (|| {
        for t in entry.saved.targets() {
            if held.iter().any(|(_, h, _)| *h == t) {
                continue;
            }
            let p = claim_file(&t);
            let Ok(mut f) = fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&p)
            else {
                continue;
            };
            let holder = fs::read_to_string(&p).unwrap_or_default();
            let mut words = holder.split_whitespace();
            let (pid, state) = (words.next().unwrap_or("?"), words.next().unwrap_or("?"));
            // A holder that was just releasing unlinks the file while
            // locked: a lock on the unlinked inode is no claim.
            let same_file = || {
                use std::os::unix::fs::MetadataExt;
                matches!((f.metadata(), fs::metadata(&p)), (Ok(a), Ok(b)) if a.ino() == b.ino())
            };
            if !flock_now(&f) || !same_file() {
                // The holder writes its pid just after it locks: a file
                // read in between is empty, so wait briefly to name it.
                let mut holder = holder.clone();
                for _ in 0..40 {
                    if !holder.trim().is_empty() {
                        break;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(5));
                    holder = fs::read_to_string(&p).unwrap_or_default();
                }
                let mut words = holder.split_whitespace();
                let (pid, state) = (words.next().unwrap_or("?"), words.next().unwrap_or("?"));
                return Err(Error::environment(format!(
                    "{} ({}) is already being changed by tunelab pid {pid} (state directory \
                     {state}): wait for it to finish or stop it; two runs on one setting would \
                     lose its original value",
                    entry.knob,
                    t.display()
                )));
            }
            if !holder.is_empty()
                && Path::new(state) != dir()
                && other_journal_holds(Path::new(state), &t)
            {
                return Err(Error::environment(format!(
                    "{} ({}) was left changed by tunelab pid {pid}, which is gone: restore it \
                     first with TUNELAB_STATE_DIR={state} tunelab restore",
                    entry.knob,
                    t.display()
                )));
            }
            let _ = f.set_len(0);
            let _ = writeln!(f, "{} {}", entry.pid, dir().display());
            taken.push((p, t, f));
        }
        Ok(())
    })();
    match result {
        Ok(()) => held.extend(taken),
        Err(_) => {
            for (p, _, _) in taken {
                let _ = fs::remove_file(p);
            }
        }
    }
    result
}

/// Give up the system-wide claims on `targets` held by this process.
fn release_system(targets: &[PathBuf]) {
    let mut held = HELD.lock().unwrap_or_else(|e| e.into_inner());
    held.retain(|(p, t, _)| {
        let mine = targets.contains(t);
        if mine {
            // Removed while still locked: no one can take a file about to go.
            let _ = fs::remove_file(p);
        }
        !mine
    });
}

/// After restoring a dead tunelab's setting: its claim file, no longer
/// locked by anyone, goes.
fn clear_dead_claims(targets: &[PathBuf]) {
    for t in targets {
        let p = claim_file(t);
        if let Ok(f) = fs::OpenOptions::new().read(true).write(true).open(&p) {
            if flock_now(&f) {
                let _ = fs::remove_file(&p);
            }
        }
    }
}

/// Record a new entry, refusing when another tunelab (alive, or killed and
/// not yet restored) holds an entry on the same setting: its recorded
/// original is the true one, ours would be its applied value. Settings are
/// claimed system-wide too, whatever state directory the other one uses.
pub fn claim(entry: Entry) -> Result<()> {
    let _l = lock(true)?;
    let mut all = load()?;
    let mine = entry.saved.targets();
    if let Some(other) = all
        .iter()
        .find(|e| e.pid != entry.pid && e.saved.targets().iter().any(|t| mine.contains(t)))
    {
        return Err(if is_alive(other) {
            Error::environment(format!(
                "{} is already being changed by tunelab pid {} (started {}): wait for it to \
                 finish or stop it; two runs on one setting would lose its original value",
                entry.knob, other.pid, other.started
            ))
        } else {
            Error::environment(format!(
                "{} was left changed by tunelab pid {} (started {}), which is gone, and could \
                 not be restored automatically: run 'tunelab restore' first",
                entry.knob, other.pid, other.started
            ))
        });
    }
    claim_system(&entry)?;
    let targets = entry.saved.targets();
    all.retain(|e| !(e.knob == entry.knob && e.pid == entry.pid));
    all.push(entry);
    store(&all).inspect_err(|_| release_system(&targets))
}

/// Replace our entry for `knob` (after `claim`).
pub fn put(entry: Entry) -> Result<()> {
    let _l = lock(true)?;
    let mut all = load()?;
    all.retain(|e| !(e.knob == entry.knob && e.pid == entry.pid));
    all.push(entry);
    store(&all)
}

pub fn remove(knob: &str, pid: u32) -> Result<()> {
    if !path().exists() {
        return Ok(());
    }
    let _l = lock(true)?;
    let mut all = load()?;
    let gone: Vec<PathBuf> = all
        .iter()
        .filter(|e| e.knob == knob && e.pid == pid)
        .flat_map(|e| e.saved.targets())
        .collect();
    all.retain(|e| !(e.knob == knob && e.pid == pid));
    store(&all)?;
    if pid == std::process::id() {
        release_system(&gone);
    }
    Ok(())
}

fn read_value(path: &std::path::Path) -> Option<String> {
    let raw = fs::read_to_string(path).ok()?;
    let raw = raw.trim();
    // sysfs choice files ("none [mq-deadline] kyber") hold the bracketed one.
    Some(crate::system::device::active_choice(raw).unwrap_or_else(|| raw.to_string()))
}

/// Current state of the files, as they would be compared with `applied`.
fn current(files: &[FileState]) -> Vec<Option<String>> {
    files.iter().map(|f| read_value(&f.path)).collect()
}

/// Put one entry back. Returns a line for the user.
pub fn restore_entry(e: &Entry) -> Result<String> {
    match &e.saved {
        Saved::Files { files } => {
            let now = current(files);
            let changed: Vec<String> = files
                .iter()
                .zip(&now)
                .filter(|(f, n)| !f.is_ours(n.as_ref()))
                .map(|(f, n)| {
                    format!(
                        "{} is {} (we set {})",
                        f.path.display(),
                        n.as_deref().unwrap_or("?"),
                        f.applied.as_deref().unwrap_or("?")
                    )
                })
                .collect();
            if !changed.is_empty() {
                return Ok(format!(
                    "left {} alone: it was changed outside tunelab ({}); its original was {}",
                    e.knob,
                    changed.join("; "),
                    files
                        .iter()
                        .map(|f| f.original.as_str())
                        .collect::<Vec<_>>()
                        .join("/")
                ));
            }
            // Pairs like dirty_ratio/dirty_bytes zero each other: write only
            // the non-zero originals unless all are zero.
            let all_zero = files.iter().all(|f| f.original == "0");
            for f in files.iter().filter(|f| all_zero || f.original != "0") {
                fs::write(&f.path, &f.original)
                    .map_err(|err| Error::io("cannot restore", &f.path, err))?;
            }
            Ok(format!(
                "restored {} to {}",
                e.knob,
                files
                    .iter()
                    .map(|f| f.original.as_str())
                    .collect::<Vec<_>>()
                    .join("/")
            ))
        }
        Saved::Mount {
            mount_point,
            original,
            ..
        } => {
            let want = MountMode::of(original);
            if sysmount::mount_at(mount_point).is_none() {
                return Ok(format!(
                    "{} is no longer mounted: nothing to restore (its options were {})",
                    mount_point.display(),
                    want.options()
                ));
            }
            sysmount::set_mode(mount_point, want).map_err(|err| {
                Error::environment(format!(
                    "{err}: restore it by hand (mount -o remount,{} {})",
                    want.options(),
                    mount_point.display()
                ))
            })?;
            Ok(format!(
                "restored mount options of {} ({}, verified in /proc/self/mountinfo)",
                mount_point.display(),
                want.options()
            ))
        }
        Saved::Lab {
            mount_point,
            image,
            device,
            scratch,
        } => {
            // Say what was actually found and done, nothing more.
            let mut did = Vec::new();
            if sysmount::mount_at(mount_point).is_some() {
                sysmount::unmount(mount_point).map_err(|err| {
                    Error::io("cannot unmount the lab file system", mount_point, err)
                })?;
                did.push(format!("unmounted {}", mount_point.display()));
            }
            // Killed between attaching and journalling the device: find it
            // by its backing file.
            let devices = match device {
                Some(d) => vec![d.clone()],
                None => sysmount::loops_backed_by(image),
            };
            for d in &devices {
                if sysmount::loop_detach_if_ours(d, image)? {
                    did.push(format!("released {}", d.display()));
                }
            }
            if fs::symlink_metadata(image).is_ok_and(|m| m.is_file())
                && fs::remove_file(image).is_ok()
            {
                did.push(format!("removed {}", image.display()));
            }
            if fs::symlink_metadata(mount_point).is_ok_and(|m| m.is_dir())
                && fs::remove_dir(mount_point).is_ok()
            {
                did.push(format!("removed {}", mount_point.display()));
            }
            if let Some(s) = scratch {
                if super::scratch_name::remove_owned(s, e.pid) {
                    did.push(format!("removed {}", s.display()));
                }
            }
            Ok(if did.is_empty() {
                format!(
                    "nothing was left of the lab file system {}",
                    mount_point.display()
                )
            } else {
                format!("lab file system: {}", did.join(", "))
            })
        }
        Saved::Scratch { path } => {
            if !path.exists() {
                return Ok(format!("nothing was left of {}", path.display()));
            }
            if !sysmount::mounts_under(path).is_empty() {
                return Err(Error::environment(format!(
                    "a file system is still mounted inside {}; unmount it first",
                    path.display()
                )));
            }
            if super::scratch_name::remove_owned(path, e.pid) {
                Ok(format!("removed the scratch directory {}", path.display()))
            } else {
                Err(Error::environment(format!(
                    "{} does not carry tunelab pid {}'s marker or cannot be removed: left alone",
                    path.display(),
                    e.pid
                )))
            }
        }
        Saved::Cgroup { path } => {
            if !path.exists() {
                return Ok(format!("nothing was left of the cgroup {}", path.display()));
            }
            let parent = path.parent().unwrap_or(Path::new("/sys/fs/cgroup"));
            let mut moved = 0;
            for _ in 0..50 {
                if let Ok(procs) = fs::read_to_string(path.join("cgroup.procs")) {
                    for pid in procs.split_whitespace() {
                        if fs::write(parent.join("cgroup.procs"), pid).is_ok() {
                            moved += 1;
                        }
                    }
                }
                if fs::remove_dir(path).is_ok() {
                    return Ok(format!(
                        "removed the throttling cgroup {}{}",
                        path.display(),
                        if moved > 0 {
                            format!(" (moved {moved} process(es) out of it)")
                        } else {
                            String::new()
                        }
                    ));
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Err(Error::environment(format!(
                "cannot remove the cgroup {} (processes still in it?)",
                path.display()
            )))
        }
        Saved::Persist { files } => restore_persist(&e.knob, files),
    }
}

/// Put persistent files back as they were before `apply`/`unapply` began;
/// a file that no longer holds what tunelab wrote is left alone.
fn restore_persist(knob: &str, files: &[PersistFile]) -> Result<String> {
    let mut left = Vec::new();
    for f in files {
        let now = fs::read_to_string(&f.path).ok();
        if now == f.before {
            continue;
        }
        if now != f.after {
            left.push(f.path.display().to_string());
            continue;
        }
        match &f.before {
            None => fs::remove_file(&f.path).map_err(|e| Error::io("cannot remove", &f.path, e))?,
            Some(text) => {
                let tmp = f.path.with_extension("tunelab-restore");
                fs::write(&tmp, text)
                    .and_then(|_| fs::rename(&tmp, &f.path))
                    .map_err(|e| Error::io("cannot restore", &f.path, e))?
            }
        }
    }
    Ok(if left.is_empty() {
        format!("put back the files of {knob} as they were")
    } else {
        format!(
            "put back the files of {knob}, except {} (changed outside tunelab, left alone)",
            left.join(", ")
        )
    })
}

/// Start time of `pid` in clock ticks after boot (field 22 of /proc/PID/stat).
fn start_ticks(pid: u32) -> Option<u64> {
    let s = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may contain spaces and ')': fields follow the last ')'.
    let rest = &s[s.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Whether the process that wrote `e` still runs (same pid, same start).
fn is_alive(e: &Entry) -> bool {
    if e.pid == std::process::id() {
        return true;
    }
    match (start_ticks(e.pid), e.pid_start) {
        (None, _) => false,
        (Some(now), Some(then)) => now == then,
        (Some(_), None) => true,
    }
}

/// Restore the entries of processes that are gone (SIGKILL, crash, power
/// cut). With `all`, also those of live processes other than us. Returns one
/// line per entry; entries that could not be restored stay in the journal.
/// An unreadable journal is an error (it explains itself).
pub fn restore_stale(all: bool) -> Result<Vec<String>> {
    if !path().exists() {
        return Ok(Vec::new());
    }
    let _l = lock(true)?;
    let entries = load()?;
    let mut msgs = Vec::new();
    let mut keep = Vec::new();
    // Newest first: a scratch directory goes after the lab mounted in it.
    for e in entries.into_iter().rev() {
        let stale = !is_alive(&e) || (all && e.pid != std::process::id());
        if !stale {
            keep.push(e);
            continue;
        }
        if let Err(why) = e.saved.validate(e.pid) {
            msgs.push(refused(&e, &why));
            continue;
        }
        match restore_entry(&e) {
            Ok(m) => {
                if matches!(e.saved, Saved::Files { .. } | Saved::Mount { .. }) {
                    clear_dead_claims(&e.saved.targets());
                }
                msgs.push(format!(
                    "{m} (left by tunelab pid {}, started {})",
                    e.pid, e.started
                ))
            }
            Err(err) => {
                msgs.push(format!("could not restore {}: {err}", e.knob));
                keep.push(e);
            }
        }
    }
    keep.reverse();
    if let Err(e) = store(&keep) {
        msgs.push(format!("could not update the journal: {e}"));
    }
    Ok(msgs)
}

/// The line for an entry tunelab cannot have written: it is dropped from
/// the journal without acting on it, and shown so nothing is lost.
fn refused(e: &Entry, why: &str) -> String {
    format!(
        "refused a journal entry tunelab cannot have written ({why}): did nothing and removed \
         it from the journal; it was: {}",
        serde_json::to_string(e).unwrap_or_default()
    )
}

/// Restore every entry of this process (second-signal emergency path). The
/// main thread may hold the journal lock: try it for a moment, then go on.
pub fn restore_mine() {
    if !path().exists() {
        return;
    }
    let mut held = None;
    for _ in 0..20 {
        match lock(false) {
            Ok(Some(l)) => {
                held = Some(l);
                break;
            }
            Ok(None) => std::thread::sleep(std::time::Duration::from_millis(25)),
            Err(_) => break,
        }
    }
    let me = std::process::id();
    let Ok(entries) = load() else { return };
    let mut keep = Vec::new();
    for e in entries.into_iter().rev() {
        if e.pid == me && e.saved.validate(me).is_ok() && restore_entry(&e).is_ok() {
            continue;
        }
        keep.push(e);
    }
    keep.reverse();
    let _ = store(&keep);
    drop(held);
}

/// The original mount options as `mount -o` would spell them (display).
pub fn remount_options(original: &[String]) -> String {
    MountMode::of(original).options()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remount_options_bring_back_atime_and_sync() {
        let o = |s: &str| s.split(',').map(String::from).collect::<Vec<_>>();
        assert_eq!(
            remount_options(&o("rw,relatime")),
            "relatime,async,nolazytime"
        );
        assert_eq!(
            remount_options(&o("rw,noatime,sync")),
            "noatime,sync,nolazytime"
        );
        assert_eq!(
            remount_options(&o("rw,strictatime,lazytime")),
            "strictatime,async,lazytime"
        );
    }
}
