//! `tunelab apply / applied / verify / unapply`: from a tune run's verdict
//! to a setting that persists (sysctl.d drop-in, udev rule, an fstab line
//! to paste), is verified against the live value and rolls back.
//!
//! Every change is one transaction through the knob journal: the live
//! values' originals (`Saved::Files`) and the persistent files' previous
//! state (`Saved::Persist`) are journalled before anything changes and
//! removed only once the store records the change. A kill in between is
//! rolled back by the next tunelab (or `tunelab restore`): the old state.
//!
//! Here: where a knob is kept (`Place`), the apply plan and transaction.
//! `verdict` reads the tune run, `verify` and `unapply` are the other
//! verbs.

mod record;
mod unapply;
mod verb;
mod verdict;
mod verify;

use rustix::io::Errno;
use std::fs;
use std::path::PathBuf;

use super::persist::{self, Root};
use crate::model::applied::{AppliedChange, AppliedFile, LiveValue};
use crate::model::run::now_rfc3339;
use crate::safety::journal::{self, Entry, FileState, PersistFile, Saved};
use crate::store::Store;
use crate::system::device::active_choice;
use crate::{Error, Result};
pub(crate) use record::{changes_here, this_machine};
pub(crate) use unapply::{plan_unapply, unapply, UnapplyPlan};
pub(crate) use verb::{applied, plan, plan_unapply_all, verify_all, Request};
pub(crate) use verdict::{
    verdict_of, TuneVerdict, ENV_DEVICE, ENV_KNOB, ENV_LAB, ENV_METRIC, ENV_NOISE, ENV_ORIGINAL,
};
pub(crate) use verify::{verify, Check};

/// How a knob is kept across boots.
#[derive(Debug, Clone)]
enum Place {
    Sysctl { key: String },
    Block { disk: String, attr: String },
    Mount,
}

fn place(v: &TuneVerdict) -> Result<Place> {
    let k = v.knob.as_str();
    if let Some(key) = k.strip_prefix("vm.").map(|_| k.to_string()) {
        return Ok(Place::Sysctl { key });
    }
    match k {
        "read_ahead_kb" | "nr_requests" | "scheduler" => {
            let disk = v.device.clone().ok_or_else(|| {
                Error::usage(format!(
                    "run {} does not record which disk {k} was swept on (tune runs record it \
                     since this version; tune again)",
                    v.run_id
                ))
            })?;
            if v.lab {
                return Err(Error::usage(format!(
                    "run {} swept {k} on the lab's loop device {disk}, which is gone: tune it on \
                     the disk you use (--target DIR or --device NAME) and apply that run",
                    v.run_id
                )));
            }
            Ok(Place::Block {
                disk,
                attr: k.to_string(),
            })
        }
        "mount" => Ok(Place::Mount),
        other => Err(Error::usage(format!(
            "tunelab apply does not keep '{other}' across boots (it keeps vm.* sysctls, \
             read_ahead_kb, nr_requests, scheduler and mount options)"
        ))),
    }
}

/// The files and live values one apply changes, worked out before anything
/// changes (what --dry-run prints).
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct Plan {
    pub(crate) change: AppliedChange,
    /// Live files with their current value (the restore value).
    pub(crate) live: Vec<(PathBuf, String)>,
    /// Partner files the kernel zeroes when the knob is set (dirty_ratio ⇄
    /// dirty_bytes): journalled, restored by unapply.
    pub(crate) partners: Vec<(PathBuf, String)>,
    pub(crate) warnings: Vec<String>,
}

pub(super) fn read_live(p: &std::path::Path) -> Result<String> {
    let raw = fs::read_to_string(p)
        .map_err(|e| Error::environment(format!("cannot read {}: {e}", p.display())))?;
    let raw = raw.trim();
    Ok(active_choice(raw).unwrap_or_else(|| raw.to_string()))
}

/// The id of the change a knob (on a disk) makes: one applied at a time.
pub(super) fn change_id(knob: &str, device: Option<&str>) -> String {
    match device {
        Some(d) => format!("{knob}@{d}"),
        None => knob.to_string(),
    }
}

