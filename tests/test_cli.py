"""llamars-server's command line (python/llamars/cli.py): llama-server's flags, short forms,
defaults and LLAMA_ARG_* variables -> ServerConfig. Fast: no model, no server."""
from __future__ import annotations

import subprocess
import sys
import types
from pathlib import Path

import pytest

import llamars
from llamars.cli import CLIError, help_text, main, parse_args
from llamars.config import ServerConfig

ROOT = Path(__file__).resolve().parent.parent


def cfg(*argv: str, **env: str) -> ServerConfig:
    return parse_args(list(argv), env=env)


def test_defaults_match_llama_server_readme():
    c = cfg()
    assert c.model is None and c.alias is None
    assert (c.n_ctx, c.n_batch, c.n_ubatch, c.n_parallel, c.n_keep) == (0, 2048, 512, -1, 0)
    assert c.n_threads is None  # -1 = auto
    assert c.cache_prompt is True and c.cache_reuse == 0 and c.cache_ram == 8192
    assert c.context_shift is False and c.swa_full is False
    assert c.slot_prompt_similarity == pytest.approx(0.1)
    assert (c.host, c.port, c.api_prefix, c.api_keys) == ("127.0.0.1", 8080, "", [])
    assert c.timeout == 3600
    assert c.resolved_cors_origins() == ["*"] and c.cors_headers == ["*"]
    assert c.cors_methods == ["GET", "POST", "DELETE", "OPTIONS"] and c.cors_credentials is True
    assert (c.metrics, c.props, c.slots, c.webui, c.embedding) == (False, False, True, True, False)
    assert c.pooling is None and c.jinja is True and c.chat_template_kwargs == {}
    assert c.n_gpu_layers is None and c.device is None and c.slot_save_path is None
    assert c.verbose is False and c.log_disable is False
    s = c.sampling
    assert (s.n_predict, s.top_k, s.seed) == (-1, 40, -1)
    assert s.temperature == pytest.approx(0.8)
    assert s.top_p == pytest.approx(0.95) and s.min_p == pytest.approx(0.05)


@pytest.mark.parametrize(
    "argv, field, value",
    [
        (["-m", "x.gguf"], "model", "x.gguf"),
        (["--model", "x.gguf"], "model", "x.gguf"),
        (["-a", "gemma"], "alias", "gemma"),
        (["--alias", "gemma"], "alias", "gemma"),
        (["-c", "4096"], "n_ctx", 4096),
        (["--ctx-size", "4096"], "n_ctx", 4096),
        (["--ctx-size=4096"], "n_ctx", 4096),
        (["--ctx_size", "4096"], "n_ctx", 4096),
        (["-b", "256"], "n_batch", 256),
        (["--batch-size", "256"], "n_batch", 256),
        (["-ub", "128"], "n_ubatch", 128),
        (["--ubatch-size", "128"], "n_ubatch", 128),
        (["-t", "3"], "n_threads", 3),
        (["--threads", "3"], "n_threads", 3),
        (["-t", "-1"], "n_threads", None),
        (["-np", "2"], "n_parallel", 2),
        (["--parallel", "2"], "n_parallel", 2),
        (["--keep", "-1"], "n_keep", -1),
        (["--cache-reuse", "256"], "cache_reuse", 256),
        (["-cram", "0"], "cache_ram", 0),
        (["--cache-ram", "-1"], "cache_ram", -1),
        (["-sps", "0.5"], "slot_prompt_similarity", 0.5),
        (["--slot-prompt-similarity", "0"], "slot_prompt_similarity", 0.0),
        (["--slot-save-path", "/tmp/slots"], "slot_save_path", "/tmp/slots"),
        (["--host", "0.0.0.0"], "host", "0.0.0.0"),
        (["--port", "9001"], "port", 9001),
        (["--api-prefix", "/v2/"], "api_prefix", "/v2"),
        (["--ssl-key-file", "k.pem"], "ssl_key_file", "k.pem"),
        (["--ssl-cert-file", "c.pem"], "ssl_cert_file", "c.pem"),
        (["-to", "30"], "timeout", 30),
        (["--timeout", "30"], "timeout", 30),
        (["--cors-origins", "http://a.test, http://b.test"], "cors_origins", ["http://a.test", "http://b.test"]),
        (["--cors-methods", "GET,POST"], "cors_methods", ["GET", "POST"]),
        (["--cors-headers", "X-A"], "cors_headers", ["X-A"]),
        (["--pooling", "mean"], "pooling", "mean"),
        (["--chat-template", "chatml"], "chat_template", "chatml"),
        (["--chat-template-file", "t.jinja"], "chat_template_file", "t.jinja"),
        (["--chat-template-kwargs", '{"enable_thinking": false}'], "chat_template_kwargs", {"enable_thinking": False}),
        (["-ngl", "99"], "n_gpu_layers", "99"),
        (["--gpu-layers", "all"], "n_gpu_layers", "all"),
        (["--n-gpu-layers", "auto"], "n_gpu_layers", "auto"),
        (["-dev", "none"], "device", "none"),
        (["--device", "CPU"], "device", "CPU"),
    ],
)
def test_value_flags(argv, field, value):
    assert getattr(cfg(*argv), field) == value


