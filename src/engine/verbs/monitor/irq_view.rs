//! `tunelab monitor irq`.

use super::*;

pub(super) struct IrqView {
    pub(super) prev_hard: Vec<irq::IrqCounts>,
    pub(super) prev_soft: Vec<irq::IrqCounts>,
    pub(super) top: usize,
    pub(super) term: crate::report::table::Terminal,
}

impl ViewState for IrqView {
    fn sample(&mut self, secs: f64) -> Result<Emitted> {
        let hard =
            irq::read_interrupts().map_err(|e| env_err("cannot read /proc/interrupts", e))?;
        let soft = irq::read_softirqs().unwrap_or_default();
        let mut rows = irq::delta(&self.prev_hard, &hard, secs, "irq");
        rows.extend(irq::delta(&self.prev_soft, &soft, secs, "softirq"));
        rows.sort_by(|a, b| b.total_per_s.total_cmp(&a.total_per_s));
        self.prev_hard = hard;
        self.prev_soft = soft;
        let shown = text::irq(&rows, self.top, self.term);
        Ok(Emitted::shown(shown, json!({ "sources": rows })))
    }
}
