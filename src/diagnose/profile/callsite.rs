//! Is a candidate return address real? A word taken for the leaf's caller
//! (`live::leaf`) is a return address only if the instruction before it
//! is a call: read from the binary's file at that offset.

use std::collections::HashSet;
use std::fs::File;
use std::os::unix::fs::FileExt;

/// x86-64: `call rel32` (E8, 5 bytes) or `call r/m` (FF /2, 2 to 7 bytes
/// with ModRM, SIB and displacement) ends right at the return address.
pub(super) fn x86_call_before(code: &[u8]) -> bool {
    let n = code.len();
    if n >= 5 && code[n - 5] == 0xE8 {
        return true;
    }
    (2..=7.min(n)).any(|k| code[n - k] == 0xFF && (code[n - k + 1] >> 3) & 7 == 2)
}

/// aarch64: the instruction before is BL (imm26) or BLR (register).
pub(super) fn arm64_call_before(code: &[u8]) -> bool {
    let Some(w) = code.len().checked_sub(4).and_then(|i| code.get(i..)) else {
        return false;
    };
    let ins = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
    ins & 0xFC00_0000 == 0x9400_0000 || ins & 0xFFFF_FC1F == 0xD63F_0000
}

/// Of `offs` (file offsets one byte before a candidate return address, as
/// callers' frames are keyed), those that follow a call instruction in
/// `path`. An unreadable file confirms none.
pub(super) fn follow_calls(path: &str, offs: &[u64]) -> HashSet<u64> {
    let mut out = HashSet::new();
    let Ok(f) = File::open(path) else {
        return out;
    };
    for &off in offs {
        let ret = off + 1;
        let mut code = [0u8; 8];
        let start = ret.saturating_sub(code.len() as u64);
        let len = (ret - start) as usize;
        if f.read_exact_at(&mut code[..len], start).is_err() {
            continue;
        }
        let code = &code[..len];
        let call = if cfg!(target_arch = "aarch64") {
            arm64_call_before(code)
        } else {
            x86_call_before(code)
        };
        if call {
            out.insert(off);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn x86_calls_are_recognised_by_their_last_bytes() {
        // call rel32
        assert!(x86_call_before(&[0x90, 0x90, 0x90, 0xE8, 1, 2, 3, 4]));
        // call *%rax (FF D0), call *0x10(%rbx) (FF 53 10), call *disp32(%rip) (FF 15 ...)
        assert!(x86_call_before(&[0x90, 0x90, 0xFF, 0xD0]));
        assert!(x86_call_before(&[0x90, 0xFF, 0x53, 0x10]));
        assert!(x86_call_before(&[0x90, 0x90, 0xFF, 0x15, 1, 2, 3, 4]));
        // mov %rsp,%rbp; ret; a jmp *%rax (FF E0: /4) is no call.
        assert!(!x86_call_before(&[0x48, 0x89, 0xE5, 0xC3]));
        assert!(!x86_call_before(&[0x90, 0x90, 0xFF, 0xE0]));
    }

    #[test]
    fn arm64_calls_are_bl_or_blr() {
        // bl 0x...: 0x94000010; blr x3: 0xd63f0060; b: 0x14000010; ret: 0xd65f03c0
        assert!(arm64_call_before(&0x9400_0010u32.to_le_bytes()));
        assert!(arm64_call_before(&[0, 0, 0, 0, 0x60, 0x00, 0x3F, 0xD6]));
        assert!(!arm64_call_before(&0x1400_0010u32.to_le_bytes()));
        assert!(!arm64_call_before(&0xD65F_03C0u32.to_le_bytes()));
        assert!(!arm64_call_before(&[0x94]));
    }

    #[test]
    fn offsets_are_checked_in_the_file_and_a_missing_file_confirms_none() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("code");
        // A call at 2..7 whose return address is 7 (key 6); a nop run after.
        std::fs::write(&p, [0x90, 0x90, 0xE8, 0, 0, 0, 0, 0x90, 0x90, 0x90]).unwrap();
        let p = p.to_str().unwrap();
        let got = follow_calls(p, &[6, 8]);
        if cfg!(target_arch = "aarch64") {
            assert!(got.is_empty());
        } else {
            assert_eq!(got, HashSet::from([6]));
        }
        assert!(follow_calls("/nonexistent/tunelab-code", &[6]).is_empty());
    }
}
