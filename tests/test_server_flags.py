"""The llama-server 2026 flags llamars implements, each through its effect: names and
tags in /v1/models, server-wide sampling defaults (-r, -l, --dry-sequence-breaker),
ignore_eos's bans, --embd-normalize, the chat flags (--reasoning, --reasoning-effort,
--reasoning-preserve, --no-prefill-assistant, --skip-chat-parsing), --ui-config, SSE
pings, listening on several addresses (--host a,b, .sock, --reuse-port), CPU affinity and
priority, the log flags, --kv-unified-per-slot, -cl and --completion-bash; and the
response details of llama-server 2026: /chat/completions/input_tokens, the
context-overflow body, /metrics' header and series, /slots for an unused slot, and a
template's date."""
from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import httpx
import numpy as np
import pytest
from server_util import LiveServer, wait_healthy

from llamars.cli import _parse, cache_list_text, completion_bash_text
from llamars.config import ServerConfig
from llamars.server.app import create_app, listen_sockets
from llamars.server.logline import LogLine
from llamars.server.sse import PING, pinged
from llamars.process import apply_process_settings, cpu_set, parse_cpu_mask, parse_cpu_range

TEMPLATE = ("{% for m in messages %}<{{ m.role }}>{{ m.content }}</{{ m.role }}>{% endfor %}"
            "{% if add_generation_prompt %}<assistant>{% endif %}"
            "|thinking={{ enable_thinking }}|effort={{ reasoning_effort }}|preserve={{ preserve_reasoning }}"
            "|date={{ date_string }}")


@pytest.fixture(scope="module")
def live(engine, model_path):
    started = []

    def make(argv=(), **cfg):
        config, _ = _parse(["-m", model_path, *argv], env={})
        for k, v in cfg.items():
            setattr(config, k, v)
        s = LiveServer(create_app(config, engine=engine)).start()
        started.append(s)
        return s

    yield make
    for s in started:
        s.stop()


def test_aliases_sorted_and_tags_in_models(live):
    s = live(["-a", "zeta,alpha, mid", "--tags", "chat,small"])
    d = httpx.get(s.url + "/v1/models").json()
    m = d["data"][0]
    assert m["id"] == "alpha" and m["aliases"] == ["alpha", "mid", "zeta"] and m["tags"] == ["chat", "small"]
    assert httpx.get(s.url + "/props").json()["model_alias"] == "alpha"


def test_sampling_defaults_from_the_command_line(live, engine):
    s = live(["-r", "Paris", "-r", "France", "-l", "15043+1.5", "-l", "3-inf", "--dry-sequence-breaker", "X",
              "--dry-sequence-breaker", "Y"])
    r = httpx.post(s.url + "/completion", json={"prompt": "The capital of France is", "n_predict": 3}).json()
    g = r["generation_settings"]
    assert g["stop"] == ["Paris", "France"]
    assert {"token": 15043, "bias": 1.5} in g["logit_bias"] and {"token": 3, "bias": None} in g["logit_bias"]
    assert g["dry_sequence_breakers"] == ["X", "Y"]
    # a request's own fields win
    r = httpx.post(s.url + "/completion", json={"prompt": "Hi", "n_predict": 1, "stop": ["z"], "logit_bias": [[7, 2.0]]}).json()
    assert r["generation_settings"]["stop"] == ["z"] and r["generation_settings"]["logit_bias"] == [{"token": 7, "bias": 2.0}]
    # "none" clears the breakers
    c, _ = _parse(["--dry-sequence-breaker", "none"], env={})
    assert c.sampling.dry_sequence_breakers == []


def test_a_default_stop_ends_generation(live):
    s = live()
    free = httpx.post(s.url + "/completion", json={"prompt": "One, two, three,", "n_predict": 12, "temperature": 0}).json()
    word = free["content"].split()[1].strip(",.")
    s2 = live(["-r", word])
    r = httpx.post(s2.url + "/completion", json={"prompt": "One, two, three,", "n_predict": 12, "temperature": 0}).json()
    assert r["stop_type"] == "word" and r["stopping_word"] == word and word not in r["content"]


def test_ignore_eos_bans_every_end_of_generation_token(live, engine):
    s = live()
    r = httpx.post(s.url + "/completion", json={"prompt": "Hi", "n_predict": 2, "ignore_eos": True}).json()
    eog = [t for t in range(engine.n_vocab) if engine._core.is_eog(t)]
    assert eog == [1, 106, 212]  # eos, <end_of_turn>, </s> (llama.cpp's EOG set for this model)
    assert r["generation_settings"]["logit_bias"] == [{"token": t, "bias": None} for t in eog]


