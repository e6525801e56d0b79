//! Tests of the compute kernels: standard vectors on every path the CPU
//! has, and the compressor's round trip.

use super::lz::{code_lengths, detokenize, len_code, LEN_CODES};
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
