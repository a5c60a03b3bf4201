"""`llamars-server`: llama-server's command line (same flags, short forms, defaults and
`LLAMA_ARG_*` environment variables) parsed into a `ServerConfig`, then the server started.

Only the flags llamars implements are accepted; anything else is an error that suggests
the nearest known flag. An environment variable applies when its flag is not on the
command line (the command line wins)."""
from __future__ import annotations

import difflib
import json
import math
import os
import platform
import sys
import textwrap
from typing import Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple

from .config import SamplingDefaults, ServerConfig

PROG = "llamars-server"


class CLIError(ValueError):
    """A bad command line or environment value; `main` prints it as `error: ...` and returns 1."""


class Opt(NamedTuple):
    names: str  # the flag spellings, comma-separated, as llama-server lists them
    dest: str  # ServerConfig field, "sampling.<field>", or "@<action>"
    kind: str  # int float str bool choice list json keys keyfile textfile ngl threads action
    hint: str  # value placeholder in --help ("" for flags without a value)
    help: str  # description; "\n" starts a new line, as in llama-server's --help
    env: Optional[str] = None
    section: str = "common"  # common | sampling | example-specific
    neg: str = ""  # spellings that turn a boolean off
    lo: Optional[float] = None
    hi: Optional[float] = None
    choices: Tuple[str, ...] = ()


C, S, X = "common", "sampling", "example-specific"
_E = "LLAMA_ARG_"

