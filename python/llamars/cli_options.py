"""The table of `llamars-server` flags: llama-server's spellings, the `ServerConfig` field
each sets, value kinds, `--help` text and `LLAMA_ARG_*` variables (parsed by `cli.py`)."""
from __future__ import annotations

from typing import NamedTuple, Optional, Tuple


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
        "(the output layer counts as one; 'all' offloads everything, 'auto' as many layers as fit)",
        _E + "N_GPU_LAYERS"),
    Opt("-mg, --main-gpu", "main_gpu", "int", "INDEX",
        "the GPU to use for the model when --device is not given (default: 0)", _E + "MAIN_GPU", lo=0),
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
    Opt("--header-timeout", "header_timeout", "int", "N",
        "seconds a connection may take to send a request's headers, an idle new or kept-alive connection "
        "included; then it is closed (default: 30, 0 = no limit)", _E + "HEADER_TIMEOUT", X, lo=0),
    Opt("--max-prompts", "max_prompts", "int", "N",
        "most generations (prompts × n) or embedding inputs one request may ask for; more is a 400 "
        "(default: 1024)", _E + "MAX_PROMPTS", X, lo=1),
    Opt("--max-messages", "max_messages", "int", "N",
        "most chat messages (or Responses input items) one request may send; more is a 400 (default: 131072)",
        _E + "MAX_MESSAGES", X, lo=1),
    Opt("--max-tools", "max_tools", "int", "N",
        "most tool definitions one request may send; more is a 400 (default: 1024)", _E + "MAX_TOOLS", X, lo=0),
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
