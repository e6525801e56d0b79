//! Whether an executable needs a dynamic loader: `remote` copies tunelab to
//! boards that often have no glibc, where a dynamically linked build fails
//! with a bare "not found". Reads only the ELF header and program headers.

/// The program interpreter (e.g. `/lib64/ld-linux-x86-64.so.2`) an ELF
/// executable names, or None for a static executable (static-pie
/// included) or bytes that are not ELF.
pub fn interpreter(b: &[u8]) -> Option<String> {
    if b.len() < 0x34 || &b[..4] != b"\x7fELF" {
        return None;
    }
    let wide = b[4] == 2;
    let le = b[5] != 2;
    // An unsigned field of `n` bytes at `o`, in the file's byte order.
    let uint_at = |o: usize, n: usize| -> Option<u64> {
        let s = b.get(o..o.checked_add(n)?)?;
        let fold = |v: u64, x: &u8| v << 8 | *x as u64;
        Some(if le {
            s.iter().rev().fold(0, fold)
        } else {
            s.iter().fold(0, fold)
        })
    };
    let u16_at = |o: usize| uint_at(o, 2);
    let u32_at = |o: usize| uint_at(o, 4);
    let u64_at = |o: usize| uint_at(o, 8);
    let (phoff, phentsize, phnum) = if wide {
        (u64_at(0x20)?, u16_at(0x36)?, u16_at(0x38)?)
    } else {
        (u32_at(0x1c)?, u16_at(0x2a)?, u16_at(0x2c)?)
    };
    const PT_INTERP: u64 = 3;
    for i in 0..phnum.min(512) {
        let ph = (phoff + i * phentsize) as usize;
        if u32_at(ph)? != PT_INTERP {
            continue;
        }
        let (off, size) = if wide {
            (u64_at(ph + 8)?, u64_at(ph + 32)?)
        } else {
            (u32_at(ph + 4)?, u32_at(ph + 16)?)
        };
        let raw = b.get(off as usize..(off + size) as usize)?;
        let name = raw.split(|c| *c == 0).next().unwrap_or(raw);
        return Some(String::from_utf8_lossy(name).into_owned());
    }
    None
}

/// The refusal `remote` gives for a dynamically linked binary.
pub(crate) fn refusal(path: &std::path::Path, interp: &str) -> String {
    format!(
        "{} is dynamically linked (it needs {interp} and that libc on the host); boards \
         without them cannot run it. Build the static binaries with scripts/build-static.sh \
         and pass --bin target/static, or --allow-dynamic when the hosts have the same libc",
        path.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_binary_and_hand_made_headers() {
        // The test binary of a glibc build names its loader; a musl static
        // build names none. Either way the answer matches the file's truth.
        let me = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        let interp = interpreter(&me);
        if cfg!(target_env = "gnu") {
            assert!(
                interp.unwrap().contains("ld-"),
                "glibc builds need a loader"
            );
        }
        assert_eq!(interpreter(b"#!/bin/sh\necho hi\n"), None);
        assert_eq!(interpreter(&[0x7f, b'E', b'L', b'F']), None);
        // A 64-bit little-endian header with one PT_INTERP program header.
        let mut b = vec![0u8; 0x200];
        b[..4].copy_from_slice(b"\x7fELF");
        b[4] = 2;
        b[5] = 1;
        b[0x20..0x28].copy_from_slice(&0x40u64.to_le_bytes());
        b[0x36..0x38].copy_from_slice(&56u16.to_le_bytes());
        b[0x38..0x3a].copy_from_slice(&1u16.to_le_bytes());
        b[0x40..0x44].copy_from_slice(&3u32.to_le_bytes());
        b[0x48..0x50].copy_from_slice(&0x100u64.to_le_bytes());
        b[0x60..0x68].copy_from_slice(&12u64.to_le_bytes());
        b[0x100..0x10c].copy_from_slice(b"/lib/ld.so\0\0");
        assert_eq!(interpreter(&b).as_deref(), Some("/lib/ld.so"));
        // The same with a PT_LOAD instead: static.
        b[0x40..0x44].copy_from_slice(&1u32.to_le_bytes());
        assert_eq!(interpreter(&b), None);
    }
}