OPTIONS: Tuple[Opt, ...] = (
    # ----- common params -----
    Opt("-h, --help, --usage", "@help", "action", "", "print usage and exit"),
    Opt("--version", "@version", "action", "", "show version and build info"),
    Opt("-t, --threads", "n_threads", "threads", "N",
        "number of CPU threads to use during generation (default: -1, -1 = the physical cores)", _E + "THREADS"),
    Opt("-c, --ctx-size", "n_ctx", "int", "N",
        "size of the prompt context (default: 0, 0 = loaded from model)", _E + "CTX_SIZE", lo=0),
    Opt("-n, --predict, --n-predict", "sampling.n_predict", "int", "N",
        "number of tokens to predict (default: -1, -1 = infinity)", _E + "N_PREDICT", lo=-2),
    Opt("-b, --batch-size", "n_batch", "int", "N", "logical maximum batch size (default: 2048)", _E + "BATCH", lo=1),
    Opt("-ub, --ubatch-size", "n_ubatch", "int", "N", "physical maximum batch size (default: 512)", _E + "UBATCH", lo=1),
    Opt("--keep", "n_keep", "int", "N", "number of tokens to keep from the initial prompt (default: 0, -1 = all)", lo=-1),
    Opt("--swa-full", "swa_full", "bool", "", "use full-size SWA cache (default: false)", _E + "SWA_FULL"),
    Opt("-dev, --device", "device", "str", "<dev1,dev2,..>",
        "comma-separated list of devices to use for offloading (none = don't offload)\n"
        "use --list-devices to see a list of available devices", _E + "DEVICE"),
    Opt("--list-devices", "@list_devices", "action", "", "print list of available devices and exit"),
    Opt("-ngl, --gpu-layers, --n-gpu-layers", "n_gpu_layers", "ngl", "N",
        "max. number of layers to store in VRAM, either an exact number, 'auto', or 'all' (default: auto)\n"
        "(accepted; this build has no GPU offload)", _E + "N_GPU_LAYERS"),
    Opt("-m, --model", "model", "str", "FNAME",
        "model path to load (default: the Gemma 3 270M Q4_K_M package, assembled on first use)", _E + "MODEL"),
    Opt("--log-disable", "log_disable", "bool", "", "Log disable"),
    Opt("-v, --verbose, --log-verbose", "verbose", "bool", "",
        "Set verbosity level to infinity (i.e. log all messages, useful for debugging)"),
    # ----- sampling params -----
    Opt("-s, --seed", "sampling.seed", "int", "SEED", "RNG seed (default: -1, use random seed for -1)", section=S, lo=-1),
    Opt("--temp, --temperature", "sampling.temperature", "float", "N", "temperature (default: 0.80)", section=S),
    Opt("--top-k", "sampling.top_k", "int", "N", "top-k sampling (default: 40, 0 = disabled)", _E + "TOP_K", S, lo=0),
    Opt("--top-p", "sampling.top_p", "float", "N", "top-p sampling (default: 0.95, 1.0 = disabled)",
        section=S, lo=0, hi=1),
    Opt("--min-p", "sampling.min_p", "float", "N", "min-p sampling (default: 0.05, 0.0 = disabled)",
        section=S, lo=0, hi=1),
    Opt("--samplers", "sampling.samplers", "str", "SAMPLERS",
        "samplers that will be used for generation in the order, separated by ';'\n"
        "(default: penalties;dry;top_n_sigma;top_k;typ_p;top_p;min_p;xtc;temperature)", section=S),
    Opt("--sampler-seq, --sampling-seq", "sampling.sampling_seq", "str", "SEQUENCE",
        "simplified sequence for samplers that will be used (default: edskypmxt)", section=S),
    Opt("--ignore-eos", "sampling.ignore_eos", "bool", "", "ignore end of stream token and continue generating", section=S),
    Opt("--top-nsigma, --top-n-sigma", "sampling.top_n_sigma", "float", "N",
        "top-n-sigma sampling (default: -1.00, -1.0 = disabled)", section=S),
    Opt("--xtc-probability", "sampling.xtc_probability", "float", "N", "xtc probability (default: 0.00, 0.0 = disabled)",
        section=S, lo=0, hi=1),
    Opt("--xtc-threshold", "sampling.xtc_threshold", "float", "N", "xtc threshold (default: 0.10, 1.0 = disabled)",
        section=S, lo=0, hi=1),
    Opt("--typical, --typical-p", "sampling.typical_p", "float", "N",
        "locally typical sampling, parameter p (default: 1.00, 1.0 = disabled)", section=S, lo=0, hi=1),
    Opt("--repeat-last-n", "sampling.repeat_last_n", "int", "N",
        "last n tokens to consider for penalize (default: 64, 0 = disabled, -1 = ctx_size)", section=S, lo=-1),
    Opt("--repeat-penalty", "sampling.repeat_penalty", "float", "N",
        "penalize repeat sequence of tokens (default: 1.00, 1.0 = disabled)", section=S, lo=0),
    Opt("--presence-penalty", "sampling.presence_penalty", "float", "N",
        "repeat alpha presence penalty (default: 0.00, 0.0 = disabled)", section=S),
    Opt("--frequency-penalty", "sampling.frequency_penalty", "float", "N",
        "repeat alpha frequency penalty (default: 0.00, 0.0 = disabled)", section=S),
    Opt("--dry-multiplier", "sampling.dry_multiplier", "float", "N",
        "set DRY sampling multiplier (default: 0.00, 0.0 = disabled)", section=S, lo=0),
    Opt("--dry-base", "sampling.dry_base", "float", "N", "set DRY sampling base value (default: 1.75)", section=S, lo=1),
    Opt("--dry-allowed-length", "sampling.dry_allowed_length", "int", "N",
        "set allowed length for DRY sampling (default: 2)", section=S, lo=0),
    Opt("--dry-penalty-last-n", "sampling.dry_penalty_last_n", "int", "N",
        "set DRY penalty for the last n tokens (default: -1, 0 = disable, -1 = context size)", section=S, lo=-1),
    Opt("--dynatemp-range", "sampling.dynatemp_range", "float", "N",
        "dynamic temperature range (default: 0.00, 0.0 = disabled)", section=S, lo=0),
    Opt("--dynatemp-exp", "sampling.dynatemp_exponent", "float", "N", "dynamic temperature exponent (default: 1.00)",
        section=S, lo=0),
    Opt("--mirostat", "sampling.mirostat", "int", "N",
        "use Mirostat sampling.\nTop K, Nucleus and Locally Typical samplers are ignored if used.\n"
        "(default: 0, 0 = disabled, 1 = Mirostat, 2 = Mirostat 2.0)", section=S, lo=0, hi=2),
    Opt("--mirostat-lr", "sampling.mirostat_eta", "float", "N", "Mirostat learning rate, parameter eta (default: 0.10)",
        section=S, lo=0),
    Opt("--mirostat-ent", "sampling.mirostat_tau", "float", "N", "Mirostat target entropy, parameter tau (default: 5.00)",
        section=S, lo=0),
    Opt("--grammar", "sampling.grammar", "str", "GRAMMAR",
        "BNF-like grammar to constrain generations (see samples in grammars/ dir) (default: '')", section=S),
    Opt("--grammar-file", "sampling.grammar", "textfile", "FNAME", "file to read grammar from", section=S),
    Opt("-j, --json-schema", "sampling.json_schema", "str", "SCHEMA",
        "JSON schema to constrain generations (https://json-schema.org/), e.g. `{}` for any JSON object", section=S),
    Opt("-jf, --json-schema-file", "sampling.json_schema", "textfile", "FILE",
        "File containing a JSON schema to constrain generations", section=S),
    # ----- example-specific params (server) -----
    Opt("-cram, --cache-ram", "cache_ram", "int", "N",
        "set the maximum cache size in MiB (default: 8192, -1 - no limit, 0 - disable)", _E + "CACHE_RAM", X, lo=-1),
    Opt("--context-shift", "context_shift", "bool", "",
        "whether to use context shift on infinite text generation (default: disabled)",
        _E + "CONTEXT_SHIFT", X, neg="--no-context-shift"),
    Opt("--pooling", "pooling", "choice", "{none,mean,cls,last,rank}",
        "pooling type for embeddings, use model default if unspecified", _E + "POOLING", X,
        choices=("none", "mean", "cls", "last", "rank")),
    Opt("-np, --parallel", "n_parallel", "int", "N", "number of server slots (default: -1, -1 = auto)",
        _E + "N_PARALLEL", X, lo=-1),
    Opt("-a, --alias", "alias", "str", "STRING", "set model name aliases, comma-separated (to be used by API)",
        _E + "ALIAS", X),
    Opt("--host", "host", "str", "HOST", "ip address to listen (default: 127.0.0.1)", _E + "HOST", X),
    Opt("--port", "port", "int", "PORT", "port to listen (default: 8080)", _E + "PORT", X, lo=0, hi=65535),
    Opt("--cors-origins", "cors_origins", "list", "ORIGINS",
        "comma-separated list of allowed origins for CORS (default: *)", _E + "CORS_ORIGINS", X),
    Opt("--cors-methods", "cors_methods", "list", "METHODS",
        "comma-separated list of allowed methods for CORS (default: GET, POST, DELETE, OPTIONS)",
        _E + "CORS_METHODS", X),
    Opt("--cors-headers", "cors_headers", "list", "HEADERS",
        "comma-separated list of allowed headers for CORS (default: *)", _E + "CORS_HEADERS", X),
    Opt("--cors-credentials", "cors_credentials", "bool", "",
        "whether to allow credentials for CORS (default: enabled)\n"
        "note: if this is enabled and --cors-origins is * (default), the Origin header is echoed back",
        _E + "CORS_CREDENTIALS", X, neg="--no-cors-credentials"),
    Opt("--api-prefix", "api_prefix", "prefix", "PREFIX",
        "prefix path the server serves from, without the trailing slash (default: )", _E + "API_PREFIX", X),
    Opt("--ui, --webui", "webui", "bool", "", "whether to enable the Web UI (default: enabled)",
        _E + "UI", X, neg="--no-ui, --no-webui"),
    Opt("--path", "static_path", "str", "PATH", "path to serve static files from (default: )", _E + "STATIC_PATH", X),
    Opt("--embedding, --embeddings", "embedding", "bool", "",
        "restrict to only support embedding use case; use only with dedicated embedding models (default: disabled)",
        _E + "EMBEDDINGS", X),
    Opt("--api-key", "api_keys", "keys", "KEY",
        "API key to use for authentication, multiple keys can be provided as a comma-separated list (default: none)",
        "LLAMA_API_KEY", X),
    Opt("--api-key-file", "api_keys", "keyfile", "FNAME",
        "path to file containing API keys, one per line; lines starting with a hash are treated as comments "
        "(default: none)", _E + "API_KEY_FILE", X),
    Opt("--ssl-key-file", "ssl_key_file", "str", "FNAME", "path to file a PEM-encoded SSL private key",
        _E + "SSL_KEY_FILE", X),
    Opt("--ssl-cert-file", "ssl_cert_file", "str", "FNAME", "path to file a PEM-encoded SSL certificate",
        _E + "SSL_CERT_FILE", X),
    Opt("--chat-template-kwargs", "chat_template_kwargs", "json", "STRING",
        "sets additional params for the json template parser, must be a valid json object string, "
        "e.g. '{\"key1\":\"value1\",\"key2\":\"value2\"}'", _E + "CHAT_TEMPLATE_KWARGS", X),
    Opt("-to, --timeout", "timeout", "int", "N", "server read/write timeout in seconds (default: 3600)",
        _E + "TIMEOUT", X, lo=0),
    Opt("--cache-prompt", "cache_prompt", "bool", "", "whether to enable prompt caching (default: enabled)",
        _E + "CACHE_PROMPT", X, neg="--no-cache-prompt"),
    Opt("--cache-reuse", "cache_reuse", "int", "N",
        "min chunk size to attempt reusing from the cache via KV shifting, requires prompt caching to be enabled "
        "(default: 0)", _E + "CACHE_REUSE", X, lo=0),
    Opt("--metrics", "metrics", "bool", "", "enable prometheus compatible metrics endpoint (default: disabled)",
        _E + "ENDPOINT_METRICS", X),
    Opt("--props", "props", "bool", "", "enable changing global properties via POST /props (default: disabled)",
        _E + "ENDPOINT_PROPS", X),
    Opt("--slots", "slots", "bool", "", "expose slots monitoring endpoint (default: enabled)",
        _E + "ENDPOINT_SLOTS", X, neg="--no-slots"),
    Opt("--slot-save-path", "slot_save_path", "str", "PATH", "path to save slot kv cache (default: disabled)",
        section=X),
    Opt("--data-dir", "data_dir", "str", "PATH",
        "directory of the database of stored responses (Responses API) (default: $XDG_CACHE_HOME/llamars or "
        "~/.cache/llamars)", _E + "DATA_DIR", X),
    Opt("--jinja", "jinja", "bool", "", "whether to use jinja template engine for chat (default: enabled)",
        _E + "JINJA", X, neg="--no-jinja"),
    Opt("--chat-template", "chat_template", "str", "JINJA_TEMPLATE",
        "set custom jinja chat template (default: template taken from model's metadata)", _E + "CHAT_TEMPLATE", X),
    Opt("--chat-template-file", "chat_template_file", "str", "JINJA_TEMPLATE_FILE",
        "set custom jinja chat template file (default: template taken from model's metadata)",
        _E + "CHAT_TEMPLATE_FILE", X),
    Opt("--reasoning-format", "reasoning_format", "choice", "FORMAT",
        "controls whether thought tags are allowed and/or extracted from the response, and in which format they're "
        "returned; one of:\n- none: leaves thoughts unparsed in `message.content`\n- deepseek: puts thoughts in "
        "`message.reasoning_content`\n- deepseek-legacy: keeps `<think>` tags in `message.content` while also "
        "populating `message.reasoning_content`\n(default: auto)", _E + "REASONING_FORMAT", X,
        choices=("auto", "deepseek", "deepseek-legacy", "none")),
    Opt("--reasoning-budget", "reasoning_budget", "int", "N",
        "controls the amount of thinking allowed; currently only one of: -1 for unrestricted thinking budget, or 0 "
        "to disable thinking (default: -1)", _E + "THINK_BUDGET", X, lo=-1, hi=0),
    Opt("-sps, --slot-prompt-similarity", "slot_prompt_similarity", "float", "SIMILARITY",
        "how much the prompt of a request must match the prompt of a slot in order to use that slot "
        "(default: 0.10, 0.0 = disabled)", section=X, lo=0, hi=1),
)

