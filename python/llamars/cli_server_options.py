"""llama-server's example-specific (server) flags as `llamars-server` takes them: the
`ServerConfig` field each sets, or why it has no effect here (inert), or the feature it
needs that is not built yet (owner), or llama-server's message for a removed one."""
from __future__ import annotations

from typing import Tuple

from .cli_opt import _E, X, Opt

_DRAFT_THREADS = "the draft model runs on the target's threads (-t / -tb)"
_DRAFT_CPU = "the draft model runs on the CPU"

SERVER_OPTIONS: Tuple[Opt, ...] = (
    # ----- example-specific params (server) -----
    Opt("-lcs, --lookup-cache-static", "lookup_cache_static", "str", "FNAME",
        "path to static lookup cache to use for lookup decoding (not updated by generation)", section=X),
    Opt("-lcd, --lookup-cache-dynamic", "lookup_cache_dynamic", "str", "FNAME",
        "path to dynamic lookup cache to use for lookup decoding (updated by generation)", section=X),
    Opt("--kv-unified-per-slot", "kv_unified_per_slot", "int", "N",
        "context limit per parallel slot (default: unset, behavior unchanged).\n"
        "when set without -c/--ctx-size, the shared KV pool is sized to n_parallel*N", _E + "KV_UNIFIED_PER_SLOT", X, lo=1),
    Opt("-ctxcp, --ctx-checkpoints, --swa-checkpoints", "ctx_checkpoints", "int", "N",
        "max number of context checkpoints to create per slot (default: 32)", _E + "CTX_CHECKPOINTS", X, lo=0,
        inert="sliding-window layers keep their ring and prompts are re-used by prefix"),
    Opt("-cms, --checkpoint-min-step", "checkpoint_min_step", "int", "N",
        "minimum spacing between context checkpoints in tokens (default: 8192, 0 = no minimum)",
        _E + "CHECKPOINT_MIN_SPACING_NT", X, lo=0, inert="no context checkpoints are made"),
    Opt("-kvu, --kv-unified", "kv_unified", "bool", "",
        "use single unified KV buffer shared across all sequences (default: enabled if number of slots is auto)",
        _E + "KV_UNIFIED", X, neg="-no-kvu, --no-kv-unified",
        off_ok=True, inert="each slot has its own n_ctx / n_parallel rows of one KV buffer"),
    Opt("--cache-idle-slots", "cache_idle_slots", "bool", "",
        "save idle slots to the prompt cache on new task (default: enabled, requires cache-ram)",
        _E + "CACHE_IDLE_SLOTS", X, neg="--no-cache-idle-slots",
        inert="a slot's prompt goes to the prompt cache when the slot is reused (-cram)"),
    Opt("-r, --reverse-prompt", "sampling.stop", "append", "PROMPT",
        "halt generation at PROMPT (the default `stop` of requests that give none)", section=X),
    Opt("-sp, --special", "special", "bool", "", "special tokens output enabled (default: false)", section=X,
        inert="generated text never includes special tokens' text"),
    Opt("--warmup", "warmup", "bool", "", "whether to perform warmup with an empty run (default: enabled)", section=X,
        neg="--no-warmup", off_ok=True, inert="the model is mapped at start; its first request warms the page cache"),
    Opt("--spm-infill", "spm_infill", "bool", "",
        "use Suffix/Prefix/Middle pattern for infill (instead of Prefix/Suffix/Middle) as some models prefer this. "
        "(default: disabled)", section=X),
    Opt("-cb, --cont-batching", "cont_batching", "bool", "",
        "whether to enable continuous batching (a.k.a dynamic batching) (default: enabled)", _E + "CONT_BATCHING", X,
        neg="-nocb, --no-cont-batching", inert="batching is always continuous"),
    *(Opt(names, dest, kind, hint, h, env, X, neg=neg, lo=lo, off_ok=True, inert="llamars reads text only (no multimodal input)")
      for names, dest, kind, hint, h, env, neg, lo in (
        ("-mm, --mmproj", "mmproj", "str", "FILE", "path to a multimodal projector file", _E + "MMPROJ", "", None),
        ("-mmu, --mmproj-url", "mmproj_url", "str", "URL", "URL to a multimodal projector file", _E + "MMPROJ_URL", "", None),
        ("--mmproj-auto", "mmproj_auto", "bool", "", "whether to use multimodal projector file (if available), useful "
         "when using -hf (default: enabled)", _E + "MMPROJ_AUTO", "--no-mmproj, --no-mmproj-auto", None),
        ("--mmproj-offload", "mmproj_offload", "bool", "", "whether to enable GPU offloading for multimodal projector "
         "(default: enabled)", _E + "MMPROJ_OFFLOAD", "--no-mmproj-offload", None),
        ("-mmdev, --mmproj-device", "mmproj_device", "str", "DEVICE", "device to use for multimodal projector",
         "MTMD_BACKEND_DEVICE", "", None),
        ("--image-min-tokens", "image_min_tokens", "int", "N", "minimum number of tokens each image can take",
         _E + "IMAGE_MIN_TOKENS", "", 0),
        ("--image-max-tokens", "image_max_tokens", "int", "N", "maximum number of tokens each image can take",
         _E + "IMAGE_MAX_TOKENS", "", 0),
        ("--mtmd-batch-max-tokens", "mtmd_batch_max_tokens", "int", "N",
         "maximum number of image tokens per batch when encoding images (default: 1024)", _E + "MTMD_BATCH_MAX_TOKENS", "", 0),
        ("--video-fps", "video_fps", "float", "N", "target video frame rate (default: 4.0)", _E + "VIDEO_FPS", "", 0),
        ("--video-timestamp-interval", "video_timestamp_interval", "int", "N",
         "interval in milliseconds between text timestamps (default: 5000)", _E + "VIDEO_TIMESTAMP_INTERVAL", "", 0),
        ("--video-ffmpeg-dir", "video_ffmpeg_dir", "str", "DIR",
         "path to the directory containing ffmpeg and ffprobe (default: search in PATH)", _E + "VIDEO_FFMPEG_DIR", "", None),
        ("--media-path", "media_path", "str", "PATH",
         "directory for loading local media files; files can be accessed via file:// URLs using relative paths "
         "(default: disabled)", None, "", None))),
    Opt("--tags", "tags", "list", "STRING", "set model tags, comma-separated (informational, not used for routing)",
        _E + "TAGS", X),
    Opt("--embd-normalize", "embd_normalize", "int", "N",
        "normalisation for embeddings (default: 2) (-1=none, 0=max absolute int16, 1=taxicab, 2=euclidean, >2=p-norm)",
        section=X, lo=-1),
    Opt("--reuse-port", "reuse_port", "bool", "", "allow multiple sockets to bind to the same port (default: disabled)",
        _E + "REUSE_PORT", X),
    Opt("--ui-config, --webui-config", "ui_config", "json", "JSON",
        "JSON that provides default UI settings (overrides UI defaults)", _E + "UI_CONFIG", X),
    Opt("--ui-config-file, --webui-config-file", "ui_config", "jsonfile", "PATH",
        "JSON file that provides default UI settings (overrides UI defaults)", _E + "UI_CONFIG_FILE", X),
    Opt("--ui-mcp-proxy, --webui-mcp-proxy", "ui_mcp_proxy", "bool", "",
        "experimental: whether to enable MCP CORS proxy (default: disabled)", _E + "UI_MCP_PROXY", X,
        neg="--no-ui-mcp-proxy, --no-webui-mcp-proxy",
        owner="the Web UI's CORS proxy to remote MCP servers (MCP servers over stdio are: --mcp-servers-config)"),
    Opt("--tools", "tools", "list", "TOOL1,TOOL2,...",
        "experimental: whether to enable built-in tools for AI agents - do not enable in untrusted environments "
        "(default: no tools)\nspecify \"all\" to enable all tools\navailable tools: read_file, file_glob_search, "
        "grep_search, exec_shell_command, write_file, edit_file, get_info\nnote: for security reasons, this will "
        "limit --cors-origins to localhost by default", _E + "TOOLS", X),
    Opt("--tools-root", "tools_root", "str", "DIR",
        "(llamars) the directory the file tools are confined to: paths that leave it, symlinks included, are refused "
        "(default: the working directory)", "LLAMARS_TOOLS_ROOT", X),
    Opt("--tools-runtime", "tools_runtime", "str", "OPTION",
        "experimental: run tools in a separate runtime environment (default: none, use host environment)\n"
        "available options: 'docker:<image>', 'podman:<image>' (a container started now, the tools root mounted at "
        "its own path, removed on exit), 'docker-container:<id>', 'podman-container:<id>' (a running one)",
        _E + "TOOLS_RUNTIME", X),
    Opt("--mcp-servers-config", "mcp_servers_config", "str", "PATH",
        "experimental: path to JSON file with MCP server definitions (Cursor-compatible format) - do not enable in "
        "untrusted environments (default: none)\nnote: for security reasons, this will limit --cors-origins to "
        "localhost by default", _E + "MCP_SERVERS_CONFIG", X),
    Opt("--mcp-servers-json", "mcp_servers_json", "str", "JSON",
        "experimental: inline JSON with MCP server definitions (Cursor-compatible format) - do not enable in "
        "untrusted environments (default: none)\nnote: for security reasons, this will limit --cors-origins to "
        "localhost by default", _E + "MCP_SERVERS_JSON", X),
    Opt("-ag, --agent", "agent", "bool", "",
        "whether to enable all built-in tools - do not enable in untrusted environments (default: disabled)\n"
        "(llama-server's CORS proxy for remote MCP servers is not in llamars)\nnote: for security reasons, this will "
        "limit --cors-origins to localhost by default", _E + "AGENT", X, neg="-no-ag, --no-agent"),
    Opt("--rerank, --reranking", "rerank", "bool", "", "enable reranking endpoint on server (default: disabled)",
        _E + "RERANKING", X),
    Opt("--sse-ping-interval", "sse_ping_interval", "int", "N",
        "server SSE ping interval in seconds (-1 = disabled, default: 30)", _E + "SSE_PING_INTERVAL", X, lo=-1),
    Opt("--threads-http", "threads_http", "int", "N", "number of threads used to process HTTP requests (default: -1)",
        _E + "THREADS_HTTP", X, lo=-1, inert="HTTP is served by one event loop; work that grows with the input runs on "
        "worker threads"),
    Opt("--model-config", "model_config", "str", "FILE",
        "(llamars) a LocalAI model config (YAML): its settings (winning over the command line), its model when -m is "
        "not given, and its prompt templates", "LLAMARS_MODEL_CONFIG", X),
    Opt("--models-dir", "models_dir", "str", "PATH", "directory containing models for the router server (default: disabled)",
        _E + "MODELS_DIR", X),
    Opt("--models-preset", "models_preset", "str", "PATH",
        "path to INI file containing model presets for the router server (default: disabled)", _E + "MODELS_PRESET", X),
    Opt("--models-max", "models_max", "int", "N",
        "for router server, maximum number of models to load simultaneously (default: 4, 0 = unlimited)",
        _E + "MODELS_MAX", X, lo=0),
    Opt("--models-autoload", "models_autoload", "bool", "",
        "for router server, whether to automatically load models (default: enabled)", _E + "MODELS_AUTOLOAD", X,
        neg="--no-models-autoload"),
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
    Opt("--host", "host", "str", "HOST",
        "IP addresses to listen on, comma-separated, or UNIX socket paths ending in .sock; with multiple TCP "
        "addresses, :: binds IPv6 only (default: 127.0.0.1)", _E + "HOST", X),
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
    Opt("--responses-store", "responses_store", "str", "URL",
        "where stored responses (Responses API) live: sqlite:///PATH, or postgresql://USER@HOST/DB shared by "
        "replicas (default: SQLite in --data-dir)", _E + "RESPONSES_STORE", X),
    Opt("--responses-ttl", "responses_ttl", "duration", "DURATION",
        "delete stored responses older than this: seconds, or 90s / 30m / 12h / 7d (default: 0, keep)",
        _E + "RESPONSES_TTL", X),
    Opt("--responses-lease", "responses_lease", "float", "SECONDS",
        "a replica whose heartbeat in the response store is older than this is taken as gone: its unfinished "
        "responses are marked failed (default: 15)", _E + "RESPONSES_LEASE", X, lo=1),
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
        "populating `message.reasoning_content`\n(default: auto)", _E + "THINK", X,
        choices=("auto", "deepseek", "deepseek-legacy", "none")),
    Opt("-rea, --reasoning", "reasoning", "tristate", "[on|off|auto]",
        "Use reasoning/thinking in the chat ('on', 'off', or 'auto', default: 'auto' (detect from template))",
        _E + "REASONING", X),
    Opt("--reasoning-effort", "reasoning_effort", "str", "LEVEL",
        "reasoning effort level given to the chat template: 'default' to keep the template default,\n"
        "or a level such as 'minimal', 'low', 'medium', 'high', 'xhigh' or 'max' (default: default)",
        _E + "REASONING_EFFORT", X),
    Opt("--reasoning-budget-message", "reasoning_budget_message", "str", "MESSAGE",
        "message injected before the end-of-thinking tag when reasoning budget is exhausted (default: none)",
        _E + "THINK_BUDGET_MESSAGE", X, inert="thinking budgets other than -1 and 0 are not enforced"),
    Opt("--reasoning-preserve", "reasoning_preserve", "bool", "",
        "preserve reasoning trace in the full history, not just the last assistant message (default: enabled)\n"
        "compatible with certain templates having 'supports_preserve_reasoning' capability",
        _E + "REASONING_PRESERVE", X, neg="--no-reasoning-preserve"),
    Opt("--skip-chat-parsing", "skip_chat_parsing", "bool", "",
        "force a pure content parser, even if a Jinja template is specified; model will output everything in the "
        "content section, including any reasoning and/or tool calls (default: disabled)", _E + "SKIP_CHAT_PARSING", X,
        neg="--no-skip-chat-parsing"),
    Opt("--prefill-assistant", "prefill_assistant", "bool", "",
        "whether to prefill the assistant's response if the last message is an assistant message (default: prefill "
        "enabled)\nwhen this flag is set, if the last message is an assistant message then it will be treated as a "
        "full message and not prefilled", _E + "PREFILL_ASSISTANT", X, neg="--no-prefill-assistant"),
    Opt("--reasoning-budget", "reasoning_budget", "int", "N",
        "token budget for thinking: -1 for unrestricted, 0 for immediate end, N>0 for token budget (default: -1)\n"
        "(llamars: N>0 is accepted with a warning and thinking is not cut)", _E + "THINK_BUDGET", X, lo=-1),
    Opt("-sps, --slot-prompt-similarity", "slot_prompt_similarity", "float", "SIMILARITY",
        "how much the prompt of a request must match the prompt of a slot in order to use that slot "
        "(default: 0.10, 0.0 = disabled)", section=X, lo=0, hi=1),
    Opt("--lora-init-without-apply", "lora_init_without_apply", "bool", "",
        "load LoRA adapters without applying them (apply later via POST /lora-adapters) (default: disabled)",
        section=X),
    Opt("--sleep-idle-seconds", "sleep_idle_seconds", "int", "SECONDS",
        "number of seconds of idleness after which the server will sleep (default: -1; -1 = disabled)", section=X,
        lo=-1, inert="the model stays loaded; an idle server uses no CPU"),
    Opt("--log-prompts-dir", "log_prompts_dir", "str", "PATH",
        "Log prompts to directory (auto-created if not present; only used for debugging, default: disabled)",
        section=X, inert="prompts are not logged to files; use --verbose to log requests"),
    # speculative decoding: n-gram lookup and a draft model (draft-simple) run; the draft
    # model's placement and tuning flags are accepted (it runs on the CPU, on the target's threads)
    Opt("--spec-draft-model, -md, --model-draft", "model_draft", "str", "FNAME",
        "draft model for speculative decoding (default: unused)", _E + "SPEC_DRAFT_MODEL", X),
    Opt("-cd, --ctx-size-draft", "ctx_size_draft", "int", "N",
        "size of the prompt context for the draft model (default: 0, 0 = the model's context)", _E + "CTX_SIZE_DRAFT", X,
        lo=0),
    Opt("--spec-draft-hf, -hfd, -hfrd, --hf-repo-draft", "hf_repo_draft", "str", "<user>/<model>[:quant]",
        "Same as --hf-repo, but for the draft model (default: unused)", _E + "SPEC_DRAFT_HF_REPO", X,
        owner="downloading models"),
    Opt("--spec-type", "spec_type", "spectype", "TYPES",
        "comma-separated list of types of speculative decoding to use (default: none)", _E + "SPEC_TYPE", X),
    Opt("--spec-default", "spec_default", "bool", "", "enable default speculative decoding config", section=X,
        owner="llama-server's default speculative configuration"),
    Opt("--spec-draft-n-max", "sampling.spec_n_max", "int", "N",
        "number of tokens to draft for speculative decoding (default: 3)", _E + "SPEC_DRAFT_N_MAX", X, lo=0, hi=256),
    Opt("--spec-draft-n-min", "sampling.spec_n_min", "int", "N",
        "minimum number of draft tokens to use for speculative decoding (default: 0)", _E + "SPEC_DRAFT_N_MIN", X,
        lo=0, hi=256),
    Opt("--spec-draft-p-min, --draft-p-min", "sampling.spec_p_min", "float", "P",
        "minimum speculative decoding probability (greedy) (default: 0.00)", _E + "SPEC_DRAFT_P_MIN", X, lo=0, hi=1),
    *(Opt(f"--spec-ngram-{k}-{n}", f"spec_ngram_{k}_{n}".replace("-", "_"), "int", "N", h.format(k=k), section=X, lo=lo)
      for k in ("simple", "map-k", "map-k4v")
      for n, h, lo in (("size-n", "ngram size N for ngram-{k} speculative decoding, length of lookup n-gram (default: 12)", 1),
                       ("size-m", "ngram size M for ngram-{k} speculative decoding, length of draft m-gram (default: 48)", 1),
                       ("min-hits", "minimum hits for ngram-{k} speculative decoding (default: 1)", 0))),
    *(Opt(f"--spec-ngram-mod-{n}", f"spec_ngram_mod_{n}".replace("-", "_"), "int", "N", h, section=X, lo=lo)
      for n, h, lo in (("n-min", "minimum number of ngram tokens to use for ngram-based speculative decoding (default: 48)", 0),
                       ("n-max", "maximum number of ngram tokens to use for ngram-based speculative decoding (default: 64)", 1),
                       ("n-match", "ngram-mod lookup length (default: 24)", 1))),
    *(Opt(names, names.split(", ")[0].lstrip("-").replace("-", "_"), kind, hint, h, env, X, neg=neg,
          inert=why)
      for names, kind, hint, h, env, neg, why in (
        ("--spec-draft-threads, -td, --threads-draft", "threads", "N", "number of threads to use during generation "
         "(default: same as --threads)", None, "", _DRAFT_THREADS),
        ("--spec-draft-threads-batch, -tbd, --threads-batch-draft", "threads", "N", "number of threads to use during "
         "batch and prompt processing (default: same as --threads-draft)", None, "", _DRAFT_THREADS),
        ("--spec-draft-cpu-mask, -Cd, --cpu-mask-draft", "str", "M", "Draft model CPU affinity mask", None, "", _DRAFT_THREADS),
        ("--spec-draft-cpu-range, -Crd, --cpu-range-draft", "str", "lo-hi", "Ranges of CPUs for affinity", None, "", _DRAFT_THREADS),
        ("--spec-draft-cpu-strict, --cpu-strict-draft", "int", "<0|1>", "Use strict CPU placement for draft model", None, "", _DRAFT_THREADS),
        ("--spec-draft-prio, --prio-draft", "int", "N", "set draft process/thread priority", None, "", _DRAFT_THREADS),
        ("--spec-draft-poll, --poll-draft", "int", "<0|1>", "Use polling to wait for draft model work", None, "", _DRAFT_THREADS),
        ("--spec-draft-cpu-mask-batch, -Cbd, --cpu-mask-batch-draft", "str", "M", "Draft model CPU affinity mask", None, "", _DRAFT_THREADS),
        ("--spec-draft-cpu-strict-batch, --cpu-strict-batch-draft", "int", "<0|1>",
         "Use strict CPU placement for draft model", None, "", _DRAFT_THREADS),
        ("--spec-draft-prio-batch, --prio-batch-draft", "int", "N", "set draft process/thread priority", None, "", _DRAFT_THREADS),
        ("--spec-draft-poll-batch, --poll-batch-draft", "int", "<0|1>", "Use polling to wait for draft model work", None, "", _DRAFT_THREADS),
        ("--spec-draft-override-tensor, -otd, --override-tensor-draft", "str", "<tensor name pattern>=<buffer type>,...",
         "override tensor buffer type for draft model", None, "", _DRAFT_CPU),
        ("--spec-draft-cpu-moe, -cmoed, --cpu-moe-draft", "bool", "",
         "keep all Mixture of Experts (MoE) weights in the CPU for the draft model", _E + "SPEC_DRAFT_CPU_MOE", "", _DRAFT_CPU),
        ("--spec-draft-n-cpu-moe, --spec-draft-ncmoe, -ncmoed, --n-cpu-moe-draft", "int", "N",
         "keep the MoE weights of the first N layers in the CPU for the draft model", _E + "SPEC_DRAFT_N_CPU_MOE", "", _DRAFT_CPU),
        ("--spec-synth-len", "float", "L", "target mean synthetic acceptance length (benchmarking only)",
         _E + "SPEC_SYNTH_LEN", "", "synthetic acceptance (benchmarking only) is not built"),
        ("--spec-synth-rates", "str", "P0,P1,...", "per-position synthetic acceptance probabilities (benchmarking only)",
         _E + "SPEC_SYNTH_RATES", "", "synthetic acceptance (benchmarking only) is not built"),
        ("--spec-draft-p-split, --draft-p-split", "float", "P", "speculative decoding split probability (default: 0.10)",
         _E + "SPEC_DRAFT_P_SPLIT", "", "drafts are single sequences (no draft trees)"),
        ("--spec-draft-backend-sampling", "bool", "", "offload draft sampling to the backend (default: enabled)",
         _E + "SPEC_DRAFT_BACKEND_SAMPLING", "--no-spec-draft-backend-sampling", "the draft's tokens are chosen on the CPU"),
        ("--spec-draft-device, -devd, --device-draft", "str", "<dev1,dev2,..>",
         "comma-separated list of devices to use for offloading the draft model", None, "", _DRAFT_CPU),
        ("--spec-draft-ngl, -ngld, --gpu-layers-draft, --n-gpu-layers-draft", "ngl", "N",
         "max. number of draft model layers to store in VRAM", _E + "N_GPU_LAYERS_DRAFT", "", _DRAFT_CPU),
    )),
    # removed from llama-server: it refuses them with these messages, and so does llamars-server
    *(Opt(names, "@removed", "int", "N", msg, env, X, removed=msg)
      for names, env, msg in (
        ("--draft, --draft-n, --draft-max", _E + "DRAFT_MAX", "use --spec-draft-n-max or --spec-ngram-mod-n-max"),
        ("--draft-min, --draft-n-min", _E + "DRAFT_MIN", "use --spec-draft-n-min or --spec-ngram-mod-n-min"),
        ("--spec-ngram-size-n", None, "use the respective --spec-ngram-*-size-n or --spec-ngram-mod-n-match"),
        ("--spec-ngram-size-m", None, "use the respective --spec-ngram-*-size-m"),
        ("--spec-ngram-min-hits", None, "use the respective --spec-ngram-*-min-hits"))),
    # llama-server's presets download a model (and set its options): llamars does not download
    *(Opt(f"--{n}", "@preset", "bool", "", h + " (note: can download weights from the internet)", section=X,
          owner="downloading models")
      for n, h in (
        ("embd-gemma-default", "use default EmbeddingGemma model"),
        ("fim-qwen-1.5b-default", "use default Qwen 2.5 Coder 1.5B"),
        ("fim-qwen-3b-default", "use default Qwen 2.5 Coder 3B"),
        ("fim-qwen-7b-default", "use default Qwen 2.5 Coder 7B"),
        ("fim-qwen-7b-spec", "use Qwen 2.5 Coder 7B + 0.5B draft for speculative decoding"),
        ("fim-qwen-14b-spec", "use Qwen 2.5 Coder 14B + 0.5B draft for speculative decoding"),
        ("fim-qwen-30b-default", "use default Qwen 3 Coder 30B A3B Instruct"),
        ("gpt-oss-20b-default", "use gpt-oss-20b"),
        ("gpt-oss-120b-default", "use gpt-oss-120b"),
        ("vision-gemma-4b-default", "use Gemma 3 4B QAT"),
        ("vision-gemma-12b-default", "use Gemma 3 12B QAT"))),
)
