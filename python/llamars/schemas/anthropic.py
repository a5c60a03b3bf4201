"""Anthropic Messages API request bodies (`POST /v1/messages`, `/v1/messages/count_tokens`)."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Union

import msgspec

from .native import Sampling


class AnthropicMessage(msgspec.Struct, kw_only=True, forbid_unknown_fields=False):
    role: str
    content: Union[str, List[Dict[str, Any]]]


class ToolChoice(msgspec.Struct, kw_only=True, forbid_unknown_fields=False):
    type: str
    name: Optional[str] = None
    disable_parallel_tool_use: bool = False


class CountTokensRequest(Sampling, kw_only=True, forbid_unknown_fields=False):
    """(Sampling's llama.cpp fields — grammar, json_schema, min_p, … — are accepted as
    extensions; `temperature`, `top_p`, `top_k` are Anthropic's own.)"""

    model: str
    messages: List[AnthropicMessage]
    system: Optional[Union[str, List[Dict[str, Any]]]] = None
    tools: Optional[List[Dict[str, Any]]] = None
    tool_choice: Optional[ToolChoice] = None
    thinking: Optional[Dict[str, Any]] = None


class MessagesRequest(CountTokensRequest, kw_only=True, forbid_unknown_fields=False):
    max_tokens: int
    stop_sequences: Optional[List[str]] = None
    stream: bool = False
    metadata: Optional[Dict[str, Any]] = None
    service_tier: Optional[str] = None
    output_config: Optional[Dict[str, Any]] = None  # {"format": {"type": "json_schema", "schema": {...}}}
