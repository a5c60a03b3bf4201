"""`Engine`: load a GGUF model and run it in-process (tokenize, logits, generate, stream),
with a batching loop serving many callers at once."""
from __future__ import annotations

import logging
import os
import threading
from typing import Any, Dict, List, Optional, Sequence, Union

import numpy as np

from . import _core, _fronts
from .engine_args import adapter_args, check_sizes, gpu_layers, lora_fields, lora_pairs, spec_config, spec_fields
from .errors import InvalidRequestError
from .progress import progress_bar
from .results import GenerationResult, Stream

Prompt = Union[str, Sequence[int]]

_ASYNC_LOCK = threading.Lock()
_log = logging.getLogger("llamars")


def generation_defaults() -> Dict[str, Any]:
    """Every generation field `Engine.stream` / `generate` take, with its default (from the core)."""
    return {name: default for name, _kind, _group, default, _help in _core.generation_fields()}


class Engine:
    """A loaded GGUF model served by a batching loop on its own thread.

    >>> eng = Engine("model.gguf", n_ctx=2048, n_parallel=4)
    >>> eng.generate("The capital of France is", max_tokens=8, temperature=0.0).text

    `generate` and `stream` may be called from many threads at once: up to
    `n_parallel` requests run together (continuous batching), the rest wait their turn.
    Each slot gets n_ctx / n_parallel positions of context. `progress` (None: only in a
    notebook or terminal) shows a spinner while the model loads; `agenerate`/`astream`
    serve asyncio callers (Jupyter's loop included); in Jupyter the engine shows as a table.
    `n_gpu_layers` (a count, 'auto' or 'all', as llama.cpp's `-ngl`) offloads the output
    layer and the last layers to a GPU through wgpu; `device` names one of
    `Engine.devices()` (software adapters such as lavapipe are used only when named).
    `speculative` turns on speculative decoding for every request: a type of llama-server's
    `--spec-type` ("ngram-simple", "ngram-map-k", "ngram-map-k4v", "ngram-mod", "ngram-cache", or several
    comma-separated), or a dict with "type" and parameters named as llama-server's flags
    ("ngram_simple_size_n", ..., and for "ngram-cache" the files "lookup_cache_static" /
    "lookup_cache_dynamic"); `draft_model` (a GGUF file with the model's vocabulary) drafts
    with a second model ("draft-simple"; `draft_n_ctx`: its context, 0 = the model's); outputs
    stay exactly those without it. Per call, `speculative={"n_max": 8, "n_min": 0}` (or False).
    `cache_type_k` / `cache_type_v` (llama-server's `-ctk` / `-ctv`: f16, q8_0, q4_0, …) and
    `flash_attn` ("on", "off", "auto") choose the KV cache's types and attention path.
    `exact`: None (as `LLAMARS_EXACT`), True (llama.cpp's orders everywhere), False (fast mode).
    `lora` (GGUF adapter files, or (file, scale) pairs) loads LoRA adapters, applied at
    those scales (0 with `lora_init_without_apply`) unless a call's `lora=[{"id", "scale"}]`
    (or `{id: scale}`) says otherwise; `control_vectors` likewise, over
    `control_vector_layer_range` = (first, last).
    """

    def __init__(
        self,
        model: Union[str, os.PathLike],
        *,
        n_ctx: int = 4096,
        n_threads: Optional[int] = None,
        n_batch: int = 512,
        n_ubatch: int = 512,
        n_parallel: int = 1,
        slot_prompt_similarity: float = 0.1,
        cache_reuse: int = 0,
        cache_ram: int = 0,
        context_shift: bool = False,
        slot_save_path: Union[str, os.PathLike, None] = None,
        swa_full: bool = False,
        n_gpu_layers: Union[int, str] = 0,
        device: Optional[str] = None,
        main_gpu: int = 0,
        speculative: Union[None, str, Dict[str, Any]] = None,
        draft_model: Union[str, os.PathLike, None] = None,
        draft_n_ctx: int = 0,
        lora=None,
        lora_init_without_apply: bool = False,
        control_vectors=None,
        control_vector_layer_range=None,
        cache_type_k: str = "f16",
        cache_type_v: str = "f16",
        flash_attn: str = "auto",
        exact: Optional[bool] = None,
        progress: Optional[bool] = None,
    ) -> None:
        check_sizes(n_ctx=n_ctx, n_batch=n_batch, n_ubatch=n_ubatch, n_parallel=n_parallel, n_threads=n_threads,
                    cache_reuse=cache_reuse, cache_ram=cache_ram, draft_model=draft_model, draft_n_ctx=draft_n_ctx, exact=exact)
        spec = spec_config(speculative)
        if draft_model is not None and speculative is None:
            spec = ("draft-simple",) + spec[1:]
        ngl = gpu_layers(n_gpu_layers)
        adapters = adapter_args(lora, lora_init_without_apply, control_vectors, control_vector_layer_range)
        if main_gpu < 0:
            raise InvalidRequestError(f"main_gpu must be >= 0, got {main_gpu}")
        self.model_path = os.fspath(model)
        # progress: a spinner with the elapsed time while the core maps and binds the
        # model (None = only in a notebook or on a terminal, and only if it takes > 0.3 s)
        with progress_bar(f"llamars: loading {os.path.basename(self.model_path)}", enabled=progress):
            self._core = _core.Engine(
                self.model_path,
                n_ctx,
                n_threads,
                n_batch,
                n_ubatch,
                n_parallel,
                float(slot_prompt_similarity),
                cache_reuse,
                cache_ram,
                bool(context_shift),
                os.fspath(slot_save_path) if slot_save_path is not None else None,
                bool(swa_full),
                ngl,
                device,
                main_gpu,
                *spec,
                os.fspath(draft_model) if draft_model is not None else None,
                draft_n_ctx,
                *adapters,
                str(cache_type_k), str(cache_type_v), str(flash_attn), exact,
            )
        self.info = self._core.info()
        if ngl != 0 and self.info["n_gpu_layers_offloaded"] == 0:
            # asked for GPU layers and got none: a warning; 'auto' on a machine without a
            # GPU is the expected CPU run (debug here; the server says it once, calmly)
            auto = isinstance(n_gpu_layers, str) and n_gpu_layers.strip().lower() == "auto"
            _log.log(logging.DEBUG if auto else logging.WARNING, "llamars: %s", self.info["gpu_note"])

    # ---------------------------------------------------------------- facts
    @property
    def n_vocab(self) -> int:
        return self.info["n_vocab"]

    @property
    def n_ctx(self) -> int:
        return self.info["n_ctx"]

    @property
    def n_parallel(self) -> int:
        return self.info["n_parallel"]

    @property
    def n_ctx_slot(self) -> int:
        return self.info["n_ctx_slot"]

    @property
    def arch(self) -> str:
        return self.info["arch"]

    @property
    def n_gpu_layers_offloaded(self) -> int:
        """Layers on the GPU, counted as llama.cpp does (the output layer is one of them)."""
        return self.info["n_gpu_layers_offloaded"]

    @property
    def gpu_device(self) -> Optional[str]:
        """The device the offloaded layers run on (`Vulkan0`, …), or None."""
        return self.info["gpu_device"]

    @staticmethod
    def devices() -> List[Dict[str, Any]]:
        """GPU adapters this build can offload to: name (for `device=`), description,
        backend, kind (discrete/integrated/virtual/cpu), driver, limits."""
        return _core.list_devices()

    def __repr__(self) -> str:
        i = self.info
        return (
            f"Engine({os.path.basename(i['path'])!r}, arch={i['arch']}, n_params={i['n_params']:,}, "
            f"n_ctx={i['n_ctx']}, n_parallel={i['n_parallel']})"
        )

    def _repr_html_(self) -> str:
        """Jupyter's rich view: model, architecture, quantization, context, devices."""
        return _fronts.get("html")(self)

    # ---------------------------------------------------------------- tokens
    def tokenize(self, text: str, add_special: bool = True, parse_special: bool = True) -> list:
        return self._core.tokenize(text, add_special, parse_special)

    def tokenize_json(self, text: str, add_special: bool = True, parse_special: bool = True) -> bytes:
        """`tokenize` as the JSON bytes `{"tokens": [...]}`, made without the GIL and without
        a Python int per token (what a server replies to a huge prompt)."""
        return self._core.tokenize_json(text, add_special, parse_special)

    def detokenize(self, ids: Sequence[int], remove_special: bool = False, unparse_special: bool = False) -> str:
        return self._core.detokenize(list(ids), remove_special, unparse_special)

    def token_to_piece(self, token: int, special: bool = True) -> bytes:
        return self._core.token_to_piece(token, special)

    # ---------------------------------------------------------------- compute
    def logits(self, ids: Sequence[int], *, lora=None) -> np.ndarray:
        """float32 [len(ids), n_vocab]: logits at every position, in a fresh context (under
        `lora`'s adapter scales as in `generate`; None: the global ones)."""
        buf, n, nv = self._core.logits(list(ids), None if lora is None else lora_pairs(lora))
        return np.frombuffer(buf, dtype=np.float32).reshape(n, nv)

    def hidden_states(self, ids: Sequence[int]) -> np.ndarray:
        """float32 [len(ids), n_embd]: final-normed hidden states, in a fresh context."""
        buf, n, ne = self._core.hidden_states(list(ids))
        return np.frombuffer(buf, dtype=np.float32).reshape(n, ne)

    def hidden_states_many(self, seqs: Sequence[Sequence[int]]) -> list:
        """`hidden_states` of several sequences, each on its own; an encoder batches them."""
        return [np.frombuffer(b, dtype=np.float32).reshape(n, ne) for b, n, ne in self._core.hidden_states_many([list(s) for s in seqs])]

    def classify_many(self, seqs: Sequence[Sequence[int]]) -> list:
        """`classify` of several sequences, batched."""
        return self._core.classify_many([list(s) for s in seqs])

    def embed(self, inputs, *, pooling: Optional[str] = None, normalize: float = 2) -> list:
        """Embeddings of a str / token ids, or a list of them: one float32 array each,
        [1, n_embd] when pooled (mean, cls, last) or [n_tokens, n_embd] for pooling
        "none"; rows normalised as llama.cpp's embd_normalize (2 = Euclidean)."""
        from . import embeddings as emb

        pooling = pooling or emb.default_pooling(self.info.get("pooling_type"))
        if pooling not in emb.POOLINGS:
            raise InvalidRequestError(f"pooling must be one of {', '.join(emb.POOLINGS)}, got {pooling!r}")
        single = isinstance(inputs, str) or (isinstance(inputs, (list, tuple)) and inputs and all(isinstance(t, int) for t in inputs))
        items = [inputs] if single else list(inputs)
        if not items:
            raise InvalidRequestError("input: at least one text or token list is required")
        ids = [self._prompt_ids(x) for x in items]
        if pooling == "rank":
            return [np.array([s], dtype=np.float32) for s in self.classify_many(ids)]
        return [emb.normalize(emb.pool(h, pooling), normalize) for h in self.hidden_states_many(ids)]

    def classify(self, ids: Sequence[int]) -> list:
        """An encoder's classifier outputs for token ids (a reranker's scores)."""
        return self._core.classify(list(ids))

    def rerank(self, query: str, documents: Sequence, *, top_n: Optional[int] = None) -> list:
        """Documents ranked by a reranker's score for `query`, highest first, as llama-server
        ranks them: [{"index", "relevance_score", "document"}], the first `top_n`."""
        from . import rerank as rr

        query, texts, top_n = rr.check(query, documents, top_n)
        scores = [s[0] for s in self.classify_many([rr.pair_ids(self, query, d) for d in texts])]
        return [{"index": i, "relevance_score": s, "document": texts[i]} for i, s in rr.order(scores, top_n)]

    def _prompt_ids(self, prompt: Prompt) -> list:
        if isinstance(prompt, str):
            return self.tokenize(prompt, add_special=True, parse_special=True)
        if isinstance(prompt, (bytes, bytearray)):
            raise InvalidRequestError("prompt must be a str or a list of token ids, not bytes")
        ids = list(prompt)
        if not all(isinstance(t, (int, np.integer)) and not isinstance(t, bool) for t in ids):
            raise InvalidRequestError("prompt must be a str or a list of token ids (ints)")
        return [int(t) for t in ids]

    def request(self, prompt: Prompt, _names: Optional[Dict[str, str]] = None, **fields) -> "_core.GenerationRequest":
        """A validated `GenerationRequest` for `prompt` with the generation `fields` given
        (the parameters of `stream`; the rest at their defaults, which the core defines:
        `llamars.generation_defaults()`). Bad values raise `InvalidRequestError` naming
        the field."""
        if "speculative" in fields:
            fields.update(spec_fields(fields.pop("speculative")))
        if fields.get("lora") is not None:
            fields["lora"] = lora_fields(fields["lora"])
        return self._core.request(self._prompt_ids(prompt), fields, _names)

    def stream(self, prompt: Prompt, **kwargs) -> Stream:
        """Start a generation and iterate over its chunks as they are produced.

        A str prompt is tokenized with BOS (when the model asks for it) and special
        tokens parsed; a list of ids is used as given. temperature <= 0 is greedy.
        Parameters (defaults as llama.cpp): max_tokens=16 (None or -1: until the context
        is full), stop, temperature=0.8, top_k=40, top_p=0.95, min_p=0.05, seed,
        ignore_eos, n_probs, cache_prompt=True, id_slot, n_keep=0 (-1: whole prompt),
        n_discard=0 (0: half), truncate=False (cut an over-long prompt instead of
        raising ContextOverflowError), return_progress=False (yield prompt-processing
        chunks with `progress` set), n_indent=0, t_max_predict_ms=0 (llama.cpp's), and
        llama.cpp's other sampler fields (repeat_penalty, presence_penalty,
        frequency_penalty, repeat_last_n, dry_*, typical_p, top_n_sigma, xtc_*, mirostat*,
        dynatemp_*, min_keep, logit_bias, samplers) with llama.cpp's defaults; grammar (GBNF,
        or Lark after `%llguidance`) or json_schema (dict) constrain the output;
        grammar_triggers (list of words) makes the grammar lazy: the output is free until
        one of the words appears, then constrained from that word on.
        """
        return self.submit(self.request(prompt, **kwargs))

    def submit(self, req: "_core.GenerationRequest", *, quiet: bool = False) -> Stream:
        """Start a generation from a `GenerationRequest` (`Engine.request`); `quiet`:
        only the final result, no per-token chunks."""
        return Stream(self._core.submit(req, quiet), progress=req.return_progress)

    def generate(self, prompt: Prompt, **kwargs) -> GenerationResult:
        """Generate to completion; same parameters as `stream`."""
        s = self.submit(self.request(prompt, **kwargs), quiet=True)
        for _ in s:
            pass
        assert s.result is not None
        return s.result

    @property
    def chat_template(self):
        """The `ChatTemplate` chat turns are rendered with (the GGUF's, else the
        architecture's format); assign a `ChatTemplate` to change it."""
        if getattr(self, "_chat_template", None) is None:
            from .chat.templates import template_for

            self._chat_template = template_for(self)
        return self._chat_template

    @chat_template.setter
    def chat_template(self, t) -> None:
        self._chat_template = t

    def chat(self, messages: list, *, tools=None, tool_choice=None, parallel_tool_calls: bool = False,
             reasoning_format: str = "auto", chat_template_kwargs: Optional[dict] = None, execute: bool = False,
             approve=None, max_steps: int = 8, on_step=None, **kwargs):
        """One chat turn: `messages` in OpenAI's shape (roles system/user/assistant/tool,
        assistant `tool_calls`), optional `tools` (OpenAI function tools) and
        `tool_choice` ("auto", "none", "required" or {"type": "function", "function":
        {"name": ...}}); other keyword arguments as `generate`. Returns a `ChatResult`
        with `content`, `reasoning`, `tool_calls`, `finish_reason` and `result`;
        `ChatResult.message()` is the assistant turn to append for the next call.

        With `execute=True`, `tools` is a `llamars.agent.Toolbox` and the calls are run:
        each one approved by `approve(name, arguments)` (default: all), its result given
        back, the model continuing until it answers without calls or after `max_steps`
        turns; `on_step(message)` sees each message added, and the result's `messages`
        holds them all."""
        if execute:
            return _fronts.get("agent")(self, messages, tools=tools, approve=approve, max_steps=max_steps, on_step=on_step,
                                        tool_choice=tool_choice, parallel_tool_calls=parallel_tool_calls,
                                        reasoning_format=reasoning_format, chat_template_kwargs=chat_template_kwargs, **kwargs)
        return _fronts.get("chat")(self, messages, tools=tools, tool_choice=tool_choice, parallel_tool_calls=parallel_tool_calls,
                        reasoning_format=reasoning_format, chat_template_kwargs=chat_template_kwargs, **kwargs)

    # ---------------------------------------------------------------- asyncio
    def _async(self):
        """The `AsyncEngine` this engine's `agenerate`/`astream` run on (made on first use)."""
        with _ASYNC_LOCK:
            if getattr(self, "_aengine", None) is None:
                self._aengine = _fronts.get("async")(engine=self)
            return self._aengine

    async def agenerate(self, prompt: Prompt, **kwargs) -> GenerationResult:
        """`generate` for asyncio (also in Jupyter's running loop: `await eng.agenerate(...)`)."""
        return await self._async().agenerate(prompt, **kwargs)

    def astream(self, prompt: Prompt, **kwargs):
        """`stream` for asyncio: `async for chunk in eng.astream(...)` directly, or
        `s = await eng.astream(...)` for the `AsyncStream` (as `AsyncEngine.astream`);
        `.result` once done. The request starts at the first `await` / iteration."""
        return _fronts.get("lazy_astream")(self._async(), prompt, kwargs)

    def cancel(self, request_id: int) -> None:
        """Stop a queued or running request by id (`Stream.id`); other requests go on."""
        self._core.cancel(int(request_id))

    def lora_adapters(self) -> list:
        """The LoRA adapters: [{id, path, scale (the global one), task_name, prompt_prefix, n_tensors}]."""
        return self._core.lora_adapters()

    def set_lora(self, scales) -> None:
        """Set the global adapter scales (`[{"id", "scale"}]` or `{id: scale}`; the others 0),
        for requests submitted from now on."""
        self._core.set_lora_scales(lora_pairs(scales))

    # ---------------------------------------------------------------- slots
    def slots(self) -> list:
        """Per-slot state: id, n_ctx, is_processing, id_task, n_cached, kv_bytes (of its KV rows),
        n_prompt_tokens, n_prompt_cached (of the running prompt, the tokens reused from the cache),
        n_decoded, n_remain, has_next_token (generating, or the last ended before a stop)."""
        return self._core.slots()

    def metrics(self) -> dict:
        """Counters since start: prompt/predicted tokens and seconds, decodes, busy slots, KV usage, deferred requests."""
        return self._core.metrics()

    def slot_save(self, id_slot: int, filename: str) -> dict:
        """Write slot `id_slot`'s tokens and KV cache to `slot_save_path/filename`."""
        return self._core.slot_action(id_slot, "save", filename)

    def slot_restore(self, id_slot: int, filename: str) -> dict:
        """Load a saved slot file into slot `id_slot` (refused if made by another model)."""
        return self._core.slot_action(id_slot, "restore", filename)

    def slot_erase(self, id_slot: int) -> dict:
        """Forget what slot `id_slot` holds."""
        return self._core.slot_action(id_slot, "erase", None)

    def close(self) -> None:
        """Stop the engine loop; pending requests end with CancelledError."""
        if getattr(self, "_aengine", None) is not None:
            self._aengine.close()
        self._core.shutdown()

    def __enter__(self) -> "Engine":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
