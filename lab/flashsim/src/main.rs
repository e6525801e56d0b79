//! flashsim: the flash model of tests/common/flashsim.rs served over NBD
//! (newstyle fixed handshake; NBD_OPT_GO, NBD_OPT_INFO and
//! NBD_OPT_EXPORT_NAME; READ, WRITE, FLUSH, DISC), so qemu can use it as a
//! drive (`-drive file=nbd:127.0.0.1:PORT,format=raw,if=virtio`) without the
//! host kernel's nbd. The model's costs are real sleeps here; the data
//! lives in a sparse backing file. `--real BYTES` makes a fake card: it
//! states `--size` but keeps only `--real`, its addresses wrapping past it
//! (flash.capacity's ground truth on the board lab).
//!
//! flashsim --port P --file PATH [--size BYTES] [--unit BYTES] [--open N]
//!          [--cache BYTES] [--real BYTES] [--program BYTES/s] [--bus BYTES/s]
//!          [--unit-step SECONDS] [--page-step SECONDS] [--once]
//!
//! `--program` and `--bus` slow the card below what an emulated guest can
//! push (TCG), so its cache and steady state show through. The model's
//! steady rate and stall p99 for 64 KiB writes are printed at start.

#[path = "../../../tests/common/flashsim.rs"]
mod model;

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant};

use model::{Card, Geometry};

const NBDMAGIC: u64 = 0x4e42_444d_4147_4943;
const IHAVEOPT: u64 = 0x4948_4156_454f_5054;
const REPLY_MAGIC: u64 = 0x0003_e889_0455_65a9;
const REQUEST_MAGIC: u32 = 0x2560_9513;
const SIMPLE_REPLY: u32 = 0x6744_6698;
const OPT_EXPORT_NAME: u32 = 1;
const OPT_ABORT: u32 = 2;
const OPT_INFO: u32 = 6;
const OPT_GO: u32 = 7;
const REP_ACK: u32 = 1;
const REP_INFO: u32 = 3;
const REP_ERR_UNSUP: u32 = 0x8000_0001;
const FLAG_FIXED_NEWSTYLE: u16 = 1;
const FLAG_NO_ZEROES: u16 = 2;
/// HAS_FLAGS | SEND_FLUSH.
const TRANSMISSION_FLAGS: u16 = 1 | 4;
const CMD_READ: u16 = 0;
const CMD_WRITE: u16 = 1;
const CMD_DISC: u16 = 2;
const CMD_FLUSH: u16 = 3;
const EINVAL: u32 = 22;
const MAX_REQUEST: u32 = 32 << 20;

struct Args {
    port: u16,
    file: String,
    geometry: Geometry,
    /// Bytes really kept (a fake card wraps addresses past them).
    real: Option<u64>,
    once: bool,
}

/// Read or write `buf` at `off` of a card that keeps `real` bytes: the
/// address wraps, and a request across the wrap is split.
fn wrapped(file: &File, buf: &mut [u8], off: u64, real: Option<u64>, write: bool) -> io::Result<()> {
    let real = real.unwrap_or(u64::MAX);
    let mut done = 0usize;
    while done < buf.len() {
        let at = (off + done as u64) % real;
        let n = (buf.len() - done).min((real - at).min(usize::MAX as u64) as usize);
        let part = &mut buf[done..done + n];
        if write {
            file.write_all_at(part, at)?;
        } else {
            file.read_exact_at(part, at)?;
        }
        done += n;
    }
    Ok(())
}

fn parse_size(s: &str) -> Option<u64> {
    let (num, mult) = match s.char_indices().find(|(_, c)| c.is_ascii_alphabetic()) {
        Some((i, _)) => (
            &s[..i],
            match s[i..].to_ascii_uppercase().as_str() {
                "K" | "KIB" => 1 << 10,
                "M" | "MIB" => 1 << 20,
                "G" | "GIB" => 1 << 30,
                _ => return None,
            },
        ),
        None => (s, 1),
    };
    num.parse::<u64>().ok().map(|n| n * mult)
}

fn args() -> Result<Args, String> {
    let mut a = Args {
        port: 10809,
        file: String::new(),
        geometry: Geometry::card(4 << 20, 2, 8 << 20),
        real: None,
        once: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        if k == "--once" {
            a.once = true;
            continue;
        }
        let v = it.next().ok_or(format!("{k} needs a value"))?;
        let size = || parse_size(&v).ok_or(format!("{k}: '{v}' is not a size"));
        match k.as_str() {
            "--port" => a.port = v.parse().map_err(|_| format!("--port: '{v}'"))?,
            "--file" => a.file = v.clone(),
            "--size" => a.geometry.size = size()?,
            "--unit" => a.geometry.unit = size()?,
            "--cache" => a.geometry.cache = size()?,
            "--real" => a.real = Some(size()?).filter(|r| *r > 0),
            "--program" => a.geometry.program_rate = size()? as f64,
            "--bus" => a.geometry.bus_rate = size()? as f64,
            // Seconds a read pays per unit / page boundary it crosses: an
            // emulated guest's read noise hides the default 150/30 µs.
            "--unit-step" => a.geometry.unit_step = v.parse().map_err(|_| format!("{k}: '{v}'"))?,
            "--page-step" => a.geometry.page_step = v.parse().map_err(|_| format!("{k}: '{v}'"))?,
            "--open" => a.geometry.open_units = v.parse().map_err(|_| format!("--open: '{v}'"))?,
            _ => return Err(format!("unknown option {k}")),
        }
    }
    if a.file.is_empty() {
        return Err("--file PATH (the sparse backing file) is required".into());
    }
    Ok(a)
}

