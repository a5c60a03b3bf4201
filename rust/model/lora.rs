//! LoRA adapters (GGUF `general.type = adapter`, `adapter.type = lora`) as llama.cpp
//! loads and applies them (`llama-adapter.cpp`, `llm_graph_context::build_lora_mm`): for a
//! base matrix W with a pair `W.lora_a` [n_in → r] / `W.lora_b` [r → n_out], a token's
//! output is `W·x + (B·(A·x))·s` with `s = scale·alpha/r` (`scale` when alpha is 0), one
//! adapter after another, the last loaded first (the order llama.cpp's `unordered_map` of
//! adapters iterates in with libstdc++; sums in another order differ in the last bits). The token embeddings' pair is flipped (`A` holds a row of r values
//! per token, `B` is [r → n_embd]) and adds `(B·A[token])·s` to the looked-up row.
//!
//! Scales are per sequence (`State::lora`, one list per slot): the product is per token row,
//! so sequences under different adapter sets can share a batch.
use super::Model;
use crate::cpu::{matmul, Scratch, ThreadPool, Weight};
use crate::error::{Error, Result};
use crate::gguf::Gguf;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One adapted matrix: `a` [n_in → rank] and `b` [rank → n_out].
pub struct Pair {
    pub a: Weight,
    pub b: Weight,
    pub rank: usize,
}

pub struct Adapter {
    pub path: PathBuf,
    pub alpha: f32,
    /// `adapter.lora.task_name` / `adapter.lora.prompt_prefix` (reported by /lora-adapters).
    pub task_name: String,
    pub prompt_prefix: String,
    /// Pairs by the base matrix they adapt (the address of its bytes in the model's map,
    /// which every step naming that matrix shares).
    pairs: HashMap<usize, Pair>,
    /// The token embeddings' pair (looked up, not multiplied: kept apart so a tied output
    /// matrix, which shares token_embd's bytes, is not adapted by it).
    pub tok_embd: Option<Pair>,
    /// Keeps the adapter's memory map alive for the weights above.
    _gguf: Arc<Gguf>,
}

impl Adapter {
    /// The effective multiplier of a pair at user scale `scale` (llama.cpp's `get_scale`).
    pub fn scale_of(&self, p: &Pair, scale: f32) -> f32 {
        if self.alpha != 0.0 {
            scale * self.alpha / p.rank as f32
        } else {
            scale
        }
    }

    pub fn pair(&self, w: &Weight) -> Option<&Pair> {
        self.pairs.get(&w.addr())
    }

    pub fn n_pairs(&self) -> usize {
        self.pairs.len() + self.tok_embd.is_some() as usize
    }

