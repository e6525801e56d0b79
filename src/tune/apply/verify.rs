//! `tunelab verify`: one applied change compared with the live system
//! (in place, drifted, file missing or edited) and, when tunelab can tell,
//! what changed it.

use std::fs;
use std::path::PathBuf;

use super::read_live;
use crate::model::applied::AppliedChange;
use crate::safety::journal::{self, Saved};
use crate::tune::persist::{self, Root};

/// The state of one applied change now.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct Check {
    pub(crate) id: String,
    pub(crate) knob: String,
    pub(crate) applied: String,
    pub(crate) live: Option<String>,
    /// "in place", "drifted", "file missing", "file edited".
    pub(crate) status: String,
    /// What changed it, when tunelab can tell.
    pub(crate) cause: Option<String>,
}

impl Check {
    pub(crate) fn ok(&self) -> bool {
        self.status == "in place"
    }
}

/// Compare one applied change with the live system.
pub(crate) fn verify(root: &Root, c: &AppliedChange) -> Check {
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
