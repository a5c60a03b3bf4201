"""LocalAI model configs: a `*.yaml` / `*.yml` file of the models directory is one model,
known by its `name`, and becomes the command line of its child server:

| YAML                                      | child server flag                                 |
|-------------------------------------------|---------------------------------------------------|
| `parameters.model` (relative to the dir)  | `-m`                                              |
| `parameters.temperature`, `top_p`, `top_k`, `min_p`, `max_tokens`, `seed`, `repeat_penalty`, `repeat_last_n`, `presence_penalty`, `frequency_penalty`, `typical_p`, `mirostat`, `mirostat_eta`, `mirostat_tau`, `n_keep`, `ignore_eos` | the sampling defaults (`--temp`, … `-n`) |
| `context_size`, `threads`, `gpu_layers`, `batch`, `main_gpu`, `mmap`, `embeddings`, `rope_freq_base`, `rope_freq_scale`, `flash_attention`, `cache_type_k` / `_v` | `-c`, `-t`, `-ngl`, `-b`, `-mg`, `--load-mode`, `--embeddings`, … |
| `stopwords`                               | `-r` (each a default stop string)                 |
| `lora_adapter` + `lora_scale`, `lora_adapters` + `lora_scales` (relative to the dir) | `--lora-scaled FILE:SCALE` (scale 1 when not given) |
| `template.chat`, `chat_message`, `completion`, `edit` | LocalAI's Go templates (chat/localai_template.py) |
| `template.use_tokenizer_template`         | the GGUF's own chat template (the default)        |
| `options: ["key:value", …]`               | LocalAI's llama.cpp backend options (`parallel`, `cache_ram`, `context_shift`, `slot_prompt_similarity`, `swa_full`, `cache_reuse`, `n_ctx_checkpoints`, …) |

`backend` may be `llama-cpp` / `llama` / `llama.cpp` (or absent); another backend is
listed as failed with the reason. Keys llamars does not act on are reported once, when
the catalog is read; values are checked by the child's own command line, so a bad one
fails that model's load with the flag's message."""
from __future__ import annotations

import os
from typing import Dict, List, Optional, Tuple

from ..cli_opt import split_names
from .entry import _KEYS, CatalogError, Entry

BACKENDS = ("llama-cpp", "llama", "llama.cpp")
_PARAMETERS = {"temperature": "temp", "top_p": "top-p", "top_k": "top-k", "min_p": "min-p", "max_tokens": "n-predict",
               "seed": "seed", "repeat_penalty": "repeat-penalty", "repeat_last_n": "repeat-last-n",
               "presence_penalty": "presence-penalty", "frequency_penalty": "frequency-penalty", "typical_p": "typical",
               "mirostat": "mirostat", "mirostat_eta": "mirostat-lr", "mirostat_tau": "mirostat-ent", "n_keep": "keep",
               "ignore_eos": "ignore-eos", "grammar": "grammar"}
_TOP = {"context_size": "ctx-size", "threads": "threads", "gpu_layers": "n-gpu-layers", "batch": "batch-size",
        "main_gpu": "main-gpu", "embeddings": "embeddings", "rope_freq_base": "rope-freq-base",
        "rope_freq_scale": "rope-freq-scale", "flash_attention": "flash-attn", "cache_type_k": "cache-type-k",
        "cache_type_v": "cache-type-v", "tensor_split": "tensor-split", "n_draft": "draft-max"}
