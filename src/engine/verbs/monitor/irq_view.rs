//! `tunelab monitor irq`.

use super::*;

pub(super) struct IrqView {
    pub(super) prev_hard: Vec<irq::IrqCounts>,
    pub(super) prev_soft: Vec<irq::IrqCounts>,
    pub(super) top: usize,
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
        let ncpu = rows.first().map_or(0, |r| r.per_cpu_per_s.len());
        let mut e = Emitted::default();
        let _ = write!(e.table, "{:<8} {:<10} {:>10}", "kind", "source", "total/s");
        for c in 0..ncpu {
            let _ = write!(e.table, " {:>9}", format!("CPU{c}/s"));
        }
        e.table.push_str("  description\n");
        for r in rows.iter().take(self.top) {
            let _ = write!(
                e.table,
                "{:<8} {:<10} {:>10.1}",
                r.kind, r.source, r.total_per_s
            );
            for v in &r.per_cpu_per_s {
                let _ = write!(e.table, " {v:>9.1}");
            }
            let _ = writeln!(e.table, "  {}", r.desc);
        }
        for r in &rows {
            for (c, v) in r.per_cpu_per_s.iter().enumerate() {
                e.metrics.push((
                    format!(
                        "tunelab_{}_per_second",
                        if r.kind == "irq" {
                            "interrupts"
                        } else {
                            "softirqs"
                        }
                    ),
                    format!("source=\"{}\",cpu=\"{c}\"", r.source),
                    *v,
                ));
            }
        }
        e.table.push('\n');
        e.json = json!({ "sources": rows });
        Ok(e)
    }
}
