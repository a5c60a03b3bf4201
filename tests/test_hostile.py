"""What a hostile client can send, against a real server (uvicorn on loopback, the real
model): grammar and schema bombs, huge inputs, out-of-range numbers, clients that leave,
planted slot files. Each case is answered with the right 4xx (never a 500 or a crash),
`/health` answers throughout, and a normal request is served right after."""
from __future__ import annotations

import json
import os
import socket
import threading
import time

import httpx
import pytest

import llamars
from server_util import LiveServer, wait_healthy

BIG = 2**70


@pytest.fixture(scope="module")
def server(model_path, tmp_path_factory):
    from llamars.config import ServerConfig
    from llamars.server.app import create_app

    slots = tmp_path_factory.mktemp("slots")
    outside = tmp_path_factory.mktemp("outside")
    from llamars.server.timeouts import header_timeout_protocol

    cfg = ServerConfig(model=model_path, n_ctx=2048, n_parallel=2, slot_save_path=str(slots), embedding=True, max_prompts=64,
                       max_messages=40_000, max_tools=8, header_timeout=2)
    srv = LiveServer(create_app(cfg), http=header_timeout_protocol(cfg.header_timeout)).start()
    srv.slots, srv.outside = slots, outside
    yield srv
    srv.stop()


@pytest.fixture
def client(server):
    with httpx.Client(base_url=server.url, timeout=120) as c:
        yield c
    # after every case: alive, healthy, serving
    with httpx.Client(base_url=server.url, timeout=120) as c:
        assert c.get("/health").status_code == 200
        r = c.post("/completion", json={"prompt": "Hello", "n_predict": 2, "temperature": 0})
        assert r.status_code == 200 and r.json()["tokens_predicted"] == 2


def _chain_gbnf(n: int) -> str:
    return "root ::= r0\n" + "".join(f'r{i} ::= "x" r{i + 1} | "y"\n' for i in range(n)) + f'r{n} ::= "z"\n'


def _chain_lark(n: int) -> str:
    return "%llguidance {}\nstart: r0\n" + "".join(f'r{i}: "x" r{i + 1} | "y"\n' for i in range(n)) + f'r{n}: "z"\n'


def _ref_chain(n: int) -> dict:
    defs = {f"d{i}": {"$ref": f"#/$defs/d{i + 1}"} for i in range(n)}
    defs[f"d{n}"] = {"type": "string", "maxLength": 3}
    return {"$ref": "#/$defs/d0", "$defs": defs}


def _nested_schema(n: int) -> dict:
    v: dict = {"type": "integer"}
    for _ in range(n):
        v = {"type": "array", "items": v, "maxItems": 1}
    return v


# (name, route, body, expected status, text the error must contain)
BOMBS = [
    ("gbnf chain at the limit", "/completion", {"grammar": _chain_gbnf(4998)}, 200, None),
    ("gbnf chain past the limit", "/completion", {"grammar": _chain_gbnf(6000)}, 400, "rules exceeds the limit of 5000"),
    ("lark chain at the limit", "/completion", {"grammar": _chain_lark(4998)}, 200, None),
    ("lark chain past the limit", "/completion", {"grammar": _chain_lark(8000)}, 400, "rules exceeds the limit"),
    ("gbnf nested groups", "/completion", {"grammar": "root ::= " + "(" * 10 + '"x"' + ")" * 10}, 200, None),
    ("gbnf nested groups past the grammar engine's limit", "/completion", {"grammar": "root ::= " + "(" * 100 + '"x"' + ")" * 100}, 400, "too deeply nested"),
    ("gbnf nested groups past the limit", "/completion", {"grammar": "root ::= " + "(" * 5000 + '"x"' + ")" * 5000}, 400, "nested groups"),
    ("schema $ref chain at the limit", "/completion", {"json_schema": _ref_chain(999)}, 200, None),
    ("schema $ref chain past the limit", "/completion", {"json_schema": _ref_chain(3000)}, 400, "$refs exceeds the limit of 1000"),
    ("schema nesting past the limit", "/completion", {"json_schema": _nested_schema(120)}, 400, "nests deeper than"),
    ("schema bomb in response_format", "/v1/chat/completions",
     {"messages": [{"role": "user", "content": "hi"}], "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": _ref_chain(5000)}}},
     400, "$refs"),
    # bounded repetitions are compiled lazily: a long one is no bomb
    ("long repetitions", "/completion", {"grammar": 'root ::= [a-z]{1,100000}[0-9]{1,100000}'}, 200, None),
]


