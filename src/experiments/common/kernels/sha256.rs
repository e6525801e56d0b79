//! The `sha256` kernel: FIPS 180-4 SHA-256, on SHA-NI (x86_64) or the
//! Armv8 SHA2 instructions when the CPU has them, in portable Rust
//! otherwise.

use super::Path;

const K: [u32; 64] = [
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
];
const H0: [u32; 8] = [
    0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
];

/// SHA-256 of `data` through `path` (the caller checked the hardware).
pub(crate) fn sha256(data: &[u8], path: Path) -> [u8; 32] {
    let mut st = H0;
    let full = data.len() / 64 * 64;
    compress(&mut st, &data[..full], path);
    let mut tail = data[full..].to_vec();
    tail.push(0x80);
    while tail.len() % 64 != 56 {
        tail.push(0);
    }
    tail.extend_from_slice(&((data.len() as u64) * 8).to_be_bytes());
    compress(&mut st, &tail, path);
    let mut out = [0u8; 32];
    for (o, w) in out.chunks_mut(4).zip(st) {
        o.copy_from_slice(&w.to_be_bytes());
    }
    out
}

fn compress(st: &mut [u32; 8], blocks: &[u8], path: Path) {
    if path == Path::Hardware {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: Hardware is chosen only when hardware_name found SHA-NI and SSE4.1.
        unsafe {
            return sha_ni(st, blocks);
        }
        #[cfg(target_arch = "aarch64")]
        // SAFETY: Hardware is chosen only when hardware_name found the SHA2 extension.
        unsafe {
            return sha_arm(st, blocks);
        }
    }
    for b in blocks.chunks_exact(64) {
        let mut w = [0u32; 64];
        for (i, c) in b.chunks_exact(4).enumerate() {
            w[i] = u32::from_be_bytes([c[0], c[1], c[2], c[3]]);
        }
        for i in 16..64 {
            let s0 = w[i - 15].rotate_right(7) ^ w[i - 15].rotate_right(18) ^ (w[i - 15] >> 3);
            let s1 = w[i - 2].rotate_right(17) ^ w[i - 2].rotate_right(19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16]
                .wrapping_add(s0)
                .wrapping_add(w[i - 7])
                .wrapping_add(s1);
        }
        let [mut a, mut b2, mut c, mut d, mut e, mut f, mut g, mut h] = *st;
        for i in 0..64 {
            let t1 = h
                .wrapping_add(e.rotate_right(6) ^ e.rotate_right(11) ^ e.rotate_right(25))
                .wrapping_add((e & f) ^ (!e & g))
                .wrapping_add(K[i])
                .wrapping_add(w[i]);
            let t2 = (a.rotate_right(2) ^ a.rotate_right(13) ^ a.rotate_right(22))
                .wrapping_add((a & b2) ^ (a & c) ^ (b2 & c));
            h = g;
            g = f;
            f = e;
            e = d.wrapping_add(t1);
            d = c;
            c = b2;
            b2 = a;
            a = t1.wrapping_add(t2);
        }
        for (s, v) in st.iter_mut().zip([a, b2, c, d, e, f, g, h]) {
            *s = s.wrapping_add(v);
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sha,sse2,ssse3,sse4.1")]
unsafe fn sha_ni(st: &mut [u32; 8], blocks: &[u8]) {
    use std::arch::x86_64::*;
    let mask = _mm_set_epi64x(0x0c0d_0e0f_0809_0a0b, 0x0405_0607_0001_0203);
    let p = st.as_ptr() as *const __m128i;
    let dcba = _mm_loadu_si128(p);
    let efgh = _mm_loadu_si128(p.add(1));
    let cdab = _mm_shuffle_epi32(dcba, 0xb1);
    let efgh = _mm_shuffle_epi32(efgh, 0x1b);
    let mut abef = _mm_alignr_epi8(cdab, efgh, 8);
    let mut cdgh = _mm_blend_epi16(efgh, cdab, 0xf0);
    for b in blocks.chunks_exact(64) {
        let (abef0, cdgh0) = (abef, cdgh);
        let d = b.as_ptr() as *const __m128i;
        let mut w = [
            _mm_shuffle_epi8(_mm_loadu_si128(d), mask),
            _mm_shuffle_epi8(_mm_loadu_si128(d.add(1)), mask),
            _mm_shuffle_epi8(_mm_loadu_si128(d.add(2)), mask),
            _mm_shuffle_epi8(_mm_loadu_si128(d.add(3)), mask),
        ];
        for i in 0..16 {
            if i >= 4 {
                let t1 = _mm_sha256msg1_epu32(w[i % 4], w[(i + 1) % 4]);
                let t2 = _mm_alignr_epi8(w[(i + 3) % 4], w[(i + 2) % 4], 4);
                w[i % 4] = _mm_sha256msg2_epu32(_mm_add_epi32(t1, t2), w[(i + 3) % 4]);
            }
            let k = _mm_loadu_si128(K.as_ptr().add(4 * i) as *const __m128i);
            let t = _mm_add_epi32(w[i % 4], k);
            cdgh = _mm_sha256rnds2_epu32(cdgh, abef, t);
            abef = _mm_sha256rnds2_epu32(abef, cdgh, _mm_shuffle_epi32(t, 0x0e));
        }
        abef = _mm_add_epi32(abef, abef0);
        cdgh = _mm_add_epi32(cdgh, cdgh0);
    }
    let feba = _mm_shuffle_epi32(abef, 0x1b);
    let dchg = _mm_shuffle_epi32(cdgh, 0xb1);
    let q = st.as_mut_ptr() as *mut __m128i;
    _mm_storeu_si128(q, _mm_blend_epi16(feba, dchg, 0xf0));
    _mm_storeu_si128(q.add(1), _mm_alignr_epi8(dchg, feba, 8));
}

#[cfg(target_arch = "aarch64")]
#[target_feature(enable = "sha2")]
unsafe fn sha_arm(st: &mut [u32; 8], blocks: &[u8]) {
    use std::arch::aarch64::*;
    let mut abcd = vld1q_u32(st.as_ptr());
    let mut efgh = vld1q_u32(st.as_ptr().add(4));
    for b in blocks.chunks_exact(64) {
        let (abcd0, efgh0) = (abcd, efgh);
        let ld = |o: usize| vreinterpretq_u32_u8(vrev32q_u8(vld1q_u8(b.as_ptr().add(o))));
        let mut w = [ld(0), ld(16), ld(32), ld(48)];
        for i in 0..16 {
            let t = vaddq_u32(w[i % 4], vld1q_u32(K.as_ptr().add(4 * i)));
            let prev = abcd;
            abcd = vsha256hq_u32(prev, efgh, t);
            efgh = vsha256h2q_u32(efgh, prev, t);
            if i < 12 {
                w[i % 4] = vsha256su1q_u32(
                    vsha256su0q_u32(w[i % 4], w[(i + 1) % 4]),
                    w[(i + 2) % 4],
                    w[(i + 3) % 4],
                );
            }
        }
        abcd = vaddq_u32(abcd, abcd0);
        efgh = vaddq_u32(efgh, efgh0);
    }
    vst1q_u32(st.as_mut_ptr(), abcd);
    vst1q_u32(st.as_mut_ptr().add(4), efgh);
}
