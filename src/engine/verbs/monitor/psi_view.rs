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
        let mut e = Emitted::default();
        let _ = writeln!(
            e.table,
            "{:<8} {:>8} {:>8} {:>11}",
            "resource", "some %", "full %", "some avg10"
        );
        for r in &rows {
            let _ = writeln!(
                e.table,
                "{:<8} {:>8.1} {:>8} {:>11.2}",
                r.resource,
                r.some_pct,
                r.full_pct.map_or("-".into(), |f| format!("{f:.1}")),
                r.some_avg10
            );
            e.metrics.push((
                "tunelab_pressure_stalled_percent".into(),
                format!("resource=\"{}\",kind=\"some\"", r.resource),
                r.some_pct,
            ));
            if let Some(f) = r.full_pct {
                e.metrics.push((
                    "tunelab_pressure_stalled_percent".into(),
                    format!("resource=\"{}\",kind=\"full\"", r.resource),
                    f,
                ));
            }
        }
        e.table.push('\n');
        e.json = json!({ "resources": rows });
        Ok(e)
    }
}
