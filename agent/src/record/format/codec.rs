//! The format's primitives: LEB128 varints, endpoints, and a cursor that
//! reads them back with an error instead of a panic at any byte.

use std::fmt;

use super::ep;
use crate::model::Endpoint;

/// LEB128: seven bits a byte, low first, high bit = more follows.
#[inline]
pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

pub fn put_endpoint(out: &mut Vec<u8>, e: &Endpoint) {
    match *e {
        Endpoint::None => out.push(ep::NONE),
        Endpoint::V4 { ip, port } => {
            out.push(ep::V4);
            out.extend_from_slice(&ip);
            out.extend_from_slice(&port.to_be_bytes());
        }
        Endpoint::V6 { ip, port } => {
            out.push(ep::V6);
            out.extend_from_slice(&ip);
            out.extend_from_slice(&port.to_be_bytes());
        }
    }
}

/// Why a varint could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VarintError {
    End,
    TooLong,
}

impl fmt::Display for VarintError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VarintError::End => f.write_str("ends inside a number"),
            VarintError::TooLong => f.write_str("number longer than 64 bits"),
        }
    }
}

/// A bounds-checked reader over a byte slice. Every method returns
/// `None`/`Err` instead of panicking.
pub struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Cursor { bytes, pos: 0 }
    }

    pub fn pos(&self) -> usize {
        self.pos
    }

    pub fn is_empty(&self) -> bool {
        self.pos >= self.bytes.len()
    }

    pub fn byte(&mut self) -> Option<u8> {
        let b = *self.bytes.get(self.pos)?;
        self.pos += 1;
        Some(b)
    }

    pub fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let s = self.bytes.get(self.pos..end)?;
        self.pos = end;
        Some(s)
    }

    #[inline]
    pub fn varint(&mut self) -> Result<u64, VarintError> {
        let mut v: u64 = 0;
        let mut shift = 0u32;
        loop {
            let b = self.byte().ok_or(VarintError::End)?;
            if shift == 63 && b > 1 {
                return Err(VarintError::TooLong);
            }
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
            shift += 7;
            if shift > 63 {
                return Err(VarintError::TooLong);
            }
        }
    }

    pub fn endpoint(&mut self) -> Result<Endpoint, String> {
        let t = self.byte().ok_or("ends inside an address")?;
        match t {
            ep::NONE => Ok(Endpoint::None),
            ep::V4 => {
                let b = self.take(6).ok_or("ends inside an IPv4 address")?;
                Ok(Endpoint::V4 {
                    ip: [b[0], b[1], b[2], b[3]],
                    port: u16::from_be_bytes([b[4], b[5]]),
                })
            }
            ep::V6 => {
                let b = self.take(18).ok_or("ends inside an IPv6 address")?;
                let mut ip = [0u8; 16];
                ip.copy_from_slice(&b[..16]);
                Ok(Endpoint::V6 {
                    ip,
                    port: u16::from_be_bytes([b[16], b[17]]),
                })
            }
            other => Err(format!("unknown address type {other}")),
        }
    }
}