# LocalAI's llama.cpp backend options (its text-generation page), by every spelling
_OPTIONS = {"use_jinja": "jinja", "jinja": "jinja", "context_shift": "context-shift", "cache_ram": "cache-ram",
            "parallel": "parallel", "n_parallel": "parallel", "grpc_servers": "rpc", "rpc_servers": "rpc",
            "fit_params": "fit", "fit": "fit", "fit_params_target": "fit-target", "fit_target": "fit-target",
            "fit_params_min_ctx": "fit-ctx", "fit_ctx": "fit-ctx", "n_cache_reuse": "cache-reuse",
            "cache_reuse": "cache-reuse", "slot_prompt_similarity": "slot-prompt-similarity",
            "sps": "slot-prompt-similarity", "swa_full": "swa-full", "cont_batching": "cont-batching",
            "continuous_batching": "cont-batching", "check_tensors": "check-tensors", "warmup": "warmup",
            "no_op_offload": "no-op-offload", "device": "device", "devices": "device", "kv_unified": "kv-unified",
            "unified_kv": "kv-unified", "cache_idle_slots": "cache-idle-slots", "idle_slots_cache": "cache-idle-slots",
            "n_ctx_checkpoints": "ctx-checkpoints", "ctx_checkpoints": "ctx-checkpoints",
            "checkpoint_min_step": "checkpoint-min-step", "checkpoint_min_spacing": "checkpoint-min-step",
            "checkpoint_every_nt": "checkpoint-min-step", "checkpoint_every_n_tokens": "checkpoint-min-step",
            "split_mode": "split-mode", "sm": "split-mode"}
# keys that describe the model to people or to LocalAI's gallery, not to the server
_LORA = ("lora_adapter", "lora_adapters", "lora_scale", "lora_scales", "lora_base")
_DESCRIPTIVE = {"name", "backend", "parameters", "description", "usage", "known_usecases", "license", "urls", "icon",
                "tags", "download_files", "options", "template", "stopwords", "f16", "mmap", "roles", "system_prompt"}


def _flag(entry: Entry, flag: str, value: object, where: str) -> None:
    o, positive = _KEYS[flag]
    if o.kind == "bool":
        on = (str(value).strip().lower() in ("1", "true", "on", "yes")) if not isinstance(value, bool) else value
        on = on == positive
        if on:
            entry.options.append((o, split_names(o.names)[-1], True))
        elif o.neg:
            entry.options.append((o, split_names(o.neg)[0], False))
        return
    if isinstance(value, bool):
        value = "true" if value else "false"
    if isinstance(value, (list, tuple)):
        value = ",".join(str(v) for v in value)
    entry.options.append((o, "--" + flag, str(value)))


def load_yaml(path: str, models_dir: str) -> Tuple[Optional[Entry], List[str]]:
    """(entry, notes): the model a LocalAI config describes (None: not a model config) and
    what was noticed in it (unknown keys, settings llamars does not act on)."""
    import yaml

    try:
        with open(path, encoding="utf-8") as f:
            doc = yaml.safe_load(f)
    except (OSError, yaml.YAMLError) as e:
        raise CatalogError(f"{path}: cannot read the model config: {e}") from None
    if not isinstance(doc, dict):
        return None, [f"{path}: not a LocalAI model config (expected a mapping with name and parameters.model); skipped"]
    where = os.path.basename(path)
    name = doc.get("name") or os.path.splitext(where)[0]
    if not isinstance(name, str) or not name.strip():
        raise CatalogError(f"{path}: name must be a non-empty string")
    params = doc.get("parameters") or {}
    if not isinstance(params, dict):
        raise CatalogError(f"{path}: parameters must be a mapping")
    model = params.get("model")
    notes: List[str] = []
    entry = Entry(name.strip(), None, "localai")
    if isinstance(model, str) and model:
        entry.path = model if os.path.isabs(model) else os.path.join(models_dir, model)
    else:
        entry.refused = f"{where}: parameters.model names no model file"
    backend = doc.get("backend")
    if backend is not None and str(backend) not in BACKENDS:
        entry.refused = (f"{where}: backend {backend!r} is not available in llamars (it runs GGUF models itself: "
                         f"use backend: llama-cpp)")
    for k, v in params.items():
        if k == "model":
            continue
        if k in _PARAMETERS:
            _flag(entry, _PARAMETERS[k], v, where)
        else:
            notes.append(f"{where}: parameters.{k} is not used by llamars")
    for k, v in doc.items():
        if k in _TOP:
            _flag(entry, _TOP[k], v, where)
        elif k == "mmap":
            _flag(entry, "load-mode", "mmap" if v else "none", where)
        elif k == "f16":
            if v is False:
                notes.append(f"{where}: f16: false has no effect (the KV cache is f16)")
        elif k == "lora_base":
            notes.append(f"{where}: lora_base is not used (adapters apply to the model as loaded, as llama.cpp)")
        elif k not in _DESCRIPTIVE and k not in _LORA:
            notes.append(f"{where}: {k} is not used by llamars")
    for f, scale in _adapters(doc, path):
        _flag(entry, "lora-scaled", f"{f if os.path.isabs(f) else os.path.join(models_dir, f)}:{scale}", where)
    stops = doc.get("stopwords") or []
    if not isinstance(stops, list) or not all(isinstance(s, str) for s in stops):
        raise CatalogError(f"{path}: stopwords must be a list of strings")
    for s in stops:
        entry.options.append((_KEYS["reverse-prompt"][0], "-r", s))
    tmpl = doc.get("template") or {}
    if not isinstance(tmpl, dict):
        raise CatalogError(f"{path}: template must be a mapping")
    from ..chat.localai_template import KINDS, load_templates
    from ..chat.templates import TemplateError

    for k in tmpl:
        if k not in KINDS and k not in ("use_tokenizer_template", "join_chat_messages_by_character"):
            notes.append(f"{where}: template.{k} is not used by llamars")
    try:
        load_templates(tmpl, models_dir, where)  # (checked here: a template that does not parse fails the model)
    except TemplateError as e:
        entry.refused = str(e)
    roles = doc.get("roles") or {}
    if not isinstance(roles, dict) or not all(isinstance(v, str) for v in roles.values()):
        raise CatalogError(f"{path}: roles must map role names to strings")
    opts = doc.get("options") or []
    if not isinstance(opts, list):
        raise CatalogError(f"{path}: options must be a list of key:value strings")
    for item in opts:
        key, _, value = str(item).partition(":")
        flag = _OPTIONS.get(key.strip())
        if flag is None:
            notes.append(f"{where}: option {key.strip()!r} is not a llama.cpp backend option llamars knows")
            continue
        _flag(entry, flag, value.strip() if value else "true", where)
    return entry, notes