@pytest.mark.parametrize("name,route,body,status,text", BOMBS, ids=[b[0] for b in BOMBS])
def test_grammar_and_schema_bombs_are_answered_and_the_server_lives(client, name, route, body, status, text):
    body = {"prompt": "Hello", "n_predict": 2, "max_tokens": 2, "temperature": 0, **body}
    if route != "/completion":
        body.pop("prompt")
    r = client.post(route, json=body)
    assert r.status_code == status, r.text[:500]
    if text:
        assert text in r.json()["error"]["message"]


# numbers out of every range: (route, body, the field the 400 names)
CHAT = {"messages": [{"role": "user", "content": "hi"}]}
OUT_OF_RANGE = [
    ("/completion", {"prompt": "a", "n_predict": BIG}, "n_predict"),
    ("/completion", {"prompt": "a", "n_predict": 2, "seed": BIG}, "seed"),
    ("/completion", {"prompt": "a", "n_predict": 2, "top_k": BIG}, "top_k"),
    ("/completion", {"prompt": "a", "n_predict": 2, "top_k": -BIG}, "top_k"),
    ("/completion", {"prompt": "a", "n_predict": 2, "id_slot": BIG}, "id_slot"),
    ("/completion", {"prompt": "a", "n_predict": 2, "n_keep": BIG}, "n_keep"),
    ("/completion", {"prompt": "a", "n_predict": 2, "n_probs": BIG}, "n_probs"),
    ("/completion", {"prompt": "a", "n_predict": 2, "temperature": 1e400}, "JSON is malformed"),  # not a finite number
    ("/completion", {"prompt": "a", "n_predict": 2, "logit_bias": {"1": "x"}}, "logit_bias"),
    ("/completion", {"prompt": "a", "n_predict": 2, "logit_bias": [[BIG, 1.0]]}, "logit_bias"),
    ("/completion", {"prompt": [BIG], "n_predict": 2}, "prompt"),
    ("/v1/completions", {"prompt": "a", "max_tokens": BIG}, "max_tokens"),
    ("/v1/chat/completions", {**CHAT, "max_tokens": BIG}, "max_tokens"),
    ("/v1/chat/completions", {**CHAT, "max_completion_tokens": -BIG}, "max_completion_tokens"),
    ("/v1/chat/completions", {**CHAT, "seed": -BIG}, "seed"),
    ("/v1/chat/completions", {**CHAT, "n": BIG}, "n"),
    ("/v1/chat/completions", {**CHAT, "top_logprobs": BIG, "logprobs": True}, "top_logprobs"),
    ("/v1/messages", {**CHAT, "max_tokens": BIG, "model": "m"}, "max_tokens"),
    ("/v1/responses", {"input": "hi", "max_output_tokens": BIG}, "max_output_tokens"),
    ("/tokenize", {"content": "a", "add_special": BIG}, "add_special"),
    ("/detokenize", {"tokens": [BIG]}, "tokens"),
    ("/embedding", {"content": [BIG]}, "content"),
]


@pytest.mark.parametrize("route,body,field", OUT_OF_RANGE, ids=[f"{r}:{f}" for r, _, f in OUT_OF_RANGE])
def test_out_of_range_numbers_are_400s_naming_the_field(client, route, body, field):
    r = client.post(route, content=json.dumps(body))
    assert r.status_code == 400, r.text[:500]
    msg = json.dumps(r.json())
    assert field in msg, msg


def test_logit_bias_keys_are_parsed_strictly(client):
    # a key str.isdigit() accepts but that is no ASCII number is text to tokenize, as llama-server does
    r = client.post("/completion", json={"prompt": "a", "n_predict": 2, "logit_bias": {"\u00b2": -100.0}})
    assert r.status_code == 200


def test_list_starting_after_out_of_range_is_a_400(client):
    r = client.get("/v1/responses/resp_x/input_items", params={"after": str(BIG)})
    assert r.status_code in (400, 404), r.text
    r = client.get("/v1/responses/resp_x/input_items", params={"limit": str(BIG)})
    assert r.status_code in (400, 404), r.text


