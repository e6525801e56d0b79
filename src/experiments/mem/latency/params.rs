//! mem.latency's parameters, read by name once, here; the rest of the
//! experiment is handed this struct.

use crate::engine::Point;
use crate::Result;

pub(super) struct Params {
    pub(crate) min: u64,
    pub(crate) max: u64,
    pub(crate) stride: u64,
    pub(crate) per_doubling: u32,
    pub(crate) curve: bool,
    pub(crate) pin: bool,
    /// pages=thp: the buffer in transparent huge pages.
    pub(crate) thp: bool,
    /// chase=pages: one load per page.
    pub(crate) pages: bool,
}

impl Params {
    pub(super) fn parse(p: &Point) -> Result<Params> {
        Ok(Params {
            min: p.u64("min")?,
            max: p.u64("max")?,
            stride: p.u64("stride")?,
            per_doubling: p.u64("per-doubling")? as u32,
            curve: p.bool("curve")?,
            pin: p.bool("pin")?,
            thp: p.text("pages")? == "thp",
            pages: p.text("chase")? == "pages",
        })
    }
}
