"""One server tool as llama-server lists it on GET /tools (display_name, tool, type,
permissions, uses_cwd, definition) and its call: the arguments checked against the
declared schema's required fields and types first, so a bad call is a clear error naming
the field, then the tool's function with the call's context."""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Optional

from .paths import Root, ToolError

_TYPES = {"string": str, "integer": int, "boolean": bool, "array": list, "object": dict, "number": (int, float)}


@dataclass
class Context:
    """What a call runs with: the tools root, the shell runtime, a cancel flag (set when
    the client leaves) and, for a streamed call, where output chunks go."""

    root: Root
    runtime: Any = None
    cancel: threading.Event = field(default_factory=threading.Event)
    on_chunk: Optional[Callable[[str], None]] = None


@dataclass
class ServerTool:
    name: str
    display_name: str
    description: str
    parameters: Dict[str, Any]
    run: Callable[[Dict[str, Any], Context], Dict[str, Any]]
    write: bool = False
    kind: str = "builtin"
    streams: bool = False
    uses_cwd: bool = True

    def definition(self) -> dict:
        return {"type": "function", "function": {"name": self.name, "description": self.description,
                                                 "parameters": self.parameters}}

    def to_json(self) -> dict:
        return {"display_name": self.display_name, "tool": self.name, "type": self.kind,
                "permissions": {"write": self.write}, "uses_cwd": self.uses_cwd, "definition": self.definition()}

    def check(self, params: Any) -> Dict[str, Any]:
        """`params` as the tool accepts them, or ToolError naming the field (built-in tools
        only: an MCP server checks its own arguments)."""
        if not isinstance(params, dict):
            raise ToolError("params: must be an object")
        if self.kind != "builtin":
            return params
        props = self.parameters.get("properties", {})
        for name in self.parameters.get("required", []):
            if name not in params or params[name] is None:
                raise ToolError(f"params.{name}: required by {self.name}")
        for name, value in params.items():
            spec = props.get(name)
            if spec is None or value is None:
                continue
            want = _TYPES.get(spec.get("type", ""))
            if want and (not isinstance(value, want) or (want is int and isinstance(value, bool))):
                raise ToolError(f"params.{name}: must be of type {spec['type']}")
        return params


def obj(properties: Dict[str, Any], required=()) -> Dict[str, Any]:
    out: Dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        out["required"] = list(required)
    return out


def prop(kind: str, description: str, **more) -> Dict[str, Any]:
    return {"type": kind, "description": description, **more}
