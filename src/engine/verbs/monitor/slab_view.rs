//! `tunelab monitor slab`.

use super::*;

pub(super) struct SlabView {
    pub(super) prev: Vec<pressure::SlabCounts>,
    pub(super) top: usize,
}

impl ViewState for SlabView {
    fn sample(&mut self, secs: f64) -> Result<Emitted> {
        let cur =
            pressure::read_slabinfo().map_err(|e| env_err("cannot read /proc/slabinfo", e))?;
        let rows = pressure::slab_delta(&self.prev, &cur, secs);
        self.prev = cur;
        let mut by_objs = rows.clone();
        by_objs.sort_by_key(|r| std::cmp::Reverse(r.active_objs));
        let mut e = Emitted::default();
        let mut shown: Vec<&pressure::SlabRow> = rows.iter().take(self.top).collect();
        for r in by_objs.iter().take(self.top) {
            if !shown.iter().any(|s| s.name == r.name) {
                shown.push(r);
            }
        }
        let _ = writeln!(
            e.table,
            "{:<28} {:>12} {:>8} {:>12} {:>12}",
            "cache", "active objs", "obj size", "memory", "net churn/s"
        );
        for r in &shown {
            let _ = writeln!(
                e.table,
                "{:<28} {:>12} {:>8} {:>12} {:>12.0}",
                r.name,
                r.active_objs,
                r.obj_size,
                human(r.bytes as f64, "B"),
                r.churn_per_s
            );
            let l = format!("cache=\"{}\"", r.name);
            e.metrics.push((
                "tunelab_slab_active_objects".into(),
                l.clone(),
                r.active_objs as f64,
            ));
            e.metrics
                .push(("tunelab_slab_churn_per_second".into(), l, r.churn_per_s));
        }
        e.table.push('\n');
        e.json = json!({ "caches": shown });
        Ok(e)
    }

    fn preface(&self) -> Vec<String> {
        vec!["note: churn is the net change of active objects per second (/proc/slabinfo has no allocation counter)".into()]
    }
}
