"""Tool calling: the OpenAI tool fields (`spec`), the native tool-call formats of chat
templates (`formats`), and splitting a reply into reasoning, content and calls (`reply`)."""
from .formats import FORMATS, Format, detect_format
from .reply import Reply, ReplyDelta, ReplyParser, parse_reply
from .spec import Tool, ToolChoice, ToolSpecError, normalize_history, parse_tool_choice, parse_tools

__all__ = [
    "FORMATS", "Format", "detect_format", "Reply", "ReplyDelta", "ReplyParser", "parse_reply",
    "Tool", "ToolChoice", "ToolSpecError", "normalize_history", "parse_tool_choice", "parse_tools",
]