/// Plan applying `value` (the verdict's candidate unless overridden).
pub(crate) fn plan_apply(root: &Root, v: &TuneVerdict, store: &Store) -> Result<Plan> {
    let place = place(v)?;
    let value = v.candidate.clone();
    let (id, device) = match &place {
        Place::Block { disk, .. } => (change_id(&v.knob, Some(disk)), disk.clone()),
        _ => (change_id(&v.knob, None), String::new()),
    };
    if let Some(c) = changes_here(store)?
        .0
        .into_iter()
        .find(|c| c.id == id && c.state == "applied" && c.root == root.display())
    {
        return Err(Error::usage(format!(
            "{id} is already applied from run {} ({} → {}): 'tunelab unapply {}' first",
            c.run_id, c.old, c.new, c.knob
        )));
    }
    let mut warnings = Vec::new();
    let mut notes = Vec::new();
    let evidence = vec![
        format!("run {}: {}", v.run_id, v.summary()),
        format!("re-measure: {}", v.remeasure),
    ];
    let (live, partners, files, fstab_line) = match &place {
        Place::Sysctl { key } => {
            let own = persist::sysctl_path(root, key);
            let old = read_live(&own)?;
            let partner_key = match key.as_str() {
                "vm.dirty_ratio" => Some("vm.dirty_bytes"),
                "vm.dirty_bytes" => Some("vm.dirty_ratio"),
                "vm.dirty_background_ratio" => Some("vm.dirty_background_bytes"),
                "vm.dirty_background_bytes" => Some("vm.dirty_background_ratio"),
                _ => None,
            };
            let partners = match partner_key {
                Some(pk) => {
                    let p = persist::sysctl_path(root, pk);
                    let pv = read_live(&p)?;
                    if pv != "0" {
                        notes.push(format!(
                            "{pk} was {pv}: setting {key} makes the kernel zero it; unapply \
                             puts it back"
                        ));
                    }
                    vec![(p, pv)]
                }
                None => vec![],
            };
            for (f, val) in persist::sysctl_setters(root, key) {
                warnings.push(format!(
                    "{} already sets {key} = {val}{}",
                    f.display(),
                    if f.file_name() > persist::sysctl_dropin(root, key).file_name() {
                        " and is read after tunelab's drop-in: it wins at boot"
                    } else {
                        " (tunelab's drop-in is read after it)"
                    }
                ));
            }
            let path = persist::sysctl_dropin(root, key);
            let mut head = evidence.clone();
            head.insert(0, format!("{key}: {old} → {value}"));
            let content = format!("{}{key} = {value}\n", persist::header(&head));
            (
                vec![(own, old)],
                partners,
                vec![AppliedFile {
                    path: path.display().to_string(),
                    content,
                }],
                None,
            )
        }
        Place::Block { disk, attr } => {
            let own = root.at(&format!("/sys/block/{disk}/queue/{attr}"));
            if !own.exists() {
                return Err(Error::environment(format!(
                    "{} does not exist: the disk {disk} of run {} is not here",
                    own.display(),
                    v.run_id
                )));
            }
            let old = read_live(&own)?;
            let (matcher, what) = persist::udev_match(root, disk);
            if matcher.starts_with("KERNEL") {
                warnings.push(format!("udev rule matches {what}"));
            }
            let path = persist::udev_rule(root, disk, attr);
            let mut head = evidence.clone();
            head.insert(
                0,
                format!("{disk} queue/{attr}: {old} → {value}, matched on {what}"),
            );
            let content = format!(
                "{}ACTION==\"add|change\", SUBSYSTEM==\"block\", {matcher}, ATTR{{queue/{attr}}}=\"{value}\"\n",
                persist::header(&head)
            );
            (
                vec![(own, old)],
                vec![],
                vec![AppliedFile {
                    path: path.display().to_string(),
                    content,
                }],
                None,
            )
        }
        Place::Mount => {
            let line = fstab_line(root, v, &value)?;
            warnings.push(
                "mount options are not changed live nor in /etc/fstab: paste the fstab line \
                 (tunelab never edits fstab) and remount"
                    .to_string(),
            );
            (vec![], vec![], vec![], Some(line))
        }
    };
    for f in &files {
        let p = PathBuf::from(&f.path);
        if let Ok(text) = fs::read_to_string(&p) {
            return Err(Error::environment(if persist::is_ours(&text) {
                format!(
                    "{} exists, written by tunelab but not recorded as applied in this database \
                     (another database, or an interrupted run): remove it by hand if it is \
                     stale; tunelab will not overwrite it",
                    p.display()
                )
            } else {
                format!(
                    "{} exists and was not written by tunelab: it is the user's and is left \
                     alone (nothing was changed); merge the value by hand or remove that file",
                    p.display()
                )
            }));
        }
    }
    let change = AppliedChange {
        id,
        run_id: v.run_id.clone(),
        knob: v.knob.clone(),
        device,
        old: live.first().map(|l| l.1.clone()).unwrap_or_default(),
        new: value,
        live: live.iter().map(|l| l.0.display().to_string()).collect(),
        partners: partners
            .iter()
            .map(|(p, o)| LiveValue {
                path: p.display().to_string(),
                old: o.clone(),
            })
            .collect(),
        verdict: v.summary(),
        files,
        fstab_line,
        remeasure: v.remeasure.clone(),
        root: root.display(),
        notes,
        machine_id: this_machine(),
        state: "applied".into(),
        applied_at: now_rfc3339(),
        unapplied_at: None,
    };
    Ok(Plan {
        change,
        live,
        partners,
        warnings,
    })
}

