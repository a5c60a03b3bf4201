"""The `llamars` command line: `llamars run` (one reply, and a conversation read from a
pipe) and `llamars bench` (llama-bench's table and JSON) on tiny models, run as real
processes through the installed entry point; the dispatcher's help and errors."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
import tiny_models as tm

from llamars import Engine

CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def _llamars() -> list:
    exe = shutil.which("llamars", path=os.path.dirname(sys.executable))
    assert exe, "the `llamars` entry point is not installed (pyproject [project.scripts]); run ./scripts/setup"
    return [exe]


def _run(*args, input=None, timeout=120):
    return subprocess.run(_llamars() + list(args), input=input, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    p = tmp_path_factory.mktemp("cmd") / "tiny-llama.gguf"
    tm.write_model(p, "llama", "Q8_0", seed=5, extra_kvs=[tm.KV("tokenizer.chat_template", tm.VT.STRING, CHATML)])
    return str(p)


def _reference_reply(path, messages, n):
    with Engine(path, n_ctx=512) as e:
        return e.chat(messages, max_tokens=n, temperature=0.0).content


def test_run_one_reply_streams_what_engine_chat_computes(tiny):
    r = _run("run", tiny, "Hello there", "-n", "12", "--temp", "0", "-c", "512")
    assert r.returncode == 0, r.stderr
    want = _reference_reply(tiny, [{"role": "user", "content": "Hello there"}], 12)
    assert want.strip() and r.stdout == want + "\n"


def test_run_reads_turns_from_a_pipe_with_history_and_clear(tiny):
    r = _run("run", "-m", tiny, "-n", "6", "--temp", "0", "-c", "512", input="first question\nsecond one\n/clear\nsecond one\n")
    assert r.returncode == 0, r.stderr
    replies = r.stdout.split("\n")
    a1 = _reference_reply(tiny, [{"role": "user", "content": "first question"}], 6)
    a2 = _reference_reply(tiny, [{"role": "user", "content": "first question"}, {"role": "assistant", "content": a1},
                                 {"role": "user", "content": "second one"}], 6)
    a3 = _reference_reply(tiny, [{"role": "user", "content": "second one"}], 6)
    assert replies[:3] == [a1, a2, a3]
    assert "chatting with" not in r.stderr  # no banner when stdin is not a terminal


def test_run_missing_model_is_a_clear_error(tmp_path):
    r = _run("run", str(tmp_path / "nope.gguf"), "hi")
    assert r.returncode == 1 and "error:" in r.stderr and "nope.gguf" in r.stderr


def test_bench_json_rows_and_markdown_table(tiny):
    r = _run("bench", tiny, "-p", "32", "-n", "8", "-r", "2", "-t", "1", "-o", "json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    assert [row["test"] for row in rows] == ["pp32", "tg8"]
    for row in rows:
        assert len(row["samples_ts"]) == 2 and all(s > 0 for s in row["samples_ts"])
        assert row["avg_ts"] == pytest.approx(sum(row["samples_ts"]) / 2)
        assert row["threads"] == 1 and row["backend"] == "CPU" and row["model"].startswith("llama ")
    r = _run("bench", "-m", tiny, "-p", "16", "-n", "0", "-r", "1")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert lines[0].split("|")[1:-1] == [f" {h} " for h in ("model".ljust(30), "size".rjust(10), "params".rjust(10),
                                                            "backend".ljust(10), "threads", "test".rjust(13), "t/s".rjust(20))]
    assert "pp16" in lines[2] and " ± " in lines[2] and len(lines) == 5 and lines[-1] == "build: llamars " + _version()


def _version():
    from llamars import __version__

    return __version__


def test_bench_bad_values_are_refused(tiny):
    r = _run("bench", tiny, "-p", "1,x")
    assert r.returncode == 2 and "comma-separated integers" in r.stderr
    r = _run("bench", tiny, "-r", "0")
    assert r.returncode == 1 and "--repetitions" in r.stderr


def test_dispatcher_help_version_and_unknown_command(tiny):
    r = _run("--help")
    assert r.returncode == 0 and all(c in r.stdout for c in ("serve", "run", "inspect", "bench"))
    assert _run().returncode == 2
    r = _run("frobnicate")
    assert r.returncode == 2 and "unknown command 'frobnicate'" in r.stderr
    assert _run("--version").stdout.strip() == f"llamars {_version()}"
    for cmd in ("serve", "run", "inspect", "bench"):
        h = _run(cmd, "--help")
        assert h.returncode == 0 and "usage:" in h.stdout.lower(), (cmd, h.stderr)
    r = _run("inspect", tiny)
    assert r.returncode == 0 and "llama.block_count" in r.stdout
