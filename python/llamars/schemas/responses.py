"""OpenAI Responses API request bodies (POST /v1/responses).

Input items stay plain dicts here: `server/responses_convert.py` validates them one by
one so that every error names its place (`input[2].content[0].type`)."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Union

from .native import Sampling


class ResponsesRequest(Sampling, kw_only=True):
    model: Optional[str] = None
    # a string (one user message) or a list of items: messages (`type: "message"` or
    # role-only), `function_call`, `function_call_output`, `reasoning`
    input: Optional[Union[str, List[Dict[str, Any]]]] = None
    instructions: Optional[str] = None
    tools: Optional[List[Dict[str, Any]]] = None  # {"type": "function", "name", "description", "parameters"}
    tool_choice: Optional[Union[str, Dict[str, Any]]] = None  # auto | none | required | {"type": "function", "name"}
    parallel_tool_calls: Optional[bool] = None
    max_output_tokens: Optional[int] = None
    text: Optional[Dict[str, Any]] = None  # {"format": {"type": "text" | "json_object" | "json_schema", ...}}
    store: bool = True
    previous_response_id: Optional[str] = None
    background: bool = False
    stream: bool = False
    metadata: Optional[Dict[str, str]] = None
    user: Optional[str] = None
    reasoning: Optional[Dict[str, Any]] = None  # {"effort", "summary"}: server/responses_options.py
    truncation: Optional[str] = None  # "auto" (drop the oldest turns to fit) | "disabled" (refuse)
    max_tool_calls: Optional[int] = None  # at most this many function_call items
    top_logprobs: Optional[int] = None  # 0..20: logprobs of the message's tokens and their top alternatives
    include: Optional[List[str]] = None  # "message.output_text.logprobs" is the one llamars fills
    reasoning_format: Optional[str] = None  # llama.cpp extension, as in chat completions
    chat_template_kwargs: Optional[Dict[str, Any]] = None
    cache_prompt: bool = True
    timings_per_token: bool = False  # llama.cpp extension: `timings` on the stream's delta events


__all__ = ["ResponsesRequest"]
