//! `tunelab monitor iostat`.

use super::*;

pub(super) struct IostatView {
    pub(super) names: Option<Vec<String>>,
    pub(super) prev: Vec<iostat::DiskCounters>,
}

/// Whole disks (those with /sys/block/NAME) that did I/O since boot — what
/// sysstat iostat lists by default.
pub(super) fn default_disk(d: &iostat::DiskCounters) -> bool {
    std::path::Path::new("/sys/block").join(&d.name).exists() && (d.reads + d.writes) > 0
}

pub(super) fn rotational(name: &str) -> Option<bool> {
    std::fs::read_to_string(format!("/sys/block/{name}/queue/rotational"))
        .ok()
        .map(|s| s.trim() == "1")
}

impl IostatView {
    pub(super) fn read(&self) -> Result<Vec<iostat::DiskCounters>> {
        let all = iostat::read_all().map_err(|e| env_err("cannot read /proc/diskstats", e))?;
        Ok(all
            .into_iter()
            .filter(|d| match &self.names {
                Some(n) => n.contains(&d.name),
                None => default_disk(d),
            })
            .collect())
    }
}

impl ViewState for IostatView {
    fn preface(&self) -> Vec<String> {
        let ssd: Vec<&str> = self
            .prev
            .iter()
            .filter(|d| rotational(&d.name) == Some(false))
            .map(|d| d.name.as_str())
            .collect();
        text::iostat_preface(&ssd)
    }

    fn sample(&mut self, secs: f64) -> Result<Emitted> {
        let cur = self.read()?;
        let mut rows = Vec::new();
        for c in &cur {
            if let Some(p) = self.prev.iter().find(|p| p.name == c.name) {
                rows.push(iostat::delta(p, c, secs));
            }
        }
        self.prev = cur;
        let shown = text::iostat(&rows);
        Ok(Emitted::shown(shown, json!({ "devices": rows })))
    }
}