def test_embd_normalize_default(engine, model_path):
    s = LiveServer(create_app(ServerConfig(model=model_path, embedding=True, pooling="mean", embd_normalize=1), engine=engine)).start()
    try:
        v = np.array(httpx.post(s.url + "/embedding", json={"content": "hello"}).json()[0]["embedding"][0])
        assert abs(np.abs(v).sum() - 1) < 1e-4  # taxicab
        v = np.array(httpx.post(s.url + "/embedding", json={"content": "hello", "embd_normalize": 2}).json()[0]["embedding"][0])
        assert abs(np.linalg.norm(v) - 1) < 1e-4
        v = np.array(httpx.post(s.url + "/v1/embeddings", json={"input": "hello"}).json()["data"][0]["embedding"])
        assert abs(np.abs(v).sum() - 1) < 1e-4
    finally:
        s.stop()


def test_chat_flags_reach_the_template(live):
    msgs = [{"role": "user", "content": "hi"}]
    s = live(["--chat-template", TEMPLATE, "--reasoning", "off", "--reasoning-effort", "high", "--no-reasoning-preserve"])
    p = httpx.post(s.url + "/apply-template", json={"messages": msgs}).json()["prompt"]
    assert "|thinking=False|effort=high|preserve=False|" in p
    # the request's chat_template_kwargs win over the flags
    p = httpx.post(s.url + "/apply-template", json={"messages": msgs, "chat_template_kwargs": {"enable_thinking": True}}).json()["prompt"]
    assert "|thinking=True|" in p
    s = live(["--chat-template", TEMPLATE, "-rea", "auto", "--reasoning-effort", "default"])
    p = httpx.post(s.url + "/apply-template", json={"messages": msgs}).json()["prompt"]
    # auto: as llama-server, enable_thinking is true for a template that reads it; the rest are the template's defaults
    assert "|thinking=True|effort=|preserve=|" in p


def test_a_template_gets_todays_date(live):
    s = live(["--chat-template", TEMPLATE])
    p = httpx.post(s.url + "/apply-template", json={"messages": [{"role": "user", "content": "hi"}]}).json()["prompt"]
    assert p.endswith("|date=" + datetime.now().strftime("%d %b %Y"))


def test_prefill_assistant_flag(live):
    msgs = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Sure"}]
    on = httpx.post(live(["--chat-template", TEMPLATE]).url + "/apply-template", json={"messages": msgs}).json()["prompt"]
    assert on.startswith("<user>hi</user><assistant>Sure") and "</assistant>" not in on
    off = httpx.post(live(["--chat-template", TEMPLATE, "--no-prefill-assistant"]).url + "/apply-template",
                     json={"messages": msgs}).json()["prompt"]
    assert off.startswith("<user>hi</user><assistant>Sure</assistant><assistant>")


def test_skip_chat_parsing_keeps_everything_in_content(engine):
    from llamars.chat.plan import plan_chat
    from llamars.chat.templates import ChatTemplate

    t = ChatTemplate("{% for m in messages %}{{ m.content }}{% endfor %}<think>\n", "t")
    reply = "I think so</think>The answer"
    rp = plan_chat(t, [{"role": "user", "content": "q"}]).parser()
    rp.text = reply
    r = rp.finish()[0]
    assert r.reasoning == "I think so" and r.content == "The answer"
    rp = plan_chat(t, [{"role": "user", "content": "q"}], parse=False).parser()
    rp.text = reply
    r = rp.finish()[0]
    assert not r.reasoning and r.content == reply


def test_ui_config_in_props(live, tmp_path):
    s = live(["--ui-config", '{"theme": "dark", "showTokens": true}'])
    assert httpx.get(s.url + "/props").json()["ui_settings"] == {"theme": "dark", "showTokens": True}
    f = tmp_path / "ui.json"
    f.write_text('{"a": 1}')
    c, _ = _parse(["--ui-config-file", str(f)], env={})
    assert c.ui_config == {"a": 1}
    from llamars.cli import CLIError

    with pytest.raises(CLIError, match="--ui-config.*invalid JSON"):
        _parse(["--ui-config", "{nope"], env={})


