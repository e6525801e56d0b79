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

use std::collections::BinaryHeap;

/// A deterministic generated corpus: English-like words with a 1/rank
/// frequency, punctuation and line breaks (compresses about 3:1 like text).
pub fn corpus(len: usize, seed: u64) -> Vec<u8> {
    const WORDS: &[&str] = &[
        "the",
        "of",
        "and",
        "to",
        "in",
        "a",
        "is",
        "that",
        "for",
        "it",
        "as",
        "was",
        "with",
        "be",
        "by",
        "on",
        "not",
        "he",
        "this",
        "are",
        "or",
        "his",
        "from",
        "at",
        "which",
        "but",
        "have",
        "an",
        "had",
        "they",
        "you",
        "were",
        "their",
        "one",
        "all",
        "we",
        "can",
        "her",
        "has",
        "there",
        "been",
        "if",
        "more",
        "when",
        "will",
        "would",
        "who",
        "so",
        "no",
        "channel",
        "programme",
        "recording",
        "schedule",
        "evening",
        "news",
        "weather",
        "football",
        "film",
        "series",
        "episode",
        "documentary",
        "children",
        "music",
        "drama",
        "comedy",
        "live",
        "highlights",
        "interview",
        "report",
        "studio",
        "kernel",
        "buffer",
        "device",
        "memory",
    ];
    let mut x = seed | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    // Zipf-like: rank r drawn with weight 1/(r+1).
    let h: f64 = (1..=WORDS.len()).map(|r| 1.0 / r as f64).sum();
    let mut out = Vec::with_capacity(len + 16);
    let mut line = 0;
    while out.len() < len {
        let mut u = (next() >> 11) as f64 / (1u64 << 53) as f64 * h;
        let mut r = 0;
        while r + 1 < WORDS.len() && u > 1.0 / (r + 1) as f64 {
            u -= 1.0 / (r + 1) as f64;
            r += 1;
        }
        out.extend_from_slice(WORDS[r].as_bytes());
        line += WORDS[r].len() + 1;
        match next() % 23 {
            0 => out.extend_from_slice(b". "),
            1 => out.extend_from_slice(b", "),
            2 => out.extend_from_slice(format!(" {} ", next() % 1000).as_bytes()),
            _ => out.push(b' '),
        }
        if line > 70 {
            out.push(b'\n');
            line = 0;
        }
    }
    out.truncate(len);
    out
}

// ---------------------------------------------------------------- lz

const HASH_BITS: u32 = 14;
const MIN_MATCH: usize = 4;
const MAX_MATCH: usize = 258;
const WINDOW: usize = 32 * 1024;
/// Literals 0..=255, end 256, match length codes 257..=(257+LEN_CODES).
const LEN_CODES: usize = 32;
const SYMBOLS: usize = 257 + LEN_CODES;

/// One LZ77 token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Token {
    Literal(u8),
    Match { len: u16, dist: u16 },
}

/// Reusable buffers of the `lz` kernel (one per thread).
pub struct Lz {
    table: Vec<u32>,
    tokens: Vec<Token>,
    out: Vec<u8>,
}

impl Default for Lz {
    fn default() -> Self {
        Lz {
            table: vec![0; 1 << HASH_BITS],
            tokens: Vec::new(),
            out: Vec::new(),
        }
    }
}

fn hash4(b: &[u8]) -> usize {
    let v = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    (v.wrapping_mul(2654435761) >> (32 - HASH_BITS)) as usize
}

/// Length code and extra bits of a match length (4..=258): 8 lengths per
/// code beyond the first 8 exact ones, as DEFLATE buckets them.
fn len_code(len: usize) -> (usize, u32, u32) {
    let l = len - MIN_MATCH;
    if l < 8 {
        (l, 0, 0)
    } else {
        let bits = (usize::BITS - 1 - l.leading_zeros()) as usize; // >= 3
        let code = 8 + (bits - 3) * 4 + ((l >> (bits - 2)) & 3);
        let extra = bits as u32 - 2;
        (
            code.min(LEN_CODES - 1),
            extra,
            (l & ((1 << extra) - 1)) as u32,
        )
    }
}

impl Lz {
    /// Tokens of `input`: greedy matching against the last position with
    /// the same 4-byte hash, within a 32 KiB window.
    pub fn tokenize(&mut self, input: &[u8]) -> &[Token] {
        self.table.fill(0);
        self.tokens.clear();
        let n = input.len();
        let mut i = 0;
        while i < n {
            if i + MIN_MATCH <= n {
                let h = hash4(&input[i..]);
                let cand = self.table[h] as usize;
                self.table[h] = (i + 1) as u32;
                if cand > 0 && i - (cand - 1) <= WINDOW {
                    let c = cand - 1;
                    let max = (n - i).min(MAX_MATCH);
                    let mut l = 0;
                    while l < max && input[c + l] == input[i + l] {
                        l += 1;
                    }
                    if l >= MIN_MATCH {
                        self.tokens.push(Token::Match {
                            len: l as u16,
                            dist: (i - c) as u16,
                        });
                        // Insert a few positions inside the match (zlib's level 1 does too).
                        for j in (i + 1..i + l).step_by(4) {
                            if j + MIN_MATCH <= n {
                                self.table[hash4(&input[j..])] = (j + 1) as u32;
                            }
                        }
                        i += l;
                        continue;
                    }
                }
            }
            self.tokens.push(Token::Literal(input[i]));
            i += 1;
        }
        &self.tokens
    }

