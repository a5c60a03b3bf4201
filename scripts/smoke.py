"""Smoke test of an installed llamars (a wheel in a clean environment): import, greedy
generation with Engine, and llamars-server answering /health and a chat completion.
Prints one JSON line (the generated tokens, the package's location) and exits non-zero
on any failure. Needs only llamars and the standard library.

    python scripts/smoke.py [MODEL.gguf]   (default: the default chat model)
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

PROMPT = "The capital of France is"


def _get(url: str, body=None, timeout: float = 60):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"} if data else {})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.status, json.loads(r.read() or b"null")


def main() -> int:
    import llamars
    from llamars import Engine
    from llamars.models import default_model

    model = sys.argv[1] if len(sys.argv) > 1 else str(default_model())
    with Engine(model, n_ctx=256) as e:
        r = e.generate(PROMPT, max_tokens=12, temperature=0.0)
    assert r.tokens, "Engine generated nothing"

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = shutil.which("llamars-server", path=os.path.dirname(sys.executable)) or shutil.which("llamars-server")
    assert server, "the llamars-server entry point is not installed"
    log = tempfile.TemporaryFile()
    p = subprocess.Popen([server, "-m", model, "--port", str(port), "-c", "1024", "-np", "1"], stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        end = time.monotonic() + 120
        while True:
            if p.poll() is not None:
                log.seek(0)
                raise SystemExit(f"llamars-server exited ({p.returncode}):\n{log.read().decode(errors='replace')}")
            try:
                if _get(url + "/health", timeout=2)[0] == 200:
                    break
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > end:
                raise SystemExit("llamars-server did not become healthy in 120 s")
            time.sleep(0.3)
        status, body = _get(url + "/v1/chat/completions",
                            {"messages": [{"role": "user", "content": "Say hello"}], "max_tokens": 8, "temperature": 0})
        assert status == 200 and body["object"] == "chat.completion", body
        assert body["choices"][0]["message"]["content"] and body["usage"]["completion_tokens"] >= 1, body
    finally:
        p.terminate()
        p.wait(30)
    log.seek(0)
    server_log = log.read().decode(errors="replace")
    print(json.dumps({"file": llamars.__file__, "version": llamars.__version__, "tokens": r.tokens, "text": r.text,
                      "reply": body["choices"][0]["message"]["content"], "server_log": server_log}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
