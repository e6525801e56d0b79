//! `tunelab apply / applied / verify / unapply`: from a tune run's verdict
//! to a setting that persists (sysctl.d drop-in, udev rule, an fstab line
//! to paste), is verified against the live value and rolls back.
//!
//! Every change is one transaction through the knob journal: the live
//! values' originals (`Saved::Files`) and the persistent files' previous
//! state (`Saved::Persist`) are journalled before anything changes and
//! removed only once the store records the change. A kill in between is
//! rolled back by the next tunelab (or `tunelab restore`): the old state.

use std::fs;
use std::path::PathBuf;

use super::persist::{self, Root};
use super::sweep::{best_value, default_metric};
use crate::model::applied::{AppliedChange, AppliedFile, LiveValue};
use crate::model::run::{now_rfc3339, Run};
use crate::model::Better;
use crate::safety::journal::{self, Entry, FileState, PersistFile, Saved};
use crate::stats::{compare, Comparison, Verdict};
use crate::store::Store;
use crate::system::device::active_choice;
use crate::{Error, Result};

/// Environment keys a tune run records for apply (see cli/tune.rs).
pub const ENV_KNOB: &str = "tune.knob";
pub const ENV_METRIC: &str = "tune.metric";
pub const ENV_NOISE: &str = "tune.noise";
pub const ENV_DEVICE: &str = "tune.device";
pub const ENV_ORIGINAL: &str = "tune.original";
pub const ENV_LAB: &str = "tune.lab";

/// What a tune run concluded, re-derived from its stored samples.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TuneVerdict {
    pub run_id: String,
    pub knob: String,
    pub metric: String,
    pub noise: f64,
    /// The disk block knobs acted on.
    pub device: Option<String>,
    /// The live value before the sweep, when the run recorded it.
    pub original: Option<String>,
    /// The value better than every other with 95% confidence, if any.
    pub best: Option<String>,
    /// The best median (the candidate when nothing won).
    pub candidate: String,
    /// What the candidate is compared with: the original value when it was
    /// swept, else the runner-up.
    pub baseline: String,
    pub ratio: f64,
    pub ci95_low: f64,
    pub ci95_high: f64,
    pub explanation: String,
    /// The sweep ran on a loop device of the file-system lab.
    pub lab: bool,
    /// The directory the sweep measured in (for the fstab line).
    pub target: Option<String>,
    /// The command that measures the same workload at the applied value.
    pub remeasure: String,
}

impl TuneVerdict {
    /// One line for file headers and the store.
    pub fn summary(&self) -> String {
        format!(
            "{}={} vs {}: {} ×{:.3} (95% CI {:.3}–{:.3}), {}",
            self.knob,
            self.candidate,
            self.baseline,
            self.metric,
            self.ratio,
            self.ci95_low,
            self.ci95_high,
            if self.best.is_some() {
                format!(
                    "better than every other value beyond ±{:.0}% noise",
                    self.noise * 100.0
                )
            } else {
                "NOT significantly better (applied with --force)".to_string()
            }
        )
    }
}

/// The value of `--flag X` in a stored argv.
fn flag<'a>(argv: &'a [String], name: &str) -> Option<&'a str> {
    let eq = format!("{name}=");
    argv.iter().enumerate().find_map(|(i, a)| {
        if a == name {
            argv.get(i + 1).map(String::as_str)
        } else {
            a.strip_prefix(&eq)
        }
    })
}

/// The knob of a tune run: recorded in its environment, or (runs stored
/// before it was) the word after `tune` in its command line.
fn knob_of(run: &Run) -> Option<String> {
    if let Some(k) = run.environment.get(ENV_KNOB) {
        return Some(k.clone());
    }
    let i = run.argv.iter().position(|a| a == "tune")?;
    run.argv.get(i + 1).cloned()
}

