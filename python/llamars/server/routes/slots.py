"""GET /slots, POST /slots/{id}?action=save|restore|erase, GET /metrics (Prometheus)."""
from __future__ import annotations

import asyncio
import os
import time

from litestar.di import NamedDependency
from litestar.params import FromPath, FromQuery, JSONBody
from typing import Optional
from litestar import get, post
from litestar.response import Response

from ...schemas.native import SlotActionRequest
from ..errors import ApiError, error_response
from ..service import Service


@get("/slots", sync_to_thread=False)
def slots(svc: NamedDependency[Service], fail_on_no_slot: FromQuery[int] = 0) -> Response:
    if not svc.config.slots:
        return error_response(501, "this server does not expose slots; start it without --no-slots", "not_supported_error")
    e = svc.need()
    params = svc.default_settings()
    spec = e.info["spec_type"] != "none"
    kv = (e.info["cache_type_k"], e.info["cache_type_v"])
    out = []
    for s in e.slots():
        if s["id_task"] is None and not s["is_processing"]:  # never used: llama-server lists only these
            out.append({"id": s["id"], "n_ctx": s["n_ctx"], "speculative": spec, "is_processing": False})
            continue
        busy = s["is_processing"]
        out.append(
            {
                "id": s["id"],
                "id_task": s["id_task"] if s["id_task"] is not None else -1,
                "n_ctx": s["n_ctx"],
                "speculative": spec,
                "is_processing": s["is_processing"],
                "n_cached": s["n_cached"],
                # llamars: the KV cache's types (-ctk / -ctv) and the bytes the slot's rows take
                "kv_cache": {"type_k": kv[0], "type_v": kv[1], "bytes": s["kv_bytes"]},
                # as llama-server's: n_prompt_tokens is what the slot's cache holds (the
                # prompt and the tokens decoded so far); an idle slot has the counters of
                # its last task reset (has_next_token stays true when that task was
                # cancelled or failed, not stopped)
                "n_prompt_tokens": s["n_cached"],
                "n_prompt_tokens_cache": s["n_prompt_cached"] if busy else 0,
                "n_prompt_tokens_processed": s["n_prompt_tokens"] - s["n_prompt_cached"] if busy else 0,
                "params": params,
                "next_token": [
                    {
                        "has_new_line": False,
                        "has_next_token": s["has_next_token"],
                        "n_remain": -1 if s["n_remain"] is None else s["n_remain"],
                        "n_decoded": s["n_decoded"] if busy else 0,
                    }
                ],
            }
        )
    if fail_on_no_slot and all(x["is_processing"] for x in out):
        return error_response(503, "no slot available", "unavailable_error")
    return Response(out)


@post("/slots/{id_slot:int}", status_code=200)
async def slot_action(svc: NamedDependency[Service], id_slot: FromPath[int], action: FromQuery[str], data: JSONBody[Optional[SlotActionRequest]] = None) -> dict:
    e = svc.need()
    if not 0 <= id_slot < e.n_parallel:
        raise ApiError(400, f"id_slot: slot {id_slot} does not exist (0..{e.n_parallel - 1})")
    filename = data.filename if data else None
    if action in ("save", "restore") and not filename:
        raise ApiError(400, f"filename: required to {action} a slot")
    if action == "save":
        r = await asyncio.to_thread(e.slot_save, id_slot, filename)
        return {"id_slot": id_slot, "filename": filename, "n_saved": r["n_tokens"], "n_written": r["n_bytes"], "timings": {"save_ms": r["ms"]}}
    if action == "restore":
        r = await asyncio.to_thread(e.slot_restore, id_slot, filename)
        return {"id_slot": id_slot, "filename": filename, "n_restored": r["n_tokens"], "n_read": r["n_bytes"], "timings": {"restore_ms": r["ms"]}}
    if action == "erase":
        r = await asyncio.to_thread(e.slot_erase, id_slot)
        return {"id_slot": id_slot, "n_erased": r["n_tokens"]}
    raise ApiError(400, f"action: must be save, restore or erase, got {action!r}")


