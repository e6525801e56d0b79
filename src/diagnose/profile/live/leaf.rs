//! The caller of a leaf that sets up no frame (the C library's memcpy,
//! strcmp, syscall wrappers): the kernel's frame-pointer walk reads the
//! return address of the frame below, so it skips the leaf's own caller
//! (the program's function of interest). That caller is still at hand in
//! the sample: in the link register on aarch64, at the stack pointer on
//! x86-64 (nothing pushed yet). Whether it is real is judged after
//! symbolisation (`callsite`): it must follow a call instruction and name a
//! function other than the leaf's and the next frame's.

use perf_event::data::Sample;
use perf_event::{Builder, SampleFlag};

use super::super::collected::FrameKey;

/// PERF_REG_ARM64_LR (x30) in sample_regs_user.
#[cfg(target_arch = "aarch64")]
const ARM64_LR: u64 = 1 << 30;

/// The sample fields that hold the leaf's return address, asked of `b`
/// (its other sample flags are `flags`).
#[cfg(target_arch = "aarch64")]
pub(super) fn ask(b: &mut Builder<'static>, flags: SampleFlag) {
    b.sample(flags | SampleFlag::REGS_USER)
        .sample_regs_user(ARM64_LR);
}

/// The word at the user stack pointer: the smallest copy the kernel takes
/// (one aligned u64).
#[cfg(target_arch = "x86_64")]
pub(super) fn ask(b: &mut Builder<'static>, flags: SampleFlag) {
    b.sample(flags | SampleFlag::STACK_USER)
        .sample_stack_user(8);
}

#[cfg(not(any(target_arch = "aarch64", target_arch = "x86_64")))]
pub(super) fn ask(b: &mut Builder<'static>, flags: SampleFlag) {
    b.sample(flags);
}

/// The leaf's return address if the sample carries it (a user-mode
/// register set or stack copy: none for kernel threads).
#[cfg(target_arch = "aarch64")]
pub(super) fn return_address(s: &Sample) -> Option<u64> {
    let r = s.regs_user()?;
    (r.mask == ARM64_LR).then(|| r.regs.first().copied())?
}

#[cfg(target_arch = "x86_64")]
pub(super) fn return_address(s: &Sample) -> Option<u64> {
    let st = s.stack_user()?;
    Some(u64::from_ne_bytes(st.get(..8)?.try_into().ok()?))
}

#[cfg(not(any(target_arch = "aarch64", target_arch = "x86_64")))]
pub(super) fn return_address(_: &Sample) -> Option<u64> {
    None
}

/// Put `caller` right after the first user frame (the leaf), unless the
/// chain already has that very address there (the leaf has a frame).
pub(super) fn splice(frames: &mut Vec<FrameKey>, caller: FrameKey) {
    let FrameKey::Caller(file, off) = caller else {
        return;
    };
    let Some(leaf) = frames
        .iter()
        .position(|f| !matches!(f, FrameKey::Kernel(_)))
    else {
        return;
    };
    if frames.get(leaf + 1) == Some(&FrameKey::User(file, off)) {
        return;
    }
    frames.insert(leaf + 1, caller);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_caller_goes_after_the_user_leaf_and_never_twice() {
        let mut f = vec![
            FrameKey::Kernel(1),
            FrameKey::User(0, 0x10),
            FrameKey::User(0, 0x90),
        ];
        splice(&mut f, FrameKey::Caller(0, 0x50));
        assert_eq!(f[2], FrameKey::Caller(0, 0x50));
        assert_eq!(f.len(), 4);
        // The chain already names it: the leaf had a frame.
        let mut g = vec![FrameKey::User(0, 0x10), FrameKey::User(0, 0x50)];
        splice(&mut g, FrameKey::Caller(0, 0x50));
        assert_eq!(g.len(), 2);
        // No user frame at all (a kernel thread): nothing to attach to.
        let mut k = vec![FrameKey::Kernel(1)];
        splice(&mut k, FrameKey::Caller(0, 0x50));
        assert_eq!(k, vec![FrameKey::Kernel(1)]);
    }
}
