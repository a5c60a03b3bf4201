//! Module-level functions: GGUF inspection and kernel entry points for tests.
use super::errors::{to_py, InvalidRequestError};
use crate::gguf::{Gguf, Value};
use crate::quant::{self, activation, dispatch, GgmlType};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use pyo3::IntoPyObjectExt;
use std::path::PathBuf;

fn value_to_py(py: Python<'_>, v: &Value) -> PyResult<Py<PyAny>> {
    Ok(match v {
        Value::U8(x) => x.into_py_any(py)?,
        Value::I8(x) => x.into_py_any(py)?,
        Value::U16(x) => x.into_py_any(py)?,
        Value::I16(x) => x.into_py_any(py)?,
        Value::U32(x) => x.into_py_any(py)?,
        Value::I32(x) => x.into_py_any(py)?,
        Value::U64(x) => x.into_py_any(py)?,
        Value::I64(x) => x.into_py_any(py)?,
        Value::F32(x) => x.into_py_any(py)?,
        Value::F64(x) => x.into_py_any(py)?,
        Value::Bool(x) => x.into_py_any(py)?,
        Value::String(s) => s.into_py_any(py)?,
        Value::Array(_, items) => {
            let l = PyList::empty(py);
            for it in items {
                l.append(value_to_py(py, it)?)?;
            }
            l.into_py_any(py)?
        }
    })
}

/// Parse a GGUF model (or the first part of a split model): header facts,
/// metadata [(key, type, value)] and tensors [(name, type, dims, offset, bytes)].
#[pyfunction]
pub fn inspect<'py>(py: Python<'py>, path: PathBuf) -> PyResult<Bound<'py, PyDict>> {
    let g = py.detach(|| Gguf::open(&path)).map_err(to_py)?;
    let d = PyDict::new(py);
    let f0 = &g.files[0];
    d.set_item("path", path.to_string_lossy().into_owned())?;
    d.set_item("version", f0.version)?;
    d.set_item("alignment", f0.alignment)?;
    d.set_item("data_offset", f0.data_offset)?;
    d.set_item("n_files", g.files.len())?;
    d.set_item("file_size", g.file_size())?;
    let meta = PyList::empty(py);
    for (k, v) in g.metadata() {
        let ty = match v {
            Value::Array(et, _) => format!("{}[{}]", v.value_type().name(), et.name()),
            _ => v.value_type().name().to_string(),
        };
        meta.append((k.as_str(), ty, value_to_py(py, v)?))?;
    }
    d.set_item("metadata", meta)?;
    let tensors = PyList::empty(py);
    for t in &g.tensors {
        tensors.append((t.name.as_str(), t.ty.name(), t.dims.clone(), t.offset, t.size, t.file))?;
    }
    d.set_item("tensors", tensors)?;
    // a model llamars can run: what it holds and what a token reads
    if let Ok(c) = crate::model::config::Config::from_gguf(&g) {
        let f = crate::model::footprint::footprint(&g, &c);
        let m = PyDict::new(py);
        m.set_item("arch", c.arch.name())?;
        m.set_item("n_params", f.n_params)?;
        m.set_item("n_params_active", f.n_params_active)?;
        m.set_item("bytes_per_token", f.bytes_per_token)?;
        m.set_item("n_expert", f.n_expert)?;
        m.set_item("n_expert_used", f.n_expert_used)?;
        d.set_item("model", m)?;
    }
    Ok(d)
}

/// What loading `path` with these settings takes, before loading it: the weights' bytes
/// (memory-mapped, all touched), the KV cache's (exact: the engine allocates that) and an
/// estimate of the activations' (one micro-batch through the widest layer, the logits of
/// every slot, each thread's attention scores over a slot's context); `n_ctx` 0 is the
/// training context.
#[pyfunction]
#[pyo3(signature = (path, n_ctx, n_parallel, n_ubatch, swa_full=false))]
pub fn memory_plan<'py>(
    py: Python<'py>, path: PathBuf, n_ctx: usize, n_parallel: usize, n_ubatch: usize, swa_full: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let (g, c) = py
        .detach(|| -> crate::Result<_> {
            let g = Gguf::open(&path)?;
            let c = crate::model::config::Config::from_gguf(&g)?;
            Ok((g, c))
        })
        .map_err(to_py)?;
    let n_ctx = if n_ctx == 0 { c.n_ctx_train } else { n_ctx };
    let n_parallel = n_parallel.max(1);
    let slot_ctx = n_ctx / n_parallel;
    let u = n_ubatch.max(1) as u128;
    let weights: u128 = g.tensors.iter().map(|t| t.size as u128).sum();
    // attention scores are per work item (one query row, one KV head's group of heads): at
    // most one per thread at a time
    let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1) as u128;
    let group = (c.n_head / c.n_head_kv.max(1)).max(1) as u128;
    // experts: each token's n_used weighted outputs, and one expert's rows at a time
    let moe = c.moe.as_ref().map_or(0, |m| m.n_expert as u128 + (m.n_used as u128 + 2) * c.n_embd as u128 + 3 * m.n_ff_exp as u128);
    let compute = u * 4 * (6 * c.n_embd as u128 + 3 * c.n_ff as u128 + moe)
        + n_parallel as u128 * c.n_vocab as u128 * 4
        + threads * group * slot_ctx as u128 * 4;
    let d = PyDict::new(py);
    d.set_item("n_ctx", n_ctx)?;
    d.set_item("n_ctx_train", c.n_ctx_train)?;
    d.set_item("weights", weights)?;
    d.set_item("kv", c.kv_bytes(n_parallel, slot_ctx, n_ubatch, swa_full))?;
    d.set_item("compute", compute)?;
    Ok(d)
}