/// Read a tune run's verdict back from its samples (the same rule `tune`
/// printed: best only when it beats every other value with 95% confidence).
pub fn verdict_of(run: &Run) -> Result<TuneVerdict> {
    let knob = knob_of(run).ok_or_else(|| {
        Error::usage(format!(
            "run {} is not a tune run (no knob recorded): apply takes the run of a \
             'tunelab tune KNOB …'",
            run.id
        ))
    })?;
    if run.results.is_empty() {
        return Err(Error::usage(format!("tune run {} has no results", run.id)));
    }
    let labs: std::collections::BTreeSet<String> = run
        .results
        .iter()
        .filter_map(|r| r.params.get("fs").map(|v| v.to_string()))
        .collect();
    if labs.len() > 1 {
        return Err(Error::usage(format!(
            "run {} swept {knob} on several lab file systems ({}): each has its own verdict; \
             tune on the one you use and apply that run",
            run.id,
            labs.into_iter().collect::<Vec<_>>().join(", ")
        )));
    }
    let metrics: Vec<(String, String)> = run.results[0]
        .metrics
        .iter()
        .map(|m| (m.name.clone(), m.unit.clone()))
        .collect();
    let metric = run
        .environment
        .get(ENV_METRIC)
        .cloned()
        .or_else(|| flag(&run.argv, "--metric").map(String::from))
        .unwrap_or_else(|| default_metric(&knob, &metrics));
    let noise = run
        .environment
        .get(ENV_NOISE)
        .and_then(|n| n.parse().ok())
        .or_else(|| {
            flag(&run.argv, "--noise").and_then(|n| {
                n.trim_end_matches('%')
                    .parse::<f64>()
                    .ok()
                    .map(|p| p / 100.0)
            })
        })
        .unwrap_or(0.02);
    let v = best_value(&knob, &run.results, &metric, noise)?;
    let rows: Vec<(String, &crate::model::run::MetricResult)> = run
        .results
        .iter()
        .filter_map(|r| Some((r.params.get(&knob)?.to_string(), r.metric(&metric)?)))
        .collect();
    let higher = rows[0].1.better == Better::Higher;
    let by_median = |a: &f64, b: &f64| {
        if higher {
            a.total_cmp(b)
        } else {
            b.total_cmp(a)
        }
    };
    let mut sorted = rows.clone();
    sorted.sort_by(|a, b| by_median(&b.1.summary.median, &a.1.summary.median));
    let candidate = v.best.clone().unwrap_or_else(|| sorted[0].0.clone());
    let original = run.environment.get(ENV_ORIGINAL).cloned();
    let baseline = original
        .as_ref()
        .filter(|o| **o != candidate && rows.iter().any(|r| &r.0 == *o))
        .cloned()
        .or_else(|| {
            sorted
                .iter()
                .find(|r| r.0 != candidate)
                .map(|r| r.0.clone())
        })
        .ok_or_else(|| Error::usage(format!("run {} measured only one value", run.id)))?;
    let samples = |name: &str| -> Result<&[f64]> {
        rows.iter()
            .find(|r| r.0 == name)
            .map(|r| r.1.samples.as_slice())
            .ok_or_else(|| {
                Error::measurement(format!("run {}: no samples for {knob}={name}", run.id))
            })
    };
    let c: Comparison = compare(samples(&baseline)?, samples(&candidate)?, higher, noise);
    let device =
        run.environment.get(ENV_DEVICE).cloned().or_else(|| {
            flag(&run.argv, "--device").map(|d| d.trim_start_matches("/dev/").to_string())
        });
    let lab = run.environment.contains_key(ENV_LAB) || !labs.is_empty();
    Ok(TuneVerdict {
        run_id: run.id.clone(),
        remeasure: remeasure(run, &knob),
        knob,
        metric,
        noise,
        device,
        original,
        best: v.best.filter(|_| c.verdict == Verdict::Improved),
        candidate,
        baseline,
        ratio: c.ratio,
        ci95_low: c.ci95_low,
        ci95_high: c.ci95_high,
        explanation: v.explanation,
        lab,
        target: run
            .environment
            .get("target.path")
            .cloned()
            .or_else(|| flag(&run.argv, "--target").map(String::from)),
    })
}