# Where llama-server's documented default differs from ServerConfig's field default, the CLI
# uses llama-server's (the README is the contract for a drop-in replacement).

_TRUE = ("1", "true", "on", "yes", "enabled")
_FALSE = ("0", "false", "off", "no", "disabled")


def _split(names: str) -> List[str]:
    return [n.strip() for n in names.split(",") if n.strip()]


_BY_NAME: Dict[str, Tuple[Opt, bool]] = {}
for _o in OPTIONS:
    for _n in _split(_o.names):
        _BY_NAME[_n] = (_o, True)
    for _n in _split(_o.neg):
        _BY_NAME[_n] = (_o, False)


def _unknown(name: str) -> CLIError:
    close = difflib.get_close_matches(name, list(_BY_NAME), n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]}?)" if close else ""
    return CLIError(f"unknown argument: {name}{hint}")


def _bad(label: str, raw: object, why: str) -> CLIError:
    return CLIError(f"invalid value for {label}: {raw!r} ({why})")


def _check_range(o: Opt, label: str, v: float) -> None:
    if o.lo is not None and o.hi is not None and not o.lo <= v <= o.hi:
        raise _bad(label, v, f"must be between {o.lo:g} and {o.hi:g}")
    if o.lo is not None and v < o.lo:
        raise _bad(label, v, f"must be >= {o.lo:g}")
    if o.hi is not None and v > o.hi:
        raise _bad(label, v, f"must be <= {o.hi:g}")