fn parse_type(name: &str) -> PyResult<GgmlType> {
    (0..64)
        .filter_map(GgmlType::from_id)
        .find(|t| t.name().eq_ignore_ascii_case(name))
        .filter(|t| t.is_supported())
        .ok_or_else(|| InvalidRequestError::new_err(format!("unsupported tensor type '{name}'")))
}

fn check_len(ty: GgmlType, data: &[u8], n: usize) -> PyResult<()> {
    if !n.is_multiple_of(ty.block_size()) || data.len() != ty.row_bytes(n) {
        return Err(InvalidRequestError::new_err(format!(
            "{}: {} bytes do not hold {n} elements (block {} elements / {} bytes)",
            ty.name(),
            data.len(),
            ty.block_size(),
            ty.type_size()
        )));
    }
    Ok(())
}

/// Scalar-reference dequantization: float32 little-endian bytes.
#[pyfunction]
pub fn dequantize<'py>(py: Python<'py>, type_name: &str, data: &[u8], n: usize) -> PyResult<Bound<'py, PyBytes>> {
    let ty = parse_type(type_name)?;
    check_len(ty, data, n)?;
    let mut out = vec![0f32; n];
    quant::dequantize(ty, data, &mut out);
    let bytes: Vec<u8> = out.iter().flat_map(|v| v.to_le_bytes()).collect();
    Ok(PyBytes::new(py, &bytes))
}

/// Dot product of one weight row with f32 activations quantized as llama.cpp does,
/// using the kernel for `isa` ("scalar", "avx2", "avx512", "neon", or "auto").
#[pyfunction]
#[pyo3(signature = (type_name, w, activations, isa="auto"))]
pub fn vec_dot(type_name: &str, w: &[u8], activations: Vec<f32>, isa: &str) -> PyResult<f32> {
    let ty = parse_type(type_name)?;
    let n = activations.len();
    check_len(ty, w, n)?;
    let isa = match isa {
        "auto" => quant::isa(),
        name => *dispatch::available()
            .iter()
            .find(|i| i.name() == name)
            .ok_or_else(|| InvalidRequestError::new_err(format!("instruction set '{name}' is not available here")))?,
    };
    let f = dispatch::dot_fn_for(ty, isa)
        .ok_or_else(|| InvalidRequestError::new_err(format!("no dot kernel for {}", ty.name())))?;
    let mut a = Vec::new();
    activation::quantize(quant::vec_dot_type(ty), &activations, &mut a);
    Ok(f(n, w, &a))
}

/// Instruction sets this machine can run, and the one in use.
#[pyfunction]
pub fn isa() -> (String, Vec<String>) {
    (quant::isa().name().to_string(), dispatch::available().iter().map(|i| i.name().to_string()).collect())
}

/// A JSON schema with llama.cpp's bounds on whitespace, digits and fractional seconds
/// (see `grammar::harden_schema`), for schemas embedded in Lark grammars.
#[pyfunction]
pub fn harden_json_schema(schema: &str) -> PyResult<String> {
    crate::grammar::harden_schema_text(schema).map_err(super::errors::InvalidRequestError::new_err)
}

/// Every GPU adapter wgpu finds, as dicts (name, description, backend, kind, driver,
/// max_buffer_bytes, max_binding_bytes, shader_f16); empty in a build without wgpu.
#[pyfunction]
pub fn list_devices<'py>(py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
    let devs = py.detach(crate::gpu::list_devices);
    devs.into_iter()
        .map(|d| {
            let o = PyDict::new(py);
            o.set_item("name", d.name)?;
            o.set_item("description", d.description)?;
            o.set_item("backend", d.backend)?;
            o.set_item("kind", d.kind)?;
            o.set_item("driver", d.driver)?;
            o.set_item("max_buffer_bytes", d.max_buffer_bytes)?;
            o.set_item("max_binding_bytes", d.max_binding_bytes)?;
            o.set_item("shader_f16", d.shader_f16)?;
            o.set_item("memory_bytes", d.memory_bytes)?;
            Ok(o)
        })
        .collect()
}

/// Whether this build has the wgpu backend.
#[pyfunction]
pub fn gpu_built() -> bool {
    crate::gpu::BUILT
}