def _adapters(doc: dict, path: str) -> List[Tuple[str, float]]:
    """LocalAI's LoRA keys as (file, scale) pairs: `lora_adapter` with `lora_scale`, then
    `lora_adapters` with `lora_scales` by position (a scale not given, or 0, is 1)."""
    files = ([doc["lora_adapter"]] if doc.get("lora_adapter") else []) + list(doc.get("lora_adapters") or [])
    scales = ([doc.get("lora_scale")] if doc.get("lora_adapter") else []) + list(doc.get("lora_scales") or [])
    out = []
    for i, f in enumerate(files):
        s = scales[i] if i < len(scales) else None
        if not isinstance(f, str) or not f or (s is not None and (isinstance(s, bool) or not isinstance(s, (int, float)))):
            raise CatalogError(f"{path}: lora_adapter(s) must be file names and lora_scale(s) numbers")
        out.append((f, float(s) if s else 1.0))
    return out


def prompts(path: str):
    """The config's prompt templates as a LocalAIChatTemplate (its `chat` / `chat_message`
    replace the model's chat template only when given), or None when it has none."""
    import yaml

    from ..chat.localai_template import LocalAIChatTemplate, load_templates

    with open(path, encoding="utf-8") as f:
        doc = yaml.safe_load(f) or {}
    tmpl = doc.get("template") or {}
    found = load_templates(tmpl, os.path.dirname(os.path.abspath(path)), os.path.basename(path))
    if not found:
        return None
    return LocalAIChatTemplate(found, dict(doc.get("roles") or {}), str(doc.get("system_prompt") or ""),
                               str(tmpl.get("join_chat_messages_by_character") or "\n"))


def scan_yaml(models_dir: str) -> Tuple[Dict[str, Entry], List[str]]:
    out: Dict[str, Entry] = {}
    notes: List[str] = []
    for f in sorted(os.listdir(models_dir)):
        if not f.endswith((".yaml", ".yml")) or not os.path.isfile(os.path.join(models_dir, f)):
            continue
        e, n = load_yaml(os.path.join(models_dir, f), models_dir)
        notes += n
        if e is not None:
            e.config_path = os.path.join(models_dir, f)  # (its child reads it: --model-config)
            if e.name in out:
                raise CatalogError(f"{models_dir}: two model configs are named {e.name!r}")
            out[e.name] = e
    return out, notes