def test_sse_pings_while_silent():
    async def slow():
        yield b"data: 1\n\n"
        await asyncio.sleep(0.35)
        yield b"data: 2\n\n"

    async def run(interval):
        return [c async for c in pinged(slow(), interval)]

    out = asyncio.run(run(0.1))
    assert out[0] == b"data: 1\n\n" and out[-1] == b"data: 2\n\n" and 2 <= out.count(PING) <= 4
    assert asyncio.run(run(-1)) == [b"data: 1\n\n", b"data: 2\n\n"]
    assert _parse([], env={})[0].sse_ping_interval == 30


def test_sse_ping_reaches_a_client(live):
    """A stream that stays silent longer than --sse-ping-interval gets `:` comments."""
    s = live(["--sse-ping-interval", "1"])
    body = {"prompt": "Count: " + "1 2 3 " * 300, "n_predict": 40, "stream": True, "temperature": 0}
    t0 = time.monotonic()
    lines = []
    with httpx.stream("POST", s.url + "/completion", json=body, timeout=120) as r:
        for ln in r.iter_lines():
            lines.append(ln)
    took = time.monotonic() - t0
    if took < 1.5:
        pytest.skip(f"the stream finished in {took:.1f} s, too fast for a 1 s ping on this machine")
    assert ":" in lines  # a ping (the comment line) arrived
    assert any(ln.startswith("data: ") for ln in lines)


def test_listen_on_several_addresses(tmp_path):
    sock_path = str(tmp_path / "s.sock")
    socks = listen_sockets(["127.0.0.1", sock_path], 0)
    try:
        assert socks[0].family == socket.AF_INET and socks[1].family == socket.AF_UNIX
        assert os.path.exists(sock_path)
    finally:
        for s in socks:
            s.close()
    with pytest.raises(ValueError, match="--port 0 is not supported with multiple TCP addresses"):
        listen_sockets(["127.0.0.1", "127.0.0.2"], 0)
    # --reuse-port: two servers may bind the same port
    a = listen_sockets(["127.0.0.1"], 0, reuse_port=True)
    port = a[0].getsockname()[1]
    b = listen_sockets(["127.0.0.1"], port, reuse_port=True)
    for s in a + b:
        s.close()
    with pytest.raises(OSError):
        c = listen_sockets(["127.0.0.1"], 0)
        try:
            listen_sockets(["127.0.0.1"], c[0].getsockname()[1])
        finally:
            c[0].close()