/// `tunelab run EXP -p … --target …`: the tune run's workload, measured
/// at whatever value is live (after apply: the applied one).
fn remeasure(run: &Run, knob: &str) -> String {
    let r = &run.results[0];
    let mut cmd = format!("tunelab run {}", r.experiment);
    for (k, v) in &r.params {
        if k != knob && k != "fs" {
            cmd.push_str(&format!(" -p {k}={v}"));
        }
    }
    for f in ["--target", "--fs", "--fs-size", "--throttle"] {
        if let Some(v) = flag(&run.argv, f) {
            cmd.push_str(&format!(" {f} {v}"));
        }
    }
    cmd.push_str(&format!(" --label after-apply-{}", run.id));
    cmd
}

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
pub struct Plan {
    pub change: AppliedChange,
    /// Live files with their current value (the restore value).
    pub live: Vec<(PathBuf, String)>,
    /// Partner files the kernel zeroes when the knob is set (dirty_ratio ⇄
    /// dirty_bytes): journalled, restored by unapply.
    pub partners: Vec<(PathBuf, String)>,
    pub warnings: Vec<String>,
}

fn read_live(p: &std::path::Path) -> Result<String> {
    let raw = fs::read_to_string(p)
        .map_err(|e| Error::environment(format!("cannot read {}: {e}", p.display())))?;
    let raw = raw.trim();
    Ok(active_choice(raw).unwrap_or_else(|| raw.to_string()))
}

/// The id of the change a knob (on a disk) makes: one applied at a time.
fn change_id(knob: &str, device: Option<&str>) -> String {
    match device {
        Some(d) => format!("{knob}@{d}"),
        None => knob.to_string(),
    }
}

