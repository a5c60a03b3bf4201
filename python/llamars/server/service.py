"""What every route shares: the loaded engine (loaded in the background so /health can
answer 503 meanwhile), the chat template, and request fields → engine parameters."""
from __future__ import annotations

import asyncio

import os
import threading
import time
from typing import Callable, List, Optional

from .._core import __version__
from ..async_engine import AsyncEngine
from ..chat.plan import ChatPlan, plan_chat
from ..config import ServerConfig
from ..engine import Engine
from ..schemas.native import SAMPLING_FIELDS, Prompt, PromptObject, Sampling, attr
from ..tools.spec import ToolSpecError
from .errors import ApiError
from .logline import LogLine
from .streams import StreamSessions


class Service:
    def __init__(self, config: ServerConfig, engine: Optional[Engine] = None) -> None:
        self.config = config
        self.logline = LogLine(config)
        self.streams = StreamSessions()  # resumable streams (X-Conversation-Id)
        self.engine: Optional[Engine] = engine
        self._owns_engine = engine is None
        self.aengine: Optional[AsyncEngine] = AsyncEngine(engine=engine) if engine else None
        self.error: Optional[str] = None
        self.template = None
        self.localai = None
        self.eog_tokens: List[int] = []
        self.created = int(time.time())
        self.fingerprint = f"llamars-{__version__}"
        self._loader: Optional[threading.Thread] = None
        # called with the error when the model cannot be loaded (the server exits on it)
        self.on_load_failed: Optional[Callable[[str], None]] = None
        # the addresses to open, said once the model is loaded (set by serve())
        self.open_urls: List[str] = []
        if engine is not None:
            self._after_load()

    # ------------------------------------------------------------ loading
    def start_loading(self) -> None:
        if self.engine is None and self._loader is None:
            self._loader = threading.Thread(target=self._load, name="llamars-load", daemon=True)
            self._loader.start()

    def _load(self) -> None:
        c = self.config
        try:
            kwargs = c.engine_kwargs()
            if c.fit != "off" and kwargs["n_ctx"] == 0:  # (a context size given is the user's)
                from ..fit import fit_ctx, target_bytes

                kwargs["n_ctx"], _, line = fit_ctx(c.model, kwargs["n_parallel"], c.n_ubatch, c.swa_full,
                                                   target_bytes(c.fit_target), c.fit_ctx)
                if line:
                    self.log(f"llamars-server: {line}")
            eng = Engine(c.model, **kwargs)
        except Exception as exc:  # reported by /health and the log
            self.error = f"{type(exc).__name__}: {exc}"
            if self.on_load_failed is not None:
                self.on_load_failed(self.error)
            else:
                self.log(f"llamars-server: failed to load the model: {self.error}", "E")
            return
        self.engine = eng
        self._after_load()
        self.aengine = AsyncEngine(engine=eng)
        self.log(f"llamars-server: model loaded: {eng!r}")
        if eng.n_gpu_layers_offloaded or str(c.n_gpu_layers or "auto").strip().lower() == "auto":
            # (a fallback from an explicit -ngl is warned about by Engine)
            self.log(f"llamars-server: {eng.info['gpu_note']}")
        for url in self.open_urls:
            self.log(f"llamars-server: ready: open {url}/ for the chat page, or use the API at {url}/v1"
                     if c.webui and not eng.info.get("encoder") else f"llamars-server: ready: the API is at {url}/v1 (and llama-server's routes at {url}/)")

    def log(self, message: str, level: str = "I") -> None:
        self.logline(message, level)

    def _after_load(self) -> None:
        from ..chat.templates import template_for

        e = self.engine
        assert e is not None
        c = self.config
        if e.info.get("encoder") and e.info.get("classifier") and e.info.get("pooling_type") == 4 and not c.rerank:
            c.rerank = True
            self.log(f"llamars-server: {e.info['arch']} reranker (a classification head, pooling rank): serving /rerank (--rerank is implied)")
        if c.rerank:
            # llama-server: --rerank is --embeddings --pooling rank
            c.embedding, c.pooling = True, c.pooling or "rank"
            if not e.info.get("classifier"):
                self.log(f"llamars-server: --rerank: {e.info['arch']} has no classification head (cls.output.weight); /rerank will answer 501", "W")
        if e.info.get("encoder") and not c.embedding:
            # an encoder computes embeddings and nothing else
            c.embedding = True
            self.log(f"llamars-server: {e.info['arch']} is an encoder model: serving embeddings (--embeddings is implied)")
        self.template = template_for(e, self.config.chat_template, self.config.chat_template_file)
        self.localai = None  # --model-config's prompt templates (completion, edit; chat when given)
        if self.config.model_config:
            from ..router.localai import prompts

            t = self.template
            self.localai = prompts(self.config.model_config)
            if self.localai is not None:
                self.localai.bos_token, self.localai.eos_token = t.bos_token, t.eos_token
                self.localai.tokenizer_adds_bos, self.localai.tokenizer_adds_eos = t.tokenizer_adds_bos, t.tokenizer_adds_eos
                if {"chat", "chat_message"} & set(self.localai.templates):
                    self.template = self.localai
        is_eog = e._core.is_eog
        self.eog_tokens = [t for t in range(e.n_vocab) if is_eog(t)]
        self.bos_text = self.template.bos_token

    def close(self) -> None:
        self.logline.close()
        if self.aengine is not None:
            self.aengine.close()
        if self.engine is not None and self._owns_engine:
            self.engine.close()

    @property
    def ready(self) -> bool:
        return self.engine is not None and self.aengine is not None

    def need(self) -> Engine:
        if self.engine is None or self.aengine is None:
            if self.error:
                raise ApiError(500, f"the model failed to load: {self.error}", "server_error")
            raise ApiError(503, "Loading model", "unavailable_error")
        return self.engine

    @property
    def model_id(self) -> str:
        """The model's name: its first alias in sorted order (as llama-server), or its path."""
        a = self.config.aliases
        return a[0] if a else str(self.config.model or "")  # (a Path when the config was made in Python)

    # ------------------------------------------------------------ requests
    def prompts(self, prompt: Prompt) -> List[List[int]]:
        """llama.cpp's prompt forms: a string, token ids, a mixed list (one prompt), or a
        list of strings / token lists (several prompts)."""
        e = self.need()
        if isinstance(prompt, PromptObject):
            prompt = _text_of(prompt)
        if isinstance(prompt, str):
            return [e.tokenize(prompt, add_special=True, parse_special=True)]
        if not prompt:
            raise ApiError(400, "prompt: must not be empty")
        prompt = [_text_of(p) if isinstance(p, PromptObject) else p for p in prompt]
        if all(isinstance(p, str) for p in prompt) and len(prompt) > 1 or any(isinstance(p, list) for p in prompt):
            return [self._one(p if isinstance(p, list) else [p]) for p in prompt]
        return [self._one(prompt)]

    def _one(self, parts: list) -> List[int]:
        e = self.need()
        out: List[int] = []
        for i, p in enumerate(parts):
            if isinstance(p, str):
                out += e.tokenize(p, add_special=(i == 0), parse_special=True)
            elif isinstance(p, int) and not isinstance(p, bool):
                if not 0 <= p < e.n_vocab:
                    raise ApiError(400, f"prompt: token id {p} is out of range [0, {e.n_vocab})")
                out.append(p)
            else:
                raise ApiError(400, f"prompt: items must be strings or token ids, got {type(p).__name__}")
        if not out:
            raise ApiError(400, "prompt: must not be empty")
        return out

    def gen_fields(self, r: Sampling, *, n_predict: Optional[int], stop, **extra) -> dict:
        """The generation fields of a request: the server's defaults (command line), then
        the request's sampling fields, then the route's own (`extra`; None = not set)."""
        f = self.config.sampling.fields()
        server_constraint = {k: f.pop(k) for k in ("grammar", "json_schema") if k in f}
        given = {k: getattr(r, attr(k)) for k in SAMPLING_FIELDS if getattr(r, attr(k)) is not None}
        if isinstance(given.get("logit_bias"), (dict, list)) and not given["logit_bias"]:
            given.pop("logit_bias")
        f.update(given)
        if n_predict is not None:
            f["max_tokens"] = n_predict
        f["stop"] = stop if stop is not None else f.get("stop", [])  # (-r: the server's default stop strings)
        f.update({k: v for k, v in extra.items() if v is not None})
        if f.get("ignore_eos") and self.eog_tokens:
            # as llama-server: ignore_eos bans every end-of-generation token (and shows it in logit_bias)
            bias = f.get("logit_bias")
            if isinstance(bias, dict):
                f["logit_bias"] = {**bias, **{str(t): False for t in self.eog_tokens}}
            else:
                f["logit_bias"] = list(bias or []) + [[t, False] for t in self.eog_tokens]
        if not (f.get("grammar") or f.get("json_schema")):  # the server-wide one when none is given
            f.update(server_constraint)
        return f

    def requests(self, prompt: Prompt, fields: dict, names: Optional[dict] = None, n: int = 1) -> list:
        """`n` validated requests for each prompt of a completion request (llama.cpp's
        prompt forms); the count is bounded before anything is tokenized."""
        count = len(prompt) if isinstance(prompt, list) and any(isinstance(p, (str, list)) for p in prompt) else 1
        if count * n > self.config.max_prompts:
            raise ApiError(400, f"prompt: {count} prompts × {n} completions exceeds the limit of {self.config.max_prompts} "
                                "generations per request (--max-prompts)")
        return [self.request(p, fields, names) for p in self.prompts(prompt) for _ in range(n)]

    async def arequests(self, prompt: Prompt, fields: dict, names: Optional[dict] = None, n: int = 1) -> list:
        """`requests` on a worker thread (tokenizing grows with the input)."""
        return await asyncio.to_thread(self.requests, prompt, fields, names, n)

    def request(self, ids: List[int], fields: dict, names: Optional[dict] = None):
        """A validated `GenerationRequest` (errors are 400s naming the field as `names`
        spells it, e.g. max_tokens → n_predict)."""
        return self.need().request(ids, _names=names, **fields)

    def default_settings(self) -> dict:
        """The server's default generation settings in llama-server's shape (/props, /slots)."""
        from . import shapes

        e = self.need()
        req = e.request([e.info["bos"] or 0], **self.config.sampling.fields(), n_keep=self.config.n_keep,
                        cache_prompt=self.config.cache_prompt)
        return shapes.settings(req.settings(), self.model_id, e.n_ctx_slot)

    def _check_counts(self, messages: list, tools=None) -> None:
        """The per-request bounds on a chat, before any rendering."""
        if len(messages) > self.config.max_messages:
            raise ApiError(400, f"messages: {len(messages)} messages exceed the limit of {self.config.max_messages} "
                                "per request (--max-messages)")
        if tools and len(tools) > self.config.max_tools:
            raise ApiError(400, f"tools: {len(tools)} tools exceed the limit of {self.config.max_tools} per request (--max-tools)")

    def render_chat(self, messages: list, add_generation_prompt: bool = True, kwargs: Optional[dict] = None) -> str:
        self.need()
        self._check_counts(messages)
        from ..chat.plan import close_thinking_prompt, thinking_kwargs

        kw = {**self.config.template_defaults(), **_template_kwargs(kwargs)}
        if self.config.reasoning_budget == 0:
            kw.setdefault("enable_thinking", False)
        kw = thinking_kwargs(self.template, kw)
        msgs = [{k: v for k, v in (m if isinstance(m, dict) else _struct_dict(m)).items() if v is not None} for m in messages]
        prompt = self.template.render(msgs, add_generation_prompt=add_generation_prompt,
                                      prefill=self.config.prefill_assistant, **kw)
        prefilled = self.config.prefill_assistant and msgs and msgs[-1].get("role") == "assistant"
        return close_thinking_prompt(self.template, prompt, kw) if add_generation_prompt and not prefilled else prompt

    def plan_chat(self, messages: list, *, tools=None, tool_choice=None, parallel_tool_calls: Optional[bool] = None,
                  reasoning_format: Optional[str] = None, template_kwargs: Optional[dict] = None) -> ChatPlan:
        """A chat turn's prompt, tool-call grammar and reply parser (server defaults from
        the command line; request fields win)."""
        self.need()
        self._check_counts(messages, tools)
        try:
            return plan_chat(
                self.template,
                messages,
                tools=tools,
                tool_choice=tool_choice,
                parallel_tool_calls=bool(parallel_tool_calls),
                reasoning_format=reasoning_format or self.config.reasoning_format,
                reasoning_budget=self.config.reasoning_budget,
                template_kwargs={**self.config.template_defaults(), **_template_kwargs(template_kwargs)},
                prefill=self.config.prefill_assistant,
                parse=not self.config.skip_chat_parsing,
            )
        except ToolSpecError as e:
            raise ApiError(400, str(e)) from None

    def chat_prompt_ids(self, text: str) -> List[int]:
        e = self.need()
        # the template may already spell out BOS; do not add a second one
        add = not (self.bos_text and text.startswith(self.bos_text))
        return e.tokenize(text, add_special=add, parse_special=True)


def _text_of(p: PromptObject) -> str:
    if p.multimodal_data:  # (llama-server's message)
        raise ApiError(400, "Multimodal data provided, but model does not support multimodal requests.")
    return p.prompt_string


# what the renderer passes to a chat template itself: a request cannot set these
RENDERER_ARGS = frozenset({"messages", "tools", "add_generation_prompt", "bos_token", "eos_token", "raise_exception",
                           "strftime_now", "tojson", "self"})


def _template_kwargs(kw: Optional[dict]) -> dict:
    bad = sorted(k for k in (kw or {}) if k in RENDERER_ARGS or not isinstance(k, str) or not k.isidentifier())
    if bad:
        raise ApiError(400, f"chat_template_kwargs: {', '.join(map(repr, bad))} cannot be set (reserved by the renderer, or not a name)")
    return dict(kw or {})


def _struct_dict(s) -> dict:
    import msgspec

    return msgspec.structs.asdict(s)


def model_path_id(path: str) -> str:
    return os.path.basename(path) if path else ""
