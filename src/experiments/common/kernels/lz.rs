//! The `lz` kernel: a generated text corpus, LZ77 match finding (hash of
//! the last position per 4-byte prefix, as LZ4/Snappy/zlib's fastest
//! level), then Huffman coding of the token stream and bit packing (as
//! DEFLATE's second half).

use std::collections::BinaryHeap;

/// A deterministic generated corpus: English-like words with a 1/rank
/// frequency, punctuation and line breaks (compresses about 3:1 like text).
pub(crate) fn corpus(len: usize, seed: u64) -> Vec<u8> {
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
pub(super) const LEN_CODES: usize = 32;
const SYMBOLS: usize = 257 + LEN_CODES;

/// One LZ77 token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Token {
    Literal(u8),
    Match { len: u16, dist: u16 },
}

/// Reusable buffers of the `lz` kernel (one per thread).
pub(crate) struct Lz {
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
pub(super) fn len_code(len: usize) -> (usize, u32, u32) {
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
    pub(crate) fn tokenize(&mut self, input: &[u8]) -> &[Token] {
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
    pub(crate) fn compress(&mut self, input: &[u8]) -> usize {
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

#[cfg(test)]
/// Rebuild the input from tokens (tests: the match finder is lossless).
pub(crate) fn detokenize(tokens: &[Token]) -> Vec<u8> {
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
pub(crate) fn code_lengths(freq: &[u32], limit: u32) -> Vec<u32> {
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
pub(crate) fn canonical_codes(lens: &[u32]) -> Vec<u32> {
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