def test_chat_template_kwargs_cannot_override_the_renderers_arguments(client):
    for k in ("messages", "add_generation_prompt", "tools", "bos_token", "raise_exception"):
        r = client.post("/v1/chat/completions", json={**CHAT, "max_tokens": 2, "chat_template_kwargs": {k: 1}})
        assert r.status_code == 400, (k, r.text)
        assert "chat_template_kwargs" in r.json()["error"]["message"] and k in r.json()["error"]["message"]


def test_deeply_nested_bodies_are_400s(client):
    deep = "[" * 100_000 + "]" * 100_000
    r = client.post("/completion", content='{"prompt": "a", "n_predict": 1, "stop": ' + deep + "}")
    assert r.status_code == 400, r.text[:300]
    r = client.post("/v1/chat/completions", content='{"messages": [{"role": "user", "content": ' + deep + "}]}")
    assert r.status_code == 400, r.text[:300]


def test_too_many_prompts_are_refused_before_any_work(client):
    r = client.post("/completion", json={"prompt": ["x"] * 100_000, "n_predict": 1})
    assert r.status_code == 400 and "--max-prompts" in r.json()["error"]["message"]
    r = client.post("/completion", json={"prompt": ["x"] * 8, "n_cmpl": 16, "n_predict": 1})
    assert r.status_code == 400 and "limit of 64" in r.json()["error"]["message"]
    r = client.post("/v1/embeddings", json={"input": ["x"] * 1000})
    assert r.status_code == 400 and "--max-prompts" in r.json()["error"]["message"]


def test_too_many_messages_tools_or_biases_are_refused_before_any_work(client):
    msgs = [{"role": "user", "content": "hi"}] * 40_001
    for route, body in [("/v1/chat/completions", {"messages": msgs, "max_tokens": 1}), ("/apply-template", {"messages": msgs}),
                        ("/v1/messages", {"model": "m", "messages": msgs, "max_tokens": 1})]:
        t0 = time.monotonic()
        r = client.post(route, json=body)
        assert r.status_code == 400 and "40001 messages exceed the limit of 40000" in r.text and "--max-messages" in r.text, (route, r.text)
        assert time.monotonic() - t0 < 10
    tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
    r = client.post("/v1/chat/completions", json={"messages": msgs[:1], "tools": [tool] * 9, "max_tokens": 1})
    assert r.status_code == 400 and "--max-tools" in r.json()["error"]["message"]
    r = client.post("/completion", json={"prompt": "a", "n_predict": 1, "logit_bias": [[1, 0.5]] * 262_145})
    assert r.status_code == 400 and "logit_bias" in r.text and "limit of 262144" in r.text, r.text[:300]


def _health_while(server, work) -> float:
    """The slowest /health answer while `work()` runs in a thread."""
    t = threading.Thread(target=work)
    t.start()
    worst = 0.0
    with httpx.Client(base_url=server.url, timeout=60) as c:
        time.sleep(0.05)
        while t.is_alive():
            t0 = time.monotonic()
            assert c.get("/health").status_code == 200
            worst = max(worst, time.monotonic() - t0)
            time.sleep(0.02)
    t.join()
    return worst


def test_big_bodies_are_worked_off_the_event_loop(server, client):
    # a 3 MB prompt tokenized, a 30 000-message chat rendered: /health answers meanwhile
    # (a liveness bound, not a speed figure: benchmarks/bench_hostile.py measures it)
    out = {}

    def tokenize():
        out["tok"] = httpx.post(server.url + "/tokenize", json={"content": "lorem ipsum dolor " * 170_000}, timeout=300)

    worst = _health_while(server, tokenize)
    assert out["tok"].status_code == 200 and len(out["tok"].json()["tokens"]) > 100_000
    assert worst < 2.0, f"/health took {worst:.2f} s while a 3 MB prompt was tokenized"

    def render():
        msgs = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i}"} for i in range(30_000)]
        out["tpl"] = httpx.post(server.url + "/apply-template", json={"messages": msgs}, timeout=300)

    worst = _health_while(server, render)
    assert out["tpl"].status_code == 200 and "message 29999" in out["tpl"].json()["prompt"]
    assert worst < 2.0, f"/health took {worst:.2f} s while 30 000 messages were rendered"


