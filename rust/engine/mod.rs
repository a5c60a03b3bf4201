//! The engine: a loaded model, its tokenizer and the CPU pool, plus sessions
//! (a KV cache and activations) that generations run in.
mod adapters;
mod admission;
mod batch_loop;
mod commit;
mod decode;
pub mod draft_model;
mod encode;
mod execute;
pub mod fields;
pub mod metrics;
pub mod planner;
mod prompt_cache;
pub mod queue;
pub mod request;
pub mod scheduler;
pub mod slot;
mod ngram_cache;
mod ngram_draft;
pub mod speculative;
mod slot_io;
mod state;
mod stop;

pub use decode::{Decoder, GenParams, StopReason, Timings, TokenEvent};
pub use metrics::{Metrics, Snapshot};
pub use request::{Event, Final, Hub, RequestParams, Sink};
pub use queue::{Fault, SchedConfig, SlotAction, SlotActionResult};
pub use scheduler::Scheduler;
pub use slot::SlotInfo;
pub use adapters::{same_lora, AdapterConfig, AdapterInfo};

use crate::cpu::{pool::default_threads, ThreadPool};
use crate::error::{Error, Result};
use crate::gguf::Gguf;
use crate::grammar::{Grammar, GrammarFactory, GrammarSpec};
use crate::tokenizer::attr;
use crate::kv_cache::{KvStore, SeqCells};
use crate::model::{LogitRows, Model, Span, State};
use crate::tokenizer::Tokenizer;
use std::path::Path;
use std::sync::Arc;

#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Context size in tokens (0 = the model's training context).
    pub n_ctx: usize,
    /// CPU threads (None = physical cores).
    pub n_threads: Option<usize>,
    /// Tokens per forward pass while evaluating a prompt.
    pub n_batch: usize,
    /// GPU offload (`n_gpu_layers`, device).
    pub gpu: crate::gpu::GpuConfig,
    /// LoRA adapters and control vectors.
    pub adapters: AdapterConfig,
    /// KV cache types and flash attention (`-ctk`, `-ctv`, `-fa`).
    pub kv: crate::kv_cache::types::KvConfig,
    /// The matmuls' kernel orders: `Some(true)` llama.cpp's everywhere, `Some(false)` the fast
    /// mode, `None` as `LLAMARS_EXACT` says (`quant::Exactness`).
    pub exact: Option<bool>,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig { n_ctx: 4096, n_threads: None, n_batch: 512, gpu: Default::default(), adapters: Default::default(), kv: Default::default(), exact: None }
    }
}

pub struct Engine {
    pub model: Model,
    pub tokenizer: Tokenizer,
    pub pool: ThreadPool,
    pub config: EngineConfig,
    /// What happened to GPU offload, for the log ("offloaded 19/19 layers to GPU Vulkan0 …").
    pub gpu_note: String,
    /// Token id → text bytes, built on first use (DRY's sequence breakers).
    pieces: std::sync::OnceLock<Arc<Vec<Vec<u8>>>>,
    /// The grammar engine over this vocabulary, built on the first constrained request.
    grammars: std::sync::OnceLock<std::result::Result<Arc<GrammarFactory>, String>>,
    /// The LoRA adapters' global scales (`/lora-adapters`), one per adapter.
    pub lora_scales: std::sync::Mutex<Vec<f32>>,
}

/// A private single-sequence KV cache plus activations, outside the scheduler
/// (`Engine::logits`, tests). Full-size on every layer.
pub struct Session {
    pub kv: KvStore,
    pub cells: SeqCells,
    pub state: State,
}