def test_a_server_process_on_tcp_and_a_unix_socket(tmp_path, model_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sock_path = str(tmp_path / "llamars.sock")
    log = tmp_path / "log.txt"
    with open(log, "w") as f:
        p = subprocess.Popen([sys.executable, "-m", "llamars.cli", "-m", model_path, "-c", "256", "--host",
                              f"127.0.0.1,{sock_path}", "--port", str(port), "--log-file", str(tmp_path / "file.log"),
                              "--log-prefix", "--numa", "distribute"], stdout=f, stderr=subprocess.STDOUT)
    try:
        wait_healthy(p, f"http://127.0.0.1:{port}", log)
        with httpx.Client(transport=httpx.HTTPTransport(uds=sock_path), base_url="http://llamars", timeout=60) as c:
            assert c.get("/health").json() == {"status": "ok"}
        out = log.read_text()
        assert "warning: --numa has no effect in llamars" in out
        assert f"I llamars-server: listening on http://127.0.0.1:{port}" in out
        assert f"I llamars-server: listening on unix:{sock_path}" in out
        assert "I llamars-server: model loaded" in (tmp_path / "file.log").read_text()
    finally:
        p.terminate()
        p.wait(30)
    assert not os.path.exists(sock_path)


def test_cpu_mask_and_range():
    assert parse_cpu_mask("0x5") == {0, 2} and parse_cpu_mask("F0") == {4, 5, 6, 7}
    assert parse_cpu_range("1-3") == {1, 2, 3} and parse_cpu_range("-1") == {0, 1}
    with pytest.raises(ValueError, match="not a hex mask"):
        parse_cpu_mask("0xZ")
    with pytest.raises(ValueError, match="not a range"):
        parse_cpu_range("3")
    c, _ = _parse(["-C", "0x1", "-Cr", "2-2"], env={})
    assert cpu_set(c) == {0, 2}
    if not hasattr(os, "sched_setaffinity"):
        pytest.skip("no sched_setaffinity on this platform")
    before = os.sched_getaffinity(0)
    try:
        first = min(before)
        c = ServerConfig(cpu_mask=hex(1 << first))
        apply_process_settings(c)
        assert os.sched_getaffinity(0) == {first} and c.n_threads == 1
        with pytest.raises(ValueError, match="name no CPU"):
            apply_process_settings(ServerConfig(cpu_range=f"{max(before) + 1}-{max(before) + 1}"))
    finally:
        os.sched_setaffinity(0, before)


def test_prio_low_renices_the_process():
    code = ("import os; from llamars.config import ServerConfig; from llamars.process import apply_process_settings;"
            "apply_process_settings(ServerConfig(prio=-1)); print(os.getpriority(os.PRIO_PROCESS, 0))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    # llama.cpp's low priority is nice 5 (an absolute value); lowering the niceness of an
    # already nicer process needs privileges, so such a process keeps its own
    now = os.getpriority(os.PRIO_PROCESS, 0)
    assert out.stdout.strip() == str(5 if now <= 5 or os.geteuid() == 0 else now), out.stderr


def test_log_lines(tmp_path, capsys):
    f = tmp_path / "l.log"
    log = LogLine(ServerConfig(log_file=str(f), log_prefix=True, log_timestamps=True))
    log("hello")
    log("careful", "W")
    log("detail", "D")  # above the default verbosity (3)
    log.close()
    lines = f.read_text().splitlines()
    assert len(lines) == 2 and lines[0].endswith(" I hello") and lines[1].endswith(" W careful")
    assert lines[0].split()[0].count(".") == 3  # llama.cpp's 0.00.000.000 stamp
    quiet = LogLine(ServerConfig(log_verbosity=1))
    quiet("hidden")
    quiet("shown", "E")
    cap = capsys.readouterr()
    assert "hidden" not in cap.out and "shown" in cap.err


def test_kv_unified_per_slot_sizes_the_context():
    c, _ = _parse(["-np", "3", "--kv-unified-per-slot", "512"], env={})
    assert c.resolved_ctx() == 1536
    c, _ = _parse(["-np", "3", "-c", "1000", "--kv-unified-per-slot", "512"], env={})
    assert c.resolved_ctx() == 1000


def test_cache_list_and_completion_bash(monkeypatch, tmp_path):
    monkeypatch.setenv("LLAMARS_CACHE", str(tmp_path))
    assert cache_list_text().startswith("no models in the cache")
    (tmp_path / "a.gguf").write_bytes(b"x" * 2048)
    assert "a.gguf" in cache_list_text()
    script = completion_bash_text()
    assert "complete -F _llamars_server_completions llamars-server" in script and "--spm-infill" in script
    r = subprocess.run(["bash", "-c", script + "\nCOMP_WORDS=(llamars-server --spm-); COMP_CWORD=1; "
                        "_llamars_server_completions; echo ${COMPREPLY[@]}"], capture_output=True, text=True)
    assert r.stdout.split() == ["--spm-infill"]


# ------------------------------------------------------------------ llama-server 2026 response details


def test_chat_input_tokens(live, engine):
    s = live()
    msgs = [{"role": "user", "content": "hello there"}]
    for path in ("/chat/completions/input_tokens", "/v1/chat/completions/input_tokens"):
        r = httpx.post(s.url + path, json={"messages": msgs}).json()
        prompt = httpx.post(s.url + "/apply-template", json={"messages": msgs}).json()["prompt"]
        n = len(engine.tokenize(prompt, add_special=not prompt.startswith("<bos>"), parse_special=True))
        assert r == {"input_tokens": n, "object": "response.input_tokens"}
    c = httpx.post(s.url + "/v1/chat/completions", json={"messages": msgs, "max_tokens": 1}).json()
    assert c["usage"]["prompt_tokens"] == n


def test_context_overflow_body_carries_the_counts(engine, model_path):
    s = LiveServer(create_app(ServerConfig(model=model_path, n_ctx=2048), engine=engine)).start()
    try:
        big = {"messages": [{"role": "user", "content": "hello " * 2500}], "max_tokens": 4}
        for body in (big, {**big, "stream": True}):
            r = httpx.post(s.url + "/v1/chat/completions", json=body, timeout=60)
            assert r.status_code == 400
            e = r.json()["error"]
            assert e["type"] == "exceed_context_size_error" and e["n_ctx"] == 2048 and e["n_prompt_tokens"] > 2048
            assert e["message"] == (f"request ({e['n_prompt_tokens']} tokens) exceeds the available context size "
                                    "(2048 tokens), try increasing it")
    finally:
        s.stop()


def test_metrics_header_series_and_unused_slots(engine, model_path):
    from llamars import Engine

    e2 = Engine(model_path, n_ctx=512, n_parallel=2)
    s = LiveServer(create_app(ServerConfig(model=model_path, metrics=True), engine=e2)).start()
    try:
        slots = httpx.get(s.url + "/slots").json()
        assert slots == [{"id": 0, "n_ctx": 256, "speculative": False, "is_processing": False},
                         {"id": 1, "n_ctx": 256, "speculative": False, "is_processing": False}]
        httpx.post(s.url + "/completion", json={"prompt": "Hello there", "n_predict": 4, "ignore_eos": True})
        httpx.post(s.url + "/completion", json={"prompt": "Hello there", "n_predict": 4, "ignore_eos": True})
        m = httpx.get(s.url + "/metrics")
        start = int(m.headers["Process-Start-Time-Unix"])
        assert time.time() - 3600 < start <= time.time()
        series = {ln.split()[0].split(":")[1]: float(ln.split()[1]) for ln in m.text.splitlines() if ln.startswith("llamacpp:")}
        for name in ("prompt_tokens_total", "prompt_tokens_cached_total", "prompt_seconds_total", "tokens_predicted_total",
                     "tokens_predicted_seconds_total", "n_decode_total", "n_tokens_max", "spec_decode_num_draft_tokens_total",
                     "spec_decode_num_accepted_tokens_total", "spec_decode_num_drafts_total", "prompt_tokens_seconds",
                     "predicted_tokens_seconds", "requests_processing", "requests_deferred", "n_busy_slots_per_decode"):
            assert name in series, name
        n_prompt = len(e2.tokenize("Hello there"))
        assert series["tokens_predicted_total"] == 8
        # the second request reuses the first one's prompt: processed + cached = both prompts
        assert series["prompt_tokens_total"] + series["prompt_tokens_cached_total"] == 2 * n_prompt
        assert series["prompt_tokens_cached_total"] >= 1
        assert series["n_tokens_max"] == n_prompt + 4
        assert series["requests_processing"] == 0
        used = [x for x in httpx.get(s.url + "/slots").json() if "id_task" in x]
        assert used and all(not x["is_processing"] for x in used) and "params" in used[0]
    finally:
        s.stop()
        e2.close()


def test_prompt_forms_llama_server_accepts(live):
    s = live()
    one = httpx.post(s.url + "/completion", json={"prompt": "hello", "n_predict": 1, "temperature": 0}).json()
    obj = httpx.post(s.url + "/completion", json={"prompt": {"prompt_string": "hello"}, "n_predict": 1, "temperature": 0}).json()
    assert obj["tokens_evaluated"] == one["tokens_evaluated"] and obj["content"] == one["content"]
    mixed = httpx.post(s.url + "/completion", json={"prompt": [2, "hello", 3], "n_predict": 1}).json()
    assert mixed["tokens_evaluated"] == 3
    many = httpx.post(s.url + "/completion", json={"prompt": [{"prompt_string": "a"}, "b"], "n_predict": 1}).json()
    assert isinstance(many, list) and len(many) == 2
    r = httpx.post(s.url + "/completion", json={"prompt": {"prompt_string": "hi <__media__>", "multimodal_data": ["aGk="]}})
    assert r.status_code == 400 and "does not support multimodal" in r.json()["error"]["message"]


def test_chat_messages_as_llama_server_checks_them(live):
    s = live()
    r = httpx.post(s.url + "/v1/chat/completions", json={"messages": [], "max_tokens": 2})
    assert r.status_code == 200 and r.json()["choices"][0]["message"]["role"] == "assistant"
    r = httpx.post(s.url + "/v1/chat/completions", json={"messages": [{"role": "user"}], "max_tokens": 2})
    assert r.status_code == 400 and "All non-assistant messages must contain 'content'" in r.json()["error"]["message"]
    two = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}, {"role": "assistant", "content": "c"}]
    r = httpx.post(s.url + "/v1/chat/completions", json={"messages": two, "max_tokens": 2})
    assert r.status_code == 400 and "Cannot have 2 or more assistant messages at the end" in r.json()["error"]["message"]


