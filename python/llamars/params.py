"""Generation parameters shared by `Engine` and `AsyncEngine`: defaults (llama.cpp's),
the sampler fields passed to the core only when set, and constraint text helpers."""
from __future__ import annotations

from typing import Optional

from .errors import InvalidRequestError

# llama.cpp's other sampler fields, passed to the core only when set
SAMPLING_KEYS = frozenset(
    "dynatemp_range dynatemp_exponent typical_p top_n_sigma xtc_probability xtc_threshold repeat_penalty "
    "presence_penalty frequency_penalty repeat_last_n dry_multiplier dry_base dry_allowed_length "
    "dry_penalty_last_n dry_sequence_breakers mirostat mirostat_tau mirostat_eta min_keep logit_bias samplers grammar_triggers".split()
)

_GEN_DEFAULTS = {
    "max_tokens": 16,
    "stop": None,
    "temperature": 0.8,
    "top_k": 40,
    "top_p": 0.95,
    "min_p": 0.05,
    "seed": None,
    "ignore_eos": False,
    "n_probs": 0,
    "cache_prompt": True,
    "id_slot": None,
    "n_keep": 0,
    "n_discard": 0,
    "truncate": False,
    "return_progress": False,
    "n_indent": 0,
    "t_max_predict_ms": 0,
    "post_sampling_probs": False,
    "grammar": None,
    "json_schema": None,
}


def _grammar_text(g) -> Optional[str]:
    if g is None or g == "":
        return None
    if not isinstance(g, str):
        raise InvalidRequestError("grammar must be a string (GBNF, or Lark starting with %llguidance)")
    return g


def _schema_text(schema) -> Optional[str]:
    """A JSON schema given as a dict (or JSON text) → JSON text for the core."""
    import json

    if schema is None:
        return None
    if isinstance(schema, str):
        return schema
    if isinstance(schema, (dict, bool)):
        return json.dumps(schema)
    raise InvalidRequestError("json_schema must be a JSON schema object (dict) or its JSON text")
