"""POST /v1/edits (and /edits), LocalAI's edit endpoint in OpenAI's former edits shape:
each `input` rewritten as `instruction` says, `n` choices per input. The prompt is one
user turn of the model's chat template that gives the instruction and the text, or the
`edit` template of the model's LocalAI config (--model-config: `.Instruction`, `.Input`);
the choices of all inputs run together in the batch."""
from __future__ import annotations

import asyncio
import time
import uuid

from litestar import post
from litestar.di import NamedDependency
from litestar.params import JSONBody

from ...schemas.openai import ChatMessage, EditRequest
from .. import shapes
from ..chat_turn import ChatTurn
from ..errors import ApiError
from ..service import Service

MAX_INPUTS = 64


def edit_prompt(instruction: str, text: str) -> str:
    """The built-in edit instruction, as one user message."""
    return (f"Rewrite the text below as the instruction says. Reply with the rewritten text only.\n\n"
            f"Instruction: {instruction}\n\nText:\n{text}")


@post(["/edits", "/v1/edits"], status_code=200, summary="LocalAI / OpenAI edits")
async def edits(data: JSONBody[EditRequest], svc: NamedDependency[Service]) -> dict:
    svc.need()
    if not data.instruction.strip():
        raise ApiError(400, "instruction: must be a non-empty string")
    inputs = [data.input] if isinstance(data.input, str) else list(data.input)
    if not 1 <= len(inputs) <= MAX_INPUTS:
        raise ApiError(400, f"input: give 1 to {MAX_INPUTS} texts, got {len(inputs)}")
    if not 1 <= data.n <= 16:
        raise ApiError(400, f"n: must be within [1, 16], got {data.n}")
    choices, pt, ct = [], 0, 0
    if svc.localai is not None and "edit" in svc.localai.templates:  # the config's edit template: a raw prompt
        fields = svc.gen_fields(data, n_predict=data.max_tokens, stop=data.stop)
        prompts = [await asyncio.to_thread(svc.localai.edit, data.instruction, text) for text in inputs]
        reqs = [r for p in prompts for r in await svc.arequests(p, fields, None, data.n)]
        results = await asyncio.gather(*(svc.aengine.collect(r) for r in reqs))
        for req, r in zip(reqs, results):
            pt += len(req.prompt)
            ct += len(r.tokens)
            choices.append({"index": len(choices), "text": r.text, "finish_reason": shapes.finish_reason(r)})
        pt //= max(1, data.n)  # (each prompt counted once)
    else:
        turns = [await ChatTurn.prepare(svc, [ChatMessage(role="user", content=edit_prompt(data.instruction, text))], data,
                                        conflict="", n_predict=data.max_tokens, stop=data.stop)
                 for text in inputs]
        for turn, rs in zip(turns, await asyncio.gather(*(t.complete(data.n) for t in turns))):
            pt += len(turn.ids)
            for r, reply in rs:
                ct += len(r.tokens)
                choices.append({"index": len(choices), "text": reply.content or "", "finish_reason": shapes.finish_reason(r)})
    return {"id": f"edit-{uuid.uuid4().hex}", "object": "edit", "created": int(time.time()), "model": data.model or svc.model_id,
            "choices": choices, "usage": shapes.usage(pt, ct)}


ROUTES = [edits]
