//! The `aes128` kernel: AES-128 in counter mode, on AES-NI (x86_64) or the
//! Armv8 AES instructions when the CPU has them, in portable Rust
//! otherwise.

use super::Path;

/// The AES S-box, computed (multiplicative inverse in GF(2^8), then the
/// affine map) rather than typed in.
fn sbox() -> [u8; 256] {
    let mut s = [0u8; 256];
    let (mut p, mut q) = (1u8, 1u8);
    loop {
        // p * 3, q / 3 in GF(2^8): q stays the inverse of p.
        p = p ^ (p << 1) ^ if p & 0x80 != 0 { 0x1b } else { 0 };
        q ^= q << 1;
        q ^= q << 2;
        q ^= q << 4;
        if q & 0x80 != 0 {
            q ^= 0x09;
        }
        let x = q ^ q.rotate_left(1) ^ q.rotate_left(2) ^ q.rotate_left(3) ^ q.rotate_left(4);
        s[p as usize] = x ^ 0x63;
        if p == 1 {
            break;
        }
    }
    s[0] = 0x63;
    s
}

/// AES-128 with its expanded key.
pub(crate) struct Aes {
    rk: [[u8; 16]; 11],
    sbox: [u8; 256],
    path: Path,
}

impl Aes {
    pub(crate) fn new(key: [u8; 16], path: Path) -> Aes {
        let sbox = sbox();
        let mut rk = [[0u8; 16]; 11];
        rk[0] = key;
        let mut rcon = 1u8;
        for r in 1..11 {
            let p = rk[r - 1];
            let mut t = [p[13], p[14], p[15], p[12]];
            for b in &mut t {
                *b = sbox[*b as usize];
            }
            t[0] ^= rcon;
            rcon = (rcon << 1) ^ if rcon & 0x80 != 0 { 0x1b } else { 0 };
            for i in 0..16 {
                let prev = if i < 4 { t[i] } else { rk[r][i - 4] };
                rk[r][i] = p[i] ^ prev;
            }
        }
        Aes { rk, sbox, path }
    }

    /// Encrypt one block.
    pub(crate) fn encrypt(&self, block: &mut [u8; 16]) {
        if self.path == Path::Hardware {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: Hardware only when hardware_name found AES-NI.
            unsafe {
                return aes_ni(&self.rk, block);
            }
            #[cfg(target_arch = "aarch64")]
            // SAFETY: Hardware only when hardware_name found the AES extension.
            unsafe {
                return aes_arm(&self.rk, block);
            }
        }
        let s = &self.sbox;
        let xt = |b: u8| (b << 1) ^ if b & 0x80 != 0 { 0x1b } else { 0 };
        for (a, k) in block.iter_mut().zip(&self.rk[0]) {
            *a ^= k;
        }
        for r in 1..11 {
            let mut t = [0u8; 16];
            // SubBytes + ShiftRows (column-major state: byte i = row i%4, column i/4).
            for c in 0..4 {
                for row in 0..4 {
                    t[4 * c + row] = s[block[4 * ((c + row) % 4) + row] as usize];
                }
            }
            if r < 10 {
                for c in 0..4 {
                    let col = [t[4 * c], t[4 * c + 1], t[4 * c + 2], t[4 * c + 3]];
                    let all = col[0] ^ col[1] ^ col[2] ^ col[3];
                    for row in 0..4 {
                        t[4 * c + row] = col[row] ^ all ^ xt(col[row] ^ col[(row + 1) % 4]);
                    }
                }
            }
            for i in 0..16 {
                block[i] = t[i] ^ self.rk[r][i];
            }
        }
    }

    /// CTR-mode encryption of `data` in place (counter blocks from `nonce`).
    /// The instructions take four blocks at a time, as every real CTR
    /// implementation does (one block alone waits on each round's latency).
    pub(crate) fn ctr(&self, nonce: u64, data: &mut [u8]) {
        let counter = |i: usize| {
            let mut b = [0u8; 16];
            b[..8].copy_from_slice(&nonce.to_le_bytes());
            b[8..].copy_from_slice(&(i as u64).to_be_bytes());
            b
        };
        let mut done = 0;
        if self.path == Path::Hardware {
            for (q, chunk) in data.chunks_exact_mut(64).enumerate() {
                let mut ks: [[u8; 16]; 4] = std::array::from_fn(|k| counter(4 * q + k));
                self.encrypt4(&mut ks);
                for (d, k) in chunk.iter_mut().zip(ks.as_flattened()) {
                    *d ^= k;
                }
                done += 64;
            }
        }
        for (i, chunk) in data[done..].chunks_mut(16).enumerate() {
            let mut ks = counter(done / 16 + i);
            self.encrypt(&mut ks);
            for (d, k) in chunk.iter_mut().zip(ks) {
                *d ^= k;
            }
        }
    }
}

impl Aes {
    /// Four blocks through the instructions at once (Hardware path only).
    fn encrypt4(&self, b: &mut [[u8; 16]; 4]) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: called only on the Hardware path, chosen when AES-NI was detected.
        unsafe {
            return aes_ni4(&self.rk, b);
        }
        #[allow(unreachable_code)]
        for x in b.iter_mut() {
            self.encrypt(x);
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "aes,sse2")]
unsafe fn aes_ni4(rk: &[[u8; 16]; 11], b: &mut [[u8; 16]; 4]) {
    use std::arch::x86_64::*;
    let k = |i: usize| _mm_loadu_si128(rk[i].as_ptr() as *const __m128i);
    let mut s: [__m128i; 4] = std::array::from_fn(|j| {
        _mm_xor_si128(_mm_loadu_si128(b[j].as_ptr() as *const __m128i), k(0))
    });
    for i in 1..10 {
        let ki = k(i);
        for x in &mut s {
            *x = _mm_aesenc_si128(*x, ki);
        }
    }
    let kl = k(10);
    for (x, out) in s.iter().zip(b.iter_mut()) {
        _mm_storeu_si128(
            out.as_mut_ptr() as *mut __m128i,
            _mm_aesenclast_si128(*x, kl),
        );
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "aes,sse2")]
unsafe fn aes_ni(rk: &[[u8; 16]; 11], block: &mut [u8; 16]) {
    use std::arch::x86_64::*;
    let k = |i: usize| _mm_loadu_si128(rk[i].as_ptr() as *const __m128i);
    let mut s = _mm_xor_si128(_mm_loadu_si128(block.as_ptr() as *const __m128i), k(0));
    for i in 1..10 {
        s = _mm_aesenc_si128(s, k(i));
    }
    s = _mm_aesenclast_si128(s, k(10));
    _mm_storeu_si128(block.as_mut_ptr() as *mut __m128i, s);
}

#[cfg(target_arch = "aarch64")]
#[target_feature(enable = "aes")]
unsafe fn aes_arm(rk: &[[u8; 16]; 11], block: &mut [u8; 16]) {
    use std::arch::aarch64::*;
    let mut s = vld1q_u8(block.as_ptr());
    for k in rk.iter().take(9) {
        s = vaesmcq_u8(vaeseq_u8(s, vld1q_u8(k.as_ptr())));
    }
    s = vaeseq_u8(s, vld1q_u8(rk[9].as_ptr()));
    s = veorq_u8(s, vld1q_u8(rk[10].as_ptr()));
    vst1q_u8(block.as_mut_ptr(), s);
}
