"""POST /rerank (/reranking, /v1/rerank, /v1/reranking): documents scored against a query
by a reranker (an encoder with a classification head), llama-server's Jina-style reply
(`results` with `index` and `relevance_score`, `usage`) or TEI's list when the request
sends `texts`. Needs --rerank, or a reranker GGUF (pooling `rank`)."""
from __future__ import annotations

import asyncio

from litestar import Response, post
from litestar.di import NamedDependency
from litestar.params import JSONBody

from ...rerank import check, order, pair_ids
from ...schemas.native import RerankRequest
from ..errors import ApiError, overflow
from ..service import Service
from ..threaded import json_reply
from .embeddings import groups, input_limit


def _pairs(svc: Service, query: str, texts: list) -> list:
    e = svc.need()
    out = []
    for d in texts:
        ids = pair_ids(e, query, d)
        if len(ids) > input_limit(e):
            raise overflow(len(ids), input_limit(e))
        out.append(ids)
    return out


@post(["/rerank", "/reranking", "/v1/rerank", "/v1/reranking"], status_code=200, summary="Rerank documents")
async def rerank(data: JSONBody[RerankRequest], svc: NamedDependency[Service]) -> Response:
    e = svc.need()
    if not svc.config.rerank:
        raise ApiError(501, "This server does not support reranking. Start it with `--reranking`", "not_supported_error")
    tei = data.texts is not None and data.documents is None
    if data.query is None:
        raise ApiError(400, '"query" must be provided')
    docs = data.texts if tei else data.documents
    n_docs = len(docs) if isinstance(docs, (list, tuple)) else 0
    if n_docs > svc.config.max_prompts:
        raise ApiError(400, f"documents: {n_docs} documents exceed the limit of {svc.config.max_prompts} per request (--max-prompts)")
    query, texts, top_n = check(data.query, docs, data.top_n)
    pairs = await asyncio.to_thread(_pairs, svc, query, texts)
    scores = []
    for group in groups(pairs, e.info["n_batch"]):  # a group at a time: a client that leaves stops the rest
        scores += [s[0] for s in await asyncio.to_thread(e.classify_many, group)]
    ranked = order(scores, top_n)
    n_tok = sum(len(p) for p in pairs)

    def body():
        if tei:
            return [{"index": i, "score": s, **({"text": texts[i]} if data.return_text else {})} for i, s in ranked]
        results = [{"index": i, "relevance_score": s, **({"document": {"text": texts[i]}} if data.return_documents else {})} for i, s in ranked]
        return {"model": data.model or svc.model_id, "object": "list", "usage": {"prompt_tokens": n_tok, "total_tokens": n_tok}, "results": results}

    return await json_reply(body)


ROUTES = [rerank]
