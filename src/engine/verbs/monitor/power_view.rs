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
        let shown = text::power(&rows);
        Ok(Emitted {
            table: shown.table,
            metrics: shown.gauges,
            json: json!({ "cpus": rows }),
            ..Default::default()
        })
    }
}
