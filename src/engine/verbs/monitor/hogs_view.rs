//! `tunelab monitor hogs`.

use super::*;

pub(super) struct HogsView {
    pub(super) reader: HogsReader,
    pub(super) prev: Vec<TaskTimes>,
    pub(super) threads: bool,
    pub(super) filter: HogsFilter,
    pub(super) ncpu: usize,
    pub(super) hz: u64,
}

impl ViewState for HogsView {
    fn sample(&mut self, secs: f64) -> Result<Emitted> {
        let cur = self.reader.read(self.threads);
        let rows = hogs::delta(&self.prev, &cur, secs, self.ncpu, self.hz, self.filter);
        self.prev = cur;
        let shown = text::hogs(&rows, self.threads);
        Ok(Emitted::shown(shown, json!({ "tasks": rows })))
    }
}