def _to_int(label: str, raw: str) -> int:
    try:
        return int(raw.strip())
    except ValueError:
        raise _bad(label, raw, "expected an integer") from None


def _to_bool(label: str, raw: str) -> bool:
    v = raw.strip().lower()
    if v in _TRUE:
        return True
    if v in _FALSE:
        return False
    raise _bad(label, raw, "expected a boolean: 1/0, true/false, on/off, yes/no, enabled/disabled")


def _read_key_file(label: str, path: str) -> List[str]:
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise CLIError(f"{label}: cannot read {path!r}: {e.strerror or e}") from None
    return [s for s in (ln.strip() for ln in lines) if s and not s.startswith("#")]


def _convert(o: Opt, label: str, raw: str) -> object:
    """One value of option `o` (given as `label`: the flag or the environment variable)."""
    k = o.kind
    if k == "bool":
        return _to_bool(label, raw)
    if k in ("int", "threads"):
        v = _to_int(label, raw)
        if k == "threads":  # llama-server: -1 (and 0) = auto
            if v < -1:
                raise _bad(label, v, "must be a positive number of threads, or -1 for auto")
            return None if v <= 0 else v
        _check_range(o, label, v)
        return v
    if k == "float":
        try:
            f = float(raw.strip())
        except ValueError:
            raise _bad(label, raw, "expected a number") from None
        if not math.isfinite(f):
            raise _bad(label, raw, "expected a finite number")
        _check_range(o, label, f)
        return f
    if k == "choice":
        if raw not in o.choices:
            raise _bad(label, raw, "expected one of: " + ", ".join(o.choices))
        return raw
    if k == "list":
        return [s.strip() for s in raw.split(",") if s.strip()]
    if k == "keys":
        return [s.strip() for s in raw.split(",") if s.strip()]
    if k == "keyfile":
        return _read_key_file(label, raw)
    if k == "prefix":
        return raw.rstrip("/")
    if k == "json":
        try:
            d = json.loads(raw)
        except ValueError as e:
            raise _bad(label, raw, f"invalid JSON: {e}") from None
        if not isinstance(d, dict):
            raise _bad(label, raw, "must be a JSON object")
        return d
    if k == "textfile":
        try:
            with open(raw, encoding="utf-8") as f:
                return f.read()
        except OSError as e:
            raise _bad(label, raw, f"cannot read the file: {e.strerror}") from None
    if k == "ngl":
        s = raw.strip().lower()
        if s in ("auto", "all"):
            return s
        v = _to_int(label, raw)
        if v < -1:
            raise _bad(label, v, "expected a number of layers >= 0, 'auto' or 'all'")
        return str(v)
    return raw  # str