/// The fstab line for the file system the run measured, with the winning
/// options: its own /etc/fstab line when it has one (source spelled as the
/// user wrote it), else one built from the mount table.
fn fstab_line(root: &Root, v: &TuneVerdict, value: &str) -> Result<String> {
    let target = v.target.clone().ok_or_else(|| {
        Error::usage(format!(
            "run {} does not record the directory it measured, so the file system for \
             the fstab line is unknown",
            v.run_id
        ))
    })?;
    let mounts =
        fs::read_to_string(root.at(&crate::system::proc::name("self/mounts"))).unwrap_or_default();
    let table: Vec<Vec<&str>> = mounts
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    let mine = table
        .iter()
        .filter(|f| f.len() >= 4 && std::path::Path::new(&target).starts_with(f[1]))
        .max_by_key(|f| f[1].len())
        .ok_or_else(|| {
            Error::environment(format!(
                "cannot find the mount of {target} in the mount table"
            ))
        })?;
    let fstab = fs::read_to_string(root.at("/etc/fstab")).unwrap_or_default();
    let own = fstab
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f.len() >= 4 && !f[0].starts_with('#') && f[1] == mine[1]);
    let (source, fstype, opts, rest) = match &own {
        Some(f) => (f[0], f[2], f[3], f[4..].join(" ")),
        None => (mine[0], mine[2], mine[3], "0 0".to_string()),
    };
    let opts = with_mount_tokens(opts, value);
    let rest = if rest.is_empty() {
        "0 0".to_string()
    } else {
        rest
    };
    Ok(format!("{source} {} {fstype} {opts} {rest}", mine[1]))
}

/// Mount options with `value`'s tokens (noatime+async) replacing their group.
fn with_mount_tokens(opts: &str, value: &str) -> String {
    let opts: Vec<String> = opts.split(',').map(String::from).collect();
    super::knobs::apply_mount_tokens(&opts, value).join(",")
}

/// Test hook: `TUNELAB_TEST_KILL_AT=<step>` SIGKILLs this process at that
/// step of apply/unapply, so tests prove the journal rolls back a kill.
/// Test builds only: a release binary ignores it.
pub(super) fn kill_point(step: &str) {
    if cfg!(debug_assertions) && std::env::var("TUNELAB_TEST_KILL_AT").is_ok_and(|s| s == step) {
        // SAFETY: kill(2) on our own pid.
        let _ =
            rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::KILL);
    }
}

/// Write the live values (own first, then zeroed partners are as the kernel
/// leaves them) and read back; returns the own value the kernel kept.
pub(super) fn write_live(files: &[(PathBuf, String)], value: &str) -> Result<String> {
    let mut kept = String::new();
    for (i, (p, _)) in files.iter().enumerate() {
        journal::set_setting(p, value).map_err(|e| match Errno::from_io_error(&e) {
            Some(Errno::INVAL) => {
                Error::usage(format!("the kernel refused '{value}' for {}", p.display()))
            }
            _ => Error::io("cannot write", p, e),
        })?;
        let back = read_live(p)?;
        if i == 0 {
            kept = back;
        }
    }
    Ok(kept)
}