def _process_start() -> int:
    """This process's start, in Unix seconds (/proc where there is one)."""
    try:
        with open(f"/proc/{os.getpid()}/stat") as f:
            ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/stat") as f:
            btime = next(int(ln.split()[1]) for ln in f if ln.startswith("btime "))
        return btime + ticks // os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration, AttributeError):
        return int(time.time())


PROCESS_START = _process_start()


@get("/metrics", sync_to_thread=False)
def metrics(svc: NamedDependency[Service]) -> Response:
    if not svc.config.metrics:
        return error_response(501, "metrics are disabled; start the server with --metrics", "not_supported_error")
    m = svc.need().metrics()
    pt, ps = m["prompt_tokens_total"], m["prompt_seconds_total"]
    gt, gs = m["tokens_predicted_total"], m["tokens_predicted_seconds_total"]
    # llama-server's series, names, help texts and order (2026); the KV-cache gauges are llamars's own
    rows = [
        ("counter", "prompt_tokens_total", "Number of prompt tokens processed, excluding cached tokens", pt),
        ("counter", "prompt_tokens_cached_total", "Number of prompt tokens reused from the cache",
         m.get("prompt_tokens_cached_total", 0)),
        ("counter", "prompt_seconds_total", "Total time spent processing prompts", ps),
        ("counter", "tokens_predicted_total", "Number of generation tokens processed", gt),
        ("counter", "tokens_predicted_seconds_total", "Total time spent generating tokens", gs),
        ("counter", "n_decode_total", "Total number of llama_decode() calls, excluding speculative decoding and "
         "multimodal decoding", m["n_decode_total"]),
        ("counter", "n_tokens_max", "Largest observed sequence length (prompt + generation)", m.get("n_tokens_max", 0)),
        ("counter", "spec_decode_num_draft_tokens_total", "Speculative: Total draft tokens generated", m["n_drafted_total"]),
        ("counter", "spec_decode_num_accepted_tokens_total", "Speculative: Total draft tokens accepted by the target model",
         m["n_drafted_accepted_total"]),
        ("counter", "spec_decode_num_drafts_total", "Speculative: Total speculative decoding verification steps",
         m["n_draft_steps_total"]),
        ("gauge", "prompt_tokens_seconds", "Average prompt throughput in tokens/s", pt / ps if ps else 0.0),
        ("gauge", "predicted_tokens_seconds", "Average generation throughput in tokens/s", gt / gs if gs else 0.0),
        ("gauge", "requests_processing", "Number of requests processing", m["requests_processing"]),
        ("gauge", "requests_deferred", "Number of requests deferred", m["requests_deferred"]),
        ("gauge", "n_busy_slots_per_decode", "Average number of busy slots per llama_decode() call",
         m["n_busy_slots_total"] / m["n_decode_total"] if m["n_decode_total"] else 0.0),
        ("gauge", "kv_cache_usage_ratio", "KV-cache usage. 1 means 100 percent usage.", m["kv_cache_usage_ratio"]),
        ("gauge", "kv_cache_tokens", "KV-cache tokens.", m["kv_cache_tokens"]),
        ("gauge", "kv_cache_bytes", f"KV-cache bytes (K {svc.need().info['cache_type_k']}, V {svc.need().info['cache_type_v']}).",
         m["kv_cache_bytes"]),
    ]
    text = "".join(f"# HELP llamacpp:{n} {h}\n# TYPE llamacpp:{n} {t}\nllamacpp:{n} {v}\n" for t, n, h, v in rows)
    return Response(text, media_type="text/plain; version=0.0.4",
                    headers={"Process-Start-Time-Unix": str(PROCESS_START)})


ROUTES = [slots, slot_action, metrics]
