//! `tunelab monitor psi`.

use super::*;

pub(super) struct PsiView {
    pub(super) prev: Vec<pressure::PsiCounters>,
}

impl ViewState for PsiView {
    fn sample(&mut self, secs: f64) -> Result<Emitted> {
        let cur = pressure::read_psi().map_err(|e| env_err("pressure stall information", e))?;
        let rows = pressure::psi_delta(&self.prev, &cur, secs);
        self.prev = cur;
        let shown = text::psi(&rows);
        Ok(Emitted {
            table: shown.table,
            metrics: shown.gauges,
            json: json!({ "resources": rows }),
            ..Default::default()
        })
    }
}
