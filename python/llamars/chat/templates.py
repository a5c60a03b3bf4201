"""Chat templates: turning OpenAI-style ``messages`` into a prompt string.

Templates are Jinja2 sources rendered the way Hugging Face transformers renders
``tokenizer.chat_template``: an immutable sandbox with ``trim_blocks`` and
``lstrip_blocks``, the ``loopcontrols`` extension, the globals
``raise_exception(msg)`` and ``strftime_now(fmt)``, a ``tojson`` filter that
keeps non-ASCII text as is, and the render variables ``messages``, ``tools``,
``add_generation_prompt``, ``bos_token`` and ``eos_token`` (plus any
``chat_template_kwargs``).

Which template a model gets (:func:`select_template`), first match wins:

1. ``--chat-template-file PATH``;
2. ``--chat-template NAME`` -- a built-in name (see :data:`BUILTIN_NAMES`), or,
   when the value is not a known name but looks like Jinja (contains ``{%`` or
   ``{{``), the value itself as template source;
3. the GGUF's ``tokenizer.chat_template`` (if it fails to compile, a warning is
   logged and selection continues, as llama.cpp falls back to ChatML);
4. the architecture's own format (gemma/gemma2/gemma3 -> ``gemma``, phi3 ->
   ``phi3``, granite -> ``granite``, command-r/cohere2 -> ``command-r``,
   qwen2/qwen3 -> ``chatml``);
5. ``chatml``.

Note the difference from llama.cpp at step 4: a model without an embedded
template gets its architecture's own format, whereas llama.cpp falls back to
ChatML even for Gemma models (which then see turn markers they never trained
on).

Built-in templates never emit a leading BOS (the tokenizer adds it); a GGUF or
user template renders ``bos_token`` only where its source uses it.  Pass
``tokenizer_adds_bos=True`` to strip such a leading BOS from the rendered text
(what llama.cpp does), so the prompt does not start with two BOS tokens.

Errors -- invalid messages, ``raise_exception`` in a template, sandbox
violations and other failures while rendering -- raise :class:`TemplateError`
(a ``ValueError``), which the server answers with HTTP 400.
"""
from __future__ import annotations

import json
import logging
import uuid
from datetime import datetime
from typing import Any, Dict, List, Optional

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

from .builtin import ALIASES, BUILTIN_TEMPLATES

__all__ = ["TemplateError", "ChatTemplate", "select_template", "BUILTIN_NAMES", "ROLES"]

log = logging.getLogger("llamars.chat")

BUILTIN_NAMES = tuple(BUILTIN_TEMPLATES)
ROLES = ("system", "user", "assistant", "tool", "developer")

_ARCH_DEFAULTS = {
    "gemma": "gemma", "gemma2": "gemma", "gemma3": "gemma",
    "phi3": "phi3",
    "qwen2": "chatml", "qwen3": "chatml",
    "granite": "granite", "granitemoe": "granite",
    "command-r": "command-r", "cohere2": "command-r",
}


class TemplateError(ValueError):
    """A chat template could not be selected, compiled or rendered for a request."""


# ----------------------------------------------------------------- environment
def _raise_exception(message: str) -> None:
    raise TemplateError(str(message))


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


def _tojson(x: Any, ensure_ascii: bool = False, indent: Optional[int] = None,
            separators: Optional[tuple] = None, sort_keys: bool = False) -> str:
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent,
                      separators=separators, sort_keys=sort_keys)


class _GenerationTag(jinja2.ext.Extension):
    """``{% generation %}...{% endgeneration %}`` (transformers' assistant-mask
    marker): renders its body unchanged."""

    tags = {"generation"}

    def parse(self, parser):  # type: ignore[override]
        next(parser.stream)
        return parser.parse_statements(("name:endgeneration",), drop_needle=True)


def _make_env() -> ImmutableSandboxedEnvironment:
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True,
        lstrip_blocks=True,
        extensions=[jinja2.ext.loopcontrols, _GenerationTag],
    )
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    return env


_ENV = _make_env()


# ------------------------------------------------------------------ messages
def _content_to_text(content: Any, i: int) -> Optional[str]:
    if content is None or isinstance(content, str):
        return content
    if not isinstance(content, (list, tuple)):
        raise TemplateError(
            f"messages[{i}].content must be a string, an array of content parts or null "
            f"(got {type(content).__name__})")
    texts = []
    for j, part in enumerate(content):
        where = f"messages[{i}].content[{j}]"
        if not isinstance(part, dict):
            raise TemplateError(f"{where} must be an object (got {type(part).__name__})")
        kind = part.get("type")
        if kind != "text":
            raise TemplateError(
                f"{where}: content part type {kind!r} is not supported (only 'text')")
        text = part.get("text")
        if not isinstance(text, str):
            raise TemplateError(f"{where}.text must be a string")
        texts.append(text)
    return "\n".join(texts)