fn main() {
    let a = match args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("flashsim: {e}");
            std::process::exit(2);
        }
    };
    if let Err(e) = serve(&a) {
        eprintln!("flashsim: {e}");
        std::process::exit(1);
    }
}

fn serve(a: &Args) -> io::Result<()> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&a.file)?;
    file.set_len(a.real.unwrap_or(a.geometry.size).min(a.geometry.size))?;
    let listener = TcpListener::bind(("127.0.0.1", a.port))?;
    eprintln!("flashsim: serving {:?} on 127.0.0.1:{}", a.geometry, a.port);
    eprintln!(
        "flashsim: model steady_rate {:.0} B/s, stall_p99 {:.4} s for 65536-byte writes",
        a.geometry.steady_rate(65536),
        a.geometry.p99_latency(65536)
    );
    for conn in listener.incoming() {
        let mut s = conn?;
        s.set_nodelay(true)?;
        let mut card = Card::new(a.geometry.clone());
        match session(&mut s, &file, &mut card, a.real) {
            Ok(()) => eprintln!("flashsim: client left"),
            Err(e) => eprintln!("flashsim: connection ended: {e}"),
        }
        if a.once {
            break;
        }
    }
    Ok(())
}

fn u16_of(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}
fn u32_of(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}
fn u64_of(b: &[u8]) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[..8]);
    u64::from_be_bytes(x)
}

fn reply(s: &mut TcpStream, opt: u32, kind: u32, data: &[u8]) -> io::Result<()> {
    let mut m = Vec::with_capacity(20 + data.len());
    m.extend_from_slice(&REPLY_MAGIC.to_be_bytes());
    m.extend_from_slice(&opt.to_be_bytes());
    m.extend_from_slice(&kind.to_be_bytes());
    m.extend_from_slice(&(data.len() as u32).to_be_bytes());
    m.extend_from_slice(data);
    s.write_all(&m)
}

/// Handshake, then requests until DISC.
fn session(s: &mut TcpStream, file: &File, card: &mut Card, real: Option<u64>) -> io::Result<()> {
    let size = card.g.size;
    let mut hello = Vec::new();
    hello.extend_from_slice(&NBDMAGIC.to_be_bytes());
    hello.extend_from_slice(&IHAVEOPT.to_be_bytes());
    hello.extend_from_slice(&(FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES).to_be_bytes());
    s.write_all(&hello)?;
    let mut b4 = [0u8; 4];
    s.read_exact(&mut b4)?;
    let no_zeroes = u32_of(&b4) & u32::from(FLAG_NO_ZEROES) != 0;
    loop {
        let mut h = [0u8; 16];
        s.read_exact(&mut h)?;
        if u64_of(&h) != IHAVEOPT {
            return Err(io::Error::other("bad option magic"));
        }
        let (opt, len) = (u32_of(&h[8..]), u32_of(&h[12..]));
        if len > 65536 {
            return Err(io::Error::other("option too long"));
        }
        let mut data = vec![0u8; len as usize];
        s.read_exact(&mut data)?;
        let mut export = Vec::new();
        export.extend_from_slice(&size.to_be_bytes());
        export.extend_from_slice(&TRANSMISSION_FLAGS.to_be_bytes());
        match opt {
            OPT_EXPORT_NAME => {
                s.write_all(&export)?;
                if !no_zeroes {
                    s.write_all(&[0u8; 124])?;
                }
                break;
            }
            OPT_INFO | OPT_GO => {
                let mut info = vec![0u8, 0u8];
                info.extend_from_slice(&export);
                reply(s, opt, REP_INFO, &info)?;
                reply(s, opt, REP_ACK, &[])?;
                if opt == OPT_GO {
                    break;
                }
            }
            OPT_ABORT => {
                reply(s, opt, REP_ACK, &[])?;
                return Ok(());
            }
            _ => reply(s, opt, REP_ERR_UNSUP, &[])?,
        }
    }
    transmission(s, file, card, real)
}

fn transmission(s: &mut TcpStream, file: &File, card: &mut Card, real: Option<u64>) -> io::Result<()> {
    let origin = Instant::now();
    let mut buf = Vec::new();
    loop {
        let mut r = [0u8; 28];
        s.read_exact(&mut r)?;
        if u32_of(&r) != REQUEST_MAGIC {
            return Err(io::Error::other("bad request magic"));
        }
        let kind = u16_of(&r[6..]);
        let handle = &r[8..16];
        let (off, len) = (u64_of(&r[16..]), u32_of(&r[24..]));
        let bad = len > MAX_REQUEST
            || off
                .checked_add(u64::from(len))
                .is_none_or(|e| e > card.g.size);
        // Idle time passes on the card too: its cache drains meanwhile.
        card.now = card.now.max(origin.elapsed().as_secs_f64());
        let mut error = 0;
        buf.resize(len.min(MAX_REQUEST) as usize, 0);
        match kind {
            CMD_READ if !bad => {
                wrapped(file, &mut buf, off, real, false)?;
                card.read(off, u64::from(len));
            }
            CMD_WRITE => {
                s.read_exact(&mut buf)?;
                if bad {
                    error = EINVAL;
                } else {
                    wrapped(file, &mut buf, off, real, true)?;
                    card.write(off, u64::from(len));
                }
            }
            CMD_FLUSH => card.flush(),
            CMD_DISC => return Ok(()),
            _ => error = EINVAL,
        }
        let due = origin + Duration::from_secs_f64(card.now);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let mut m = Vec::with_capacity(16);
        m.extend_from_slice(&SIMPLE_REPLY.to_be_bytes());
        m.extend_from_slice(&error.to_be_bytes());
        m.extend_from_slice(handle);
        s.write_all(&m)?;
        if kind == CMD_READ && error == 0 {
            s.write_all(&buf)?;
        }
    }
}
