//! io.burst's parameters, read by name once, here; the rest of the
//! experiment is handed this struct.

use super::Mode;
use crate::engine::Point;
use crate::Result;

pub(super) struct Params {
    pub(crate) frame: u64,
    pub(crate) fps: f64,
    pub(crate) duration: f64,
    pub(crate) queue: u64,
    pub(crate) mode: Mode,
}

impl Params {
    pub(super) fn parse(p: &Point) -> Result<Params> {
        Ok(Params {
            frame: p.u64("frame")?,
            fps: p.f64("fps")?,
            duration: p.f64("duration")?,
            queue: p.u64("queue")?,
            mode: match p.text("mode")? {
                "io-thread" => Mode::IoThread,
                "io-uring" => Mode::IoUring,
                _ => Mode::DirectWrite,
            },
        })
    }
}
