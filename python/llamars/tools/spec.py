"""Validation of the OpenAI tool fields: `tools`, `tool_choice` and the tool calls and
results in a conversation's history. Every error names the field (ToolSpecError is a
ValueError; the server answers 400)."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Union

_NAME = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")


class ToolSpecError(ValueError):
    """Invalid `tools`, `tool_choice` or tool-call history."""


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: Dict[str, Any]

    def as_openai(self) -> dict:
        return {"type": "function", "function": {"name": self.name, "description": self.description, "parameters": self.parameters}}


@dataclass(frozen=True)
class ToolChoice:
    mode: str  # "auto" | "none" | "required"
    name: Optional[str] = None  # a named function (mode "required")


def parse_tools(tools: Any, field: str = "tools") -> List[Tool]:
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise ToolSpecError(f"{field}: must be an array of tools")
    out, seen = [], set()
    for i, t in enumerate(tools):
        where = f"{field}[{i}]"
        if not isinstance(t, dict):
            raise ToolSpecError(f"{where}: must be an object")
        if t.get("type", "function") != "function":
            raise ToolSpecError(f"{where}.type: only 'function' tools are supported, got {t.get('type')!r}")
        fn = t.get("function", t)  # Responses API tools are flat: {"type", "name", "parameters"}
        if not isinstance(fn, dict):
            raise ToolSpecError(f"{where}.function: must be an object")
        fwhere = f"{where}.function" if "function" in t else where
        name = fn.get("name")
        if not isinstance(name, str) or not _NAME.match(name):
            raise ToolSpecError(f"{fwhere}.name: must be 1-128 letters, digits, '_', '.', ':' or '-' (got {name!r})")
        if name in seen:
            raise ToolSpecError(f"{fwhere}.name: {name!r} is defined twice")
        seen.add(name)
        desc = fn.get("description") or ""
        if not isinstance(desc, str):
            raise ToolSpecError(f"{fwhere}.description: must be a string")
        params = fn.get("parameters")
        if params is None:
            params = {"type": "object", "properties": {}}
        if not isinstance(params, dict):
            raise ToolSpecError(f"{fwhere}.parameters: must be a JSON schema object")
        if params.get("type", "object") != "object":
            raise ToolSpecError(f"{fwhere}.parameters.type: must be 'object', got {params.get('type')!r}")
        out.append(Tool(name, desc, params))
    return out


def parse_tool_choice(choice: Union[str, dict, None], tools: List[Tool], field: str = "tool_choice") -> ToolChoice:
    if choice is None:
        return ToolChoice("auto" if tools else "none")
    if isinstance(choice, str):
        if choice not in ("auto", "none", "required"):
            raise ToolSpecError(f"{field}: must be 'auto', 'none', 'required' or a named function, got {choice!r}")
        if choice == "required" and not tools:
            raise ToolSpecError(f"{field}: 'required' needs at least one tool in tools")
        return ToolChoice(choice if tools else "none")
    if isinstance(choice, dict):
        fn = choice.get("function") if isinstance(choice.get("function"), dict) else choice
        name = fn.get("name")
        if not isinstance(name, str):
            raise ToolSpecError(f"{field}.function.name: a function name is required")
        if name not in {t.name for t in tools}:
            raise ToolSpecError(f"{field}.function.name: {name!r} is not one of the tools")
        return ToolChoice("required", name)
    raise ToolSpecError(f"{field}: must be a string or an object")


def normalize_history(messages: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Copies of the messages where each assistant tool call's `arguments` is an object
    (templates render it with `tojson`); malformed calls are errors naming the message."""
    out = []
    for i, m in enumerate(messages):
        calls = m.get("tool_calls")
        if not calls:
            out.append(m)
            continue
        if m.get("role") != "assistant":
            raise ToolSpecError(f"messages[{i}].tool_calls: only assistant messages carry tool calls")
        if not isinstance(calls, list):
            raise ToolSpecError(f"messages[{i}].tool_calls: must be an array")
        fixed = []
        for j, c in enumerate(calls):
            where = f"messages[{i}].tool_calls[{j}]"
            if not isinstance(c, dict) or not isinstance(c.get("function"), dict):
                raise ToolSpecError(f"{where}.function: must be an object with name and arguments")
            fn = c["function"]
            name = fn.get("name")
            if not isinstance(name, str) or not name:
                raise ToolSpecError(f"{where}.function.name: must be a non-empty string")
            args = fn.get("arguments", {})
            if isinstance(args, str):
                try:
                    args = json.loads(args) if args.strip() else {}
                except ValueError as e:
                    raise ToolSpecError(f"{where}.function.arguments: not valid JSON ({e})") from None
            if not isinstance(args, dict):
                raise ToolSpecError(f"{where}.function.arguments: must be a JSON object")
            fixed.append({"id": c.get("id") or f"call_{i}_{j}", "type": "function", "function": {"name": name, "arguments": args}})
        out.append(dict(m, tool_calls=fixed))
    return out
