"""POST /embedding (/embeddings): llama.cpp's native shape, and POST /v1/embeddings:
OpenAI's. Needs --embeddings; pooling from --pooling or the model."""
from __future__ import annotations

import asyncio
import base64
from typing import Optional

from litestar.di import NamedDependency
from litestar.params import JSONBody
from litestar import Response, post

from ...embeddings import default_pooling, normalize, pool
from ...schemas.native import EmbeddingRequest
from ...schemas.openai import OAIEmbeddingRequest
from ..errors import ApiError, overflow
from ..service import Service
from ..threaded import json_reply


def _inputs(svc: NamedDependency[Service], raw, field: str = "input") -> list:
    """A string, a token list, or a list of strings / token lists → token id lists."""
    e = svc.need()
    if isinstance(raw, str):
        raw = [raw]
    elif raw and all(isinstance(t, int) for t in raw):
        raw = [raw]
    if not raw:
        raise ApiError(400, f"{field}: at least one text or token list is required")
    if len(raw) > svc.config.max_prompts:
        raise ApiError(400, f"{field}: {len(raw)} inputs exceed the limit of {svc.config.max_prompts} per request (--max-prompts)")
    out = []
    for i, x in enumerate(raw):
        if isinstance(x, str):
            ids = e.tokenize(x, add_special=True, parse_special=True)
        elif isinstance(x, list) and all(isinstance(t, int) for t in x):
            ids = x
        else:
            raise ApiError(400, f"{field}[{i}]: must be a string or a list of token ids")
        if not ids:
            raise ApiError(400, f"{field}[{i}]: is empty")
        bad = [t for t in ids if not 0 <= t < e.n_vocab]
        if bad:
            raise ApiError(400, f"{field}[{i}]: token id {bad[0]} is out of range [0, {e.n_vocab})")
        if len(ids) > e.n_ctx_slot:
            raise overflow(len(ids), e.n_ctx_slot)
        out.append(ids)
    return out


def _pooling(svc: NamedDependency[Service]) -> str:
    if not svc.config.embedding:
        raise ApiError(501, "this server does not serve embeddings; start it with --embeddings", "not_supported_error")
    e = svc.need()
    return svc.config.pooling or default_pooling(e.info.get("pooling_type"))


def _norm(svc: Service, given: Optional[float]) -> float:
    return svc.config.embd_normalize if given is None else given


async def _embed(svc: NamedDependency[Service], ids: list, pooling: str, norm: float):
    e = svc.need()
    hidden = await asyncio.to_thread(e.hidden_states, ids)
    return normalize(pool(hidden, pooling), norm)


@post(["/embedding", "/embeddings"], status_code=200, summary="llama.cpp embeddings")
async def embedding(data: JSONBody[EmbeddingRequest], svc: NamedDependency[Service]) -> Response:
    pooling = _pooling(svc)
    raw = data.content if data.content is not None else data.input
    if raw is None:
        raise ApiError(400, "content: required")
    out = []
    field = "content" if data.content is not None else "input"
    for i, ids in enumerate(await asyncio.to_thread(_inputs, svc, raw, field)):
        out.append(await _embed(svc, ids, pooling, _norm(svc, data.embd_normalize)))
    return await json_reply(lambda: [{"index": i, "embedding": rows.tolist()} for i, rows in enumerate(out)])


@post("/v1/embeddings", status_code=200, summary="OpenAI embeddings")
async def oai_embeddings(data: JSONBody[OAIEmbeddingRequest], svc: NamedDependency[Service]) -> Response:
    pooling = _pooling(svc)
    if pooling == "none":
        raise ApiError(400, "pooling 'none' is not OpenAI-compatible; start the server with --pooling mean|cls|last")
    if data.encoding_format not in ("float", "base64"):
        raise ApiError(400, f"encoding_format: must be 'float' or 'base64', got {data.encoding_format!r}")
    if data.dimensions is not None:
        raise ApiError(400, "dimensions: this model's embeddings cannot be shortened")
    vecs, n_tok = [], 0
    for ids in await asyncio.to_thread(_inputs, svc, data.input):
        vecs.append((await _embed(svc, ids, pooling, _norm(svc, data.embd_normalize)))[0])
        n_tok += len(ids)

    def body() -> dict:
        b64 = data.encoding_format == "base64"
        items = [{"object": "embedding", "index": i, "embedding": base64.b64encode(v.astype("<f4").tobytes()).decode() if b64 else v.tolist()}
                 for i, v in enumerate(vecs)]
        return {"object": "list", "data": items, "model": data.model or svc.model_id, "usage": {"prompt_tokens": n_tok, "total_tokens": n_tok}}

    return await json_reply(body)


ROUTES = [embedding, oai_embeddings]
