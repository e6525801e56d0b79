//! `tunelab monitor vmstat`.

use super::*;

pub(super) struct VmstatView {
    pub(super) prev: vmstat::VmstatCounters,
    pub(super) window: Vec<vmstat::VmstatRow>,
    pub(super) lines: usize,
}

impl ViewState for VmstatView {
    fn sample(&mut self, secs: f64) -> Result<Emitted> {
        let cur = vmstat::read().map_err(|e| env_err("cannot read /proc", e))?;
        let r = vmstat::delta(&self.prev, &cur, secs);
        self.prev = cur;
        self.window.push(r.clone());
        if self.window.len() > hints::IOWAIT_INTERVALS {
            self.window.remove(0);
        }
        let signs = hints::vmstat_signs(&self.window);
        let shown = text::vmstat(&r, text::header_due(self.lines));
        self.lines += 1;
        let mut json = serde_json::to_value(&r)?;
        json["hints"] = json!(signs.iter().map(|s| &s.1).collect::<Vec<_>>());
        Ok(Emitted {
            hints: signs.into_iter().map(|s| s.1).collect(),
            ..Emitted::shown(shown, json)
        })
    }
}
