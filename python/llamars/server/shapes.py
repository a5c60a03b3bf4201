"""Response bodies in llama.cpp's shapes, built from engine results (no I/O here)."""
from __future__ import annotations

from typing import List, Optional

from ..engine import Engine
from ..results import GenerationResult


def timings(r: GenerationResult) -> dict:
    t = r.timings
    out = {
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
    if t.draft_n > 0:  # as llama-server: only when speculative decoding drafted something
        out.update(draft_n=t.draft_n, draft_n_accepted=t.draft_n_accepted)
    return out


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


# the sampler chain's fields, in llama-server's order
_CHAIN = ("dynatemp_range", "dynatemp_exponent", "top_n_sigma", "xtc_probability", "xtc_threshold", "typical_p", "repeat_last_n",
          "repeat_penalty", "presence_penalty", "frequency_penalty", "dry_multiplier", "dry_base", "dry_allowed_length",
          "dry_penalty_last_n", "dry_sequence_breakers", "mirostat", "mirostat_tau", "mirostat_eta", "min_keep")


def logit_bias(b) -> list:
    """llama-server's shape: [{"bias": b, "token": id}], a ban (false, -inf) as null."""
    pairs = b.items() if isinstance(b, dict) else (b or [])
    out = []
    for t, v in pairs:
        if isinstance(t, str) and t.lstrip("-").isdigit():
            t = int(t)
        ban = v is False or (isinstance(v, float) and v == float("-inf"))
        out.append({"bias": None if ban else v, "token": t})
    return out


def settings(s: dict, model: str, n_ctx: int, extra: Optional[dict] = None) -> dict:
    """generation_settings in llama-server's shape from a request's effective fields
    (`GenerationRequest.settings()`: every field, defaults filled in by the core)."""
    return {
        "n_predict": s["max_tokens"],
        "max_tokens": s["max_tokens"],
        "seed": s["seed"],
        "temperature": s["temperature"],
        "top_k": s["top_k"],
        "top_p": s["top_p"],
        "min_p": s["min_p"],
        **{k: s[k] for k in _CHAIN},
        "logit_bias": logit_bias(s["logit_bias"]),
        "n_probs": s["n_probs"],
        "post_sampling_probs": s["post_sampling_probs"],
        "ignore_eos": s["ignore_eos"],
        "stop": s["stop"],
        "n_keep": s["n_keep"],
        "n_discard": s["n_discard"],
        "cache_prompt": s["cache_prompt"],
        "id_slot": s["id_slot"],
        "samplers": s["samplers"],
        "lora": s.get("lora") or [],
        **{k: s[k] for k in ("speculative.n_max", "speculative.n_min", "speculative.p_min")},
        "grammar": s["grammar"],
        "json_schema": s["json_schema"] if s["json_schema"] is not None else "",
        "stream": False,
        "timings_per_token": False,
        "model": model,
        "n_ctx": n_ctx,
        **(extra or {}),
    }


def native_final(e: Engine, r: GenerationResult, gen: dict, model: str, index: int, return_tokens: bool, with_probs: bool, post: bool = False) -> dict:
    """The final object of a native completion; `gen`: the request's settings."""
    out = {
        "index": index,
        "content": r.text,
        "tokens": r.tokens if return_tokens else [],
        "id_slot": r.id_slot,
        "stop": True,
        "model": model,
        "tokens_predicted": len(r.tokens),
        "tokens_evaluated": r.tokens_evaluated,
        "generation_settings": settings(gen, model, e.n_ctx_slot, {"seed": r.seed}),
        "prompt": e.detokenize(r.prompt_tokens, unparse_special=True),  # (special tokens shown, as llama-server)
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
