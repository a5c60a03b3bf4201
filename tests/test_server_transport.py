"""llamars-server's transport around the routes, on real servers with the real model:
--api-prefix, CORS, TLS, a unix socket, client disconnects mid-stream, the request body
limit, and the command line + LLAMA_ARG_* environment end to end in a real process."""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional

import httpx
import pytest
from server_util import LiveServer, self_signed_cert as _self_signed

from llamars.config import ServerConfig
from llamars.server.app import create_app

ORIGIN = "http://browser.example:3000"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _assert_error(r: httpx.Response, status: int) -> dict:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/json")
    err = r.json()["error"]
    assert err["code"] == status and isinstance(err["message"], str) and err["message"] and err["type"]
    return err


@pytest.fixture
def live(engine, model_path):
    """live(**ServerConfig fields, server=dict(LiveServer options)) -> a started LiveServer
    sharing the session engine; all are stopped at teardown."""
    started: List[LiveServer] = []

    def make(server: Optional[dict] = None, **cfg) -> LiveServer:
        s = LiveServer(create_app(ServerConfig(model=model_path, **cfg), engine=engine), **(server or {}))
        started.append(s.start(path=cfg.get("api_prefix", "").rstrip("/") + "/health"))
        return s

    yield make
    for s in started:
        s.stop()


# ------------------------------------------------------------------ lifetime


def test_stopping_a_server_leaves_the_callers_engine_running(model_path):
    """create_app(cfg, engine=e): the engine is the caller's; shutting the app down must not
    shut it down (the tests here serve the session engine again and again)."""
    import threading

    from llamars import Engine

    e = Engine(model_path, n_ctx=256, n_threads=1)
    try:
        LiveServer(create_app(ServerConfig(model=model_path), engine=e)).start().stop()
        out: list = []
        t = threading.Thread(target=lambda: out.append(e.generate("Hello", max_tokens=2, temperature=0.0)), daemon=True)
        t.start()
        t.join(30)
        assert out and len(out[0].tokens) == 2, "the engine stopped working when the server using it shut down"
    finally:
        e.close()


# ------------------------------------------------------------------ --api-prefix


def test_api_prefix_routes_and_public_auth_paths(live):
    s = live(api_prefix="/api", api_keys=["sekret"])
    key = {"Authorization": "Bearer sekret"}
    with httpx.Client(base_url=s.url, timeout=60) as c:
        # the public health paths answer under the prefix without a key
        assert c.get("/api/health").json() == {"status": "ok"}
        assert c.get("/api/v1/health").json() == {"status": "ok"}
        # the other routes are there, behind the key
        _assert_error(c.post("/api/tokenize", json={"content": "hi"}), 401)
        assert c.post("/api/tokenize", json={"content": "hi"}, headers=key).status_code == 200
        r = c.post("/api/completion", json={"prompt": "Hello", "n_predict": 2, "temperature": 0}, headers=key)
        assert r.status_code == 200 and r.json()["tokens_predicted"] == 2
        assert c.get("/api/v1/models", headers=key).status_code == 200
        # the bare paths are gone: 404 in the JSON error shape, with or without a key
        for path in ["/health", "/v1/health", "/completion", "/props"]:
            err = _assert_error(c.get(path, headers=key), 404)
            assert err["type"] == "not_found_error" and path in err["message"]
        _assert_error(c.post("/completion", json={"prompt": "x"}), 404)
        _assert_error(c.get("/api/no/such/route", headers=key), 404)


def test_api_prefix_trailing_slash_is_ignored(live):
    s = live(api_prefix="/v2/")
    assert httpx.get(s.url + "/v2/health").json() == {"status": "ok"}
    _assert_error(httpx.get(s.url + "/health"), 404)


# ------------------------------------------------------------------ CORS


