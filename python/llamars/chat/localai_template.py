"""LocalAI's prompt templates (a model config's `template:` files, Go text/template), as
LocalAI renders them:

- chat: each message through `chat_message` (`.RoleName`, `.Role` (the config's `roles`
  entry), `.Content`, `.FunctionCall` (the tool calls), `.FunctionName`, `.MessageIndex`,
  `.LastMessage`, `.SystemPrompt`); a message it renders empty, or every message when
  there is no `chat_message`, is `ROLE CONTENT` with the role's `roles` entry (or the
  content alone); the messages are joined by `join_chat_messages_by_character` (default a
  newline) and the result is `.Input` of the `chat` template (`.SystemPrompt`,
  `.Functions`, `.MessageIndex`), or the prompt itself when there is none;
- completion: the prompt is `.Input` of the `completion` template;
- edit: `.Input` and `.Instruction` of the `edit` template.

A template value with `{{` in it is the template itself; otherwise it names a file of
the models directory (`NAME.tmpl`, or `NAME` as given)."""
from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Optional

from .gotemplate import GoTemplate
from .templates import ChatTemplate, TemplateError

KINDS = ("chat", "chat_message", "completion", "edit", "function")


def load_templates(section: Dict[str, Any], models_dir: str, where: str) -> Dict[str, GoTemplate]:
    out: Dict[str, GoTemplate] = {}
    for kind in KINDS:
        v = section.get(kind)
        if not v:
            continue
        if not isinstance(v, str):
            raise TemplateError(f"{where}: template.{kind} must be a string (a file name or the template)")
        if "{{" in v:
            source, name = v, f"{where}: template.{kind}"
        else:
            for cand in (os.path.join(models_dir, v + ".tmpl"), os.path.join(models_dir, v)):
                if os.path.isfile(cand):
                    break
            else:
                raise TemplateError(f"{where}: template.{kind}: no file {v}.tmpl (or {v}) in {models_dir}")
            try:
                with open(cand, encoding="utf-8") as f:
                    source = f.read()
            except OSError as e:
                raise TemplateError(f"{where}: template.{kind}: cannot read {cand}: {e.strerror or e}") from None
            name = os.path.basename(cand)
        out[kind] = GoTemplate(source, name)
    return out


def _text(content: Any) -> str:
    if isinstance(content, list):  # OpenAI content parts: their text
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type", "text") == "text")
    return "" if content is None else str(content)


class LocalAIChatTemplate(ChatTemplate):
    """A chat template made of LocalAI's Go templates (used where the chat template is)."""

    def __init__(self, templates: Dict[str, GoTemplate], roles: Dict[str, str], system_prompt: str = "",
                 join: str = "\n", name: str = "localai", bos_token: str = "", eos_token: str = "", **options: bool):
        self.templates, self.roles, self.system_prompt, self.join = templates, roles, system_prompt, join
        self.source = "\n".join(t.source for k, t in templates.items() if k in ("chat", "chat_message"))
        self.name = name
        self.bos_token, self.eos_token = bos_token or "", eos_token or ""
        self.is_builtin = False
        self.tokenizer_adds_bos = options.get("tokenizer_adds_bos", False)
        self.tokenizer_adds_eos = options.get("tokenizer_adds_eos", False)

    def __repr__(self) -> str:
        return f"LocalAIChatTemplate({', '.join(self.templates)})"

    def _render(self, msgs: List[Dict[str, Any]], add_generation_prompt: bool, tools: Any, kwargs: Dict[str, Any]) -> str:
        system = self.system_prompt
        parts: List[str] = []
        per = self.templates.get("chat_message")
        for i, m in enumerate(msgs):
            role = m.get("role", "")
            content = _text(m.get("content"))
            calls = m.get("tool_calls") or None
            if calls:
                calls = [{**c, "function": {**c.get("function", {}), "arguments": _args(c.get("function", {}).get("arguments"))}}
                         for c in calls]
            text = ""
            if per is not None:
                text = per.render({"SystemPrompt": system, "Role": self.roles.get(role, ""), "RoleName": role, "Content": content,
                                   "FunctionCall": calls, "FunctionName": m.get("name", ""), "LastMessage": i == len(msgs) - 1,
                                   "Function": False, "MessageIndex": i})
            if not text:
                r = self.roles.get(role, "")
                text = f"{r} {content}" if r and content else (r or content)
                if calls:
                    text += json.dumps(calls, ensure_ascii=False)
            parts.append(text)
        prompt = self.join.join(parts)
        chat = self.templates.get("chat")
        if chat is None:
            return prompt
        functions = [t.get("function", t) for t in (tools or [])]
        return chat.render({"SystemPrompt": system, "SuppressSystemPrompt": False, "Input": prompt, "Functions": functions,
                            "MessageIndex": len(msgs), "Instruction": ""})

    def render(self, messages: List[Dict[str, Any]], add_generation_prompt: bool = True,
               tools: Optional[List[Dict[str, Any]]] = None, prefill: bool = True, **kwargs: Any) -> str:
        return self._strip(self._render([dict(m) for m in messages], add_generation_prompt, tools, kwargs))

    def completion(self, prompt: str) -> str:
        t = self.templates.get("completion")
        return prompt if t is None else t.render({"Input": prompt, "SystemPrompt": self.system_prompt, "Instruction": ""})

    def edit(self, instruction: str, text: str) -> Optional[str]:
        t = self.templates.get("edit")
        return None if t is None else t.render({"Input": text, "Instruction": instruction, "SystemPrompt": self.system_prompt})


def _args(a: Any) -> Any:
    if isinstance(a, str):
        try:
            return json.loads(a)
        except ValueError:
            return a
    return a
