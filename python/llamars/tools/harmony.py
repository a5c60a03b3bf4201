"""OpenAI's harmony format (gpt-oss): a reply is a series of messages on channels,

    <|channel|>analysis<|message|>…thinking…<|end|>
    <|start|>assistant<|channel|>final<|message|>…answer…
    <|start|>assistant<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{…}

(the generation prompt already wrote the first `<|start|>assistant`; `<|return|>` and
`<|call|>` end the generation and are not in the text). `analysis` is reasoning, `final`
(and `commentary` addressed to nobody, a preamble) is content, and a message addressed
`to=functions.NAME` is a call of NAME with the message as its JSON arguments. The markup
tokens are control tokens: requests in this format ask for them in the text
(`preserved_tokens`), as llama-server does.
"""
from __future__ import annotations

import json
import re
from typing import List, Optional, Tuple

from .base import Call, Constraint, Format, Parsed, _hold, _json_rule
from .jsonscan import skip_ws, value_end

START, CHANNEL, MESSAGE, END, CONSTRAIN = "<|start|>", "<|channel|>", "<|message|>", "<|end|>", "<|constrain|>"
#: the markup the parser reads: rendered in the generated text for this format
PRESERVED = (START, CHANNEL, MESSAGE, END, CONSTRAIN)
_RECIPIENT = re.compile(r"to=functions\.([A-Za-z0-9_.:-]+)")
_CALL_OPEN = " to=functions."


class Harmony(Format):
    name = "gpt-oss"
    markers = (_CALL_OPEN,)
    reasoning = (CHANNEL + "analysis" + MESSAGE, END)
    #: the reply is parsed by channel (reasoning included), not by reasoning tags
    channels = True
    preserved = PRESERVED

    def constraint(self, tools, choice, parallel):
        # one call per generation (`<|call|>` ends it). Forced (`required`, a named tool):
        # the reply is the call's message; lazy (`auto`): the grammar engages at the
        # recipient, after whatever thinking came first (the trigger is plain text: the
        # engine matches triggers in the text, and feeds it to the grammar)
        chosen = [t for t in tools if choice.name in (None, t.name)]
        lazy = choice.mode != "required"
        head = '" to=functions."' if lazy else '<|channel|> "commentary to=functions."'
        alts = " | ".join(f"fn{i}" for i in range(len(chosen)))
        rules = "\n".join(
            f'fn{i}: {json.dumps(t.name)} " "? <|constrain|>? "json"? <|message|> {_json_rule(t.parameters)}' for i, t in enumerate(chosen)
        )
        lark = f"%llguidance {{}}\nstart: {head} call\ncall: {alts}\n{rules}\n"
        return Constraint(lark=lark, triggers=[" to=functions."] if lazy else [])

    def parse(self, text: str, partial: bool) -> Parsed:
        return self.parse_channels(text, partial)[1]

    def parse_channels(self, text: str, partial: bool) -> Tuple[Optional[str], Parsed]:
        """(reasoning or None, content and calls) of a reply, complete or still arriving
        (`partial`: a marker's unfinished prefix and an unfinished header are held)."""
        reasoning: List[str] = []
        content: List[str] = []
        calls: List[Call] = []
        i = 0
        while i < len(text):
            if text.startswith(START, i):
                head_at = i + len(START)
            elif text.startswith(CHANNEL, i):
                head_at = i
            elif partial and (START.startswith(text[i:]) or CHANNEL.startswith(text[i:])):
                break  # a marker still arriving
            else:
                # text outside any message (a model that dropped the markup): content
                nxt = _next(text, i + 1, (START, CHANNEL))
                piece = text[i:nxt]
                content.append(_hold(piece, (START, CHANNEL)) if partial and nxt == len(text) else piece)
                i = nxt
                continue
            m = text.find(MESSAGE, head_at)
            if m < 0:
                if not partial:
                    content.append(_strip_markup(text[head_at:]))
                break  # the header is still arriving
            header = text[head_at:m]
            body_at = m + len(MESSAGE)
            e = _next(text, body_at, (END, START, CHANNEL))
            body = text[body_at:e]
            ended = e < len(text)
            if partial and not ended:
                body = _hold(body, (END, START, CHANNEL))
            channel = header.split(CHANNEL)[-1].strip().split(" ")[0] if CHANNEL in header else ""
            who = _RECIPIENT.search(header)
            if who:
                a = skip_ws(body, 0)
                done = a < len(body) and value_end(body, a) is not None and (ended or not partial)
                calls.append(Call(who.group(1), body.strip(), done))
            elif channel == "analysis":
                reasoning.append(body)
            else:
                content.append(body)
            i = e + len(END) if text.startswith(END, e) else e
        r = "\n".join(x.strip() for x in reasoning) if reasoning else None
        return r, Parsed("".join(content), calls)


def _next(text: str, i: int, marks: Tuple[str, ...]) -> int:
    """Where the first of `marks` at or after i begins (len(text) if none)."""
    return min((k for k in (text.find(mk, i) for mk in marks) if k >= 0), default=len(text))


def _strip_markup(s: str) -> str:
    for mk in PRESERVED:
        s = s.replace(mk, "")
    return s


def is_harmony(template_source: str) -> bool:
    """llama.cpp's detection of the gpt-oss format: the template writes `<|channel|>`."""
    return CHANNEL in (template_source or "")