def _processing(server) -> int:
    return sum(s["is_processing"] for s in httpx.get(server.url + "/slots", timeout=10).json())


def _leave_after_sending(server, path: str, body: dict) -> None:
    """Send a request on a raw socket, wait until the server works on it, then leave."""
    payload = json.dumps(body).encode()
    s = socket.create_connection(("127.0.0.1", server.port))
    s.sendall(b"POST " + path.encode() + b" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: "
              + str(len(payload)).encode() + b"\r\n\r\n" + payload)
    t0 = time.monotonic()
    while _processing(server) == 0:
        assert time.monotonic() - t0 < 30, "the request never started"
        time.sleep(0.02)
    s.close()


@pytest.mark.parametrize("path,body", [
    ("/completion", {"prompt": "Tell me a story", "n_predict": -1, "ignore_eos": True}),
    ("/completion", {"prompt": "Tell me a story", "n_predict": -1, "ignore_eos": True, "n_cmpl": 2}),
    ("/v1/chat/completions", {**CHAT, "max_tokens": 100_000, "ignore_eos": True}),
    ("/completion", {"prompt": "Tell me a story", "n_predict": -1, "ignore_eos": True, "stream": True}),
], ids=["non-stream", "n_cmpl", "chat", "stream"])
def test_a_client_that_leaves_frees_its_slots(server, client, path, body):
    _leave_after_sending(server, path, body)
    t0 = time.monotonic()
    while _processing(server):
        assert time.monotonic() - t0 < 5, "the generation went on after its client left"
        time.sleep(0.02)


def test_slot_files_cannot_be_turned_against_the_server(server, client):
    slots, outside = server.slots, server.outside
    r = client.post("/completion", json={"prompt": "The capital of France is", "n_predict": 2, "id_slot": 0, "temperature": 0})
    assert r.status_code == 200
    # a link planted under the file's name is replaced, never written through
    target = outside / "victim"
    target.write_bytes(b"precious")
    os.symlink(target, slots / "planted.bin")
    r = client.post("/slots/0?action=save", json={"filename": "planted.bin"})
    assert r.status_code == 200, r.text
    assert target.read_bytes() == b"precious" and not (slots / "planted.bin").is_symlink()
    # a link is not followed on restore
    os.symlink(target, slots / "link.bin")
    r = client.post("/slots/0?action=restore", json={"filename": "link.bin"})
    assert r.status_code == 400 and "symbolic link" in r.json()["error"]["message"]
    # a directory is a 400 that does not show the server's paths
    (slots / "adir").mkdir()
    for action in ("save", "restore"):
        r = client.post(f"/slots/0?action={action}", json={"filename": "adir"})
        assert r.status_code == 400 and "directory" in r.json()["error"]["message"], r.text
        assert str(slots) not in r.text
    # a fifo would block a reader forever: refused
    os.mkfifo(slots / "fifo")
    r = client.post("/slots/0?action=restore", json={"filename": "fifo"})
    assert r.status_code == 400 and "regular file" in r.json()["error"]["message"]
    # token ids outside the vocabulary are refused on restore
    data = bytearray((slots / "planted.bin").read_bytes())
    header = 8 + 4 + 8 + 16
    data[header:header + 4] = (10**9).to_bytes(4, "little")
    (slots / "forged.bin").write_bytes(bytes(data))
    r = client.post("/slots/1?action=restore", json={"filename": "forged.bin"})
    assert r.status_code == 400 and "invalid tokens" in r.json()["error"]["message"]
    # the real file restores
    r = client.post("/slots/1?action=restore", json={"filename": "planted.bin"})
    assert r.status_code == 200 and r.json()["n_restored"] > 0
    assert not [p for p in os.listdir(slots) if p.endswith(".partial")]


def test_dry_sequence_breakers_are_bounded_and_deduplicated(client):
    r = client.post("/completion", json={"prompt": "a", "n_predict": 2, "dry_multiplier": 0.8, "dry_sequence_breakers": ["x"] * 100_000})
    assert r.status_code == 200, r.text[:300]  # duplicates collapse to one breaker
    r = client.post("/completion", json={"prompt": "a", "n_predict": 2, "dry_multiplier": 0.8, "dry_sequence_breakers": [f"w{i}" for i in range(5000)]})
    assert r.status_code == 400 and "dry_sequence_breakers" in r.json()["error"]["message"]


