//! Bounds-checked little-endian reader over the mapped header bytes.
use super::value::{Value, ValueType};
use crate::error::{Error, Result};
use std::path::Path;

/// Deepest array nesting accepted (real files use 1).
const MAX_ARRAY_DEPTH: u32 = 8;

pub struct Cursor<'a> {
    buf: &'a [u8],
    pub pos: usize,
    path: &'a Path,
}

impl<'a> Cursor<'a> {
    pub fn new(buf: &'a [u8], path: &'a Path) -> Self {
        Cursor { buf, pos: 0, path }
    }

    pub fn err(&self, offset: usize, what: impl Into<String>) -> Error {
        Error::Gguf { path: self.path.to_path_buf(), offset: offset as u64, what: what.into() }
    }

    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        if n > self.remaining() {
            return Err(self.err(
                self.pos,
                format!("truncated {what}: needs {n} bytes, only {} left in the file", self.remaining()),
            ));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn arr<const N: usize>(&mut self, what: &str) -> Result<[u8; N]> {
        let s = self.take(N, what)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    pub fn u8(&mut self, what: &str) -> Result<u8> {
        Ok(self.arr::<1>(what)?[0])
    }
    pub fn u16(&mut self, what: &str) -> Result<u16> {
        Ok(u16::from_le_bytes(self.arr(what)?))
    }
    pub fn u32(&mut self, what: &str) -> Result<u32> {
        Ok(u32::from_le_bytes(self.arr(what)?))
    }
    pub fn u64(&mut self, what: &str) -> Result<u64> {
        Ok(u64::from_le_bytes(self.arr(what)?))
    }

    /// A GGUF string: u64 length then bytes. Invalid UTF-8 is replaced, never fatal.
    pub fn string(&mut self, what: &str) -> Result<String> {
        let at = self.pos;
        let n = self.u64(what)?;
        if n > self.remaining() as u64 {
            return Err(self.err(
                at,
                format!("{what}: string length {n} exceeds the {} bytes left in the file", self.remaining()),
            ));
        }
        let bytes = self.take(n as usize, what)?;
        Ok(String::from_utf8_lossy(bytes).into_owned())
    }

    pub fn value(&mut self, ty: ValueType, what: &str, depth: u32) -> Result<Value> {
        Ok(match ty {
            ValueType::U8 => Value::U8(self.u8(what)?),
            ValueType::I8 => Value::I8(self.u8(what)? as i8),
            ValueType::U16 => Value::U16(self.u16(what)?),
            ValueType::I16 => Value::I16(self.u16(what)? as i16),
            ValueType::U32 => Value::U32(self.u32(what)?),
            ValueType::I32 => Value::I32(self.u32(what)? as i32),
            ValueType::F32 => Value::F32(f32::from_bits(self.u32(what)?)),
            ValueType::Bool => {
                let at = self.pos;
                match self.u8(what)? {
                    0 => Value::Bool(false),
                    1 => Value::Bool(true),
                    b => return Err(self.err(at, format!("{what}: invalid bool byte {b}"))),
                }
            }
            ValueType::String => Value::String(self.string(what)?),
            ValueType::U64 => Value::U64(self.u64(what)?),
            ValueType::I64 => Value::I64(self.u64(what)? as i64),
            ValueType::F64 => Value::F64(f64::from_bits(self.u64(what)?)),
            ValueType::Array => {
                let at = self.pos;
                if depth >= MAX_ARRAY_DEPTH {
                    return Err(self.err(at, format!("{what}: arrays nested deeper than {MAX_ARRAY_DEPTH}")));
                }
                let id = self.u32(what)?;
                let ety = ValueType::from_id(id)
                    .ok_or_else(|| self.err(at, format!("{what}: unknown array element type {id}")))?;
                let count_at = self.pos;
                let n = self.u64(what)?;
                if n.saturating_mul(ety.min_size()) > self.remaining() as u64 {
                    return Err(self.err(
                        count_at,
                        format!(
                            "{what}: array of {n} {} values cannot fit in the {} bytes left in the file",
                            ety.name(),
                            self.remaining()
                        ),
                    ));
                }
                let mut items = Vec::with_capacity(n as usize);
                for _ in 0..n {
                    items.push(self.value(ety, what, depth + 1)?);
                }
                Value::Array(ety, items)
            }
        })
    }
}
