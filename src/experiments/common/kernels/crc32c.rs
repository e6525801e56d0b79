//! The `crc32c` kernel: CRC-32C (Castagnoli), on SSE4.2 (x86_64) or the
//! Armv8 CRC32 instructions when the CPU has them, a table in portable
//! Rust otherwise.

use super::Path;

fn crc_table() -> [u32; 256] {
    let mut t = [0u32; 256];
    for (i, e) in t.iter_mut().enumerate() {
        let mut c = i as u32;
        for _ in 0..8 {
            c = if c & 1 != 0 {
                (c >> 1) ^ 0x82f6_3b78
            } else {
                c >> 1
            };
        }
        *e = c;
    }
    t
}

/// CRC-32C (Castagnoli, iSCSI/ext4/btrfs) of `data`.
pub(crate) fn crc32c(data: &[u8], path: Path) -> u32 {
    if path == Path::Hardware {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: Hardware only when hardware_name found SSE4.2.
        unsafe {
            return crc_x86(data);
        }
        #[cfg(target_arch = "aarch64")]
        // SAFETY: Hardware only when hardware_name found the CRC32 extension.
        unsafe {
            return crc_arm(data);
        }
    }
    thread_local!(static T: [u32; 256] = crc_table());
    T.with(|t| {
        !data.iter().fold(!0u32, |c, &b| {
            (c >> 8) ^ t[((c ^ b as u32) & 0xff) as usize]
        })
    })
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
unsafe fn crc_x86(data: &[u8]) -> u32 {
    use std::arch::x86_64::*;
    let mut c = !0u64;
    let mut it = data.chunks_exact(8);
    for w in &mut it {
        c = _mm_crc32_u64(c, u64::from_le_bytes(w.try_into().unwrap_or_default()));
    }
    let mut c = c as u32;
    for &b in it.remainder() {
        c = _mm_crc32_u8(c, b);
    }
    !c
}

#[cfg(target_arch = "aarch64")]
#[target_feature(enable = "crc")]
unsafe fn crc_arm(data: &[u8]) -> u32 {
    use std::arch::aarch64::*;
    let mut c = !0u32;
    let mut it = data.chunks_exact(8);
    for w in &mut it {
        c = __crc32cd(c, u64::from_le_bytes(w.try_into().unwrap_or_default()));
    }
    for &b in it.remainder() {
        c = __crc32cb(c, b);
    }
    !c
}
