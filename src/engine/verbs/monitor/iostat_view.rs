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
        let mut v = vec![
            "note: %util is the share of time with at least one request in flight; on devices that \
             serve requests in parallel (SSD, NVMe, RAID, virtual disks) 100% does not mean saturated — \
             watch aqu-sz and await instead"
                .to_string(),
        ];
        if !ssd.is_empty() {
            v.push(format!("non-rotational devices here: {}", ssd.join(", ")));
        }
        v
    }

    fn sample(&mut self, secs: f64) -> Result<Emitted> {
        let cur = self.read()?;
        let mut e = Emitted::default();
        let mut rows = Vec::new();
        for c in &cur {
            if let Some(p) = self.prev.iter().find(|p| p.name == c.name) {
                rows.push(iostat::delta(p, c, secs));
            }
        }
        self.prev = cur;
        e.table.push_str(&format!(
            "{:<10} {:>8} {:>8} {:>10} {:>10} {:>8} {:>8} {:>7} {:>8} {:>6}\n",
            "Device",
            "r/s",
            "w/s",
            "rkB/s",
            "wkB/s",
            "r_await",
            "w_await",
            "aqu-sz",
            "areq-sz",
            "%util"
        ));
        for r in &rows {
            let _ =
                writeln!(
                e.table,
                "{:<10} {:>8.2} {:>8.2} {:>10.2} {:>10.2} {:>8.2} {:>8.2} {:>7.2} {:>8.2} {:>6.1}",
                r.device, r.r_s, r.w_s, r.rkb_s, r.wkb_s, r.r_await_ms, r.w_await_ms, r.aqu_sz,
                r.areq_sz_kb, r.util_pct
            );
            let l = format!("device=\"{}\"", r.device);
            for (n, v) in [
                ("reads_per_second", r.r_s),
                ("writes_per_second", r.w_s),
                ("read_kib_per_second", r.rkb_s),
                ("write_kib_per_second", r.wkb_s),
                ("read_await_milliseconds", r.r_await_ms),
                ("write_await_milliseconds", r.w_await_ms),
                ("queue_size", r.aqu_sz),
                ("request_size_kib", r.areq_sz_kb),
                ("util_percent", r.util_pct),
            ] {
                e.metrics
                    .push((format!("tunelab_iostat_{n}"), l.clone(), v));
            }
        }
        e.table.push('\n');
        e.json = json!({ "devices": rows });
        Ok(e)
    }
}