def test_verbose_adds_the_raw_result_to_chat_completions(live):
    msgs = [{"role": "user", "content": "hi"}]
    s = live(["--verbose"])
    r = httpx.post(s.url + "/v1/chat/completions", json={"messages": msgs, "max_tokens": 3}).json()
    v = r["__verbose"]
    assert v["content"] == r["choices"][0]["message"]["content"] and v["tokens_predicted"] == 3
    assert v["prompt"].endswith("<start_of_turn>model\n") and "generation_settings" in v and v["stop"] is True
    r = httpx.post(s.url + "/v1/chat/completions", json={"messages": msgs, "max_tokens": 1, "verbose": False}).json()
    assert "__verbose" not in r
    quiet = live()
    assert "__verbose" not in httpx.post(quiet.url + "/v1/chat/completions", json={"messages": msgs, "max_tokens": 1}).json()
    assert "__verbose" in httpx.post(quiet.url + "/v1/chat/completions", json={"messages": msgs, "max_tokens": 1, "verbose": True}).json()


# ------------------------------------------------------------------ resumable streams (/v1/stream)


def _events(raw: bytes) -> list:
    return [json.loads(ln[6:]) for ln in raw.decode().split("\n") if ln.startswith("data: ") and ln != "data: [DONE]"]


def test_a_dropped_stream_resumes_exactly_once(live):
    s = live()
    conv = "conv-1::org/model-name"  # (slashes in the id: it travels in the query)
    body = {"prompt": "Once upon a time", "n_predict": 24, "temperature": 0, "ignore_eos": True, "stream": True}
    whole = httpx.post(s.url + "/completion", json={**body, "stream": False}).json()
    got = b""
    with httpx.Client(timeout=60) as c:
        with c.stream("POST", s.url + "/completion", json=body, headers={"X-Conversation-Id": conv}) as r:
            for part in r.iter_raw():
                got += part
                if got.count(b"\n\n") >= 3:
                    break  # the client drops the connection mid-stream
    assert got.count(b"data: ") >= 3
    rest = httpx.get(s.url + "/v1/stream", params={"conv_id": conv, "from": len(got)}, timeout=60).content
    ev = _events(got + rest)
    assert ev[-1]["stop"] is True and all(e["stop"] is False for e in ev[:-1])
    assert "".join(e["content"] for e in ev[:-1]) == whole["content"]
    assert [e["tokens_predicted"] for e in ev[:-1]] == list(range(1, 25))  # every token once
    # the whole stream again from the start, and the session in a lookup
    assert httpx.get(s.url + "/v1/stream", params={"conv_id": conv}).content == got + rest
    look = httpx.post(s.url + "/v1/streams/lookup", json={"conversation_ids": ["conv-1", "other"]}).json()
    assert len(look) == 1 and look[0]["conversation_id"] == conv and look[0]["is_done"] is True
    assert look[0]["total_bytes"] == len(got + rest)