@pytest.mark.parametrize(
    "argv, field, value",
    [
        (["-n", "16"], "n_predict", 16),
        (["--predict", "16"], "n_predict", 16),
        (["--n-predict", "16"], "n_predict", 16),
        (["--temp", "0"], "temperature", 0.0),
        (["--temperature", "1.5"], "temperature", 1.5),
        (["--top-k", "1"], "top_k", 1),
        (["--top-p", "0.5"], "top_p", 0.5),
        (["--min-p", "0"], "min_p", 0.0),
        (["-s", "42"], "seed", 42),
        (["--seed", "42"], "seed", 42),
    ],
)
def test_sampling_flags(argv, field, value):
    assert getattr(cfg(*argv).sampling, field) == value


@pytest.mark.parametrize(
    "argv, field, value",
    [
        (["--no-cache-prompt"], "cache_prompt", False),
        (["--cache-prompt"], "cache_prompt", True),
        (["--context-shift"], "context_shift", True),
        (["--context-shift", "--no-context-shift"], "context_shift", False),  # last one wins
        (["--swa-full"], "swa_full", True),
        (["--metrics"], "metrics", True),
        (["--props"], "props", True),
        (["--no-slots"], "slots", False),
        (["--no-webui"], "webui", False),
        (["--no-ui"], "webui", False),
        (["--no-webui", "--webui"], "webui", True),
        (["--embedding"], "embedding", True),
        (["--embeddings"], "embedding", True),
        (["--no-jinja"], "jinja", False),
        (["--no-cors-credentials"], "cors_credentials", False),
        (["-v"], "verbose", True),
        (["--verbose"], "verbose", True),
        (["--log-disable"], "log_disable", True),
    ],
)
def test_boolean_flags(argv, field, value):
    assert getattr(cfg(*argv), field) is value


def test_env_vars_apply():
    c = cfg(
        LLAMA_ARG_MODEL="/m.gguf",
        LLAMA_ARG_CTX_SIZE="1024",
        LLAMA_ARG_PORT="9000",
        LLAMA_ARG_HOST="0.0.0.0",
        LLAMA_ARG_N_PARALLEL="2",
        LLAMA_ARG_THREADS="2",
        LLAMA_ARG_ENDPOINT_METRICS="1",
        LLAMA_ARG_ENDPOINT_SLOTS="off",
        LLAMA_ARG_UI="disabled",
        LLAMA_ARG_EMBEDDINGS="yes",
        LLAMA_ARG_CACHE_PROMPT="false",
        LLAMA_ARG_N_PREDICT="12",
        LLAMA_ARG_TOP_K="5",
        LLAMA_ARG_POOLING="cls",
        LLAMA_ARG_CHAT_TEMPLATE_KWARGS='{"a": 1}',
        LLAMA_ARG_N_GPU_LAYERS="all",
        LLAMA_API_KEY="k1,k2",
    )
    assert (c.model, c.n_ctx, c.port, c.host, c.n_parallel, c.n_threads) == ("/m.gguf", 1024, 9000, "0.0.0.0", 2, 2)
    assert (c.metrics, c.slots, c.webui, c.embedding, c.cache_prompt) == (True, False, False, True, False)
    assert (c.sampling.n_predict, c.sampling.top_k, c.pooling) == (12, 5, "cls")
    assert c.chat_template_kwargs == {"a": 1} and c.n_gpu_layers == "all"
    assert c.api_keys == ["k1", "k2"]


def test_cli_overrides_env():
    env = {"LLAMA_ARG_CTX_SIZE": "1024", "LLAMA_ARG_PORT": "9000", "LLAMA_ARG_CONTEXT_SHIFT": "true",
           "LLAMA_API_KEY": "envkey"}
    c = parse_args(["-c", "2048", "--no-context-shift", "--api-key", "clikey"], env=env)
    assert c.n_ctx == 2048 and c.context_shift is False and c.api_keys == ["clikey"]
    assert c.port == 9000  # not on the command line: the env var applies