    /// Open `path` and check it against `model` (architecture, every pair's base tensor and
    /// shapes); errors name the adapter file and the tensor.
    pub fn load(path: &Path, model: &Model) -> Result<Adapter> {
        let g = Arc::new(Gguf::open(path)?);
        let bad = |what: String| Error::Tensor { path: path.to_path_buf(), tensor: String::new(), what };
        let meta_str = |k: &str| g.get(k).and_then(|v| v.as_str()).map(str::to_owned);
        let ty = meta_str("general.type").unwrap_or_default();
        if ty != "adapter" {
            return Err(bad(format!("is not a LoRA adapter: general.type is {ty:?}, expected \"adapter\"")));
        }
        let aty = meta_str("adapter.type").unwrap_or_default();
        if aty != "lora" {
            return Err(bad(format!("adapter.type is {aty:?}; only \"lora\" adapters are supported")));
        }
        let arch = meta_str("general.architecture").unwrap_or_default();
        if arch != model.config.arch.name() {
            return Err(bad(format!("is an adapter for architecture {arch:?}, but the model is {:?}", model.config.arch.name())));
        }
        let alpha = g.get_f64("adapter.lora.alpha")? as f32;
        if !alpha.is_finite() {
            return Err(bad(format!("adapter.lora.alpha is {alpha}")));
        }
        let base = &model.gguf;
        let mut names: Vec<&str> = Vec::new();
        for t in &g.tensors {
            match t.name.strip_suffix(".lora_a").or_else(|| t.name.strip_suffix(".lora_b")) {
                Some(b) => names.push(b),
                None => return Err(Error::Tensor { path: path.to_path_buf(), tensor: t.name.clone(), what: "is not a LoRA tensor (names end in .lora_a or .lora_b)".into() }),
            }
        }
        names.sort_unstable();
        names.dedup();
        let mut pairs = HashMap::new();
        let mut tok_embd = None;
        for name in names {
            let terr = |what: String| Error::Tensor { path: path.to_path_buf(), tensor: name.to_string(), what };
            let (Some(a), Some(b)) = (g.tensor(&format!("{name}.lora_a")), g.tensor(&format!("{name}.lora_b"))) else {
                return Err(terr("has only one of its .lora_a / .lora_b pair".into()));
            };
            let Some(m) = base.tensor(name) else {
                return Err(terr(format!("does not exist in the base model {} (an adapter for another model?)", base.path().display())));
            };
            let dims2 = |t: &crate::gguf::TensorInfo| -> Result<[usize; 2]> {
                match t.dims.iter().map(|&d| d as usize).collect::<Vec<_>>()[..] {
                    [x] => Ok([x, 1]),
                    [x, y] => Ok([x, y]),
                    _ => Err(Error::Tensor { path: path.to_path_buf(), tensor: t.name.clone(), what: format!("has shape {:?}; LoRA tensors are matrices", t.dims) }),
                }
            };
            let ([m0, m1], [a0, a1], [b0, b1]) = (dims2(m)?, dims2(a)?, dims2(b)?);
            if m.dims.len() > 2 {
                return Err(terr("adapts a 3-D tensor (mixture-of-experts weights); llamars applies LoRA to matrices only".into()));
            }
            let weight = |t: &crate::gguf::TensorInfo, n_in: usize, n_out: usize| -> Result<Weight> {
                if !t.ty.is_supported() {
                    return Err(Error::UnsupportedTensorType { path: path.to_path_buf(), tensor: t.name.clone(), type_name: t.ty.name().to_string() });
                }
                let dot = crate::quant::dot_fn(t.ty).ok_or_else(|| Error::UnsupportedTensorType { path: path.to_path_buf(), tensor: t.name.clone(), type_name: t.ty.name().to_string() })?;
                // SAFETY: the bytes live in `g`'s memory map, which the Adapter keeps (`_gguf`).
                Ok(unsafe { Weight::new(t.ty, n_in, n_out, g.tensor_data(t), dot) })
            };
            if name == "token_embd.weight" {
                // flipped: A [rank, n_vocab] (a row per token), B [rank, n_embd]
                if m0 != b1 || m1 != a1 || a0 != b0 {
                    return Err(terr(format!("has A {:?} and B {:?} for a base of {:?} (expected A [r, {m1}] and B [r, {m0}]; an adapter for another model?)", a.dims, b.dims, m.dims)));
                }
                tok_embd = Some(Pair { a: weight(a, a0, a1)?, b: weight(b, b0, b1)?, rank: a0 });
                continue;
            }
            if m0 != a0 || m1 != b1 {
                return Err(terr(format!("has A {:?} and B {:?} for a base of {:?} (expected A [{m0}, r] and B [r, {m1}]; an adapter for another model?)", a.dims, b.dims, m.dims)));
            }
            if a1 != b0 {
                return Err(terr(format!("has A {:?} and B {:?}: lora_a is not transposed (adapters of the old finetune example are not supported)", a.dims, b.dims)));
            }
            let addr = base.tensor_data(m).as_ptr() as usize;
            pairs.insert(addr, Pair { a: weight(a, a0, a1)?, b: weight(b, b0, b1)?, rank: a1 });
        }
        Ok(Adapter {
            path: path.to_path_buf(),
            alpha,
            task_name: meta_str("adapter.lora.task_name").unwrap_or_default(),
            prompt_prefix: meta_str("adapter.lora.prompt_prefix").unwrap_or_default(),
            pairs,
            tok_embd,
            _gguf: g,
        })
    }
}

/// Scratch of the low-rank products.
#[derive(Default)]
pub struct LoraScratch {
    ax: Vec<f32>,
    bax: Vec<f32>,
    scratch: Scratch,
}

/// `y[t] += (B[lo..hi]·(A·x[t]))·s` for the adapters in `scales` (a factor per adapter; 0:
/// not applied) that adapt `w`, over `n` tokens: x [n, w.n_in], y [n, hi - lo].
#[allow(clippy::too_many_arguments)]
pub fn add_delta(pool: &ThreadPool, adapters: &[Adapter], scales: &[f32], w: &Weight, lo: usize, hi: usize, x: &[f32], y: &mut [f32], n: usize, s: &mut LoraScratch) {
    for (ad, &scale) in adapters.iter().zip(scales).rev() {
        if scale == 0.0 {
            continue;
        }
        let Some(p) = ad.pair(w) else { continue };
        let f = ad.scale_of(p, scale);
        let b = p.b.rows(lo, hi);
        s.ax.resize(n * p.rank, 0.0);
        s.bax.resize(n * b.n_out, 0.0);
        matmul(pool, &p.a, &x[..n * p.a.n_in], n, &mut s.ax, &mut s.scratch);
        matmul(pool, &b, &s.ax, n, &mut s.bax, &mut s.scratch);
        // ggml_scale, then ggml_add(res, ab)
        for (yv, &d) in y[..n * b.n_out].iter_mut().zip(&s.bax) {
            *yv += d * f;
        }
    }
}

/// The token embeddings' adapters on the looked-up rows x [n, n_embd] of `tokens`.
pub fn add_embd_delta(pool: &ThreadPool, adapters: &[Adapter], scales: &[f32], tokens: &[u32], x: &mut [f32], s: &mut LoraScratch) {
    let n = tokens.len();
    for (ad, &scale) in adapters.iter().zip(scales).rev() {
        let Some(p) = ad.tok_embd.as_ref().filter(|_| scale != 0.0) else { continue };
        let f = ad.scale_of(p, scale);
        s.ax.resize(n * p.rank, 0.0);
        for (t, &tok) in tokens.iter().enumerate() {
            p.a.dequantize_row(tok as usize, &mut s.ax[t * p.rank..(t + 1) * p.rank]);
        }
        s.bax.resize(n * p.b.n_out, 0.0);
        matmul(pool, &p.b, &s.ax, n, &mut s.bax, &mut s.scratch);
        for (xv, &d) in x[..n * p.b.n_out].iter_mut().zip(&s.bax) {
            *xv += d * f;
        }
    }
}
