"""Chat templates (Jinja, rendered like Hugging Face transformers) and their selection."""
from .templates import (
    BUILTIN_NAMES,
    ROLES,
    ChatTemplate,
    TemplateError,
    normalize_messages,
    select_template,
)

__all__ = [
    "BUILTIN_NAMES",
    "ROLES",
    "ChatTemplate",
    "TemplateError",
    "normalize_messages",
    "select_template",
]