def test_cors_default_echoes_origin_with_credentials(live):
    """Defaults (origins *, credentials on): a browser rejects `*` with credentials, so the
    request's Origin must come back, with Vary: Origin."""
    s = live()
    with httpx.Client(base_url=s.url, timeout=60) as c:
        pre = c.options(
            "/completion",
            headers={"Origin": ORIGIN, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type, authorization"},
        )
        assert pre.status_code == 200, pre.text  # as llama-server (not 204)
        h = pre.headers
        assert h["access-control-allow-origin"] == ORIGIN
        assert h["access-control-allow-credentials"] == "true"
        assert "POST" in h["access-control-allow-methods"]
        allowed = {x.strip().lower() for x in h["access-control-allow-headers"].split(",")}
        assert {"content-type", "authorization"} <= allowed
        assert "origin" in h.get("vary", "").lower()

        r = c.get("/health", headers={"Origin": ORIGIN})
        assert r.status_code == 200
        assert r.headers["access-control-allow-origin"] == ORIGIN
        assert r.headers["access-control-allow-credentials"] == "true"
        assert "origin" in r.headers.get("vary", "").lower()

        # an actual cross-origin API call, and an error response, carry the headers too
        r = c.post("/completion", json={"prompt": "Hi", "n_predict": 1}, headers={"Origin": ORIGIN})
        assert r.status_code == 200 and r.headers["access-control-allow-origin"] == ORIGIN
        r = c.get("/nope", headers={"Origin": ORIGIN})
        assert r.status_code == 404 and r.headers["access-control-allow-origin"] == ORIGIN

        # same-origin / non-browser requests get no CORS headers
        assert "access-control-allow-origin" not in c.get("/health").headers


def test_cors_wildcard_without_credentials(live):
    s = live(cors_credentials=False)
    r = httpx.get(s.url + "/health", headers={"Origin": ORIGIN})
    assert r.headers["access-control-allow-origin"] == "*"
    assert "access-control-allow-credentials" not in r.headers
    pre = httpx.options(s.url + "/completion", headers={"Origin": ORIGIN, "Access-Control-Request-Method": "POST"})
    assert pre.status_code == 200 and pre.headers["access-control-allow-origin"] == "*"


def test_cors_origin_list(live):
    s = live(cors_origins=["http://good.example"], cors_methods=["GET", "POST"])
    with httpx.Client(base_url=s.url, timeout=60) as c:
        good = c.get("/health", headers={"Origin": "http://good.example"})
        assert good.headers["access-control-allow-origin"] == "http://good.example"
        bad = c.get("/health", headers={"Origin": "http://evil.example"})
        assert bad.status_code == 200 and "access-control-allow-origin" not in bad.headers
        pre = c.options("/completion", headers={"Origin": "http://good.example", "Access-Control-Request-Method": "POST"})
        assert pre.status_code == 200 and pre.headers["access-control-allow-origin"] == "http://good.example"
        assert pre.headers["access-control-allow-methods"] == "GET, POST"
        # as llama-server: a preflight from another origin is answered 200 without an allowed
        # origin (so the browser refuses the call); the allowed methods are listed for the browser to check
        evil = c.options("/completion", headers={"Origin": "http://evil.example", "Access-Control-Request-Method": "POST"})
        assert evil.status_code == 200 and "access-control-allow-origin" not in evil.headers


def test_cors_localhost_origins(live):
    """--cors-origins localhost: only a localhost Origin (any port) is reflected."""
    s = live(cors_origins=["localhost"])
    with httpx.Client(base_url=s.url, timeout=60) as c:
        for origin in ("http://localhost:3000", "http://127.0.0.1:8080", "http://[::1]:5173", "https://localhost"):
            r = c.get("/health", headers={"Origin": origin})
            assert r.headers["access-control-allow-origin"] == origin, origin
            pre = c.options("/v1/chat/completions", headers={"Origin": origin, "Access-Control-Request-Method": "POST"})
            assert pre.status_code == 200 and pre.headers["access-control-allow-origin"] == origin
        for origin in ("http://example.com", "http://localhost.example.com", "null"):
            r = c.get("/health", headers={"Origin": origin})
            assert "access-control-allow-origin" not in r.headers, origin


def test_preflight_skips_the_api_key(live):
    """Browsers send no Authorization header on a preflight: it is answered before the key check."""
    s = live(api_keys=["k1"])
    pre = httpx.options(s.url + "/v1/chat/completions", headers={"Origin": ORIGIN, "Access-Control-Request-Method": "POST"})
    assert pre.status_code == 200 and pre.headers["access-control-allow-origin"] == ORIGIN
    assert httpx.post(s.url + "/v1/chat/completions", json={}, headers={"Origin": ORIGIN}).status_code == 401


# ------------------------------------------------------------------ TLS


def test_tls(live, tmp_path):
    cert, key = _self_signed(tmp_path)
    s = live(server=dict(ssl_certfile=cert, ssl_keyfile=key))
    assert s.url.startswith("https://")
    with httpx.Client(base_url=s.url, verify=False, timeout=60) as c:
        r = c.get("/health")
        assert r.status_code == 200 and r.json() == {"status": "ok"}
        r = c.post("/completion", json={"prompt": "Hello", "n_predict": 2, "temperature": 0})
        assert r.status_code == 200 and r.json()["tokens_predicted"] == 2
    # the certificate is not trusted by default, and plain HTTP is not served on that port
    with pytest.raises(httpx.ConnectError):
        httpx.get(s.url + "/health")
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"http://127.0.0.1:{s.port}/health", timeout=5)


