//! The compute kernels of `cpu.compute` and `cpu.sustained`: work that
//! stands for what a board's CPU does all day and needs nothing installed.
//!
//! - `lz`: compression — LZ77 match finding over a generated text corpus
//!   (hash table of the last position per 4-byte prefix, as LZ4/Snappy/zlib's
//!   fastest level) followed by Huffman coding of the token stream and bit
//!   packing (as DEFLATE's second half);
//! - `sha256`, `aes128`, `crc32c`: hashing, encryption and checksums, on the
//!   CPU's own instructions when it has them (SHA-NI / Armv8 SHA2, AES-NI /
//!   Armv8 AES, SSE4.2 / Armv8 CRC32), in portable Rust otherwise, and the
//!   point says which;
//! - `float`: a 64×64 double-precision matrix multiply (cache-resident,
//!   i-k-j order the compiler vectorises).
//!
//! One file per kernel (`lz`, `sha256`, `aes`, `crc32c`); the
//! choice of hardware or portable path and the `float` kernel are here.

mod aes;
mod crc32c;
mod lz;
mod sha256;
#[cfg(test)]
mod tests;

pub(crate) use aes::Aes;
pub(crate) use crc32c::crc32c;
pub(crate) use lz::{corpus, Lz};
pub(crate) use sha256::sha256;

/// Which implementation a kernel runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Path {
    Hardware,
    Software,
}

/// The CPU instructions `algo` would use here, if the CPU has them.
pub(crate) fn hardware_name(algo: &str) -> Option<&'static str> {
    #[cfg(target_arch = "x86_64")]
    {
        let ok = match algo {
            "sha256" => is_x86_feature_detected!("sha") && is_x86_feature_detected!("sse4.1"),
            "aes128" => is_x86_feature_detected!("aes"),
            "crc32c" => is_x86_feature_detected!("sse4.2"),
            _ => false,
        };
        if ok {
            return Some(match algo {
                "sha256" => "SHA-NI",
                "aes128" => "AES-NI",
                _ => "SSE4.2 crc32",
            });
        }
    }
    #[cfg(target_arch = "aarch64")]
    {
        let ok = match algo {
            "sha256" => std::arch::is_aarch64_feature_detected!("sha2"),
            "aes128" => std::arch::is_aarch64_feature_detected!("aes"),
            "crc32c" => std::arch::is_aarch64_feature_detected!("crc"),
            _ => false,
        };
        if ok {
            return Some(match algo {
                "sha256" => "Armv8 SHA2",
                "aes128" => "Armv8 AES",
                _ => "Armv8 CRC32",
            });
        }
    }
    let _ = algo;
    None
}

// ---------------------------------------------------------------- float

/// Side of the matrices of the `float` kernel.
pub(crate) const MATRIX: usize = 64;

/// C = A × B for MATRIX×MATRIX row-major matrices (i-k-j order: the inner
/// loop is a vectorisable axpy). 2·MATRIX³ floating-point operations.
pub(crate) fn matmul(a: &[f64], b: &[f64], c: &mut [f64]) {
    let n = MATRIX;
    c.fill(0.0);
    for i in 0..n {
        for k in 0..n {
            let aik = a[i * n + k];
            let (row, brow) = (&mut c[i * n..(i + 1) * n], &b[k * n..(k + 1) * n]);
            for (x, y) in row.iter_mut().zip(brow) {
                *x += aik * y;
            }
        }
    }
}
