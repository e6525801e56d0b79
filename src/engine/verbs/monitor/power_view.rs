//! `tunelab monitor power`.

use super::*;

pub(super) struct PowerView {
    pub(super) prev: Vec<pressure::CpuPower>,
}

impl ViewState for PowerView {
    fn sample(&mut self, secs: f64) -> Result<Emitted> {
        let cur = pressure::read_power().map_err(|e| env_err("CPU power information", e))?;
        let rows = pressure::power_delta(&self.prev, &cur, secs);
        self.prev = cur;
        let mut e = Emitted::default();
        for r in &rows {
            let idle: Vec<String> = r
                .idle
                .iter()
                .map(|(n, pct, rate)| format!("{n} {pct:.1}% ({rate:.0}/s)"))
                .collect();
            let _ = writeln!(
                e.table,
                "cpu{:<3} governor {:<12} freq {:>8}  idle: {}",
                r.cpu,
                r.governor.as_deref().unwrap_or("-"),
                r.freq_mhz.map_or("-".into(), |f| format!("{f:.0} MHz")),
                if idle.is_empty() {
                    "-".into()
                } else {
                    idle.join(", ")
                }
            );
            if let Some(f) = r.freq_mhz {
                e.metrics.push((
                    "tunelab_cpu_frequency_mhz".into(),
                    format!("cpu=\"{}\"", r.cpu),
                    f,
                ));
            }
            for (n, pct, _) in &r.idle {
                e.metrics.push((
                    "tunelab_cpu_idle_residency_percent".into(),
                    format!("cpu=\"{}\",state=\"{n}\"", r.cpu),
                    *pct,
                ));
            }
        }
        e.table.push('\n');
        e.json = json!({ "cpus": rows });
        Ok(e)
    }
}