# ------------------------------------------------------------------ client disconnect


def _busy(c: httpx.Client) -> list:
    return [x for x in c.get("/slots").json() if x["is_processing"]]


def _predicted_total(c: httpx.Client) -> int:
    line = next(x for x in c.get("/metrics").text.splitlines() if x.startswith("llamacpp:tokens_predicted_total "))
    return int(float(line.split()[1]))


def test_client_disconnect_mid_stream_frees_the_slot(live, engine):
    s = live(metrics=True)
    with httpx.Client(base_url=s.url, timeout=60) as mon:
        assert _busy(mon) == []
        predicted_before = _predicted_total(mon)
        try:
            with httpx.Client(base_url=s.url, timeout=60) as c:
                body = {"prompt": "Once upon a time", "n_predict": 2000, "ignore_eos": True, "temperature": 0, "stream": True}
                with c.stream("POST", "/completion", json=body) as r:
                    assert r.status_code == 200
                    events = 0
                    # the iterator is held: a dropped one is finalized at the `break`, and
                    # httpx closes the connection then (the server would see the client leave
                    # before the /slots check below)
                    lines = r.iter_lines()
                    for line in lines:
                        if line.startswith("data: "):
                            ev = json.loads(line[6:])
                            assert ev["stop"] is False
                            events += 1
                            if events == 3:
                                break
                    busy = _busy(mon)
                    assert len(busy) == 1  # generating while we hold the stream open
                    assert busy[0]["next_token"][0]["has_next_token"] is True
                # leaving the blocks closes the connection with the response half read
            t0 = time.monotonic()
            while _busy(mon):
                # generous: on a loaded 2-core machine the loop may need a few seconds to see it
                assert time.monotonic() - t0 < 15, f"slot still busy {time.monotonic() - t0:.1f}s after the client went away: {_busy(mon)}"
                time.sleep(0.05)
            freed = next(x for x in mon.get("/slots").json() if x["id"] == busy[0]["id"])
            # as llama-server reports a cancelled task: idle, its counters reset, but
            # has_next_token still true (it never reached a stop)
            assert freed["is_processing"] is False and freed["id_task"] == busy[0]["id_task"]
            assert freed["next_token"][0] == {"has_new_line": False, "has_next_token": True, "n_remain": -1, "n_decoded": 0}
            assert freed["n_prompt_tokens_processed"] == 0 and freed["n_prompt_tokens_cache"] == 0
            assert 3 <= freed["n_prompt_tokens"] < 2000 + 16  # the tokens the slot holds: prompt and what was generated
            # the cancelled task's tokens count as predicted, as llama-server flushes them
            cancelled_n = _predicted_total(mon) - predicted_before
            assert 3 <= cancelled_n < 2000
        finally:
            for x in _busy(mon):  # do not leave the shared engine generating for the next tests
                engine.cancel(x["id_task"])
        # the server and the slot still work
        r = mon.post("/completion", json={"prompt": "Hello", "n_predict": 2, "temperature": 0})
        assert r.status_code == 200 and r.json()["tokens_predicted"] == 2
        done = next(x for x in mon.get("/slots").json() if x["id"] == r.json()["id_slot"])
        assert done["next_token"][0]["has_next_token"] is False  # this one reached its stop


