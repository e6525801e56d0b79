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
        let mut e = Emitted::default();
        if self.lines.is_multiple_of(20) {
            e.table.push_str(
                "procs -----------memory---------- ---swap-- -----io---- -system-- -------cpu-------\n \
                 r  b   swpd     free     buff    cache   si   so    bi    bo   in   cs us sy id wa st\n",
            );
        }
        self.lines += 1;
        let _ = writeln!(
            e.table,
            "{:>2} {:>2} {:>6} {:>8} {:>8} {:>8} {:>4.0} {:>4.0} {:>5.0} {:>5.0} {:>4.0} {:>4.0} {:>2.0} {:>2.0} {:>2.0} {:>2.0} {:>2.0}",
            r.r, r.b, r.swpd_kb, r.free_kb, r.buff_kb, r.cache_kb, r.si, r.so, r.bi, r.bo,
            r.in_s, r.cs_s, r.us, r.sy, r.id, r.wa, r.st
        );
        let mut j = serde_json::to_value(&r)?;
        j["hints"] = json!(signs.iter().map(|s| &s.1).collect::<Vec<_>>());
        e.json = j;
        for (name, v) in [
            ("procs_running", r.r as f64),
            ("procs_blocked", r.b as f64),
            ("swap_used_kib", r.swpd_kb as f64),
            ("free_kib", r.free_kb as f64),
            ("buffers_kib", r.buff_kb as f64),
            ("cache_kib", r.cache_kb as f64),
            ("swap_in_kib_per_second", r.si),
            ("swap_out_kib_per_second", r.so),
            ("blocks_in_kib_per_second", r.bi),
            ("blocks_out_kib_per_second", r.bo),
            ("interrupts_per_second", r.in_s),
            ("context_switches_per_second", r.cs_s),
        ] {
            e.metrics
                .push((format!("tunelab_vmstat_{name}"), String::new(), v));
        }
        for (mode, v) in [
            ("user", r.us),
            ("system", r.sy),
            ("idle", r.id),
            ("iowait", r.wa),
            ("steal", r.st),
        ] {
            e.metrics.push((
                "tunelab_vmstat_cpu_percent".into(),
                format!("mode=\"{mode}\""),
                v,
            ));
        }
        e.hints = signs.into_iter().map(|s| s.1).collect();
        Ok(e)
    }
}