    /// Compress `input`: tokens, then Huffman code lengths for literals and
    /// length codes, then every token packed into a bit stream (distance as
    /// 15 raw bits). Returns the packed size in bytes.
    pub fn compress(&mut self, input: &[u8]) -> usize {
        self.tokenize(input);
        let mut freq = [0u32; SYMBOLS];
        for t in &self.tokens {
            match *t {
                Token::Literal(b) => freq[b as usize] += 1,
                Token::Match { len, .. } => freq[257 + len_code(len as usize).0] += 1,
            }
        }
        freq[256] += 1;
        let lens = code_lengths(&freq, 24);
        let codes = canonical_codes(&lens);
        let mut bits = BitWriter::new(std::mem::take(&mut self.out));
        // The code-length table first, 5 bits each, as a decoder needs it.
        for &l in &lens {
            bits.put(l as u64, 5);
        }
        for t in &self.tokens {
            match *t {
                Token::Literal(b) => bits.put(codes[b as usize] as u64, lens[b as usize]),
                Token::Match { len, dist } => {
                    let (c, extra, ev) = len_code(len as usize);
                    bits.put(codes[257 + c] as u64, lens[257 + c]);
                    bits.put(ev as u64, extra);
                    bits.put(dist as u64, 15);
                }
            }
        }
        bits.put(codes[256] as u64, lens[256]);
        self.out = bits.finish();
        self.out.len()
    }
}

/// Rebuild the input from tokens (tests: the match finder is lossless).
pub fn detokenize(tokens: &[Token]) -> Vec<u8> {
    let mut out = Vec::new();
    for t in tokens {
        match *t {
            Token::Literal(b) => out.push(b),
            Token::Match { len, dist } => {
                let s = out.len() - dist as usize;
                for k in 0..len as usize {
                    out.push(out[s + k]);
                }
            }
        }
    }
    out
}

/// Huffman code lengths (0 for unused symbols), at most `limit` bits: when
/// the tree is deeper, the frequencies are flattened and it is rebuilt.
pub fn code_lengths(freq: &[u32], limit: u32) -> Vec<u32> {
    let mut f: Vec<u64> = freq.iter().map(|&x| x as u64).collect();
    loop {
        let mut lens = vec![0u32; f.len()];
        let used: Vec<usize> = (0..f.len()).filter(|&i| f[i] > 0).collect();
        if used.len() == 1 {
            lens[used[0]] = 1;
            return lens;
        }
        // Nodes: leaves then internal; parent links give depths.
        let mut parent = vec![usize::MAX; 2 * f.len()];
        let mut heap: BinaryHeap<std::cmp::Reverse<(u64, usize)>> =
            used.iter().map(|&i| std::cmp::Reverse((f[i], i))).collect();
        let mut next = f.len();
        while heap.len() > 1 {
            let std::cmp::Reverse((a, i)) = heap.pop().unwrap_or_default();
            let std::cmp::Reverse((b, j)) = heap.pop().unwrap_or_default();
            parent[i] = next;
            parent[j] = next;
            heap.push(std::cmp::Reverse((a + b, next)));
            next += 1;
        }
        let mut deepest = 0;
        for &i in &used {
            let (mut d, mut n) = (0, i);
            while parent[n] != usize::MAX {
                n = parent[n];
                d += 1;
            }
            lens[i] = d;
            deepest = deepest.max(d);
        }
        if deepest <= limit {
            return lens;
        }
        for x in f.iter_mut().filter(|x| **x > 0) {
            *x = *x / 2 + 1;
        }
    }
}

/// Canonical codes for `lens`, bit-reversed for LSB-first packing.
pub fn canonical_codes(lens: &[u32]) -> Vec<u32> {
    let max = lens.iter().copied().max().unwrap_or(0) as usize;
    let mut count = vec![0u32; max + 2];
    for &l in lens.iter().filter(|&&l| l > 0) {
        count[l as usize] += 1;
    }
    let mut next = vec![0u32; max + 2];
    let mut code = 0u32;
    for b in 1..=max {
        code = (code + count[b - 1]) << 1;
        next[b] = code;
    }
    lens.iter()
        .map(|&l| {
            if l == 0 {
                return 0;
            }
            let c = next[l as usize];
            next[l as usize] += 1;
            c.reverse_bits() >> (32 - l)
        })
        .collect()
}

/// LSB-first bit packing through a 64-bit accumulator.
struct BitWriter {
    out: Vec<u8>,
    acc: u64,
    n: u32,
}