def normalize_messages(messages: Any, *, builtin: bool = False) -> List[Dict[str, Any]]:
    """Validate ``messages`` and return copies whose ``content`` is a string (or
    ``None``).  For built-in templates ``None`` becomes ``""`` and the
    ``developer`` role becomes ``system``."""
    if not isinstance(messages, (list, tuple)):
        raise TemplateError(f"messages must be an array (got {type(messages).__name__})")
    allowed = ", ".join(repr(r) for r in ROLES)
    out = []
    for i, msg in enumerate(messages):
        if not isinstance(msg, dict):
            raise TemplateError(f"messages[{i}] must be an object (got {type(msg).__name__})")
        role = msg.get("role")
        if not isinstance(role, str) or role not in ROLES:
            got = "missing" if "role" not in msg else repr(role)
            raise TemplateError(f"messages[{i}].role must be one of {allowed} (got {got})")
        m = dict(msg)
        m["content"] = _content_to_text(msg.get("content"), i)
        if builtin:
            if m["content"] is None:
                m["content"] = ""
            if role == "developer":
                m["role"] = "system"
        out.append(m)
    return out


# ------------------------------------------------------------------ template
class ChatTemplate:
    """A compiled chat template.

    ``name`` is a built-in name, ``"gguf"``, a file path or ``"custom"``;
    ``source`` is the Jinja text (what ``/props`` reports as ``chat_template``).
    """

    def __init__(self, source: str, name: str = "custom", bos_token: str = "",
                 eos_token: str = "", *, builtin: bool = False,
                 tokenizer_adds_bos: bool = False, tokenizer_adds_eos: bool = False):
        if not isinstance(source, str):
            raise TemplateError(f"chat template {name!r}: source must be a string")
        self.source = source
        self.name = name
        self.bos_token = bos_token or ""
        self.eos_token = eos_token or ""
        self.is_builtin = builtin
        self.tokenizer_adds_bos = tokenizer_adds_bos
        self.tokenizer_adds_eos = tokenizer_adds_eos
        try:
            self._template = _ENV.from_string(source)
        except jinja2.TemplateError as e:
            raise TemplateError(f"chat template {name!r} does not compile: {e}") from e

    def __repr__(self) -> str:
        return f"ChatTemplate(name={self.name!r})"

    @classmethod
    def from_source(cls, source: str, name: str = "custom", bos_token: str = "",
                    eos_token: str = "", **options: bool) -> "ChatTemplate":
        """Compile a Jinja chat template (``options``: ``tokenizer_adds_bos``,
        ``tokenizer_adds_eos``)."""
        return cls(source, name, bos_token, eos_token, **options)

    @classmethod
    def builtin(cls, name: str, bos_token: str = "", eos_token: str = "",
                **options: bool) -> "ChatTemplate":
        """A built-in format by name (or llama.cpp alias, e.g. ``mistral-v7``)."""
        key = ALIASES.get(name, name)
        if key not in BUILTIN_TEMPLATES:
            raise TemplateError(
                f"unknown chat template {name!r}; known templates: {', '.join(BUILTIN_NAMES)}")
        return cls(BUILTIN_TEMPLATES[key], key, bos_token, eos_token, builtin=True, **options)

    def render(self, messages: List[Dict[str, Any]], add_generation_prompt: bool = True,
               tools: Optional[List[Dict[str, Any]]] = None, prefill: bool = True, **kwargs: Any) -> str:
        """Render ``messages`` into a prompt.

        If ``add_generation_prompt`` is requested and the last message is from
        the assistant, that message is a prefill: its turn is left open so the
        model continues its text (no end-of-turn marker after it). With
        ``prefill=False`` (--no-prefill-assistant) it is a finished turn.
        ``kwargs`` become extra template variables (``chat_template_kwargs``).
        """
        msgs = normalize_messages(messages, builtin=self.is_builtin)
        if not (prefill and add_generation_prompt and msgs and msgs[-1]["role"] == "assistant"):
            return self._strip(self._render(msgs, add_generation_prompt, tools, kwargs))

        prefill = msgs[-1]["content"] or ""
        sentinel = f"LLAMARS_PREFILL_{uuid.uuid4().hex}"
        probe = msgs[:-1] + [dict(msgs[-1], content=sentinel)]
        text = self._render(probe, False, tools, kwargs)
        cut = text.find(sentinel)
        if cut >= 0:
            return self._strip(text[:cut], eos=False) + prefill
        # The template dropped or rewrote the assistant content: do what
        # llama.cpp does, i.e. open a fresh assistant turn and append the text.
        log.debug("chat template %r hides the prefill sentinel; appending instead", self.name)
        text = self._render(msgs[:-1], True, tools, kwargs)
        return self._strip(text, eos=False) + prefill

    def _render(self, msgs: List[Dict[str, Any]], add_generation_prompt: bool,
                tools: Any, kwargs: Dict[str, Any]) -> str:
        now = datetime.now()
        # as llama.cpp's extra context: today's date for templates that print it (Llama 3.x's
        # `date_string`, which would otherwise fall back to the template's default)
        ctx: Dict[str, Any] = {"bos_token": self.bos_token, "eos_token": self.eos_token,
                               "date_string": now.strftime("%d %b %Y"), "datetime": now.strftime("%b %d %Y")}
        ctx.update(kwargs)
        ctx.update(messages=msgs, tools=tools, add_generation_prompt=add_generation_prompt)
        try:
            return self._template.render(**ctx)
        except TemplateError:
            raise
        except Exception as e:  # SecurityError, UndefinedError, TypeError, ...
            raise TemplateError(
                f"chat template {self.name!r} failed to render: {type(e).__name__}: {e}") from e

    def _strip(self, text: str, eos: bool = True) -> str:
        if self.tokenizer_adds_bos and self.bos_token and text.startswith(self.bos_token):
            text = text[len(self.bos_token):]
        if (eos and self.tokenizer_adds_eos and self.eos_token
                and text.endswith(self.eos_token)):
            text = text[: -len(self.eos_token)]
        return text


