"""Response bodies in llama.cpp's shapes, built from engine results (no I/O here)."""
from __future__ import annotations

from typing import List, Optional

from ..engine import Engine
from ..results import GenerationResult


def timings(r: GenerationResult) -> dict:
    t = r.timings
    return {
        "cache_n": r.tokens_cached,
        "prompt_n": t.prompt_n,
        "prompt_ms": t.prompt_ms,
        "prompt_per_token_ms": t.prompt_ms / t.prompt_n if t.prompt_n else 0.0,
        "prompt_per_second": t.prompt_per_second,
        "predicted_n": t.predicted_n,
        "predicted_ms": t.predicted_ms,
        "predicted_per_token_ms": t.predicted_ms / t.predicted_n if t.predicted_n else 0.0,
        "predicted_per_second": t.predicted_per_second,
    }


def running_timings(progress: dict, predicted_n: int, elapsed_ms: float) -> dict:
    """Timings while streaming (timings_per_token): the prompt figures as the engine
    reported them, generation measured from the end of the prompt to this token."""
    prompt_n = progress["total"] - progress["cache"]
    prompt_ms = progress["time_ms"]
    predicted_ms = max(elapsed_ms - prompt_ms, 1e-3)
    return {
        "cache_n": progress["cache"],
        "prompt_n": prompt_n,
        "prompt_ms": prompt_ms,
        "prompt_per_token_ms": prompt_ms / prompt_n if prompt_n else 0.0,
        "prompt_per_second": 1e3 * prompt_n / prompt_ms if prompt_ms > 0 else 0.0,
        "predicted_n": predicted_n,
        "predicted_ms": predicted_ms,
        "predicted_per_token_ms": predicted_ms / predicted_n,
        "predicted_per_second": 1e3 * predicted_n / predicted_ms,
    }


def piece(e: Engine, tok: int) -> tuple:
    b = e.token_to_piece(tok, special=True)
    return b.decode("utf-8", "replace"), list(b)


def probs(e: Engine, tok: int, value: float, top: list, post: bool = False) -> dict:
    """One completion_probabilities entry: log-probabilities, or with post_sampling_probs
    the probabilities after the sampler chain (`prob` / `top_probs`, llama.cpp's names)."""
    text, bs = piece(e, tok)
    key, tkey = ("prob", "top_probs") if post else ("logprob", "top_logprobs")
    return {
        "id": tok,
        "token": text,
        "bytes": bs,
        key: value,
        tkey: [{"id": i, "token": piece(e, i)[0], "bytes": piece(e, i)[1], key: v} for i, v in top],
    }


# llama.cpp's defaults for the sampler fields a request did not set
_CHAIN_DEFAULTS = {
    "dynatemp_range": 0.0, "dynatemp_exponent": 1.0, "top_n_sigma": -1.0, "xtc_probability": 0.0, "xtc_threshold": 0.1,
    "typical_p": 1.0, "repeat_last_n": 64, "repeat_penalty": 1.0, "presence_penalty": 0.0, "frequency_penalty": 0.0,
    "dry_multiplier": 0.0, "dry_base": 1.75, "dry_allowed_length": 2, "dry_penalty_last_n": -1,
    "dry_sequence_breakers": ["\n", ":", "\"", "*"], "mirostat": 0, "mirostat_tau": 5.0, "mirostat_eta": 0.1, "min_keep": 0,
}
_DEFAULT_ORDER = ["penalties", "dry", "top_n_sigma", "top_k", "typ_p", "top_p", "min_p", "xtc", "temperature"]


def settings(kw: dict, model: str, n_ctx: int, extra: Optional[dict] = None) -> dict:
    """generation_settings in llama-server's shape: every sampler field with its value."""
    samplers = kw.get("samplers") or _DEFAULT_ORDER
    return {
        "n_predict": -1 if kw["max_tokens"] is None else kw["max_tokens"],
        "max_tokens": -1 if kw["max_tokens"] is None else kw["max_tokens"],
        "seed": kw["seed"] if kw["seed"] is not None else -1,
        "temperature": kw["temperature"],
        "top_k": kw["top_k"],
        "top_p": kw["top_p"],
        "min_p": kw["min_p"],
        **{k: kw.get(k, v) for k, v in _CHAIN_DEFAULTS.items()},
        "logit_bias": [list(x) for x in kw.get("logit_bias") or []],
        "n_probs": kw["n_probs"],
        "post_sampling_probs": kw.get("post_sampling_probs", False),
        "ignore_eos": kw["ignore_eos"],
        "stop": kw["stop"],
        "n_keep": kw.get("n_keep", 0),
        "n_discard": kw.get("n_discard", 0),
        "cache_prompt": kw.get("cache_prompt", True),
        "id_slot": kw.get("id_slot") if kw.get("id_slot") is not None else -1,
        "samplers": list(samplers) if not isinstance(samplers, str) else list(samplers),
        "grammar": kw.get("grammar") or "",
        "json_schema": kw.get("json_schema") or "",
        "stream": kw.get("stream", False),
        "timings_per_token": kw.get("timings_per_token", False),
        "model": model,
        "n_ctx": n_ctx,
        **(extra or {}),
    }


def native_final(e: Engine, r: GenerationResult, kw: dict, model: str, index: int, return_tokens: bool, with_probs: bool, post: bool = False) -> dict:
    out = {
        "index": index,
        "content": r.text,
        "tokens": r.tokens if return_tokens else [],
        "id_slot": r.id_slot,
        "stop": True,
        "model": model,
        "tokens_predicted": len(r.tokens),
        "tokens_evaluated": r.tokens_evaluated,
        "generation_settings": settings(kw, model, e.n_ctx_slot, {"seed": r.seed}),
        "prompt": e.detokenize(r.prompt_tokens),
        "has_new_line": "\n" in r.text,
        "truncated": r.truncated,
        "stop_type": r.stop_reason,
        "stopping_word": r.stopping_word,
        "tokens_cached": r.tokens_cached,
        "timings": timings(r),
    }
    if with_probs:
        out["completion_probabilities"] = [probs(e, p["id"], p["logprob"], [(t["id"], t["logprob"]) for t in p["top_logprobs"]], post) for p in r.probs]
    return out


def pick_fields(obj: dict, fields: List[str]) -> dict:
    """llama.cpp's response_fields: keep these (paths like a/b are unnested to b)."""
    out = {}
    for f in fields:
        cur = obj
        for part in f.split("/"):
            cur = cur.get(part) if isinstance(cur, dict) else None
        if cur is not None:
            out[f.split("/")[-1]] = cur
    return out


def finish_reason(r: GenerationResult) -> str:
    return "length" if r.stop_reason == "limit" else "stop"


def usage(prompt_n: int, completion_n: int, cached: int = 0) -> dict:
    return {
        "prompt_tokens": prompt_n,
        "completion_tokens": completion_n,
        "total_tokens": prompt_n + completion_n,
        "prompt_tokens_details": {"cached_tokens": cached},
    }
