"""llama.cpp server (native) request bodies."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Union

import msgspec

from .. import _core

class PromptObject(msgspec.Struct, kw_only=True):
    """llama-server's multimodal prompt form; on a text model only `prompt_string` is used."""

    prompt_string: str
    multimodal_data: Optional[List[str]] = None


PromptPart = Union[int, str, List[Union[int, str]], PromptObject]
Prompt = Union[str, List[PromptPart], PromptObject]


# the JSON types of the core's field kinds (llamars._core.generation_fields)
_TYPES: Dict[str, Any] = {
    "float": float,
    "int": int,
    "bool": bool,
    "str": str,
    "str_list": List[str],
    "str_or_list": Union[str, List[str]],
    "bias": Union[Dict[str, Any], List[Any]],
    "schema": Dict[str, Any],
    "samplers": Union[List[str], str],
    "lora": List[Any],
}

#: Sampling fields shared by every generation route (llama.cpp names), one per field of the
#: core's "sampling" group; None: the server default. The core defines, checks and
#: documents them (`rust/engine/fields.rs`).
SAMPLING_FIELDS = tuple(name for name, _kind, group, _default, _doc in _core.generation_fields() if group == "sampling")


def attr(name: str) -> str:
    """The Python attribute of a field (llama-server's dotted names, e.g. `speculative.n_max`,
    are `speculative_n_max` on the struct and keep their name in JSON)."""
    return name.replace(".", "_")


Sampling = msgspec.defstruct(
    "Sampling",
    [(attr(name), Optional[_TYPES[kind]], None) for name, kind, group, _default, _doc in _core.generation_fields() if group == "sampling"],
    kw_only=True,
    forbid_unknown_fields=False,
    rename={attr(n): n for n in SAMPLING_FIELDS if attr(n) != n},
    module=__name__,
)


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
    embd_normalize: Optional[float] = None  # None: the server's --embd-normalize (default 2)


class RerankRequest(msgspec.Struct, kw_only=True):
    """/rerank (and /reranking, /v1/rerank, /v1/reranking): llama-server's Jina form
    (`query`, `documents`, `top_n`), TEI's (`texts`, `return_text`), and Jina's / LocalAI's
    `return_documents`. Fields are checked by llamars.rerank.check, with llama-server's
    messages."""

    query: Any = None
    documents: Any = None
    texts: Any = None
    top_n: Any = None
    model: Optional[str] = None
    return_text: bool = False
    return_documents: bool = False


class InfillExtra(msgspec.Struct, kw_only=True):
    filename: str = "tmp"  # llama-server's default
    text: str = ""


class InfillRequest(CompletionRequest, kw_only=True):
    input_prefix: str = ""
    input_suffix: str = ""
    input_extra: List[InfillExtra] = msgspec.field(default_factory=list)