def _parse(argv: Sequence[str], env: Optional[Mapping[str, str]] = None) -> Tuple[ServerConfig, Optional[str]]:
    """(config, action): action is "help", "version", "list_devices" or None."""
    env = os.environ if env is None else env
    given: Dict[Opt, List[Tuple[str, object]]] = {}  # option -> [(flag as typed, raw value or bool)]
    action: Optional[str] = None
    args = list(argv)
    i = 0
    while i < len(args):
        tok = args[i]
        i += 1
        if not tok.startswith("-") or tok in ("-", "--"):
            raise CLIError(f"unknown argument: {tok} (llama-server takes no positional arguments; use -m FNAME)")
        name, inline = tok, None
        if tok.startswith("--"):
            if "=" in tok:
                name, inline = tok.split("=", 1)
            name = name.replace("_", "-")  # as llama.cpp does for long flags
        hit = _BY_NAME.get(name)
        if hit is None:
            raise _unknown(tok.split("=", 1)[0])
        o, positive = hit
        if o.kind == "action":
            if o.dest in ("@help", "@version"):  # llama-server acts on these as soon as it sees them
                return ServerConfig(), o.dest[1:]
            action = o.dest[1:]
            continue
        if o.kind == "bool":
            if inline is not None:
                raise CLIError(f"argument {name} takes no value")
            given.setdefault(o, []).append((name, positive))
            continue
        if inline is None:
            if i >= len(args):
                raise CLIError(f"argument {name} expects a value ({o.hint})")
            inline = args[i]
            i += 1
        given.setdefault(o, []).append((name, inline))

    values: Dict[str, object] = {}
    keys: List[str] = []
    for o in OPTIONS:
        if o.kind == "action":
            continue
        if o in given:
            items = given[o]
        elif o.env and env.get(o.env, "").strip():
            items = [(o.env, env[o.env])]
        else:
            continue
        for label, raw in items:
            v = raw if isinstance(raw, bool) else _convert(o, label, raw)  # type: ignore[arg-type]
            if o.kind in ("keys", "keyfile"):
                keys.extend(v)  # type: ignore[arg-type]
            else:
                values[o.dest] = v
    if keys:
        values["api_keys"] = list(dict.fromkeys(keys))
    sampling = {k.split(".", 1)[1]: v for k, v in values.items() if k.startswith("sampling.")}
    top = {k: v for k, v in values.items() if not k.startswith("sampling.")}
    return ServerConfig(**top, sampling=SamplingDefaults(**sampling)), action