def test_stream_resume_errors_and_stop(live, engine):
    s = live()
    assert httpx.get(s.url + "/v1/stream", params={"conv_id": "nope"}).status_code == 404
    assert httpx.get(s.url + "/v1/stream").status_code == 400
    assert httpx.delete(s.url + "/v1/stream", params={"conv_id": "nope"}).status_code == 204
    body = {"prompt": "Count:", "n_predict": 100000, "ignore_eos": True, "stream": True}
    with httpx.Client(timeout=60) as c:
        with c.stream("POST", s.url + "/completion", json=body, headers={"X-Conversation-Id": "long"}) as r:
            next(r.iter_raw())
    assert httpx.get(s.url + "/v1/stream", params={"conv_id": "long", "from": "x"}).status_code == 400
    time.sleep(0.5)
    assert any(x["is_processing"] for x in httpx.get(s.url + "/slots").json())  # it runs on without its client
    assert httpx.delete(s.url + "/v1/stream", params={"conv_id": "long"}).status_code == 204
    t0 = time.monotonic()
    while any(x["is_processing"] for x in httpx.get(s.url + "/slots").json()):
        assert time.monotonic() - t0 < 10, "DELETE /v1/stream did not stop the generation"
        time.sleep(0.05)
    assert httpx.get(s.url + "/v1/stream", params={"conv_id": "long"}).status_code == 404


