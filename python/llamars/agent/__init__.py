"""Agent tools: llama-server's built-in server tools (files confined to a root, a shell,
runtime info), MCP servers over stdio, the registry both are offered from (`Toolbox`),
and the call → result → continue loop run in-process (`Engine.chat(..., execute=True)`)."""
from .toolbox import Toolbox, ToolsConfigError, UnknownTool, result_text

__all__ = ["Toolbox", "ToolsConfigError", "UnknownTool", "result_text"]