def parse_args(argv: Sequence[str], env: Optional[Mapping[str, str]] = None) -> ServerConfig:
    """llama-server's flags and `LLAMA_ARG_*` variables (`env`, default os.environ) -> ServerConfig.

    Raises CLIError for a bad argument or value. `--help` and `--version` print their
    text and raise SystemExit(0); `--list-devices` is acted on by `main` only."""
    config, action = _parse(argv, env)
    if action == "help":
        print(help_text())
        raise SystemExit(0)
    if action == "version":
        print(version_text())
        raise SystemExit(0)
    return config


# ----- output -----

_LEAD = 40  # llama.cpp's common_arg::to_string layout: 40-column flag column, help wrapped at 70
_WRAP = 70


def _flag_column(o: Opt) -> str:
    names = _split(o.names) + _split(o.neg)
    if len(names) == 1:
        s = names[0]
    else:  # first spelling (usually the short one) padded to 7 columns, as llama-server does
        first = names[0] + ", "
        s = first + " " * max(0, 7 - len(first)) + ", ".join(names[1:])
    return s + (" " + o.hint if o.hint else "")


def _format_opt(o: Opt) -> str:
    lead = " " * _LEAD
    left = _flag_column(o)
    out = left + ("\n" + lead if len(left) > _LEAD - 3 else " " * (_LEAD - len(left)))
    lines: List[str] = []
    for para in o.help.split("\n"):
        lines.extend(textwrap.wrap(para, _WRAP) or [""])
    out += ("\n" + lead).join(lines) + "\n"
    if o.env:
        out += f"{lead}(env: {o.env})\n"
    return out


def help_text() -> str:
    parts = [f"usage: {PROG} [options]\n"]
    for section in (C, S, X):
        parts.append(f"\n----- {section} params -----\n\n")
        parts.extend(_format_opt(o) for o in OPTIONS if o.section == section)
    parts.append(
        "\nIf a flag and its environment variable are both set, the flag wins. Boolean variables accept\n"
        "1/0, true/false, on/off, yes/no, enabled/disabled.\n"
        f"\nexample usage: {PROG} -m model.gguf -c 4096 --host 0.0.0.0 --port 8080\n"
    )
    return "".join(parts)


def version_text() -> str:
    from . import __version__

    return (
        f"version: {__version__} (llamars)\n"
        f"built with llamars (Rust core, Python {platform.python_version()}) for {platform.machine()}-{sys.platform}"
    )


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "CPU"


def devices_text() -> str:
    mem = ""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // (1024 * 1024)
        mem = f", {total} MiB"
    except (ValueError, OSError, AttributeError):
        pass
    return (
        "Available devices:\n"
        f"  CPU: {_cpu_name()} ({os.cpu_count() or 1} threads{mem})\n"
        "note: GPU offload is not built into llamars yet; -ngl and -dev are accepted and ignored"
    )


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Console entry point (`llamars-server`, `python -m llamars.cli`): returns the exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        config, action = _parse(argv)
    except CLIError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    if action is not None:
        print({"help": help_text, "version": version_text, "list_devices": devices_text}[action]())
        return 0
    from .errors import LlamarsError

    try:
        if config.model is None:
            from .models import default_model

            config.model = str(default_model(progress=True))
        from .server.app import serve

        rc = serve(config)
    except (LlamarsError, OSError) as e:  # FileNotFoundError included: no default model package
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return int(rc or 0)


if __name__ == "__main__":
    sys.exit(main())