def test_responses_stream_timings(live):
    s = live()
    body = {"input": "Say hi", "max_output_tokens": 4, "stream": True, "store": False, "timings_per_token": True}
    with httpx.stream("POST", s.url + "/v1/responses", json=body, timeout=60) as r:
        ev = [json.loads(ln[6:]) for ln in r.iter_lines() if ln.startswith("data: ")]
    deltas = [e for e in ev if e["type"].endswith(".delta")]
    assert deltas and all("timings" in e and e["timings"]["predicted_n"] >= 1 for e in deltas)
    done = ev[-1]
    assert done["type"] in ("response.completed", "response.incomplete") and done["timings"]["predicted_n"] == 4
    body["timings_per_token"] = False
    with httpx.stream("POST", s.url + "/v1/responses", json=body, timeout=60) as r:
        ev = [json.loads(ln[6:]) for ln in r.iter_lines() if ln.startswith("data: ")]
    assert not any("timings" in e for e in ev if e["type"].endswith(".delta")) and "timings" in ev[-1]


REASONING = json.loads((Path(__file__).parent / "fixtures" / "llama_server" / "reasoning-2026.json").read_text())


@pytest.mark.parametrize("name", sorted(REASONING["prompts"]))
def test_reasoning_prompt_endings_as_llama_server(live, name):
    """The prompt llama-server renders for each template under --reasoning on / off / auto
    (captured by capture_reasoning_2026.py): DeepSeek-R1 distills and QwQ end `<think>\\n`,
    or `<think>\\n</think>` with thinking off; Qwen3 `<think>\\n\\n</think>\\n\\n` off;
    Command R7B `<|START_THINKING|><|END_THINKING|>` off; Llama 3.1 prints today's date."""
    path = Path(__file__).parent / "fixtures" / "reasoning_templates" / name
    for mode, want in REASONING["prompts"][name].items():
        s = live(["--chat-template-file", str(path), "--reasoning", mode])
        got = httpx.post(s.url + "/apply-template", json={"messages": REASONING["messages"]}).json()["prompt"]
        want = want.replace(REASONING["date"], datetime.now().strftime("%d %b %Y"))
        assert got == want, (name, mode, got[-80:], want[-80:])


def test_stream_sessions_are_bounded():
    """Distinct conversation ids cannot grow the memory without bound: past the cap the
    oldest finished sessions go first; a session keeps its last `cap` bytes (trimmed in
    steps), and a reader behind them is told so."""
    from llamars.server.streams import OffsetLost, StreamSessions

    async def run():
        async def events(n):
            for i in range(n):
                yield b"x" * 100

        ss = StreamSessions(max_sessions=3, cap=1000)
        for i in range(5):
            s = ss.start(f"c{i}", events(3))
            await s.task
        assert sorted(ss.sessions) == ["c2", "c3", "c4"]
        big = ss.start("big", events(30))
        await big.task
        assert big.total == 3000 and 1000 <= len(big.buf) <= 1250 and big.dropped == big.total - len(big.buf)
        with pytest.raises(OffsetLost):
            async for _ in big.read_from(0):
                pass
        tail = b"".join([c async for c in big.read_from(big.dropped)])
        assert len(tail) == len(big.buf)
        await ss.close()

    asyncio.run(run())


def test_stream_lookup_is_bounded(live):
    s = live()
    r = httpx.post(s.url + "/v1/streams/lookup", json={"conversation_ids": ["a"] * 5000})
    assert r.status_code == 400 and "conversation_ids" in r.json()["error"]["message"]


def test_embd_normalize_large_p_and_bad_values(engine, model_path):
    from llamars.embeddings import normalize

    rows = np.array([[3.0, -4.0, 1e-3], [200.0, 1.0, 0.0]], dtype=np.float32)
    for p in (3, 50, 500):
        out = normalize(rows, p).astype(np.float64)
        assert np.all(np.isfinite(out))
        assert np.allclose((np.abs(out) ** p).sum(axis=1) ** (1 / p), 1.0, rtol=1e-5)
    s = LiveServer(create_app(ServerConfig(model=model_path, embedding=True, pooling="mean"), engine=engine)).start()
    try:
        r = httpx.post(s.url + "/embedding", content=b'{"content": "hi", "embd_normalize": 1e999}',
                       headers={"content-type": "application/json"})
        assert r.status_code == 400  # (JSON has no infinity: the decoder refuses a number out of range)
    finally:
        s.stop()
