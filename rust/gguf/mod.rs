//! GGUF reader over a memory map: header, metadata, tensor infos, split models.
//! Spec: ggml/docs/gguf.md (versions 2 and 3, little-endian).
mod cursor;
pub mod value;

pub use value::{Value, ValueType};

use crate::error::{Error, Result};
use crate::quant::GgmlType;
use cursor::Cursor;
use memmap2::Mmap;
use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};

const GGUF_MAGIC: &[u8; 4] = b"GGUF";
const DEFAULT_ALIGNMENT: u64 = 32;
const MAX_DIMS: u32 = 4; // GGML_MAX_DIMS

#[derive(Debug, Clone)]
pub struct TensorInfo {
    pub name: String,
    /// ggml order: dims[0] is the contiguous (row) length.
    pub dims: Vec<u64>,
    pub ty: GgmlType,
    /// Absolute byte offset of the data within its file.
    pub offset: u64,
    pub size: u64,
    /// Index of the split file holding the data.
    pub file: usize,
}

impl TensorInfo {
    pub fn n_elements(&self) -> u64 {
        self.dims.iter().product()
    }
    /// Number of rows = product of all dims but the first.
    pub fn n_rows(&self) -> usize {
        self.dims.iter().skip(1).product::<u64>() as usize
    }
    pub fn row_len(&self) -> usize {
        self.dims.first().copied().unwrap_or(1) as usize
    }
}

enum Storage {
    Mmap(Mmap),
    Owned(Vec<u8>),
}

impl Storage {
    fn bytes(&self) -> &[u8] {
        match self {
            Storage::Mmap(m) => m,
            Storage::Owned(v) => v,
        }
    }
}

/// One parsed GGUF file.
pub struct GgufFile {
    pub path: PathBuf,
    storage: Storage,
    pub version: u32,
    pub metadata: Vec<(String, Value)>,
    pub tensors: Vec<TensorInfo>,
    pub alignment: u64,
    pub data_offset: u64,
}

impl GgufFile {
    /// Map and parse a file.
    pub fn open(path: &Path) -> Result<GgufFile> {
        let io = |source| Error::Io { path: path.to_path_buf(), source };
        let file = File::open(path).map_err(io)?;
        let len = file.metadata().map_err(io)?.len();
        let storage = if len == 0 {
            Storage::Owned(Vec::new())
        } else {
            // SAFETY: the map is read-only; a file truncated by another process while mapped
            // is outside what any mmap-based loader (llama.cpp included) can defend against.
            Storage::Mmap(unsafe { Mmap::map(&file) }.map_err(io)?)
        };
        Self::parse(path.to_path_buf(), storage)
    }

    /// Parse bytes already in memory (tests, fuzzing).
    pub fn from_bytes(path: &Path, bytes: Vec<u8>) -> Result<GgufFile> {
        Self::parse(path.to_path_buf(), Storage::Owned(bytes))
    }