# ------------------------------------------------------------------ real processes


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env() -> dict:
    return {k: v for k, v in os.environ.items() if not k.startswith("LLAMA_ARG_") and k != "LLAMA_API_KEY"}


def test_a_model_that_cannot_be_loaded_ends_the_process(tmp_path):
    import subprocess
    import sys

    bad = tmp_path / "corrupt.gguf"
    bad.write_bytes(b"\xff{\x00\x01" + os.urandom(64))
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "llamars.cli", "-m", str(bad), "--port", str(_free_port())], env=_env(),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode != 0, r.stdout + r.stderr
    lines = [ln for ln in r.stderr.splitlines() if "failed to load the model" in ln]
    assert len(lines) == 1, r.stderr
    assert r'bad magic "\xff{\x00\x01"' in lines[0] and "\ufffd" not in r.stderr
    assert time.monotonic() - t0 < 60


def test_sigterm_cancels_the_work_and_exits_promptly(model_path, tmp_path):
    import signal
    import subprocess
    import sys

    port = _free_port()
    log = open(tmp_path / "server.log", "wb")
    p = subprocess.Popen([sys.executable, "-m", "llamars.cli", "-m", model_path, "--port", str(port), "-c", "1024", "-np", "2"],
                         env=_env(), stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(p, url, tmp_path / "server.log")
        body = {"prompt": "Tell me a story", "n_predict": -1, "ignore_eos": True}
        # one streamed and one plain generation that would run for minutes, and queued ones
        clients = [threading.Thread(target=lambda b=b: _swallow(url, b), daemon=True)
                   for b in [{**body, "stream": True}, body, body, body]]
        for c in clients:
            c.start()
        while sum(s["is_processing"] for s in httpx.get(url + "/slots", timeout=10).json()) < 2:
            time.sleep(0.05)
        t1 = time.monotonic()
        p.send_signal(signal.SIGTERM)
        rc = p.wait(30)
        took = time.monotonic() - t1
        assert rc == 0, (tmp_path / "server.log").read_text()
        assert took < 5, f"SIGTERM took {took:.2f} s"
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(10)
        log.close()


def test_a_second_sigterm_exits_at_once(model_path, tmp_path):
    import signal
    import subprocess
    import sys

    port = _free_port()
    p = subprocess.Popen([sys.executable, "-m", "llamars.cli", "-m", model_path, "--port", str(port), "-c", "512"],
                         env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_healthy(p, f"http://127.0.0.1:{port}", os.devnull)
        # a client holds a connection open: the graceful shutdown would wait for it
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(b"POST /completion HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
        p.send_signal(signal.SIGTERM)
        time.sleep(0.2)
        p.send_signal(signal.SIGTERM)
        rc = p.wait(5)
        assert rc != 0 and b"second signal" in p.stderr.read()
        s.close()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(10)


def _swallow(url: str, body: dict) -> None:
    try:
        with httpx.stream("POST", url + "/completion", json=body, timeout=60) as r:
            for _ in r.iter_bytes():
                pass
    except httpx.HTTPError:
        pass


def _closed_after(sock: socket.socket, limit: float) -> float:
    """Seconds until the server closes `sock` (reads until EOF), failing past `limit`."""
    t0 = time.monotonic()
    sock.settimeout(limit)
    try:
        while sock.recv(65536):
            pass
    except socket.timeout:
        pytest.fail(f"the server kept the connection open for {limit} s")
    except ConnectionResetError:
        pass
    return time.monotonic() - t0


def test_connections_that_send_no_request_head_are_closed(server, client):
    host, port = "127.0.0.1", server.port
    # a new connection that sends nothing (--header-timeout 2 here)
    with socket.create_connection((host, port)) as s:
        assert 1.5 < _closed_after(s, 10) < 5
    # a client trickling its head, a byte every 0.2 s: the deadline does not move
    with socket.create_connection((host, port)) as s:
        t0 = time.monotonic()
        head = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 100
        try:
            for b in head:
                s.sendall(bytes([b]))
                time.sleep(0.2)
                assert time.monotonic() - t0 < 5, "a trickled head held the connection open"
        except (BrokenPipeError, ConnectionResetError):
            pass
        assert time.monotonic() - t0 < 5
    # a kept-alive connection gone quiet after its response
    with socket.create_connection((host, port)) as s:
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        s.settimeout(10)
        assert s.recv(65536).startswith(b"HTTP/1.1 200")
        assert _closed_after(s, 10) < 5
    # a head sent in time and a slow body: the body is --timeout's business, not this one's
    with socket.create_connection((host, port)) as s:
        body = b'{"content": "hello"}'
        s.sendall(b"POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: "
                  + str(len(body)).encode() + b"\r\n\r\n")
        time.sleep(3)
        s.sendall(body)
        s.settimeout(30)
        assert s.recv(65536).startswith(b"HTTP/1.1 200")


def test_header_timeout_flag():
    from llamars.cli import parse_args

    assert parse_args(["-m", "x.gguf"]).header_timeout == 30
    assert parse_args(["-m", "x.gguf", "--header-timeout", "7"]).header_timeout == 7
    assert parse_args(["-m", "x.gguf"], env={"LLAMA_ARG_HEADER_TIMEOUT": "0"}).header_timeout == 0


def _raw(text: str):
    import msgspec

    return msgspec.Raw(text.encode())


def _deep_cases(d: int) -> list:
    """Client data nested `d` deep where the server walks it: tool schemas (three
    dialects), response formats, tool-call arguments, template kwargs, content parts."""
    schema = _raw('{"type":"object","properties":{"a":' * d + '{"type":"string"}' + "}}" * d)
    value = _raw('{"a":' * d + '"x"' + "}" * d)
    chat = [{"role": "user", "content": "hi"}]
    call = [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "1", "type": "function", "function": {"name": "f", "arguments": '{"a":' * d + "1" + "}" * d}}]},
        {"role": "tool", "tool_call_id": "1", "content": "ok"}]
    return [
        ("/v1/chat/completions", {"messages": chat, "max_tokens": 2, "tools": [{"type": "function", "function": {"name": "f", "parameters": schema}}]}),
        ("/v1/messages", {"model": "m", "messages": chat, "max_tokens": 2, "tools": [{"name": "f", "input_schema": schema}]}),
        ("/v1/responses", {"input": "hi", "max_output_tokens": 2, "tools": [{"type": "function", "name": "f", "parameters": schema}]}),
        ("/v1/chat/completions", {"messages": chat, "max_tokens": 2, "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}}),
        ("/v1/chat/completions", {"messages": chat + call, "max_tokens": 2}),
        ("/v1/chat/completions", {"messages": chat, "max_tokens": 2, "chat_template_kwargs": {"x": value}}),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": _raw("[" * d + '"x"' + "]" * d)}], "max_tokens": 2}),
        ("/v1/responses", {"input": "hi", "max_output_tokens": 2, "metadata": {"a": value}}),
        ("/apply-template", {"messages": chat + call}),
    ]


@pytest.mark.parametrize("depth", [50, 200, 900, 5000])
def test_deep_client_data_in_every_walker_is_answered(client, depth):
    import msgspec

    for route, body in _deep_cases(depth):
        t0 = time.monotonic()
        r = client.post(route, content=msgspec.json.encode(body), headers={"content-type": "application/json"})
        assert r.status_code in (200, 400), (route, depth, r.status_code, r.text[:300])
        assert time.monotonic() - t0 < 20, (route, depth)


def test_a_client_that_leaves_stops_its_embedding_inputs(server):
    # 64 inputs of ~400 tokens take many seconds; after the disconnect the server's CPU
    # (this process: the server runs in it) goes idle once the input being computed ends
    payload = json.dumps({"content": ["lorem ipsum dolor sit amet " * 60] * 64}).encode()
    s = socket.create_connection(("127.0.0.1", server.port))
    s.sendall(b"POST /embedding HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: "
              + str(len(payload)).encode() + b"\r\n\r\n" + payload)
    time.sleep(1.0)
    c_busy = time.process_time()
    time.sleep(0.5)
    assert time.process_time() - c_busy > 0.3, "the embedding request was not computing"
    t0 = time.monotonic()
    s.close()
    while True:
        c0 = time.process_time()
        time.sleep(0.2)
        if time.process_time() - c0 < 0.05:
            break
        assert time.monotonic() - t0 < 5, "the embedding inputs went on after the client left"