impl Engine {
    pub fn load(path: impl AsRef<Path>, mut config: EngineConfig) -> Result<Engine> {
        let gguf = Arc::new(Gguf::open(path.as_ref())?);
        let mut model = Model::load(gguf.clone(), crate::quant::Exactness::new(config.exact))?;
        let tokenizer = Tokenizer::from_gguf(&gguf)?;
        if tokenizer.n_vocab() != model.config.n_vocab {
            return Err(Error::Tokenizer(format!(
                "{}: the vocabulary has {} tokens but the embedding matrix has {} rows",
                gguf.path().display(),
                tokenizer.n_vocab(),
                model.config.n_vocab
            )));
        }
        if config.n_ctx == 0 {
            config.n_ctx = model.config.n_ctx_train;
        }
        if model.config.arch.is_encoder() {
            // an encoder's positions end with its position table
            config.n_ctx = config.n_ctx.min(model.config.n_ctx_train);
        }
        if config.n_batch == 0 {
            return Err(Error::InvalidRequest("n_batch must be at least 1".into()));
        }
        let n_threads = config.n_threads.unwrap_or_else(default_threads).max(1);
        config.n_threads = Some(n_threads);
        config.gpu.n_ctx = config.n_ctx;
        config.gpu.n_batch = config.n_batch;
        let scales = adapters::attach(&mut model, &config.adapters)?;
        config.kv.resolve()?;
        let auto_cpu = adapters::keep_on_cpu(&model, &config.kv, &mut config.gpu);
        let mut gpu_note = model.offload(&config.gpu, &mut |_, _| {})?;
        if let Some(why) = auto_cpu {
            gpu_note = why;
        }
        adapters::check_placement(&model, &config.kv)?;
        Ok(Engine {
            model,
            tokenizer,
            pool: ThreadPool::new(n_threads),
            config,
            gpu_note,
            pieces: std::sync::OnceLock::new(),
            grammars: std::sync::OnceLock::new(),
            lora_scales: std::sync::Mutex::new(scales),
        })
    }

    /// Every token's text (special tokens rendered), shared.
    pub fn pieces(&self) -> Arc<Vec<Vec<u8>>> {
        self.pieces
            .get_or_init(|| Arc::new((0..self.model.config.n_vocab as u32).map(|t| self.tokenizer.token_to_piece(t, true)).collect()))
            .clone()
    }

