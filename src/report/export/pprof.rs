//! pprof's profile.proto (github.com/google/pprof/proto/profile.proto),
//! hand-encoded: the few messages a stack profile needs (sample types,
//! samples, locations, functions, the string table). Written uncompressed —
//! pprof reads a raw protobuf as well as a gzipped one, and the build has no
//! deflate crate. One value column per stored profile: CPU samples and
//! off-CPU microseconds (a stack of one profile has 0 in the other's).

use std::collections::HashMap;

use super::folded::profiles;
use super::{Exporter, Subject};
use crate::Result;

pub(crate) struct Pprof;

impl Exporter for Pprof {
    fn name(&self) -> &'static str {
        "pprof"
    }
    fn about(&self) -> &'static str {
        "a diagnosis's CPU and off-CPU profiles as a pprof profile.proto"
    }
    fn export(&self, s: &Subject) -> Result<Vec<u8>> {
        let (all, interval_s) = profiles(s, self.name())?;
        let mut p = Proto::default();
        let types: Vec<(u64, u64)> = all
            .iter()
            .map(|x| {
                let t = if x.name == "cpu" {
                    "samples"
                } else {
                    "off_cpu"
                };
                let u = if x.unit == "samples" {
                    "count"
                } else {
                    "microseconds"
                };
                (p.string(t), p.string(u))
            })
            .collect();
        for (t, u) in &types {
            let mut vt = Vec::new();
            int(&mut vt, 1, *t);
            int(&mut vt, 2, *u);
            bytes(&mut p.out, 1, &vt);
        }
        for (col, x) in all.iter().enumerate() {
            for st in x.stacks {
                // pprof wants the leaf first.
                let locs: Vec<u64> = st.stack.split(';').rev().map(|f| p.location(f)).collect();
                let values: Vec<u64> = (0..all.len())
                    .map(|c| if c == col { st.samples } else { 0 })
                    .collect();
                let mut sample = Vec::new();
                packed(&mut sample, 1, &locs);
                packed(&mut sample, 2, &values);
                bytes(&mut p.out, 2, &sample);
            }
        }
        Ok(p.finish(interval_s))
    }
}

/// The profile being built: samples and sample types in `out`, locations
/// and functions (one each per distinct frame) and strings kept to write last.
#[derive(Default)]
struct Proto {
    out: Vec<u8>,
    strings: Vec<String>,
    string_ids: HashMap<String, u64>,
    frames: HashMap<String, u64>,
    frame_order: Vec<(u64, u64)>,
}

impl Proto {
    fn string(&mut self, s: &str) -> u64 {
        if self.strings.is_empty() {
            // Index 0 is the empty string, as the format requires.
            self.strings.push(String::new());
            self.string_ids.insert(String::new(), 0);
        }
        if let Some(&i) = self.string_ids.get(s) {
            return i;
        }
        let i = self.strings.len() as u64;
        self.strings.push(s.to_string());
        self.string_ids.insert(s.to_string(), i);
        i
    }

    /// The location id of a frame (also its function id), made on first use.
    fn location(&mut self, frame: &str) -> u64 {
        if let Some(&id) = self.frames.get(frame) {
            return id;
        }
        let id = self.frames.len() as u64 + 1;
        let name = self.string(frame);
        self.frames.insert(frame.to_string(), id);
        self.frame_order.push((id, name));
        id
    }

    fn finish(mut self, interval_s: f64) -> Vec<u8> {
        self.string("");
        for &(id, name) in &self.frame_order {
            let mut line = Vec::new();
            int(&mut line, 1, id);
            let mut loc = Vec::new();
            int(&mut loc, 1, id);
            bytes(&mut loc, 4, &line);
            bytes(&mut self.out, 4, &loc);
            let mut func = Vec::new();
            int(&mut func, 1, id);
            int(&mut func, 2, name);
            int(&mut func, 3, name);
            bytes(&mut self.out, 5, &func);
        }
        for s in &self.strings {
            bytes(&mut self.out, 6, s.as_bytes());
        }
        if interval_s.is_finite() && interval_s > 0.0 {
            int(&mut self.out, 10, (interval_s * 1e9) as u64);
        }
        self.out
    }
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A varint field (wire type 0).
fn int(out: &mut Vec<u8>, field: u64, v: u64) {
    varint(out, field << 3);
    varint(out, v);
}

/// A length-delimited field (wire type 2): a message, string or bytes.
fn bytes(out: &mut Vec<u8>, field: u64, b: &[u8]) {
    varint(out, (field << 3) | 2);
    varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// A packed repeated varint field.
fn packed(out: &mut Vec<u8>, field: u64, vs: &[u64]) {
    let mut b = Vec::new();
    for &v in vs {
        varint(&mut b, v);
    }
    bytes(out, field, &b);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_and_fields_encode_as_protobuf_does() {
        let mut v = Vec::new();
        varint(&mut v, 300);
        assert_eq!(v, [0xac, 0x02]);
        let mut f = Vec::new();
        int(&mut f, 1, 150);
        assert_eq!(f, [0x08, 0x96, 0x01]);
        let mut s = Vec::new();
        bytes(&mut s, 2, b"testing");
        assert_eq!(s, [0x12, 0x07, b't', b'e', b's', b't', b'i', b'n', b'g']);
    }
}
