"""POST /embedding (/embeddings): llama.cpp's native shape, and POST /v1/embeddings:
OpenAI's. Needs --embeddings; pooling from --pooling or the model."""
from __future__ import annotations

import asyncio
import base64
from typing import Optional

import numpy as np
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
        if len(ids) > input_limit(e):
            raise overflow(len(ids), input_limit(e))
        out.append(ids)
    return out


def input_limit(e) -> int:
    """Tokens one input may have: a slot's context, or an encoder's whole context (its
    inputs run outside the slots, each in one batch)."""
    return e.info["n_ctx"] if e.info.get("encoder") else e.n_ctx_slot


def _pooling(svc: NamedDependency[Service]) -> str:
    if not svc.config.embedding:
        raise ApiError(501, "this server does not serve embeddings; start it with --embeddings", "not_supported_error")
    e = svc.need()
    return svc.config.pooling or default_pooling(e.info.get("pooling_type"))


def _norm(svc: Service, given: Optional[float]) -> float:
    return svc.config.embd_normalize if given is None else given


def groups(seqs: list, budget: int) -> list:
    """Consecutive inputs of at most `budget` tokens together (at least one each): the work
    of one worker-thread call. An encoder evaluates a group in shared batches; between
    groups a client that has left stops the rest."""
    out, cur, n = [], [], 0
    for s in seqs:
        if cur and n + len(s) > budget:
            out.append(cur)
            cur, n = [], 0
        cur.append(s)
        n += len(s)
    return out + [cur] if cur else out


async def _embed_all(svc: NamedDependency[Service], seqs: list, pooling: str, norm: float) -> list:
    """The rows of each input: pooled and normalised, or the classifier's for `rank`."""
    e = svc.need()
    # an encoder evaluates a group in shared batches; a decoder runs each input on its own,
    # so each is its own group and a client that leaves stops the rest after the current one
    out = []
    for group in groups(seqs, e.info["n_batch"] if e.info["encoder"] else 1):
        if pooling == "rank":
            out += [np.array([s], dtype=np.float32) for s in await asyncio.to_thread(e.classify_many, group)]
        else:
            out += [normalize(pool(h, pooling), norm) for h in await asyncio.to_thread(e.hidden_states_many, group)]
    return out


@post(["/embedding", "/embeddings"], status_code=200, summary="llama.cpp embeddings")
async def embedding(data: JSONBody[EmbeddingRequest], svc: NamedDependency[Service]) -> Response:
    pooling = _pooling(svc)
    raw = data.content if data.content is not None else data.input
    if raw is None:
        raise ApiError(400, "content: required")
    field = "content" if data.content is not None else "input"
    out = await _embed_all(svc, await asyncio.to_thread(_inputs, svc, raw, field), pooling, _norm(svc, data.embd_normalize))
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
    seqs = await asyncio.to_thread(_inputs, svc, data.input)
    vecs = [rows[0] for rows in await _embed_all(svc, seqs, pooling, _norm(svc, data.embd_normalize))]
    n_tok = sum(len(s) for s in seqs)

    def body() -> dict:
        b64 = data.encoding_format == "base64"
        items = [{"object": "embedding", "index": i, "embedding": base64.b64encode(v.astype("<f4").tobytes()).decode() if b64 else v.tolist()}
                 for i, v in enumerate(vecs)]
        return {"object": "list", "data": items, "model": data.model or svc.model_id, "usage": {"prompt_tokens": n_tok, "total_tokens": n_tok}}

    return await json_reply(body)


ROUTES = [embedding, oai_embeddings]
