//! Arming the perf tracer only around late wake-ups.
//!
//! An enabled context-switch event makes the kernel write a record on every
//! switch, the measuring thread's own wake-up included: always on, that
//! cost is in every sample. So the event stays open but disabled; a late
//! wake-up enables it (after the sample is taken) for the next `hold`
//! wake-ups, after which it stays disabled for `COOL` times as many,
//! whatever comes: at most one wake-up in `COOL + 1` is traced, however
//! often spikes come, so the tracer's share of the mean is bounded. A
//! culprit that recurs within the hold is named; the spike that armed the
//! tracer, and those in the cool-down, are reported as not traced.

use std::os::fd::OwnedFd;

use super::perf::{ioctl_fd, IOC_DISABLE, IOC_ENABLE};

/// How long the tracer stays armed after a late wake-up: 100 ms worth of
/// wake-ups, so a culprit that recurs at 10 Hz or more is caught.
const HOLD_NS: u64 = 100_000_000;
/// At least this many wake-ups, for long periods.
const HOLD_MIN: u32 = 16;
/// Disarmed wake-ups after each armed stretch, per armed one.
pub(crate) const COOL: u32 = 9;

/// The arm/disarm rule of one measuring thread, without the descriptor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct ArmRule {
    hold: u32,
    /// Armed wake-ups left; 0 = disarmed.
    armed_left: u32,
    /// Wake-ups left before a late one may arm again.
    cool_left: u32,
}

/// What the rule asks of the tracer after a wake-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ArmStep {
    Enable,
    Disable,
    Keep,
}

impl ArmRule {
    /// The rule for a wake-up `period_ns`.
    pub(super) fn for_period(period_ns: u64) -> ArmRule {
        let hold = (HOLD_NS / period_ns.max(1)).clamp(HOLD_MIN as u64, (u32::MAX / 16) as u64);
        ArmRule {
            hold: hold as u32,
            armed_left: 0,
            cool_left: 0,
        }
    }

    /// Whether the tracer is armed now (before the next wake-up).
    pub(super) fn armed(&self) -> bool {
        self.armed_left > 0
    }

    /// After one wake-up, late or not.
    #[inline]
    pub(super) fn step(&mut self, late: bool) -> ArmStep {
        if self.armed_left > 0 {
            self.armed_left -= 1;
            if self.armed_left == 0 {
                self.cool_left = self.hold * COOL;
                return ArmStep::Disable;
            }
            return ArmStep::Keep;
        }
        if self.cool_left > 0 {
            self.cool_left -= 1;
            return ArmStep::Keep;
        }
        if late {
            self.armed_left = self.hold;
            return ArmStep::Enable;
        }
        ArmStep::Keep
    }
}

/// A measuring thread's handle on its CPU's perf event (a duplicate of the
/// tracer's descriptor) with the rule that arms it.
pub(crate) struct Trigger {
    fd: OwnedFd,
    rule: ArmRule,
}

impl Trigger {
    pub(super) fn new(fd: OwnedFd, period_ns: u64) -> Trigger {
        Trigger {
            fd,
            rule: ArmRule::for_period(period_ns),
        }
    }

    /// Whether the switches up to the next wake-up are being recorded.
    #[inline]
    pub(crate) fn armed(&self) -> bool {
        self.rule.armed()
    }

    /// After a wake-up (its latency already taken): arm or disarm.
    #[inline]
    pub(crate) fn after_wake(&mut self, late: bool) {
        match self.rule.step(late) {
            ArmStep::Enable => ioctl_fd(&self.fd, IOC_ENABLE),
            ArmStep::Disable => ioctl_fd(&self.fd, IOC_DISABLE),
            ArmStep::Keep => {}
        }
    }
}

impl Drop for Trigger {
    fn drop(&mut self) {
        // Never left armed past the thread's last wake-up.
        if self.rule.armed() {
            ioctl_fd(&self.fd, IOC_DISABLE);
        }
    }
}