    fn parse(path: PathBuf, storage: Storage) -> Result<GgufFile> {
        let bytes = storage.bytes();
        let file_len = bytes.len() as u64;
        let mut c = Cursor::new(bytes, &path);
        let magic = c.take(4, "header (magic)")?;
        if magic != GGUF_MAGIC {
            return Err(c.err(0, format!("bad magic \"{}\": not a GGUF file (expected \"GGUF\")", magic.escape_ascii())));
        }
        let version = c.u32("header (version)")?;
        if version != 2 && version != 3 {
            let hint = if version == 1 {
                " (GGUF v1 is obsolete; re-convert the model)"
            } else if version.swap_bytes() == 2 || version.swap_bytes() == 3 {
                " (this looks like a big-endian GGUF file; only little-endian is supported)"
            } else {
                ""
            };
            return Err(c.err(4, format!("unsupported GGUF version {version}{hint}; supported versions: 2, 3")));
        }
        let n_tensors_at = c.pos;
        let n_tensors = c.u64("header (tensor count)")?;
        let n_kv_at = c.pos;
        let n_kv = c.u64("header (metadata count)")?;
        // Each tensor info needs at least 8+4+8+4+8 bytes, each kv at least 8+4+1.
        if n_tensors.saturating_mul(32) > c.remaining() as u64 {
            return Err(c.err(n_tensors_at, format!("tensor count {n_tensors} cannot fit in a {file_len}-byte file")));
        }
        if n_kv.saturating_mul(13) > c.remaining() as u64 {
            return Err(c.err(n_kv_at, format!("metadata count {n_kv} cannot fit in a {file_len}-byte file")));
        }

        let mut metadata = Vec::with_capacity(n_kv as usize);
        for i in 0..n_kv {
            let key_at = c.pos;
            let key = c.string(&format!("metadata key #{i}"))?;
            let ty_at = c.pos;
            let ty_id = c.u32(&format!("metadata '{key}' type"))?;
            let ty = ValueType::from_id(ty_id)
                .ok_or_else(|| c.err(ty_at, format!("metadata '{key}': unknown value type {ty_id}")))?;
            let v = c.value(ty, &format!("metadata '{key}'"), 0)?;
            if key.is_empty() {
                return Err(c.err(key_at, "empty metadata key"));
            }
            metadata.push((key, v));
        }

        let alignment = match metadata.iter().find(|(k, _)| k == "general.alignment") {
            None => DEFAULT_ALIGNMENT,
            Some((_, v)) => match v.as_u64() {
                Some(a) if a > 0 && a.is_power_of_two() => a,
                _ => return Err(c.err(0, format!("general.alignment = {v} is not a power of two"))),
            },
        };

        let mut infos = Vec::with_capacity(n_tensors as usize);
        for i in 0..n_tensors {
            let name = c.string(&format!("tensor info #{i} (name)"))?;
            let what = format!("tensor info '{name}'");
            let nd_at = c.pos;
            let n_dims = c.u32(&what)?;
            if n_dims == 0 || n_dims > MAX_DIMS {
                return Err(c.err(nd_at, format!("{what}: {n_dims} dimensions (must be 1..={MAX_DIMS})")));
            }
            let mut dims = Vec::with_capacity(n_dims as usize);
            for _ in 0..n_dims {
                let d_at = c.pos;
                let d = c.u64(&what)?;
                if d == 0 || d > (1u64 << 40) {
                    return Err(c.err(d_at, format!("{what}: dimension {d} is out of range")));
                }
                dims.push(d);
            }
            let ty_at = c.pos;
            let ty_id = c.u32(&what)?;
            let ty = GgmlType::from_id(ty_id)
                .ok_or_else(|| {
                    let known = GgmlType::supported_names().join(", ");
                    c.err(ty_at, format!("{what}: unknown tensor type {ty_id} (llamars computes {known})"))
                })?;
            let off_at = c.pos;
            let offset = c.u64(&what)?;
            if offset % alignment != 0 {
                return Err(c.err(off_at, format!("{what}: data offset {offset} is not a multiple of the alignment {alignment}")));
            }
            let (bs, ts) = ty.block();
            if dims[0] % bs as u64 != 0 {
                return Err(c.err(
                    nd_at,
                    format!("{what}: row length {} is not divisible by the {} block size {bs}", dims[0], ty.name()),
                ));
            }
            let n_el = dims.iter().try_fold(1u64, |a, &d| a.checked_mul(d));
            let size = n_el
                .and_then(|n| (n / bs as u64).checked_mul(ts as u64))
                .ok_or_else(|| c.err(nd_at, format!("{what}: shape {dims:?} overflows")))?;
            infos.push((name, dims, ty, offset, size, off_at));
        }
        let header_end = c.pos as u64;
        let data_offset = header_end.div_ceil(alignment) * alignment;
        let mut tensors = Vec::with_capacity(infos.len());
        let mut seen = HashMap::new();
        for (name, dims, ty, rel, size, at) in infos {
            let start = data_offset.checked_add(rel);
            let end = start.and_then(|s| s.checked_add(size));
            match end {
                Some(e) if e <= file_len => {}
                _ => {
                    return Err(c.err(
                        at,
                        format!(
                            "tensor '{name}' ({} bytes at data offset {rel}) extends past the end of the file ({file_len} bytes): the file is truncated",
                            size
                        ),
                    ))
                }
            }
            if seen.insert(name.clone(), ()).is_some() {
                return Err(c.err(at, format!("duplicate tensor name '{name}'")));
            }
            tensors.push(TensorInfo { name, dims, ty, offset: data_offset + rel, size, file: 0 });
        }
        Ok(GgufFile { path, storage, version, metadata, tensors, alignment, data_offset })
    }

    pub fn bytes(&self) -> &[u8] {
        self.storage.bytes()
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        self.metadata.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }
}

/// A model: one GGUF file or the parts of a split model, seen as one.
pub struct Gguf {
    pub files: Vec<GgufFile>,
    meta_index: HashMap<String, usize>,
    tensor_index: HashMap<String, usize>,
    pub tensors: Vec<TensorInfo>,
}

/// `name-00001-of-00003.gguf` → ("name", 1, 3)
fn split_name(path: &Path) -> Option<(String, u32, u32)> {
    let s = path.to_str()?;
    let stem = s.strip_suffix(".gguf")?;
    let (rest, total) = stem.rsplit_once("-of-")?;
    let (prefix, no) = rest.rsplit_once('-')?;
    if no.len() != 5 || total.len() != 5 {
        return None;
    }
    Some((prefix.to_string(), no.parse().ok()?, total.parse().ok()?))
}

