"""GET /health, /v1/health, /props (POST with --props), /v1/models, /models, /lora-adapters."""
from __future__ import annotations

from litestar.di import NamedDependency
from litestar.params import JSONBody
from litestar import get, post
from litestar.response import Response

from ... import __version__
from ...chat.plan import capabilities
from ...models import FILE_TYPES
from ..errors import ApiError, error_response
from ..service import Service


@get(["/health", "/v1/health"], sync_to_thread=False)
def health(svc: NamedDependency[Service]) -> Response:
    if svc.error:
        return error_response(500, f"the model failed to load: {svc.error}", "server_error")
    if not svc.ready:
        return error_response(503, "Loading model", "unavailable_error")
    return Response({"status": "ok"})


@get("/props", sync_to_thread=False)
def props(svc: NamedDependency[Service]) -> dict:
    e = svc.need()
    i = e.info
    caps = capabilities(svc.template)  # what the template renders by itself (llama.cpp probes the same)
    return {
        "default_generation_settings": {
            "id": 0,
            "n_ctx": e.n_ctx_slot,
            "speculative": i["spec_type"] != "none",
            "is_processing": False,
            "params": svc.default_settings(),
        },
        "total_slots": e.n_parallel,
        "model_alias": svc.model_id,
        "model_path": i["path"],
        "modalities": {"vision": False, "video": False, "audio": False},
        "chat_template": svc.template.source if svc.template is not None else "",
        "bos_token": e.token_to_piece(i["bos"]).decode("utf-8", "replace") if i.get("bos") is not None else "",
        "eos_token": e.token_to_piece(i["eos"]).decode("utf-8", "replace") if i.get("eos") is not None else "",
        "build_info": f"llamars {__version__}",
        "is_sleeping": False,
        "model_ftype": FILE_TYPES.get(i.get("file_type"), ""),
        # llamars: what the model holds and what a token reads (mixtures of experts: active)
        "model_info": {
            "arch": i["arch"],
            "n_params": i["n_params"],
            "n_params_active": i["n_params_active"],
            "n_expert": i["n_expert"],
            "n_expert_used": i["n_expert_used"],
            "bytes_per_token": i["bytes_per_token"],
        },
        # llamars: the KV cache's types (-ctk / -ctv), attention path (-fa) and size
        "kv_cache": {
            "type_k": i["cache_type_k"],
            "type_v": i["cache_type_v"],
            "flash_attn": i["flash_attn"],
            "bytes": e.metrics()["kv_cache_bytes"],
            "bytes_per_token": i["kv_bytes_per_token"],
        },
        "endpoint_slots": svc.config.slots,
        "endpoint_props": svc.config.props,
        "endpoint_metrics": svc.config.metrics,
        "chat_template_caps": {
            "supports_system_role": caps.system,
            "supports_string_content": True,
            "supports_typed_content": False,
            "supports_tools": caps.tools,
            "supports_tool_calls": caps.tool_calls,
            "supports_parallel_tool_calls": caps.tool_calls,
            "supports_object_arguments": False,
            "supports_preserve_reasoning": False,
            "supports_reasoning_effort": False,
        },
        "media_marker": "",
        "cors_proxy_enabled": False,
        "ui": svc.config.webui,
        "ui_settings": svc.config.ui_config,
    }


# general.file_type → llama.cpp's names (the common ones)


@post("/props", status_code=200)
async def set_props(svc: NamedDependency[Service], data: JSONBody[dict]) -> dict:
    if not svc.config.props:
        raise ApiError(501, "changing server properties is disabled; start the server with --props", "not_supported_error")
    unknown = set(data) - {"n_predict", "temperature", "top_k", "top_p", "min_p", "seed", "n_probs"}
    if unknown:
        raise ApiError(400, f"props: cannot change {', '.join(sorted(unknown))}")
    d = svc.config.sampling
    for k, v in data.items():
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            raise ApiError(400, f"{k}: must be a number")
        setattr(d, k, type(getattr(d, k))(v))
    return {"success": True}


@get(["/v1/models", "/models"], sync_to_thread=False)
def models(svc: NamedDependency[Service]) -> dict:
    e = svc.need()
    i = e.info
    return {
        "object": "list",
        "models": [
            {
                "name": svc.model_id,
                "model": svc.model_id,
                "modified_at": "",
                "size": "",
                "digest": "",
                "type": "model",
                "description": "",
                "tags": [""],
                "capabilities": ["completion"],
                "parameters": "",
                "details": {"parent_model": "", "format": "gguf", "family": "", "families": [""], "parameter_size": "", "quantization_level": ""},
            }
        ],
        "data": [
            {
                "id": svc.model_id,
                "aliases": svc.config.aliases,
                "tags": sorted(set(svc.config.tags)),
                "object": "model",
                "created": svc.created,
                "owned_by": "llamars",
                "meta": {
                    "vocab_type": 1,
                    "n_vocab": i["n_vocab"],
                    "n_ctx_train": i["n_ctx_train"],
                    "n_ctx": e.n_ctx_slot,
                    "ftype": FILE_TYPES.get(i.get("file_type"), ""),
                    "n_embd": i["n_embd"],
                    "n_params": i["n_params"],
                    "n_params_active": i["n_params_active"],
                    "size": i["size"],
                },
            }
        ],
    }


@get("/lora-adapters", sync_to_thread=False)
def lora_list(svc: NamedDependency[Service]) -> list:
    """llama-server's list: id, path, scale (the global one), task_name, prompt_prefix."""
    return [{k: a[k] for k in ("id", "path", "scale", "task_name", "prompt_prefix")} for a in svc.need().lora_adapters()]


@post("/lora-adapters", status_code=200, sync_to_thread=False)
def lora_set(svc: NamedDependency[Service], data: JSONBody[object]) -> dict:
    """Set the global scales: [{"id", "scale"}]; adapters not listed get 0 (llama-server's
    rule). Requests already running keep theirs."""
    if not isinstance(data, list):
        raise ApiError(400, "Request body must be an array")
    e = svc.need()
    n = len(e.lora_adapters())
    pairs = []
    for i, x in enumerate(data):
        if not isinstance(x, dict):
            raise ApiError(400, f"[{i}]: must be an object with id and scale")
        sid, scale = x.get("id"), x.get("scale", 0.0)
        if not isinstance(sid, int) or isinstance(sid, bool) or not 0 <= sid < n:
            raise ApiError(400, f"[{i}].id: {sid!r} is not a loaded adapter" + (f" (ids 0..{n - 1})" if n else " (none are loaded)"))
        if isinstance(scale, bool) or not isinstance(scale, (int, float)) or scale != scale or abs(scale) == float("inf"):
            raise ApiError(400, f"[{i}].scale: must be a finite number, got {scale!r}")
        pairs.append((sid, float(scale)))
    e.set_lora([{"id": a, "scale": b} for a, b in pairs])
    return {"success": True}


ROUTES = [health, props, set_props, models, lora_list, lora_set]