/// The journal entry for the live files: originals now, `pending` the value
/// about to be written (a crash after the write still knows it as ours).
pub(super) fn live_entry(
    tag: &str,
    own: &[(PathBuf, String)],
    partners: &[(PathBuf, String)],
    pending: &str,
) -> Entry {
    let mut files: Vec<FileState> = own
        .iter()
        .map(|(p, o)| FileState {
            path: p.clone(),
            original: o.clone(),
            applied: None,
            pending: Some(pending.to_string()),
        })
        .collect();
    files.extend(partners.iter().map(|(p, o)| FileState {
        path: p.clone(),
        original: o.clone(),
        applied: None,
        pending: Some("0".into()),
    }));
    Entry::new(tag, Saved::Files { files })
}

/// Carry out a plan: journal, live value (read back), files, store, commit.
/// Every journal entry names the store record that makes the change final
/// (`journal::Commit`): after a kill, `restore` keeps the change if the
/// store has it and undoes it if not.
pub(crate) fn apply(plan: Plan, store: &mut Store) -> Result<AppliedChange> {
    let mut change = plan.change;
    let tag = format!("apply {}", change.id);
    let commit = record::commit_of(store, &change);
    let mut live = live_entry(&tag, &plan.live, &plan.partners, &change.new);
    live.commit = Some(commit.clone());
    let has_live = !plan.live.is_empty();
    if has_live {
        journal::claim(live.clone())?;
    }
    let mut steps = || -> Result<()> {
        kill_point("apply-journalled");
        if has_live {
            let kept = write_live(&plan.live, &change.new)?;
            if kept != change.new {
                change.notes.push(format!(
                    "the kernel set {kept} when {} was written {}: {kept} is what is applied",
                    change.knob, change.new
                ));
                for f in &mut change.files {
                    f.content = f
                        .content
                        .replace(&format!("= {}\n", change.new), &format!("= {kept}\n"))
                        .replace(&format!("=\"{}\"\n", change.new), &format!("=\"{kept}\"\n"));
                }
                change.new = kept;
            }
        }
        kill_point("apply-live");
        let mut persist = Entry::new(
            &format!("{tag} files"),
            Saved::Persist {
                files: change
                    .files
                    .iter()
                    .map(|f| PersistFile {
                        path: PathBuf::from(&f.path),
                        before: None,
                        after: Some(f.content.clone()),
                    })
                    .collect(),
            },
        );
        persist.commit = Some(commit.clone());
        journal::claim(persist)?;
        for f in &change.files {
            persist::create_new(&PathBuf::from(&f.path), &f.content)?;
        }
        kill_point("apply-files");
        store.save_change(&change)?;
        kill_point("apply-stored");
        Ok(())
    };
    let result = steps();
    let me = std::process::id();
    match result {
        Ok(()) => {
            forget(&tag, me)?;
            Ok(change)
        }
        Err(e) => {
            let why = roll_back(&tag, me)?;
            if why.is_empty() {
                Err(e)
            } else {
                Err(Error::environment(format!(
                    "{e}; rolling back also failed ({}): run 'tunelab restore'",
                    why.join("; ")
                )))
            }
        }
    }
}

/// A change is done: drop this process's journal entries of it (`tag` and
/// `tag files`).
pub(super) fn forget(tag: &str, me: u32) -> Result<()> {
    journal::remove(&format!("{tag} files"), me)?;
    journal::remove(tag, me)
}

/// A change failed: undo what was done through the journal's own restore.
/// Returns the restores that failed; their entries stay for `tunelab
/// restore`.
pub(super) fn roll_back(tag: &str, me: u32) -> Result<Vec<String>> {
    let mut why = Vec::new();
    for k in [format!("{tag} files"), tag.to_string()] {
        if let Some(en) = journal::load()?
            .into_iter()
            .find(|x| x.knob == k && x.pid == me)
        {
            match journal::restore_entry(&en) {
                Ok(_) => journal::remove(&k, me)?,
                Err(err) => why.push(err.to_string()),
            }
        }
    }
    Ok(why)
}
