"""Server configuration: one msgspec Struct filled from llama-server's CLI flags and
`LLAMA_ARG_*` environment variables (see `cli.py`); the app (`server/app.py`) reads it."""
from __future__ import annotations

from typing import Dict, List, Optional

import msgspec

from . import _core

# every generation field's default, as the core defines it (rust/engine/fields.rs)
_CORE = {name: default for name, _kind, _group, default, _doc in _core.generation_fields()}


class SamplingDefaults(msgspec.Struct, kw_only=True):
    """Server-wide defaults for request sampling fields (llama-server's sampling flags);
    the values are the core's defaults unless a flag sets them."""

    n_predict: int = -1  # llama-server's default: no limit (Engine's own default is 16 tokens)
    temperature: float = _CORE["temperature"]
    top_k: int = _CORE["top_k"]
    top_p: float = _CORE["top_p"]
    min_p: float = _CORE["min_p"]
    seed: int = _CORE["seed"]
    n_probs: int = _CORE["n_probs"]
    ignore_eos: bool = _CORE["ignore_eos"]
    # the rest of the chain: None = llama.cpp's default (see llamars.sampling)
    samplers: Optional[str] = None  # names separated by ';'
    sampling_seq: Optional[str] = None  # letters, e.g. "edskypmxt"
    top_n_sigma: Optional[float] = None
    xtc_probability: Optional[float] = None
    xtc_threshold: Optional[float] = None
    typical_p: Optional[float] = None
    repeat_last_n: Optional[int] = None
    repeat_penalty: Optional[float] = None
    presence_penalty: Optional[float] = None
    frequency_penalty: Optional[float] = None
    dry_multiplier: Optional[float] = None
    dry_base: Optional[float] = None
    dry_allowed_length: Optional[int] = None
    dry_penalty_last_n: Optional[int] = None
    dynatemp_range: Optional[float] = None
    dynatemp_exponent: Optional[float] = None
    mirostat: Optional[int] = None
    mirostat_tau: Optional[float] = None
    mirostat_eta: Optional[float] = None
    dry_sequence_breakers: Optional[List[str]] = None  # --dry-sequence-breaker (repeated; [] = none)
    logit_bias: Optional[List[List[float]]] = None  # -l ID+BIAS (repeated): [[id, bias], ...]
    stop: Optional[List[str]] = None  # -r PROMPT (repeated): the stop strings of requests that give none
    # server-wide constraint (--grammar / --json-schema), used when a request sets none
    grammar: Optional[str] = None
    json_schema: Optional[str] = None
    # speculative decoding's per-request limits (--spec-draft-n-max / -n-min / -p-min)
    spec_n_max: Optional[int] = None
    spec_n_min: Optional[int] = None
    spec_p_min: Optional[float] = None

    def fields(self) -> dict:
        """The generation fields a request starts from on this server (request fields win)."""
        out = {k: getattr(self, k) for k in ("temperature", "top_k", "top_p", "min_p", "seed", "n_probs", "ignore_eos")}
        out["max_tokens"] = self.n_predict
        out.update(self.chain_defaults())
        if self.logit_bias:
            # (-inf, as in `-l 15043-inf`, is llama-server's `false`: the token is banned)
            out["logit_bias"] = [[int(t), False if b == float("-inf") else b] for t, b in self.logit_bias]
        if self.stop:
            out["stop"] = list(self.stop)
        for k in ("n_max", "n_min", "p_min"):
            if getattr(self, "spec_" + k) is not None:
                out["speculative." + k] = getattr(self, "spec_" + k)
        if self.grammar:
            out["grammar"] = self.grammar
        elif self.json_schema:
            out["json_schema"] = self.json_schema
        return out

    def chain_defaults(self) -> dict:
        """Server-wide sampler settings given on the command line (request fields win)."""
        out = {
            k: getattr(self, k)
            for k in ("top_n_sigma", "xtc_probability", "xtc_threshold", "typical_p", "repeat_last_n", "repeat_penalty",
                      "presence_penalty", "frequency_penalty", "dry_multiplier", "dry_base", "dry_allowed_length",
                      "dry_penalty_last_n", "dynatemp_range", "dynatemp_exponent", "mirostat", "mirostat_tau", "mirostat_eta")
            if getattr(self, k) is not None
        }
        if self.dry_sequence_breakers is not None:
            out["dry_sequence_breakers"] = list(self.dry_sequence_breakers)
        if self.sampling_seq:
            out["samplers"] = self.sampling_seq
        if self.samplers:
            out["samplers"] = [x for x in self.samplers.split(";") if x]
        return out