impl Gguf {
    /// Open a model; for a split model pass any part (normally the first).
    pub fn open(path: impl AsRef<Path>) -> Result<Gguf> {
        let path = path.as_ref();
        let first = GgufFile::open(path)?;
        let n_split = first.get("split.count").and_then(|v| v.as_u64()).unwrap_or(1);
        if n_split <= 1 {
            return Ok(Self::from_files(vec![first]));
        }
        let (prefix, _, total) = split_name(path).ok_or_else(|| Error::Gguf {
            path: path.to_path_buf(),
            offset: 0,
            what: format!("split.count = {n_split} but the file name does not follow NAME-00001-of-{n_split:05}.gguf"),
        })?;
        if total as u64 != n_split {
            return Err(Error::Gguf {
                path: path.to_path_buf(),
                offset: 0,
                what: format!("file name says {total} parts but split.count = {n_split}"),
            });
        }
        let mut files = Vec::with_capacity(n_split as usize);
        for i in 1..=total {
            let p = PathBuf::from(format!("{prefix}-{i:05}-of-{total:05}.gguf"));
            let f = if p == path { GgufFile::open(&p)? } else {
                if !p.exists() {
                    return Err(Error::Gguf {
                        path: path.to_path_buf(),
                        offset: 0,
                        what: format!("split part {} is missing (expected {})", i, p.display()),
                    });
                }
                GgufFile::open(&p)?
            };
            let no = f.get("split.no").and_then(|v| v.as_u64());
            if no != Some(i as u64 - 1) {
                return Err(Error::Gguf {
                    path: p.clone(),
                    offset: 0,
                    what: format!("split.no is {no:?}, expected {}", i - 1),
                });
            }
            files.push(f);
        }
        let g = Self::from_files(files);
        if let Some(expect) = g.get("split.tensors.count").and_then(|v| v.as_u64()) {
            if expect != g.tensors.len() as u64 {
                return Err(Error::Gguf {
                    path: path.to_path_buf(),
                    offset: 0,
                    what: format!("split.tensors.count = {expect} but the parts hold {} tensors", g.tensors.len()),
                });
            }
        }
        Ok(g)
    }

    pub fn from_files(mut files: Vec<GgufFile>) -> Gguf {
        let mut tensors = Vec::new();
        for (i, f) in files.iter_mut().enumerate() {
            for mut t in std::mem::take(&mut f.tensors) {
                t.file = i;
                tensors.push(t);
            }
        }
        let meta_index = files
            .first()
            .map(|f| f.metadata.iter().enumerate().map(|(i, (k, _))| (k.clone(), i)).collect())
            .unwrap_or_default();
        let tensor_index = tensors.iter().enumerate().map(|(i, t)| (t.name.clone(), i)).collect();
        Gguf { files, meta_index, tensor_index, tensors }
    }

    pub fn path(&self) -> &Path {
        &self.files[0].path
    }

    pub fn metadata(&self) -> &[(String, Value)] {
        &self.files[0].metadata
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        self.meta_index.get(key).map(|&i| &self.files[0].metadata[i].1)
    }

    fn missing(&self, key: &str, what: &str) -> Error {
        Error::MissingKey { path: self.path().to_path_buf(), key: key.to_string(), what: what.to_string() }
    }

    pub fn get_u64(&self, key: &str) -> Result<u64> {
        match self.get(key) {
            None => Err(self.missing(key, "is required but missing")),
            Some(v) => v.as_u64().ok_or_else(|| self.missing(key, &format!("must be an unsigned integer, found {}", v.value_type().name()))),
        }
    }

    pub fn get_f64(&self, key: &str) -> Result<f64> {
        match self.get(key) {
            None => Err(self.missing(key, "is required but missing")),
            Some(v) => v.as_f64().ok_or_else(|| self.missing(key, &format!("must be a number, found {}", v.value_type().name()))),
        }
    }

    pub fn get_str(&self, key: &str) -> Result<&str> {
        match self.get(key) {
            None => Err(self.missing(key, "is required but missing")),
            Some(v) => v.as_str().ok_or_else(|| self.missing(key, &format!("must be a string, found {}", v.value_type().name()))),
        }
    }

    pub fn get_array(&self, key: &str) -> Result<&[Value]> {
        match self.get(key) {
            None => Err(self.missing(key, "is required but missing")),
            Some(v) => v.as_array().ok_or_else(|| self.missing(key, &format!("must be an array, found {}", v.value_type().name()))),
        }
    }

    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensor_index.get(name).map(|&i| &self.tensors[i])
    }

    /// Zero-copy view of a tensor's bytes (bounds were checked at parse time).
    pub fn tensor_data(&self, t: &TensorInfo) -> &[u8] {
        &self.files[t.file].bytes()[t.offset as usize..(t.offset + t.size) as usize]
    }

    pub fn file_size(&self) -> u64 {
        self.files.iter().map(|f| f.bytes().len() as u64).sum()
    }
}

#[cfg(test)]
mod tests;
