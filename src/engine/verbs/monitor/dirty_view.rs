//! `tunelab monitor dirty`.

use super::*;

pub(super) struct DirtyView {
    pub(super) watch: DirtyWatch,
    pub(super) lines: usize,
}

pub(super) fn read_dirty_sample() -> Result<(DirtySample, dirty::DirtyLimits)> {
    let m = crate::observe::procmem::read_meminfo()
        .map_err(|e| env_err("cannot read /proc/meminfo", e))?;
    let limits = dirty::read_limits().map_err(|e| env_err("cannot read vm.dirty_* sysctls", e))?;
    Ok((
        DirtySample {
            dirty: m.dirty,
            writeback: m.writeback,
            available: crate::observe::procmem::system_mem(&m).available,
            cache: m.cached + m.buffers,
        },
        limits,
    ))
}

impl ViewState for DirtyView {
    fn preface(&self) -> Vec<String> {
        vec![text::dirty_preface(&self.watch.limits)]
    }

    fn sample(&mut self, _secs: f64) -> Result<Emitted> {
        let (s, limits) = read_dirty_sample()?;
        if limits != self.watch.limits {
            // Sysctls changed while watching: restart the accounting.
            self.watch = DirtyWatch::new(limits);
        }
        let line = self.watch.observe(&s);
        let shown = text::dirty(&line, text::header_due(self.lines));
        self.lines += 1;
        Ok(Emitted {
            warnings: text::dirty_warning(&line).into_iter().collect(),
            ..Emitted::shown(shown, serde_json::to_value(&line)?)
        })
    }

    fn finish(&self) -> Option<(String, Value)> {
        let s = self.watch.summary();
        Some((text::dirty_summary(&s), json!({ "summary": s })))
    }
}
