//! io.burst's parameters, read by name once, here; the rest of the
//! experiment is handed this struct.

use super::Mode;
use crate::engine::Point;
use crate::Result;

pub(super) struct Params {
    pub frame: u64,
    pub fps: f64,
    pub duration: f64,
    pub queue: u64,
    pub mode: Mode,
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