# ------------------------------------------------------------------ request body limit


def test_oversized_body_gets_413(live):
    s = live()
    limit = s.server.config.app.request_max_body_size
    with httpx.Client(base_url=s.url, timeout=60) as c:
        r = c.post("/completion", content=b"x" * (limit + 1), headers={"Content-Type": "application/json"})
        err = _assert_error(r, 413)
        assert err["type"] == "invalid_request_error"
    # without a Content-Length (chunked), the limit holds on the bytes actually received
    mib = b"x" * (1024 * 1024)
    with httpx.Client(base_url=s.url, timeout=60) as c:
        r = c.post("/completion", content=iter([mib] * (limit // len(mib) + 1)), headers={"Content-Type": "application/json"})
        assert "content-length" not in r.request.headers
        _assert_error(r, 413)
    # a fresh connection finds the server healthy, and a body just under the limit is read
    with httpx.Client(base_url=s.url, timeout=60) as c:
        assert c.get("/health").json() == {"status": "ok"}
        pad = " " * (1024 * 1024)
        r = c.post("/tokenize", content=b'{"content": "hi"' + pad.encode() + b"}", headers={"Content-Type": "application/json"})
        assert r.status_code == 200 and r.json()["tokens"]


# ------------------------------------------------------------------ real processes


def _clean_env(extra: Dict[str, str]) -> Dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLAMA_ARG_") and k != "LLAMA_API_KEY"}
    env.update(extra)
    return env


class _Proc:
    """`python -m llamars.cli ARGS` in a subprocess, its output in a log file."""

    def __init__(self, args: List[str], env: Dict[str, str], log: Path) -> None:
        self.log = log
        self._f = open(log, "wb")
        self.p = subprocess.Popen([sys.executable, "-m", "llamars.cli", *args], env=env, stdout=self._f, stderr=subprocess.STDOUT)

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_healthy(self, client: httpx.Client, timeout: float = 60) -> None:
        t0 = time.monotonic()
        while True:
            if self.p.poll() is not None:
                pytest.fail(f"llamars-server exited with {self.p.returncode}:\n{self.output()}")
            try:
                if client.get("/health").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if time.monotonic() - t0 > timeout:
                pytest.fail(f"llamars-server not healthy after {timeout}s:\n{self.output()}")
            time.sleep(0.1)

    def stop(self) -> None:
        """SIGTERM, and expect a prompt graceful exit with status 0 (as llama-server)."""
        if self.p.poll() is None:
            self.p.terminate()
            try:
                self.p.wait(15)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait(10)
                self._f.close()
                pytest.fail(f"llamars-server ignored SIGTERM for 15 s:\n{self.output()}")
        self._f.close()
        assert self.p.returncode == 0, f"exit status {self.p.returncode}:\n{self.output()}"


def test_cli_and_env_end_to_end(model_path, tmp_path):
    port, env_port = _free_port(), _free_port()
    env = _clean_env({
        "LLAMA_ARG_PORT": str(env_port),  # the --port flag wins
        "LLAMA_ARG_N_PARALLEL": "5",  # -np wins
        "LLAMA_ARG_THREADS": "1",
        "LLAMA_ARG_N_PREDICT": "33",  # these have no flag on the command line: they apply
        "LLAMA_ARG_TOP_K": "7",
        "LLAMA_ARG_CACHE_RAM": "0",
    })
    p = _Proc(["-m", model_path, "--port", str(port), "-c", "512", "-np", "2", "--metrics", "--alias", "x"], env, tmp_path / "server.log")
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as c:
            p.wait_healthy(c)
            props = c.get("/props").json()
            assert props["total_slots"] == 2
            assert props["default_generation_settings"]["n_ctx"] == 256  # -c 512 over 2 slots
            params = props["default_generation_settings"]["params"]
            assert params["n_predict"] == 33 and params["top_k"] == 7
            m = c.get("/v1/models").json()
            assert m["data"][0]["id"] == "x"
            r = c.post("/completion", json={"prompt": "Hello", "n_predict": 3, "temperature": 0})
            assert r.status_code == 200 and r.json()["model"] == "x" and r.json()["tokens_predicted"] == 3
            met = c.get("/metrics")
            assert met.status_code == 200 and met.headers["content-type"].startswith("text/plain")
            assert "llamacpp:tokens_predicted_total 3" in met.text
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"http://127.0.0.1:{env_port}/health", timeout=5)
        assert f"http://127.0.0.1:{port}" in p.output()
    finally:
        p.stop()


def test_unix_socket(model_path, tmp_path):
    # AF_UNIX paths are limited to ~107 bytes: keep the socket in a short directory
    d = tempfile.mkdtemp(prefix="llrs-")
    sock = os.path.join(d, "s.sock")
    p = _Proc(["-m", model_path, "--host", sock, "-c", "256", "-np", "1", "-t", "1"], _clean_env({}), tmp_path / "server.log")
    try:
        with httpx.Client(transport=httpx.HTTPTransport(uds=sock), base_url="http://llamars", timeout=60) as c:
            p.wait_healthy(c)
            assert c.get("/health").json() == {"status": "ok"}
            r = c.post("/completion", json={"prompt": "Hello", "n_predict": 2, "temperature": 0})
            assert r.status_code == 200 and r.json()["tokens_predicted"] == 2
        assert f"unix:{sock}" in p.output()
    finally:
        try:
            p.stop()
        finally:
            shutil.rmtree(d, ignore_errors=True)


# ------------------------------------------------------------------ --timeout


def test_stalled_request_body_gets_408_after_timeout(live):
    """--timeout N: a client that stops sending its body is answered 408 after N seconds."""
    s = live(timeout=1)
    with socket.create_connection(("127.0.0.1", s.port), timeout=10) as sock:
        body = b'{"prompt": "Hello", "n_predict": 1}'
        head = f"POST /completion HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {len(body) + 50}\r\n\r\n"
        t0 = time.monotonic()
        sock.sendall(head.encode() + body)  # 50 bytes short: the server waits for the rest
        reply = b""
        while b"\r\n\r\n" not in reply or not reply.rstrip().endswith(b"}"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            reply += chunk
        waited = time.monotonic() - t0
    status = reply.split(b"\r\n", 1)[0]
    assert b" 408 " in status, reply[:300]
    assert 0.9 <= waited < 8, waited
    err = json.loads(reply.split(b"\r\n\r\n", 1)[1])["error"]
    assert err["code"] == 408 and "--timeout" in err["message"]
    assert httpx.get(s.url + "/health", timeout=10).status_code == 200


def test_timeout_does_not_cut_long_generations(live):
    """The timeout bounds waiting on the client, not the time a response takes."""
    s = live(timeout=1)
    body = {"prompt": "Once", "n_predict": 120, "ignore_eos": True, "temperature": 0}
    r = httpx.post(s.url + "/completion", json=body, timeout=60)
    assert r.status_code == 200 and r.json()["tokens_predicted"] == 120
    with httpx.stream("POST", s.url + "/completion", json={**body, "stream": True}, timeout=60) as r:
        last = [json.loads(ln[6:]) for ln in r.iter_lines() if ln.startswith("data: ")][-1]
    assert last["stop"] is True and last["tokens_predicted"] == 120