class ServerConfig(msgspec.Struct, kw_only=True):
    # model and context
    model: Optional[str] = None  # None: the default chat model (models.default_model)
    alias: Optional[str] = None
    n_ctx: int = 0  # 0: the model's training context
    n_batch: int = 2048
    n_ubatch: int = 512
    n_threads: Optional[int] = None
    n_parallel: int = -1  # -1: auto (4)
    n_keep: int = 0
    # cache
    cache_prompt: bool = True
    cache_reuse: int = 0
    cache_ram: int = 8192  # MiB; 0 off, -1 no limit
    context_shift: bool = False
    slot_prompt_similarity: float = 0.1
    swa_full: bool = False
    # speculative decoding (--spec-type, --spec-ngram-{simple,map-k,map-k4v}-*, --spec-ngram-mod-*)
    spec_type: List[str] = []
    spec_ngram_simple_size_n: int = 12
    spec_ngram_simple_size_m: int = 48
    spec_ngram_simple_min_hits: int = 1
    spec_ngram_map_k_size_n: int = 12
    spec_ngram_map_k_size_m: int = 48
    spec_ngram_map_k_min_hits: int = 1
    spec_ngram_map_k4v_size_n: int = 12
    spec_ngram_map_k4v_size_m: int = 48
    spec_ngram_map_k4v_min_hits: int = 1
    spec_ngram_mod_n_match: int = 24
    spec_ngram_mod_n_min: int = 48
    spec_ngram_mod_n_max: int = 64
    model_draft: Optional[str] = None  # -md (draft-simple)
    ctx_size_draft: int = 0  # -cd: the draft model's context (0: the target's)
    lookup_cache_static: Optional[str] = None   # -lcs (ngram-cache)
    lookup_cache_dynamic: Optional[str] = None  # -lcd (ngram-cache; read, not written)
    slot_save_path: Optional[str] = None
    data_dir: Optional[str] = None  # stored Responses API objects; None: $XDG_CACHE_HOME/llamars or ~/.cache/llamars
    responses_store: Optional[str] = None  # sqlite:///PATH or postgresql://…; None: SQLite in data_dir
    responses_ttl: float = 0.0  # seconds a stored response is kept (0: forever)
    responses_lease: float = 15.0  # seconds a replica's lease lasts without a heartbeat
    # --fit: a context size left unset is lowered to what fits in memory (fit.py)
    fit: str = "on"
    fit_target: Optional[str] = None  # MiB of memory to leave free (default 1024)
    fit_ctx: int = 4096  # the smallest context --fit may choose
    model_config: Optional[str] = None  # --model-config: a LocalAI YAML (router/localai.py)
    # router mode (no -m, and --models-dir or --models-preset): one child server per model
    models_dir: Optional[str] = None
    models_preset: Optional[str] = None
    models_max: int = 4  # models loaded at once; 0 = unlimited
    models_autoload: bool = True
    # network
    host: str = "127.0.0.1"
    port: int = 8080
    api_prefix: str = ""
    api_keys: List[str] = msgspec.field(default_factory=list)
    ssl_key_file: Optional[str] = None
    ssl_cert_file: Optional[str] = None
    timeout: int = 3600
    header_timeout: int = 30  # seconds to send a request's headers, idle connections included (0: no limit)
    # bounds on one request's work (llamars' own; llama-server has no such flags)
    max_prompts: int = 1024  # generations (prompts × n) or embedding inputs per request
    max_messages: int = 131072  # chat messages (or Responses input items) per request
    max_tools: int = 1024  # tool definitions per request
    # empty: `*`, or `localhost` once tools or MCP servers are on (resolved_cors_origins)
    cors_origins: List[str] = msgspec.field(default_factory=list)
    cors_methods: List[str] = msgspec.field(default_factory=lambda: ["GET", "POST", "DELETE", "OPTIONS"])
    cors_headers: List[str] = msgspec.field(default_factory=lambda: ["*"])
    cors_credentials: bool = True
    # agent tools (agent/): built-in tools (names or "all"), where file tools are confined
    # (None: the working directory), where the shell runs, MCP servers
    tools: List[str] = msgspec.field(default_factory=list)
    tools_root: Optional[str] = None
    tools_runtime: Optional[str] = None
    mcp_servers_config: Optional[str] = None
    mcp_servers_json: Optional[str] = None
    agent: bool = False  # -ag: every built-in tool
    # endpoints
    metrics: bool = False
    props: bool = False
    slots: bool = True
    webui: bool = True
    static_path: Optional[str] = None  # --path: serve this directory at / instead of the built-in UI
    embedding: bool = False
    pooling: Optional[str] = None
    rerank: bool = False  # --rerank: /rerank on a reranker (implies --embeddings --pooling rank)
    # chat
    chat_template: Optional[str] = None
    chat_template_file: Optional[str] = None
    chat_template_kwargs: Dict[str, object] = msgspec.field(default_factory=dict)
    jinja: bool = True
    reasoning_format: str = "auto"  # auto | deepseek | deepseek-legacy | none
    reasoning_budget: int = -1  # -1 unlimited; 0 turns thinking off (enable_thinking=False)
    # devices: -ngl (a count, "auto" or "all"; None = auto: everything on a GPU when one is
    # found, software adapters excepted), -dev, -mg
    n_gpu_layers: Optional[str] = None
    device: Optional[str] = None
    main_gpu: int = 0
    # KV cache types and flash attention (-ctk, -ctv, -fa)
    cache_type_k: str = "f16"
    cache_type_v: str = "f16"
    flash_attn: str = "auto"
    # LoRA adapters and control vectors: [path, scale] items (--lora, --lora-scaled, ...)
    lora: List[List[object]] = msgspec.field(default_factory=list)
    lora_init_without_apply: bool = False
    control_vectors: List[List[object]] = msgspec.field(default_factory=list)
    control_vector_layer_range: Optional[List[int]] = None
    # chat (2026 flags)
    reasoning: str = "auto"  # -rea on|off|auto: enable_thinking given to the template (auto: its default)
    reasoning_effort: Optional[str] = None  # --reasoning-effort LEVEL ("default": the template's)
    reasoning_preserve: Optional[bool] = None  # --[no-]reasoning-preserve: preserve_reasoning for the template
    skip_chat_parsing: bool = False  # replies are plain content (no reasoning or tool-call extraction)
    prefill_assistant: bool = True  # a trailing assistant message is continued (False: a finished turn)
    spm_infill: bool = False  # /infill prompts in Suffix/Prefix/Middle order
    embd_normalize: int = 2  # default normalisation of /embedding(s) rows
    tags: List[str] = msgspec.field(default_factory=list)  # --tags: informational, shown by /v1/models
    ui_config: Dict[str, object] = msgspec.field(default_factory=dict)  # --ui-config: /props ui_settings
    sse_ping_interval: int = 30  # seconds of silence before an SSE comment ping (-1: none)
    reuse_port: bool = False  # SO_REUSEPORT on the listening sockets
    kv_unified_per_slot: Optional[int] = None  # without -c: n_ctx = n_parallel * N
    # process
    cpu_mask: Optional[str] = None  # -C hex mask of the CPUs the process may run on
    cpu_range: Optional[str] = None  # -Cr lo-hi
    prio: int = 0  # -1 low, 0 normal, 1 medium, 2 high, 3 realtime (raising needs privileges)
    offline: bool = False  # llamars never downloads: accepted as is
    # logging
    verbose: bool = False
    log_disable: bool = False
    log_file: Optional[str] = None  # llamars's log lines also go to this file
    log_verbosity: int = 3  # 1 errors, 2 warnings, 3 info, 4+ debug (as --verbose)
    log_prefix: bool = False  # a level letter before each llamars log line
    log_timestamps: bool = False  # the time since start before each llamars log line
    # one line per llama-server flag given that llamars accepts without acting on it
    warnings: List[str] = msgspec.field(default_factory=list)
    sampling: SamplingDefaults = msgspec.field(default_factory=SamplingDefaults)

    @property
    def tools_enabled(self) -> bool:
        """Built-in tools or MCP servers are on (they expose files and commands)."""
        return bool(self.tools or self.agent or self.mcp_servers_config or self.mcp_servers_json)

    def resolved_cors_origins(self) -> List[str]:
        """--cors-origins, else llama-server's default: `*`, narrowed to `localhost` when
        tools or MCP servers are on."""
        return self.cors_origins or (["localhost"] if self.tools_enabled else ["*"])

    def resolved_parallel(self) -> int:
        return 4 if self.n_parallel is None or self.n_parallel < 0 else max(1, self.n_parallel)

    def engine_kwargs(self) -> Dict[str, object]:
        """The `Engine(model, **kwargs)` this configuration asks for."""
        return dict(
            n_ctx=self.resolved_ctx(), n_threads=self.n_threads, n_batch=self.n_batch, n_ubatch=self.n_ubatch,
            n_parallel=self.resolved_parallel(), slot_prompt_similarity=self.slot_prompt_similarity,
            cache_reuse=self.cache_reuse, cache_ram=self.cache_ram, context_shift=self.context_shift,
            slot_save_path=self.slot_save_path, swa_full=self.swa_full,
            n_gpu_layers=self.n_gpu_layers if self.n_gpu_layers is not None else "auto", device=self.device,
            main_gpu=self.main_gpu, progress=False if self.log_disable else None, draft_model=self.model_draft,
            draft_n_ctx=self.ctx_size_draft,
            cache_type_k=self.cache_type_k, cache_type_v=self.cache_type_v, flash_attn=self.flash_attn,
            lora=[tuple(x) for x in self.lora], lora_init_without_apply=self.lora_init_without_apply,
            control_vectors=[tuple(x) for x in self.control_vectors],
            control_vector_layer_range=tuple(self.control_vector_layer_range) if self.control_vector_layer_range else None,
            speculative={"type": ",".join(self.spec_type) or ("draft-simple" if self.model_draft else "none"),
                         **{k[5:]: getattr(self, k) for k in self.__struct_fields__ if k.startswith("spec_ngram_")},
                         "lookup_cache_static": self.lookup_cache_static, "lookup_cache_dynamic": self.lookup_cache_dynamic},
        )

    def resolved_ctx(self) -> int:
        """-c, or with --kv-unified-per-slot N and no -c, room for N tokens in every slot."""
        if self.n_ctx == 0 and self.kv_unified_per_slot:
            return self.kv_unified_per_slot * self.resolved_parallel()
        return self.n_ctx

    @property
    def router(self) -> bool:
        """Router mode: started without -m and with a models directory or preset file."""
        return self.model is None and bool(self.models_dir or self.models_preset)

    @property
    def aliases(self) -> List[str]:
        """-a a,b: the model's names, sorted (llama-server keeps them in a std::set)."""
        return sorted({a.strip() for a in (self.alias or "").split(",") if a.strip()})

    @property
    def hosts(self) -> List[str]:
        """--host a,b: every address (or .sock path) to listen on."""
        return [h.strip() for h in self.host.split(",") if h.strip()] or ["127.0.0.1"]

    def template_defaults(self) -> Dict[str, object]:
        """Template variables the chat flags set (--reasoning, --reasoning-effort,
        --reasoning-preserve), under --chat-template-kwargs and request fields."""
        out: Dict[str, object] = {}
        if self.reasoning in ("on", "off"):
            out["enable_thinking"] = self.reasoning == "on"
        if self.reasoning_effort and self.reasoning_effort != "default":
            out["reasoning_effort"] = self.reasoning_effort
        if self.reasoning_preserve is not None:
            out["preserve_reasoning"] = self.reasoning_preserve
        out.update(self.chat_template_kwargs)
        return out
