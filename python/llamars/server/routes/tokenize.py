"""POST /tokenize, /detokenize, /apply-template."""
from __future__ import annotations

import asyncio

from litestar.di import NamedDependency
from litestar.params import JSONBody
from litestar import Response, post

from ...schemas.native import DetokenizeRequest, TokenizeRequest
from ...schemas.openai import ApplyTemplateRequest
from ..errors import ApiError
from ..service import Service
from ..threaded import json_reply


@post("/tokenize", status_code=200)
async def tokenize(data: JSONBody[TokenizeRequest], svc: NamedDependency[Service]) -> Response:
    e = svc.need()

    if not data.with_pieces:
        body = await asyncio.to_thread(e.tokenize_json, data.content, data.add_special, data.parse_special)
        return Response(content=body, media_type="application/json")

    def run() -> dict:
        ids = e.tokenize(data.content, add_special=data.add_special, parse_special=data.parse_special)
        out = []
        for i in ids:
            b = e.token_to_piece(i, special=True)
            try:
                piece = b.decode("utf-8")
            except UnicodeDecodeError:
                piece = list(b)
            out.append({"id": i, "piece": piece})
        return {"tokens": out}

    return await json_reply(run)


@post("/detokenize", status_code=200)
async def detokenize(data: JSONBody[DetokenizeRequest], svc: NamedDependency[Service]) -> Response:
    e = svc.need()

    def run() -> dict:
        bad = next((t for t in data.tokens if not 0 <= t < e.n_vocab), None)
        if bad is not None:
            raise ApiError(400, f"tokens: token id {bad} is out of range [0, {e.n_vocab})")
        return {"content": e.detokenize(data.tokens)}

    return await json_reply(run)


@post("/apply-template", status_code=200)
async def apply_template(data: JSONBody[ApplyTemplateRequest], svc: NamedDependency[Service]) -> dict:
    return {"prompt": await asyncio.to_thread(svc.render_chat, data.messages, data.add_generation_prompt, data.chat_template_kwargs)}


ROUTES = [tokenize, detokenize, apply_template]
