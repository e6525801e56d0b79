//! `tunelab monitor psi` and `power`: counters read whole every interval,
//! their change a row of rates per resource or CPU.

use serde::Serialize;

use super::*;

/// How one interval's rows are shown (a view may close over the terminal).
type Show<R> = Box<dyn Fn(&[R]) -> text::Shown>;

pub(super) struct DeltaView<C, R> {
    prev: Vec<C>,
    /// What is read, for the error when it cannot be.
    what: &'static str,
    read: fn() -> std::io::Result<Vec<C>>,
    delta: fn(&[C], &[C], f64) -> Vec<R>,
    show: Show<R>,
    /// The JSON object's key for the rows.
    key: &'static str,
}

impl<C, R> DeltaView<C, R> {
    /// Start watching: the first counters are read now.
    pub(super) fn start(
        what: &'static str,
        read: fn() -> std::io::Result<Vec<C>>,
        delta: fn(&[C], &[C], f64) -> Vec<R>,
        show: impl Fn(&[R]) -> text::Shown + 'static,
        key: &'static str,
    ) -> Result<Self> {
        Ok(DeltaView {
            prev: read().map_err(|e| env_err(what, e))?,
            what,
            read,
            delta,
            show: Box::new(show),
            key,
        })
    }
}

impl<C, R: Serialize> ViewState for DeltaView<C, R> {
    fn sample(&mut self, secs: f64) -> Result<Emitted> {
        let cur = (self.read)().map_err(|e| env_err(self.what, e))?;
        let rows = (self.delta)(&self.prev, &cur, secs);
        self.prev = cur;
        Ok(Emitted::shown(
            (self.show)(&rows),
            json!({ self.key: rows }),
        ))
    }
}
