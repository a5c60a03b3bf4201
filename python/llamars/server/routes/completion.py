"""POST /completion (/completions): llama.cpp's native completion API, and
POST /v1/completions: OpenAI's legacy completions."""
from __future__ import annotations

import asyncio
import time
import uuid

from litestar.di import NamedDependency
from litestar.params import JSONBody
from litestar import Request, post

from ...schemas.native import CompletionRequest
from ...schemas.openai import OAICompletionRequest
from .. import shapes
from ..errors import ApiError
from ..service import Service
from ..sse import DONE, EventStream, event, event_stream


# llama-server's names for the core's fields on the native routes
NATIVE_NAMES = {"max_tokens": "n_predict"}


def native_fields(svc: NamedDependency[Service], data: JSONBody[CompletionRequest]) -> dict:
    if data.n_cmpl < 1 or data.n_cmpl > 16:
        raise ApiError(400, f"n_cmpl: must be within [1, 16], got {data.n_cmpl}")
    return svc.gen_fields(
        data,
        n_predict=data.n_predict,
        stop=data.stop,
        cache_prompt=data.cache_prompt,
        id_slot=data.id_slot,
        n_keep=data.n_keep,
        n_discard=data.n_discard,
        truncate=data.truncate,
        return_progress=data.return_progress and data.stream,
        n_indent=data.n_indent,
        t_max_predict_ms=data.t_max_predict_ms,
        post_sampling_probs=data.post_sampling_probs,
    )


@post(["/completion", "/completions"], status_code=200, summary="llama.cpp completion")
async def completion(request: Request, data: JSONBody[CompletionRequest], svc: NamedDependency[Service]) -> object:
    e = svc.need()
    fields = native_fields(svc, data)
    reqs = await svc.arequests(data.prompt, fields, NATIVE_NAMES, data.n_cmpl)
    with_probs = reqs[0].n_probs > 0
    if not data.stream:
        results = await asyncio.gather(*(svc.aengine.collect(r) for r in reqs))
        gen = reqs[0].settings()
        out = [shapes.native_final(e, r, gen, svc.model_id, i, data.return_tokens, with_probs, data.post_sampling_probs) for i, r in enumerate(results)]
        if data.response_fields:
            out = [shapes.pick_fields(o, data.response_fields) for o in out]
        return out[0] if len(out) == 1 else out
    if len(reqs) > 1:
        raise ApiError(501, "streaming several prompts in one request is not supported yet; send one request per prompt", "not_supported_error")

    return await native_stream(svc, reqs[0], data, request)


async def native_stream(svc: NamedDependency[Service], req, data: JSONBody[CompletionRequest], request=None) -> EventStream:
    """llama.cpp's SSE stream: a chunk per token (content, tokens, probabilities, progress,
    running timings), then the final chunk with stop: true and the full fields."""
    e = svc.need()
    with_probs = req.n_probs > 0
    n_prompt = len(req.prompt)
    s = await svc.aengine.start(req)  # refused requests fail here, before the 200

    async def chunks():
        t0 = time.monotonic()
        n_out = 0
        try:
            async for c in s:
                if c.progress is not None:
                    yield event({"index": 0, "content": "", "tokens": [], "stop": False, "id_slot": -1, "prompt_progress": c.progress})
                    continue
                n_out += 1
                ev = {
                    "index": 0,
                    "content": c.text,
                    "tokens": [c.token] if c.token is not None else [],
                    "stop": False,
                    "id_slot": -1,
                    "tokens_predicted": n_out,
                    "tokens_evaluated": n_prompt,
                }
                if with_probs and c.token is not None:
                    ev["completion_probabilities"] = [shapes.probs(e, c.token, c.logprob, c.top_logprobs, data.post_sampling_probs)]
                if data.timings_per_token and s.prompt_progress is not None:
                    ev["timings"] = shapes.running_timings(s.prompt_progress, n_out, (time.monotonic() - t0) * 1e3)
                yield event(ev)
            fin = shapes.native_final(e, s.result, req.settings(), svc.model_id, 0, False, False)
            fin["content"] = ""
            yield event(shapes.pick_fields(fin, data.response_fields) if data.response_fields else fin)
        finally:
            await s.aclose()

    return event_stream(request, svc, chunks())


@post("/v1/completions", status_code=200, summary="OpenAI completions")
async def oai_completions(request: Request, data: JSONBody[OAICompletionRequest], svc: NamedDependency[Service]) -> object:
    e = svc.need()
    if not 1 <= data.n <= 16:
        raise ApiError(400, f"n: must be within [1, 16], got {data.n}")
    if data.echo:
        raise ApiError(501, "echo: returning the prompt is not supported yet", "not_supported_error")
    if data.logprobs is not None and not 0 <= data.logprobs <= 20:
        raise ApiError(400, f"logprobs: must be within [0, 20], got {data.logprobs}")
    fields = svc.gen_fields(
        data,
        n_predict=data.max_tokens if data.max_tokens is not None else 16,
        stop=data.stop,
        n_probs=data.logprobs or 0,
        cache_prompt=data.cache_prompt,
        id_slot=data.id_slot,
        n_keep=data.n_keep,
    )
    prompt = data.prompt
    if svc.localai is not None and "completion" in svc.localai.templates and isinstance(prompt, str):
        prompt = await asyncio.to_thread(svc.localai.completion, prompt)  # (LocalAI's completion template)
    reqs = await svc.arequests(prompt, fields, None, data.n)
    prompts = [r.prompt for r in reqs]
    cid, created = f"cmpl-{uuid.uuid4().hex}", int(time.time())
    base = {"id": cid, "object": "text_completion", "created": created, "model": data.model or svc.model_id, "system_fingerprint": svc.fingerprint}

    def logprobs_of(probs: list) -> dict:
        return {
            "tokens": [shapes.piece(e, p["id"])[0] for p in probs],
            "token_logprobs": [p["logprob"] for p in probs],
            "top_logprobs": [{shapes.piece(e, t["id"])[0]: t["logprob"] for t in p["top_logprobs"]} for p in probs],
            "text_offset": [],
        }

    if not data.stream:
        results = await asyncio.gather(*(svc.aengine.collect(r) for r in reqs))
        choices = [
            {"index": i, "text": r.text, "logprobs": logprobs_of(r.probs) if data.logprobs else None, "finish_reason": shapes.finish_reason(r)}
            for i, r in enumerate(results)
        ]
        pt = sum(len(p) for p in prompts)
        ct = sum(len(r.tokens) for r in results)
        return {**base, "choices": choices, "usage": shapes.usage(pt, ct)}
    if len(prompts) > 1:
        raise ApiError(501, "streaming with n > 1 or several prompts is not supported yet", "not_supported_error")

    s = await svc.aengine.start(reqs[0])  # refused requests fail here, before the 200

    async def chunks():
        try:
            async for c in s:
                if c.text:
                    yield event({**base, "choices": [{"index": 0, "text": c.text, "logprobs": None, "finish_reason": None}]})
            r = s.result
            yield event({**base, "choices": [{"index": 0, "text": "", "logprobs": None, "finish_reason": shapes.finish_reason(r)}]})
            if data.stream_options and data.stream_options.include_usage:
                yield event({**base, "choices": [], "usage": shapes.usage(len(prompts[0]), len(r.tokens))})
            yield DONE
        finally:
            await s.aclose()

    return EventStream(chunks(), ping=svc.config.sse_ping_interval)


ROUTES = [completion, oai_completions]