    /// Compile a request's grammar (the engine behind it is built once per model).
    pub fn compile_grammar(&self, spec: &GrammarSpec) -> Result<Grammar> {
        let f = self.grammars.get_or_init(|| {
            let pieces = self.pieces();
            let v = &self.tokenizer.vocab;
            let special: Vec<bool> = (0..pieces.len() as u32).map(|t| v.attr(t) & attr::CONTROL != 0).collect();
            let eos = v.eos.or(v.eot).unwrap_or(0);
            GrammarFactory::new(&pieces, &special, eos).map(Arc::new)
        });
        let f = match f {
            Ok(f) => f.clone(),
            Err(e) => return Err(Error::NotSupported(e.clone())),
        };
        // the grammar engine recurses as deep as the grammar nests: on a thread whose stack
        // is sized for the limits `check_grammar` / `check_schema` enforce, and a panic in
        // it is this request's error
        let spec = spec.clone();
        let compiler = std::thread::Builder::new()
            .name("llamars-grammar".into())
            .stack_size(crate::grammar::limits::COMPILE_STACK)
            .spawn(move || std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f.compile(&spec))))
            .map_err(|e| Error::Internal(format!("could not start the grammar compiler thread: {e}")))?;
        match compiler.join() {
            Ok(Ok(r)) => r.map_err(Error::InvalidRequest),
            Ok(Err(p)) | Err(p) => Err(Error::from_panic(p, "compiling the grammar")),
        }
    }

    pub fn new_session(&self) -> Result<Session> {
        self.session_of(self.config.n_ctx)
    }

    /// A private session holding `n_ctx` positions.
    pub fn session_of(&self, n_ctx: usize) -> Result<Session> {
        let c = &self.model.config;
        let caps = self.model.kv_caps(n_ctx, self.config.n_batch, true);
        Ok(Session {
            kv: self.config.kv.store(1, n_ctx, &caps, c.n_head_kv * c.head_dim, c.n_head_kv * c.v_head_dim)?,
            cells: SeqCells::new(None),
            state: State::default(),
        })
    }

    /// Evaluate `tokens` after what the session holds, in `n_batch` chunks.
    /// Returns the logits of the last token, or of every token with `LogitRows::All`.
    pub fn eval(&self, s: &mut Session, tokens: &[u32], rows: LogitRows, out: &mut Vec<f32>) -> Result<()> {
        let n_past = s.cells.n_past();
        if n_past + tokens.len() > s.kv.slot_ctx {
            return Err(Error::ContextOverflow { n_tokens: n_past + tokens.len(), n_ctx: s.kv.slot_ctx });
        }
        out.clear();
        let prompt_end = n_past + tokens.len();
        let chunks: Vec<&[u32]> = tokens.chunks(self.config.n_batch).collect();
        for (i, chunk) in chunks.iter().enumerate() {
            let last = i + 1 == chunks.len();
            let r = match rows {
                LogitRows::All => LogitRows::All,
                LogitRows::Last if last => LogitRows::Last,
                _ => LogitRows::None,
            };
            let (pos0, ubatch) = (s.cells.n_past(), self.config.n_batch);
            let span = Span { slot: 0, pos0, n: chunk.len(), logits: r, ring_lo: 0, prompt_end, ubatch };
            let logits = self.model.forward(&self.pool, &mut s.state, &mut s.kv, chunk, &[span])?;
            out.extend_from_slice(logits);
            s.cells.push(chunk);
        }
        Ok(())
    }

    /// Logits for every position of `tokens`, evaluated in a fresh context: [n, n_vocab].
    pub fn logits(&self, tokens: &[u32]) -> Result<Vec<f32>> {
        self.logits_lora(tokens, None)
    }

    /// `logits` under LoRA scales (`lora`: a request's list; None: the global scales).
    pub fn logits_lora(&self, tokens: &[u32], lora: Option<&[(usize, f32)]>) -> Result<Vec<f32>> {
        self.check_len(tokens)?;
        let mut s = self.session_of(tokens.len())?;
        s.state.lora = vec![self.resolve_lora(lora)?];
        let mut out = Vec::with_capacity(tokens.len() * self.model.config.n_vocab);
        self.eval(&mut s, tokens, LogitRows::All, &mut out)?;
        Ok(out)
    }

    fn check_len(&self, tokens: &[u32]) -> Result<()> {
        if tokens.is_empty() {
            return Err(Error::InvalidRequest("tokens: at least one token is required".into()));
        }
        if tokens.len() > self.config.n_ctx {
            return Err(Error::ContextOverflow { n_tokens: tokens.len(), n_ctx: self.config.n_ctx });
        }
        Ok(())
    }

    /// Final-normed hidden states of every position of `tokens`, evaluated in a fresh
    /// context: [n, n_embd] (pooling and normalisation are up to the caller).
    pub fn hidden_states(&self, tokens: &[u32]) -> Result<Vec<f32>> {
        self.check_len(tokens)?;
        let mut s = self.session_of(tokens.len())?;
        s.state.lora = vec![self.resolve_lora(None)?];
        let e = self.model.config.n_embd;
        let mut out = Vec::with_capacity(tokens.len() * e);
        // an encoder's attention is bidirectional: the whole input in one batch
        let step = if self.model.config.causal { self.config.n_batch } else { tokens.len() };
        for chunk in tokens.chunks(step) {
            let (pos0, ubatch) = (s.cells.n_past(), step);
            let span = Span { slot: 0, pos0, n: chunk.len(), logits: LogitRows::All, ring_lo: 0, prompt_end: tokens.len(), ubatch };
            let h = self.model.forward_hidden(&self.pool, &mut s.state, &mut s.kv, chunk, &[span])?;
            out.extend_from_slice(h);
            s.cells.push(chunk);
        }
        Ok(out)
    }
}