def test_env_defaults_to_os_environ(monkeypatch):
    monkeypatch.setenv("LLAMA_ARG_CTX_SIZE", "777")
    assert parse_args([]).n_ctx == 777


@pytest.mark.parametrize("raw", ["1", "true", "TRUE", "on", "yes", "enabled"])
def test_env_bool_true(raw):
    assert cfg(LLAMA_ARG_CONTEXT_SHIFT=raw).context_shift is True


@pytest.mark.parametrize("raw", ["0", "false", "off", "no", "disabled", "Disabled"])
def test_env_bool_false(raw):
    assert cfg(LLAMA_ARG_JINJA=raw).jinja is False


def test_bad_env_value_names_the_variable():
    with pytest.raises(CLIError, match="LLAMA_ARG_ENDPOINT_METRICS"):
        cfg(LLAMA_ARG_ENDPOINT_METRICS="maybe")
    with pytest.raises(CLIError, match="LLAMA_ARG_CTX_SIZE"):
        cfg(LLAMA_ARG_CTX_SIZE="big")


def test_api_keys_comma_list_and_repeats():
    c = cfg("--api-key", "k1, k2", "--api-key", "k3")
    assert c.api_keys == ["k1", "k2", "k3"]


def test_api_key_file(tmp_path):
    f = tmp_path / "keys.txt"
    f.write_text("# comment\nfile1\n\n   \nfile2  \n#file3\n")
    assert cfg("--api-key-file", str(f)).api_keys == ["file1", "file2"]
    assert cfg("--api-key", "k1", "--api-key-file", str(f)).api_keys == ["k1", "file1", "file2"]
    assert cfg(LLAMA_ARG_API_KEY_FILE=str(f)).api_keys == ["file1", "file2"]
    with pytest.raises(CLIError, match="--api-key-file"):
        cfg("--api-key-file", str(tmp_path / "missing.txt"))


def test_unknown_flag_suggests_nearest():
    with pytest.raises(CLIError, match=r"unknown argument: --ctx-szie \(did you mean --ctx-size\?\)"):
        cfg("--ctx-szie", "10")
    with pytest.raises(CLIError, match="did you mean --no-webui"):
        cfg("--no-webiu")
    with pytest.raises(CLIError, match="unknown argument: stray"):
        cfg("stray")


def test_main_unknown_flag_exit_1(capsys):
    assert main(["--ctx-szie", "10"]) == 1
    err = capsys.readouterr().err
    assert "error: unknown argument: --ctx-szie (did you mean --ctx-size?)" in err


@pytest.mark.parametrize(
    "argv, label",
    [
        (["-c", "abc"], "-c"),
        (["--ctx-size", "-5"], "--ctx-size"),
        (["--port", "70000"], "--port"),
        (["--port", "eighty"], "--port"),
        (["-t", "-2"], "-t"),
        (["--threads", "-8"], "--threads"),
        (["-b", "0"], "-b"),
        (["--pooling", "max"], "--pooling"),
        (["--chat-template-kwargs", "{bad json"], "--chat-template-kwargs"),
        (["--chat-template-kwargs", "[1, 2]"], "--chat-template-kwargs"),
        (["-sps", "2"], "-sps"),
        (["--top-p", "x"], "--top-p"),
        (["--temp", "nan"], "--temp"),
        (["-ngl", "lots"], "-ngl"),
        (["-c"], "-c"),  # missing value
        (["--metrics=1"], "--metrics"),  # a flag without a value
    ],
)
def test_bad_values_name_the_flag(argv, label):
    with pytest.raises(CLIError) as ei:
        parse_args(argv, env={})
    assert label in str(ei.value)