impl BitWriter {
    fn new(mut out: Vec<u8>) -> Self {
        out.clear();
        BitWriter { out, acc: 0, n: 0 }
    }
    #[inline]
    fn put(&mut self, v: u64, bits: u32) {
        if bits == 0 {
            return;
        }
        self.acc |= (v & ((1u64 << bits) - 1)) << self.n;
        self.n += bits;
        if self.n >= 32 {
            self.out.extend_from_slice(&(self.acc as u32).to_le_bytes());
            self.acc >>= 32;
            self.n -= 32;
        }
    }
    fn finish(mut self) -> Vec<u8> {
        while self.n > 0 {
            self.out.push(self.acc as u8);
            self.acc >>= 8;
            self.n = self.n.saturating_sub(8);
        }
        self.out
    }
}

// ---------------------------------------------------------------- sha256

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

/// Which implementation a kernel runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Path {
    Hardware,
    Software,
}

/// The CPU instructions `algo` would use here, if the CPU has them.
pub fn hardware_name(algo: &str) -> Option<&'static str> {
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

/// SHA-256 of `data` through `path` (the caller checked the hardware).
pub fn sha256(data: &[u8], path: Path) -> [u8; 32] {
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

// ---------------------------------------------------------------- aes128

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
pub struct Aes {
    rk: [[u8; 16]; 11],
    sbox: [u8; 256],
    path: Path,
}

impl Aes {
    pub fn new(key: [u8; 16], path: Path) -> Aes {
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
    pub fn encrypt(&self, block: &mut [u8; 16]) {
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
    pub fn ctr(&self, nonce: u64, data: &mut [u8]) {
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

// ---------------------------------------------------------------- crc32c

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
pub fn crc32c(data: &[u8], path: Path) -> u32 {
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

// ---------------------------------------------------------------- float

/// Side of the matrices of the `float` kernel.
pub const MATRIX: usize = 64;

/// C = A × B for MATRIX×MATRIX row-major matrices (i-k-j order: the inner
/// loop is a vectorisable axpy). 2·MATRIX³ floating-point operations.
pub fn matmul(a: &[f64], b: &[f64], c: &mut [f64]) {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    fn paths(algo: &str) -> Vec<Path> {
        let mut v = vec![Path::Software];
        if hardware_name(algo).is_some() {
            v.push(Path::Hardware);
        }
        v
    }

    #[test]
    fn sha256_matches_the_standard_vectors_on_every_path() {
        for p in paths("sha256") {
            assert_eq!(
                hex(&sha256(b"abc", p)),
                "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
                "{p:?}"
            );
            let long = corpus(10_000, 3);
            assert_eq!(sha256(&long, p), sha256(&long, Path::Software), "{p:?}");
        }
    }

    #[test]
    fn aes_matches_fips_197_on_every_path() {
        let key: [u8; 16] = std::array::from_fn(|i| i as u8);
        for p in paths("aes128") {
            let mut b: [u8; 16] = std::array::from_fn(|i| (i as u8) * 0x11);
            Aes::new(key, p).encrypt(&mut b);
            assert_eq!(hex(&b), "69c4e0d86a7b0430d8cdb78070b4c55a", "{p:?}");
            // CTR (four blocks at a time on the instructions) agrees with one at a time.
            let mut data = corpus(1000, 9);
            Aes::new(key, p).ctr(7, &mut data);
            let mut soft = corpus(1000, 9);
            Aes::new(key, Path::Software).ctr(7, &mut soft);
            assert_eq!(data, soft, "{p:?}");
        }
    }

    #[test]
    fn crc32c_matches_the_check_value_on_every_path() {
        for p in paths("crc32c") {
            assert_eq!(crc32c(b"123456789", p), 0xe306_9283, "{p:?}");
            let long = corpus(1001, 5);
            assert_eq!(crc32c(&long, p), crc32c(&long, Path::Software));
        }
    }

    #[test]
    fn lz_is_lossless_and_compresses_text() {
        let input = corpus(200_000, 7);
        let mut lz = Lz::default();
        let tokens = lz.tokenize(&input).to_vec();
        assert_eq!(detokenize(&tokens), input);
        let packed = lz.compress(&input);
        let ratio = input.len() as f64 / packed as f64;
        assert!(ratio > 1.8 && ratio < 10.0, "ratio {ratio}");
        // Prefix-free code lengths: Kraft sum exactly 1 for a full tree.
        let lens = code_lengths(&[5, 9, 12, 13, 16, 45, 0], 24);
        let kraft: f64 = lens
            .iter()
            .filter(|&&l| l > 0)
            .map(|&l| 0.5f64.powi(l as i32))
            .sum();
        assert!((kraft - 1.0).abs() < 1e-12, "{lens:?}");
        assert_eq!(lens[6], 0);
        for l in 4..=258 {
            let (c, extra, v) = len_code(l);
            assert!(c < LEN_CODES && v < (1 << extra).max(1), "{l}");
        }
    }

    #[test]
    fn matmul_is_a_matrix_product() {
        let n = MATRIX;
        let a: Vec<f64> = (0..n * n).map(|i| (i % 7) as f64).collect();
        let id: Vec<f64> = (0..n * n)
            .map(|i| if i / n == i % n { 1.0 } else { 0.0 })
            .collect();
        let mut c = vec![0.0; n * n];
        matmul(&a, &id, &mut c);
        assert_eq!(c, a);
    }
}
