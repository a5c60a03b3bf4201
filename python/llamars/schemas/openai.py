"""OpenAI-compatible request bodies (completions, chat completions)."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Union

import msgspec

from .native import Prompt, Sampling


class StreamOptions(msgspec.Struct, kw_only=True):
    include_usage: bool = False


class OAICompletionRequest(Sampling, kw_only=True):
    prompt: Prompt
    model: Optional[str] = None
    max_tokens: Optional[int] = None
    n: int = 1
    stop: Optional[Union[str, List[str]]] = None
    stream: bool = False
    stream_options: Optional[StreamOptions] = None
    logprobs: Optional[int] = None
    echo: bool = False
    user: Optional[str] = None
    cache_prompt: bool = True
    id_slot: int = -1
    n_keep: int = 0


class ChatMessage(msgspec.Struct, kw_only=True, forbid_unknown_fields=False):
    role: str
    content: Optional[Union[str, List[Dict[str, Any]]]] = None
    name: Optional[str] = None
    tool_calls: Optional[List[Dict[str, Any]]] = None
    tool_call_id: Optional[str] = None
    reasoning_content: Optional[str] = None


class ChatRequest(Sampling, kw_only=True):
    messages: List[ChatMessage]
    model: Optional[str] = None
    max_tokens: Optional[int] = None
    max_completion_tokens: Optional[int] = None
    n: int = 1
    stop: Optional[Union[str, List[str]]] = None
    stream: bool = False
    stream_options: Optional[StreamOptions] = None
    logprobs: bool = False
    top_logprobs: Optional[int] = None
    user: Optional[str] = None
    tools: Optional[List[Dict[str, Any]]] = None
    tool_choice: Optional[Union[str, Dict[str, Any]]] = None
    parallel_tool_calls: Optional[bool] = None
    reasoning_format: Optional[str] = None
    response_format: Optional[Dict[str, Any]] = None
    chat_template_kwargs: Optional[Dict[str, Any]] = None
    cache_prompt: bool = True
    id_slot: int = -1
    n_keep: int = 0
    verbose: Optional[bool] = None  # llama.cpp: add __verbose (the native result); None: the server's --verbose


class EditRequest(Sampling, kw_only=True):
    """LocalAI's (and OpenAI's former) edits: `input` rewritten as `instruction` says."""

    instruction: str
    input: Union[str, List[str]] = ""
    model: Optional[str] = None
    max_tokens: Optional[int] = None
    n: int = 1
    stop: Optional[Union[str, List[str]]] = None


class ApplyTemplateRequest(msgspec.Struct, kw_only=True):
    messages: List[ChatMessage]
    add_generation_prompt: bool = True
    chat_template_kwargs: Optional[Dict[str, Any]] = None


class OAIEmbeddingRequest(msgspec.Struct, kw_only=True):
    input: Union[str, List[Union[int, str, List[int]]]]
    model: Optional[str] = None
    encoding_format: str = "float"
    dimensions: Optional[int] = None
    user: Optional[str] = None
    embd_normalize: Optional[float] = None  # llama.cpp extension; None: the server's --embd-normalize
