"""What every route shares: the loaded engine (loaded in the background so /health can
answer 503 meanwhile), the chat template, and request fields → engine parameters."""
from __future__ import annotations

import os
import threading
import time
from typing import List, Optional

from .. import __version__
from ..async_engine import AsyncEngine
from ..chat.plan import ChatPlan, plan_chat
from ..config import ServerConfig
from ..engine import Engine
from ..schemas.native import Prompt, Sampling
from ..tools.spec import ToolSpecError
from .errors import ApiError

# llama.cpp sampler fields passed through to the engine when a request sets them
_SAMPLER_FIELDS = (
    "repeat_penalty", "repeat_last_n", "presence_penalty", "frequency_penalty", "dry_multiplier", "dry_base",
    "dry_allowed_length", "dry_penalty_last_n", "dry_sequence_breakers", "xtc_probability", "xtc_threshold",
    "typical_p", "top_n_sigma", "mirostat", "mirostat_tau", "mirostat_eta", "dynatemp_range", "dynatemp_exponent",
    "min_keep", "logit_bias", "samplers",
)


class Service:
    def __init__(self, config: ServerConfig, engine: Optional[Engine] = None) -> None:
        self.config = config
        self.engine: Optional[Engine] = engine
        self._owns_engine = engine is None
        self.aengine: Optional[AsyncEngine] = AsyncEngine(engine=engine) if engine else None
        self.error: Optional[str] = None
        self.template = None
        self.created = int(time.time())
        self.fingerprint = f"llamars-{__version__}"
        self._loader: Optional[threading.Thread] = None
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
            eng = Engine(
                c.model,
                n_ctx=c.n_ctx,
                n_threads=c.n_threads,
                n_batch=c.n_batch,
                n_ubatch=c.n_ubatch,
                n_parallel=c.resolved_parallel(),
                slot_prompt_similarity=c.slot_prompt_similarity,
                cache_reuse=c.cache_reuse,
                cache_ram=c.cache_ram,
                context_shift=c.context_shift,
                slot_save_path=c.slot_save_path,
                swa_full=c.swa_full,
                n_gpu_layers=c.n_gpu_layers if c.n_gpu_layers is not None else "auto",
                device=c.device,
                main_gpu=c.main_gpu,
                progress=False if c.log_disable else None,
            )
        except Exception as exc:  # reported by /health and the log
            self.error = f"{type(exc).__name__}: {exc}"
            self.log(f"llamars-server: failed to load the model: {self.error}")
            return
        self.engine = eng
        self._after_load()
        self.aengine = AsyncEngine(engine=eng)
        self.log(f"llamars-server: model loaded: {eng!r}")
        if eng.n_gpu_layers_offloaded:  # (a fallback to the CPU is logged once by Engine)
            self.log(f"llamars-server: {eng.info['gpu_note']}")

    def log(self, message: str) -> None:
        if not self.config.log_disable:
            print(message, flush=True)

    def _after_load(self) -> None:
        from ..chat.templates import template_for

        e = self.engine
        assert e is not None
        self.template = template_for(e, self.config.chat_template, self.config.chat_template_file)
        self.bos_text = self.template.bos_token

    def close(self) -> None:
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
        return self.config.alias or (self.config.model or "")

    # ------------------------------------------------------------ requests
    def prompts(self, prompt: Prompt) -> List[List[int]]:
        """llama.cpp's prompt forms: a string, token ids, a mixed list (one prompt), or a
        list of strings / token lists (several prompts)."""
        e = self.need()
        if isinstance(prompt, str):
            return [e.tokenize(prompt, add_special=True, parse_special=True)]
        if not prompt:
            raise ApiError(400, "prompt: must not be empty")
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

    def gen_kwargs(self, r: Sampling, *, n_predict: Optional[int], stop, n_probs: Optional[int] = None, **extra) -> dict:
        if r.grammar and r.json_schema:
            raise ApiError(400, "grammar and json_schema: give one, not both")
        if r.grammar:
            extra.setdefault("grammar", r.grammar)
        if r.json_schema:
            extra.setdefault("json_schema", r.json_schema)
        d0 = self.config.sampling
        if "grammar" not in extra and "json_schema" not in extra:
            if d0.grammar:
                extra["grammar"] = d0.grammar
            elif d0.json_schema:
                extra["json_schema"] = d0.json_schema
        extra_sampling = {**self.config.sampling.chain_defaults(), **{k: getattr(r, k) for k in _SAMPLER_FIELDS if getattr(r, k) is not None}}
        if isinstance(extra_sampling.get("logit_bias"), (dict, list)) and not extra_sampling["logit_bias"]:
            extra_sampling.pop("logit_bias")
        d = self.config.sampling
        if n_predict is None:
            n_predict = d.n_predict
        if n_predict < -1:
            raise ApiError(400, f"n_predict: must be >= -1, got {n_predict}")
        seed = r.seed if r.seed is not None else d.seed
        stop_list = [stop] if isinstance(stop, str) else list(stop or [])
        if len(stop_list) > 64:
            raise ApiError(400, "stop: at most 64 stop strings")
        np_ = n_probs if n_probs is not None else (r.n_probs if r.n_probs is not None else d.n_probs)
        return dict(
            max_tokens=None if n_predict == -1 else n_predict,
            stop=stop_list,
            temperature=r.temperature if r.temperature is not None else d.temperature,
            top_k=r.top_k if r.top_k is not None else d.top_k,
            top_p=r.top_p if r.top_p is not None else d.top_p,
            min_p=r.min_p if r.min_p is not None else d.min_p,
            seed=None if seed is None or seed < 0 else seed,
            ignore_eos=r.ignore_eos or d.ignore_eos,
            n_probs=np_,
            **extra_sampling,
            **extra,
        )

    def default_settings(self) -> dict:
        """The server's default generation settings in llama-server's shape (/props, /slots)."""
        from . import shapes

        e = self.need()
        d, c = self.config.sampling, self.config
        kw = {
            "max_tokens": None if d.n_predict < 0 else d.n_predict,
            "seed": d.seed,
            "temperature": d.temperature,
            "top_k": d.top_k,
            "top_p": d.top_p,
            "min_p": d.min_p,
            "n_probs": d.n_probs,
            "ignore_eos": d.ignore_eos,
            "stop": [],
            "n_keep": c.n_keep,
            "cache_prompt": c.cache_prompt,
            **d.chain_defaults(),
        }
        return shapes.settings(kw, self.model_id, e.n_ctx_slot)

    def render_chat(self, messages: list, add_generation_prompt: bool = True, kwargs: Optional[dict] = None) -> str:
        self.need()
        kw = {**self.config.chat_template_kwargs, **(kwargs or {})}
        msgs = [{k: v for k, v in (m if isinstance(m, dict) else _struct_dict(m)).items() if v is not None} for m in messages]
        return self.template.render(msgs, add_generation_prompt=add_generation_prompt, **kw)

    def plan_chat(self, messages: list, *, tools=None, tool_choice=None, parallel_tool_calls: Optional[bool] = None,
                  reasoning_format: Optional[str] = None, template_kwargs: Optional[dict] = None) -> ChatPlan:
        """A chat turn's prompt, tool-call grammar and reply parser (server defaults from
        the command line; request fields win)."""
        self.need()
        try:
            return plan_chat(
                self.template,
                messages,
                tools=tools,
                tool_choice=tool_choice,
                parallel_tool_calls=bool(parallel_tool_calls),
                reasoning_format=reasoning_format or self.config.reasoning_format,
                reasoning_budget=self.config.reasoning_budget,
                template_kwargs={**self.config.chat_template_kwargs, **(template_kwargs or {})},
            )
        except ToolSpecError as e:
            raise ApiError(400, str(e)) from None

    def chat_prompt_ids(self, text: str) -> List[int]:
        e = self.need()
        # the template may already spell out BOS; do not add a second one
        add = not (self.bos_text and text.startswith(self.bos_text))
        return e.tokenize(text, add_special=add, parse_special=True)


def _struct_dict(s) -> dict:
    import msgspec

    return msgspec.structs.asdict(s)


def model_path_id(path: str) -> str:
    return os.path.basename(path) if path else ""
