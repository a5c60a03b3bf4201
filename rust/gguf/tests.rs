//! Parser tests over hand-built GGUF bytes.
use super::*;
use std::path::Path;

struct W(Vec<u8>);
impl W {
    fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn str(&mut self, s: &str) -> &mut Self {
        self.u64(s.len() as u64);
        self.0.extend_from_slice(s.as_bytes());
        self
    }
}

/// A file with every value type, a nested array and one F32 tensor [4, 2].
fn sample() -> Vec<u8> {
    let mut w = W(Vec::new());
    w.0.extend_from_slice(b"GGUF");
    w.u32(3).u64(1).u64(14);
    w.str("u8").u32(0).0.push(7);
    w.str("i8").u32(1).0.push(0xff);
    w.str("u16").u32(2).0.extend_from_slice(&513u16.to_le_bytes());
    w.str("i16").u32(3).0.extend_from_slice(&(-2i16).to_le_bytes());
    w.str("u32").u32(4).u32(70000);
    w.str("i32").u32(5).u32((-5i32) as u32);
    w.str("f32").u32(6).0.extend_from_slice(&1.5f32.to_le_bytes());
    w.str("bool").u32(7).0.push(1);
    w.str("string").u32(8).str("héllo");
    w.str("u64").u32(10).u64(1 << 40);
    w.str("i64").u32(11).u64((-9i64) as u64);
    w.str("f64").u32(12).0.extend_from_slice(&2.25f64.to_le_bytes());
    w.str("arr").u32(9).u32(8).u64(2).str("a").str("bc");
    w.str("nested").u32(9).u32(9).u64(2);
    w.u32(4).u64(1).u32(1);
    w.u32(4).u64(2).u32(2).u32(3);
    // tensor info
    w.str("t").u32(2).u64(4).u64(2).u32(0).u64(0);
    while w.0.len() % 32 != 0 {
        w.0.push(0);
    }
    for i in 0..8 {
        w.0.extend_from_slice(&(i as f32).to_le_bytes());
    }
    w.0
}

fn parse(b: Vec<u8>) -> Result<GgufFile> {
    GgufFile::from_bytes(Path::new("test.gguf"), b)
}

#[test]
fn parses_every_value_type() {
    let f = parse(sample()).expect("valid file");
    assert_eq!(f.version, 3);
    assert_eq!(f.get("u8"), Some(&Value::U8(7)));
    assert_eq!(f.get("i8"), Some(&Value::I8(-1)));
    assert_eq!(f.get("u16"), Some(&Value::U16(513)));
    assert_eq!(f.get("i16"), Some(&Value::I16(-2)));
    assert_eq!(f.get("u32"), Some(&Value::U32(70000)));
    assert_eq!(f.get("i32"), Some(&Value::I32(-5)));
    assert_eq!(f.get("f32"), Some(&Value::F32(1.5)));
    assert_eq!(f.get("bool"), Some(&Value::Bool(true)));
    assert_eq!(f.get("string").and_then(|v| v.as_str()), Some("héllo"));
    assert_eq!(f.get("u64"), Some(&Value::U64(1 << 40)));
    assert_eq!(f.get("i64"), Some(&Value::I64(-9)));
    assert_eq!(f.get("f64"), Some(&Value::F64(2.25)));
    let arr = f.get("arr").and_then(|v| v.as_array()).expect("array");
    assert_eq!(arr.len(), 2);
    let nested = f.get("nested").and_then(|v| v.as_array()).expect("nested");
    assert_eq!(nested[1].as_array().map(|a| a.len()), Some(2));
    assert_eq!(f.tensors.len(), 1);
    let t = &f.tensors[0];
    assert_eq!((t.dims.clone(), t.size, t.offset % 32), (vec![4, 2], 32, 0));
}

#[test]
fn tensor_view_is_zero_copy_and_exact() {
    let g = Gguf::from_files(vec![parse(sample()).expect("valid")]);
    let t = g.tensor("t").expect("tensor");
    let d = g.tensor_data(t);
    assert_eq!(d.len(), 32);
    assert_eq!(f32::from_le_bytes([d[4], d[5], d[6], d[7]]), 1.0);
}

fn err_of(b: Vec<u8>) -> String {
    match parse(b) {
        Ok(_) => panic!("expected an error"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn bad_magic_and_version() {
    let mut b = sample();
    b[0] = b'X';
    b[1] = 0xff;
    // the bytes are shown escaped, never raw
    let e = err_of(b);
    assert!(e.contains(r#"bad magic "X\xffUF""#), "{e}");
    let mut b = sample();
    b[4..8].copy_from_slice(&1u32.to_le_bytes());
    assert!(err_of(b).contains("unsupported GGUF version 1"));
    let mut b = sample();
    b[4..8].copy_from_slice(&3u32.to_be_bytes());
    assert!(err_of(b).contains("big-endian"));
}

#[test]
fn every_truncation_is_an_error() {
    let full = sample();
    for cut in 0..full.len() {
        let e = err_of(full[..cut].to_vec());
        assert!(e.contains("test.gguf") && e.contains("byte offset"), "cut {cut}: {e}");
    }
}

#[test]
fn oversized_counts_are_refused() {
    let mut b = sample();
    b[8..16].copy_from_slice(&(1u64 << 60).to_le_bytes());
    assert!(err_of(b).contains("tensor count"));
    let mut b = sample();
    b[16..24].copy_from_slice(&(1u64 << 60).to_le_bytes());
    assert!(err_of(b).contains("metadata count"));
}

#[test]
fn unknown_tensor_type_and_bad_shape() {
    let b = sample();
    let info_end = tensor_info_end(&b);
    let mut b1 = b.clone();
    b1[info_end - 12..info_end - 8].copy_from_slice(&99u32.to_le_bytes());
    assert!(err_of(b1).contains("unknown tensor type 99"));
    let mut b2 = b.clone();
    b2[info_end - 12..info_end - 8].copy_from_slice(&8u32.to_le_bytes()); // Q8_0, row 4 not /32
    assert!(err_of(b2).contains("not divisible"));
    let mut b3 = b;
    b3[info_end - 8..info_end].copy_from_slice(&64u64.to_le_bytes()); // past the end
    assert!(err_of(b3).contains("extends past the end"));
}

/// End of the tensor info: name "t" (the last 't' before the data), then n_dims u32,
/// dims 2×u64, type u32, offset u64.
fn tensor_info_end(b: &[u8]) -> usize {
    let data = b.len() - 32;
    let t_pos = b[..data].iter().rposition(|&c| c == b't').unwrap_or(0);
    t_pos + 1 + 4 + 16 + 4 + 8
}

#[test]
fn split_name_parsing() {
    assert_eq!(split_name(Path::new("/m/x-00001-of-00003.gguf")), Some(("/m/x".to_string(), 1, 3)));
    assert_eq!(split_name(Path::new("/m/x.gguf")), None);
}