# ----------------------------------------------------------------- selection
def _looks_like_jinja(s: str) -> bool:
    return "{%" in s or "{{" in s


def select_template(*, gguf_template: Optional[str], arch: str,
                    override_name: Optional[str] = None, override_file: Optional[str] = None,
                    bos_token: str = "", eos_token: str = "",
                    **options: bool) -> ChatTemplate:
    """Pick the chat template for a model (priority order in the module docstring).

    ``options`` (``tokenizer_adds_bos``, ``tokenizer_adds_eos``) are passed to
    :class:`ChatTemplate`.  Bad overrides raise :class:`TemplateError`.
    """
    tok = dict(bos_token=bos_token, eos_token=eos_token, **options)
    if override_file:
        try:
            with open(override_file, encoding="utf-8") as f:
                source = f.read()
        except OSError as e:
            raise TemplateError(f"cannot read chat template file {override_file!r}: {e}") from e
        return ChatTemplate.from_source(source, name=override_file, **tok)
    if override_name:
        if ALIASES.get(override_name, override_name) in BUILTIN_TEMPLATES:
            return ChatTemplate.builtin(override_name, **tok)
        if _looks_like_jinja(override_name):
            return ChatTemplate.from_source(override_name, name="custom", **tok)
        return ChatTemplate.builtin(override_name, **tok)  # raises, listing known names
    if gguf_template:
        try:
            return ChatTemplate.from_source(gguf_template, name="gguf", **tok)
        except TemplateError as e:
            log.warning("%s; using the %r architecture default instead", e, arch)
    return ChatTemplate.builtin(_ARCH_DEFAULTS.get((arch or "").lower(), "chatml"), **tok)


def template_for(engine: Any, chat_template: Optional[str] = None, chat_template_file: Optional[str] = None) -> ChatTemplate:
    """The chat template for a loaded `Engine`: its GGUF's (``chat_template`` may name one
    of the GGUF's ``tokenizer.chat_template.NAME`` variants), a built-in name or Jinja
    source, or a file; otherwise the architecture's default (see the module docstring)."""
    info = engine.info

    def text_of(key: str) -> str:
        tid = info.get(key)
        return engine.token_to_piece(tid).decode("utf-8", "replace") if tid is not None else ""

    variants = info.get("chat_templates") or {}
    named = chat_template in variants
    return select_template(
        gguf_template=variants[chat_template] if named else info.get("chat_template"),
        arch=engine.arch,
        override_name=None if named else chat_template,
        override_file=chat_template_file,
        bos_token=text_of("bos"),
        eos_token=text_of("eos"),
        tokenizer_adds_bos=bool(info.get("add_bos")),
    )
