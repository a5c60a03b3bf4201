"""What a model of router mode's catalog is (`Entry`), and what its sources share: the
flag names a preset or config may use, and the flags the router keeps for itself."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from ..cli_opt import Opt, split_names
from ..cli_options import OPTIONS

# flags the router sets for each child itself (or that belong to the router alone)
RESERVED = {"host", "port", "api_keys", "alias", "tags", "models_dir", "models_preset", "models_max", "models_autoload",
            "model", "reuse_port", "ssl_key_file", "ssl_cert_file", "api_prefix", "cors_origins", "cors_methods",
            "cors_headers", "cors_credentials", "log_file", "tools", "tools_root", "tools_runtime", "mcp_servers_config",
            "mcp_servers_json", "agent"}
PRESET_ONLY = {"load-on-startup", "stop-timeout", "dedup-cache-models", "version"}


class CatalogError(ValueError):
    """A models directory or preset file that cannot be read; the router does not start."""


@dataclass
class Entry:
    name: str
    path: Optional[str]  # the model file (None: a preset that names none; it fails to load)
    source: str  # "models_dir" or "preset", as llama-server names them; "localai" (a YAML config)
    options: List[Tuple[Opt, str, object]] = field(default_factory=list)  # from the preset, [*] first
    load_on_startup: bool = False
    stop_timeout: float = 10.0
    refused: Optional[str] = None  # why it cannot be loaded at all (listed as failed, no child started)
    config_path: Optional[str] = None  # a LocalAI config: its child reads it (--model-config)


_KEYS: Dict[str, Tuple[Opt, bool]] = {}
for _o in OPTIONS:
    for _n in split_names(_o.names):
        _KEYS[_n.lstrip("-")] = (_o, True)
    for _n in split_names(_o.neg):
        _KEYS[_n.lstrip("-")] = (_o, False)
    if _o.env:
        _KEYS[_o.env] = (_o, True)
