"""llama.cpp server (native) request bodies."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Union

import msgspec

PromptPart = Union[int, str, List[Union[int, str]]]
Prompt = Union[str, List[PromptPart]]


class Sampling(msgspec.Struct, kw_only=True, forbid_unknown_fields=False):
    """Sampling fields shared by every generation route (llama.cpp names)."""

    temperature: Optional[float] = None
    top_k: Optional[int] = None
    top_p: Optional[float] = None
    min_p: Optional[float] = None
    seed: Optional[int] = None
    n_probs: Optional[int] = None
    ignore_eos: bool = False
    # the rest of llama.cpp's sampler chain (None: the server default)
    repeat_penalty: Optional[float] = None
    repeat_last_n: Optional[int] = None
    presence_penalty: Optional[float] = None
    frequency_penalty: Optional[float] = None
    dry_multiplier: Optional[float] = None
    dry_base: Optional[float] = None
    dry_allowed_length: Optional[int] = None
    dry_penalty_last_n: Optional[int] = None
    dry_sequence_breakers: Optional[List[str]] = None
    xtc_probability: Optional[float] = None
    xtc_threshold: Optional[float] = None
    typical_p: Optional[float] = None
    top_n_sigma: Optional[float] = None
    mirostat: Optional[int] = None
    mirostat_tau: Optional[float] = None
    mirostat_eta: Optional[float] = None
    dynatemp_range: Optional[float] = None
    dynatemp_exponent: Optional[float] = None
    min_keep: Optional[int] = None
    # constrained output arrives with the grammar engine: refused with 501 until then
    grammar: Optional[str] = None
    json_schema: Optional[Dict[str, Any]] = None
    logit_bias: Optional[Union[Dict[str, Any], List[Any]]] = None
    samplers: Optional[Union[List[str], str]] = None


class CompletionRequest(Sampling, kw_only=True):
    prompt: Prompt = ""
    n_predict: Optional[int] = None
    n_keep: int = 0
    n_discard: int = 0
    n_cmpl: int = 1
    stop: Optional[Union[str, List[str]]] = None
    stream: bool = False
    cache_prompt: bool = True
    id_slot: int = -1
    return_tokens: bool = False
    response_fields: Optional[List[str]] = None
    timings_per_token: bool = False
    return_progress: bool = False
    t_max_predict_ms: int = 0
    n_indent: int = 0
    post_sampling_probs: bool = False
    truncate: bool = False


class TokenizeRequest(msgspec.Struct, kw_only=True):
    content: str
    add_special: bool = False
    parse_special: bool = True
    with_pieces: bool = False


class DetokenizeRequest(msgspec.Struct, kw_only=True):
    tokens: List[int]


class SlotActionRequest(msgspec.Struct, kw_only=True):
    filename: Optional[str] = None


class EmbeddingRequest(msgspec.Struct, kw_only=True):
    """/embedding (native): `content` (or `input`) as text, tokens, or a list of them."""

    content: Optional[Union[str, List[Union[int, str, List[int]]]]] = None
    input: Optional[Union[str, List[Union[int, str, List[int]]]]] = None
    embd_normalize: float = 2


class InfillExtra(msgspec.Struct, kw_only=True):
    filename: str = ""
    text: str = ""


class InfillRequest(CompletionRequest, kw_only=True):
    input_prefix: str = ""
    input_suffix: str = ""
    input_extra: List[InfillExtra] = msgspec.field(default_factory=list)