/// Plan applying `value` (the verdict's candidate unless overridden).
pub fn plan_apply(root: &Root, v: &TuneVerdict, store: &Store) -> Result<Plan> {
    let place = place(v)?;
    let value = v.candidate.clone();
    let (id, device) = match &place {
        Place::Block { disk, .. } => (change_id(&v.knob, Some(disk)), disk.clone()),
        _ => (change_id(&v.knob, None), String::new()),
    };
    if let Some(c) = store
        .changes()?
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
    let mounts = fs::read_to_string(root.at("/proc/self/mounts")).unwrap_or_default();
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
fn kill_point(step: &str) {
    if std::env::var("TUNELAB_TEST_KILL_AT").is_ok_and(|s| s == step) {
        // SAFETY: kill(2) on our own pid.
        unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
    }
}

/// Write the live values (own first, then zeroed partners are as the kernel
/// leaves them) and read back; returns the own value the kernel kept.
fn write_live(files: &[(PathBuf, String)], value: &str) -> Result<String> {
    let mut kept = String::new();
    for (i, (p, _)) in files.iter().enumerate() {
        fs::write(p, value).map_err(|e| match e.raw_os_error() {
            Some(libc::EINVAL) => {
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
fn live_entry(
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
pub fn apply(plan: Plan, store: &mut Store) -> Result<AppliedChange> {
    let mut change = plan.change;
    let tag = format!("apply {}", change.id);
    let live = live_entry(&tag, &plan.live, &plan.partners, &change.new);
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
        let persist = Entry::new(
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
        journal::claim(persist)?;
        for f in &change.files {
            persist::create_new(&PathBuf::from(&f.path), &f.content)?;
        }
        kill_point("apply-files");
        store.save_change(&change)?;
        Ok(())
    };
    let result = steps();
    let me = std::process::id();
    match result {
        Ok(()) => {
            journal::remove(&format!("{tag} files"), me)?;
            journal::remove(&tag, me)?;
            Ok(change)
        }
        Err(e) => {
            // Roll back what was done, through the journal's own restore.
            let mut why = Vec::new();
            for k in [format!("{tag} files"), tag.clone()] {
                if let Some(en) = journal::load()?
                    .into_iter()
                    .find(|x| x.knob == k && x.pid == me)
                {
                    match journal::restore_entry(&en) {
                        Ok(_) => {
                            journal::remove(&k, me)?;
                        }
                        Err(err) => why.push(err.to_string()),
                    }
                }
            }
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

/// The state of one applied change now.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Check {
    pub id: String,
    pub knob: String,
    pub applied: String,
    pub live: Option<String>,
    /// "in place", "drifted", "file missing", "file edited".
    pub status: String,
    /// What changed it, when tunelab can tell.
    pub cause: Option<String>,
}

impl Check {
    pub fn ok(&self) -> bool {
        self.status == "in place"
    }
}

/// Compare one applied change with the live system.
pub fn verify(root: &Root, c: &AppliedChange) -> Check {
    let live = c
        .live
        .first()
        .and_then(|p| read_live(std::path::Path::new(p)).ok());
    let mut status = "in place".to_string();
    let mut cause = None;
    for f in &c.files {
        match fs::read_to_string(&f.path) {
            Err(_) => {
                status = "file missing".into();
                cause = Some(format!("{} is gone (removed outside tunelab)", f.path));
            }
            Ok(t) if t != f.content => {
                status = "file edited".into();
                cause = Some(format!("{} was edited after apply", f.path));
            }
            Ok(_) => {}
        }
    }
    if !c.live.is_empty() && live.as_deref() != Some(c.new.as_str()) {
        status = "drifted".into();
        cause = Some(drift_cause(root, c, live.as_deref()));
    }
    Check {
        id: c.id.clone(),
        knob: c.knob.clone(),
        applied: c.new.clone(),
        live,
        status,
        cause,
    }
}

/// Who may have set a drifted value: a tunelab still holding the setting,
/// a sysctl file loaded after ours, tuned, else unknown (by hand).
fn drift_cause(root: &Root, c: &AppliedChange, live: Option<&str>) -> String {
    let live_path = c.live.first().map(PathBuf::from);
    if let Ok(entries) = journal::load() {
        if let Some(e) = entries.iter().find(|e| match &e.saved {
            Saved::Files { files } => files.iter().any(|f| Some(&f.path) == live_path.as_ref()),
            _ => false,
        }) {
            return format!(
                "tunelab pid {} ({}, started {}) is changing it",
                e.pid, e.knob, e.started
            );
        }
    }
    if c.knob.starts_with("vm.") {
        let ours = c.files.first().map(|f| PathBuf::from(&f.path));
        let others: Vec<String> = persist::sysctl_setters(root, &c.knob)
            .into_iter()
            .filter(|(f, v)| Some(f) != ours.as_ref() && Some(v.as_str()) == live)
            .map(|(f, v)| format!("{} sets {} = {v}", f.display(), c.knob))
            .collect();
        if !others.is_empty() {
            return others.join("; ");
        }
    }
    if let Ok(p) = fs::read_to_string(root.at("/etc/tuned/active_profile")) {
        if !p.trim().is_empty() {
            return format!(
                "no file here sets it; tuned's active profile '{}' may",
                p.trim()
            );
        }
    }
    format!(
        "no configuration file sets it to {}: changed by hand or by a program since {}",
        live.unwrap_or("?"),
        c.applied_at
    )
}

/// What unapply will do for one change (for --dry-run and the real thing).
#[derive(Debug, Clone, serde::Serialize)]
pub struct UnapplyPlan {
    pub change: AppliedChange,
    /// Live value restored: path, now, to.
    pub restore: Vec<(PathBuf, String, String)>,
    /// Files removed.
    pub remove: Vec<PathBuf>,
    pub warnings: Vec<String>,
}

/// Plan undoing `c`: the pre-apply value back where the live value is still
/// the applied one (a drifted value is someone else's: left, unless
/// `force`), and tunelab's files removed (a file without tunelab's header
/// is never touched).
pub fn plan_unapply(c: &AppliedChange, force: bool) -> Result<UnapplyPlan> {
    let mut warnings = Vec::new();
    let mut restore = Vec::new();
    if let Some(p) = c.live.first().map(PathBuf::from) {
        let now = read_live(&p)?;
        if now == c.new || force {
            restore.push((p, now, c.old.clone()));
        } else {
            warnings.push(format!(
                "{} is {now}, not the applied {}: someone changed it, so it is left alone \
                 (--force restores {} anyway)",
                c.knob, c.new, c.old
            ));
        }
    }
    let mut remove = Vec::new();
    for f in &c.files {
        let p = PathBuf::from(&f.path);
        match fs::read_to_string(&p) {
            Err(_) => warnings.push(format!("{} is already gone", p.display())),
            Ok(t) if !persist::is_ours(&t) => warnings.push(format!(
                "{} no longer has tunelab's header: it is not removed",
                p.display()
            )),
            Ok(t) => {
                if t != f.content {
                    warnings.push(format!(
                        "{} was edited after apply; removing it anyway (it is tunelab's)",
                        p.display()
                    ));
                }
                remove.push(p);
            }
        }
    }
    Ok(UnapplyPlan {
        change: c.clone(),
        restore,
        remove,
        warnings,
    })
}

/// Carry out an unapply plan as one journalled transaction.
pub fn unapply(plan: UnapplyPlan, store: &mut Store) -> Result<AppliedChange> {
    let mut c = plan.change;
    let tag = format!("unapply {}", c.id);
    let me = std::process::id();
    let own: Vec<(PathBuf, String)> = plan
        .restore
        .iter()
        .map(|(p, now, _)| (p.clone(), now.clone()))
        .collect();
    let has_live = !own.is_empty();
    if has_live {
        // "pending" is the old value: a kill after the write is still ours.
        let partners: Vec<(PathBuf, String)> = c
            .partners
            .iter()
            .map(|p| {
                let p = PathBuf::from(&p.path);
                let now = read_live(&p).unwrap_or_default();
                (p, now)
            })
            .collect();
        let mut e = live_entry(&tag, &own, &partners, &c.old);
        if let Saved::Files { files } = &mut e.saved {
            for (f, p) in files.iter_mut().skip(own.len()).zip(&c.partners) {
                f.pending = Some(p.old.clone());
            }
        }
        journal::claim(e)?;
    }
    let files: Vec<PersistFile> = plan
        .remove
        .iter()
        .map(|p| PersistFile {
            path: p.clone(),
            before: fs::read_to_string(p).ok(),
            after: None,
        })
        .collect();
    let mut steps = || -> Result<()> {
        if !files.is_empty() {
            journal::claim(Entry::new(
                &format!("{tag} files"),
                Saved::Persist {
                    files: files.clone(),
                },
            ))?;
        }
        kill_point("unapply-journalled");
        if !plan.restore.is_empty() {
            restore_values(&c)?;
        }
        kill_point("unapply-live");
        for f in &files {
            persist::remove_ours(&f.path)?;
        }
        kill_point("unapply-files");
        c.state = "unapplied".into();
        c.unapplied_at = Some(now_rfc3339());
        store.save_change(&c)
    };
    let result = steps();
    match result {
        Ok(()) => {
            journal::remove(&format!("{tag} files"), me)?;
            journal::remove(&tag, me)?;
            Ok(c)
        }
        Err(e) => {
            for k in [format!("{tag} files"), tag.clone()] {
                if let Some(en) = journal::load()?
                    .into_iter()
                    .find(|x| x.knob == k && x.pid == me)
                {
                    if journal::restore_entry(&en).is_ok() {
                        journal::remove(&k, me)?;
                    }
                }
            }
            Err(e)
        }
    }
}

/// Write the pre-apply values back. The dirty pairs reset each other, so
/// (like the journal) only the non-zero originals are written, or the own
/// one when all were zero; each is read back.
fn restore_values(c: &AppliedChange) -> Result<()> {
    let mut all: Vec<(PathBuf, &str)> = c
        .live
        .iter()
        .take(1)
        .map(|p| (PathBuf::from(p), c.old.as_str()))
        .collect();
    all.extend(
        c.partners
            .iter()
            .map(|p| (PathBuf::from(&p.path), p.old.as_str())),
    );
    let all_zero = all.iter().all(|(_, v)| *v == "0");
    for (p, to) in all.iter().filter(|(_, v)| all_zero || *v != "0") {
        fs::write(p, to).map_err(|e| Error::io("cannot restore", p, e))?;
        let back = read_live(p)?;
        if back != *to {
            return Err(Error::environment(format!(
                "wrote {to} back to {} but the kernel holds {back}",
                p.display()
            )));
        }
    }
    Ok(())
}
