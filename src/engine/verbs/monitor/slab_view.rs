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
        let mut shown: Vec<&pressure::SlabRow> = rows.iter().take(self.top).collect();
        for r in by_objs.iter().take(self.top) {
            if !shown.iter().any(|s| s.name == r.name) {
                shown.push(r);
            }
        }
        Ok(Emitted::shown(
            text::slab(&shown),
            json!({ "caches": shown }),
        ))
    }

    fn preface(&self) -> Vec<String> {
        vec![text::SLAB_PREFACE.into()]
    }
}