def test_main_bad_value_exit_1(capsys):
    assert main(["-c", "abc"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "-c" in err


def test_help(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for header in ("----- common params -----", "----- sampling params -----", "----- example-specific params -----"):
        assert header in out
    assert out.index("common params") < out.index("sampling params") < out.index("example-specific params")
    lines = out.splitlines()
    i = next(n for n, ln in enumerate(lines) if ln.startswith("-c,    --ctx-size N"))
    assert lines[i][40:].startswith("size of the prompt context (default: 0")
    assert "(env: LLAMA_ARG_CTX_SIZE)" in lines[i + 1]
    for flag in ("--api-key-file", "--no-webui", "--chat-template-kwargs", "--top-k", "--list-devices"):
        assert flag in out
    assert "(env: LLAMA_API_KEY)" in out
    assert "--mirostat N" in out and "--repeat-penalty N" in out
    # every llama-server flag is listed; those llamars does not act on say so
    i = next(n for n, ln in enumerate(lines) if ln.startswith("--perf, --no-perf"))
    assert "llamars: accepted, no effect" in " ".join(lines[i:i + 4])
    i = next(n for n, ln in enumerate(lines) if ln.startswith("-hff,  --hf-file FILE"))
    assert "is not available yet" in " ".join(lines[i:i + 4])
    for flag in ("--lora FNAME", "-ctk,  --cache-type-k TYPE", "-fa,   --flash-attn [on|off|auto]"):
        i = next(n for n, ln in enumerate(lines) if ln.startswith(flag))
        assert "llamars:" not in " ".join(lines[i:i + 3]), flag


def test_help_short_forms_and_parse_args_exit(capsys):
    assert main(["-h"]) == 0 and "common params" in capsys.readouterr().out
    with pytest.raises(SystemExit) as ei:
        parse_args(["--ctx-size", "1", "--help"], env={})
    assert ei.value.code == 0
    assert help_text() in capsys.readouterr().out


def test_version(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.startswith(f"version: {llamars.__version__}")


def test_list_devices(capsys):
    assert main(["--list-devices"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Available devices:")
    assert "  CPU: " in out
    # every adapter wgpu finds is listed by the name -dev takes
    for d in llamars.Engine.devices():
        assert f"  {d['name']}: {d['description']} (" in out


def test_main_resolves_default_model_and_serves(monkeypatch):
    import llamars.models

    seen = {}

    def fake_default_model(progress=True):
        seen["progress"] = progress
        return Path("/cache/default.gguf")

    def fake_serve(config):
        seen["config"] = config
        return 0

    monkeypatch.setattr(llamars.models, "default_model", fake_default_model)
    monkeypatch.setitem(sys.modules, "llamars.server.app", types.SimpleNamespace(serve=fake_serve))
    monkeypatch.delenv("LLAMA_ARG_MODEL", raising=False)
    assert main(["-c", "512", "--port", "0"]) == 0
    assert seen["progress"] is True
    assert seen["config"].model == "/cache/default.gguf" and seen["config"].n_ctx == 512


def test_main_missing_default_model_is_an_error(monkeypatch, capsys):
    import llamars.models

    def missing(progress=True):
        raise FileNotFoundError("no model given and the default model package is not installed")

    monkeypatch.setattr(llamars.models, "default_model", missing)
    monkeypatch.delenv("LLAMA_ARG_MODEL", raising=False)
    assert main([]) == 1
    assert capsys.readouterr().err.startswith("error: no model given")


def test_console_script_and_module_entry():
    assert 'llamars-server = "llamars.cli:main"' in (ROOT / "pyproject.toml").read_text()
    r = subprocess.run([sys.executable, "-m", "llamars.cli", "--version"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.startswith("version: ")
    r = subprocess.run([sys.executable, "-m", "llamars.cli", "--bogus"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and r.stderr.startswith("error: unknown argument: --bogus")


def test_sampling_chain_defaults_from_the_command_line():
    c = parse_args(["--repeat-penalty", "1.3", "--samplers", "top_k;temperature", "--mirostat", "2", "--ignore-eos",
                    "--dry-multiplier", "0.8", "--typical", "0.9"], env={})
    d = c.sampling.chain_defaults()
    assert d["repeat_penalty"] == 1.3 and d["samplers"] == ["top_k", "temperature"] and d["mirostat"] == 2
    assert d["dry_multiplier"] == 0.8 and d["typical_p"] == 0.9 and c.sampling.ignore_eos
    assert parse_args(["--sampling-seq", "kt"], env={}).sampling.chain_defaults()["samplers"] == "kt"
    assert parse_args([], env={}).sampling.chain_defaults() == {}
    with pytest.raises(CLIError, match="--mirostat"):
        parse_args(["--mirostat", "3"], env={})


def test_grammar_and_schema_flags(tmp_path):
    g = tmp_path / "g.gbnf"
    g.write_text('root ::= "yes" | "no"\n')
    c = parse_args(["--grammar-file", str(g)], env={})
    assert c.sampling.grammar == 'root ::= "yes" | "no"\n'
    assert parse_args(["-j", '{"type": "object"}'], env={}).sampling.json_schema == '{"type": "object"}'
    with pytest.raises(CLIError, match="--grammar-file"):
        parse_args(["--grammar-file", str(tmp_path / "missing")], env={})
