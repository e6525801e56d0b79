//! The live value of a knob as one arm of a sweep: what is in place now,
//! expressed as a value the sweep can write back and measure.

use super::KnobGuard;
use crate::safety::journal::Saved;

impl KnobGuard {
    /// The live value as a value of this knob, to be measured as one arm
    /// of the sweep: the original for a file knob; for a mount, the
    /// original's option in each group the swept `values` touch (the
    /// kernel's defaults where none is given: relatime, async, nolazytime).
    /// Err says why it cannot be one (a dirty ratio whose bytes partner is
    /// in use reads 0, and writing 0 would be another setting).
    pub(crate) fn live_arm(&self, values: &[String]) -> std::result::Result<String, String> {
        match &self.entry.saved {
            Saved::Mount { original, .. } => {
                let mut tokens: Vec<&str> = Vec::new();
                for v in values.iter().flat_map(|v| v.split('+')) {
                    let (group, default) = mount_group(v);
                    let now = original
                        .iter()
                        .map(String::as_str)
                        .find(|o| group.contains(o))
                        .unwrap_or(default);
                    if !tokens.contains(&now) {
                        tokens.push(now);
                    }
                }
                Ok(tokens.join("+"))
            }
            Saved::Files { files } => {
                let own = self.original();
                let partner = files
                    .iter()
                    .find(|f| !self.knob.files.contains(&f.path) && f.original != "0");
                match partner {
                    Some(p) if own == "0" => Err(format!(
                        "{} reads 0 because {} is in use ({}): the live setting is not a value                          of {}; tune {} instead",
                        self.knob.name,
                        p.path.display(),
                        p.original,
                        self.knob.name,
                        p.path
                            .file_name()
                            .map(|n| format!("vm.{}", n.to_string_lossy()))
                            .unwrap_or_default()
                    )),
                    _ => Ok(own),
                }
            }
            _ => Err(format!("{}: the live value cannot be read", self.knob.name)),
        }
    }
}

/// The mount options a token replaces, and the kernel's default among them.
pub(super) fn mount_group(token: &str) -> (&'static [&'static str], &'static str) {
    match token {
        "noatime" | "relatime" | "strictatime" => {
            (&["noatime", "relatime", "strictatime"], "relatime")
        }
        "sync" | "async" => (&["sync", "async"], "async"),
        _ => (&["lazytime", "nolazytime"], "nolazytime"),
    }
}
