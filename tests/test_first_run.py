"""A newcomer's first run: `./scripts/run` in a fresh copy of the repository, with an
`apt-get` (and `sudo`) on the PATH that fail if called, sets up a `.venv` with the
runtime dependencies only, serves the default chat model, and the chat page's first
reply (greedy, typed into the page in headless Chromium) is a coherent answer: no token
repeated more than 5 times in a row, ended by the model before the token limit. A
second `./scripts/run` does no setup work and starts in seconds."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from browser_util import driver, open_page, send, stored, texts, wait_idle  # noqa: F401

ROOT = Path(__file__).resolve().parents[1]
QUESTION = "Write a short list of three fruits"
MAX_TOKENS = 256


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _copy_repo(dest: Path) -> None:
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, check=True).stdout.decode().split("\0")
    for f in filter(None, files):
        src = ROOT / f
        if src.is_file():
            (dest / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / f)


@pytest.fixture(scope="module")
def fresh(tmp_path_factory):
    base = tmp_path_factory.mktemp("first-run")
    repo = base / "llamars"
    _copy_repo(repo)
    fake = base / "fakebin"
    fake.mkdir()
    marker = base / "apt-get-was-called"
    for tool in ("apt-get", "sudo", "apt"):
        (fake / tool).write_text(f"#!/bin/sh\necho \"$0 $*\" >> '{marker}'\nexit 1\n")
        (fake / tool).chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHONHOME"))}
    path = [p for p in env.get("PATH", "").split(os.pathsep) if p and not p.startswith(str(ROOT / ".venv"))]
    env["PATH"] = os.pathsep.join([str(fake)] + path)
    # the Rust dependencies this checkout compiled are reused (the llamars crate itself is built)
    env["CARGO_TARGET_DIR"] = str(ROOT / "target")
    env["PYTHON"] = getattr(sys, "_base_executable", None) or shutil.which("python3")
    return repo, env, marker


class Run:
    def __init__(self, repo: Path, env: dict, log: Path) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        self._f = log.open("w")
        self.t0 = time.monotonic()
        self.p = subprocess.Popen(["./scripts/run", "--port", str(self.port), "-c", "2048", "-np", "1"], cwd=repo, env=env,
                                  stdout=self._f, stderr=subprocess.STDOUT, start_new_session=True)

    def wait_healthy(self, timeout: float) -> float:
        end = self.t0 + timeout
        while True:
            assert self.p.poll() is None, f"./scripts/run exited ({self.p.returncode}):\n{self.log.read_text()[-4000:]}"
            try:
                if httpx.get(self.url + "/health", timeout=2).status_code == 200:
                    return time.monotonic() - self.t0
            except httpx.HTTPError:
                pass
            assert time.monotonic() < end, f"no healthy server after {timeout:.0f}s:\n{self.log.read_text()[-4000:]}"
            time.sleep(0.5)

    def stop(self) -> None:
        if self.p.poll() is None:
            os.killpg(self.p.pid, 15)
            try:
                self.p.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.p.pid, 9)
                self.p.wait(10)
        self._f.close()


def test_first_run_serves_a_model_that_chats(fresh, driver, tmp_path):  # noqa: F811
    repo, env, marker = fresh
    run = Run(repo, env, tmp_path / "first.log")
    try:
        took = run.wait_healthy(1500)
        print(f"\nfirst ./scripts/run: healthy after {took:.0f}s (fresh .venv, llamars built, runtime packages installed)")
        assert not marker.exists(), f"./scripts/run called {marker.read_text()}"
        venv_py = str(repo / ".venv" / "bin" / "python")
        for pkg in ("pytest", "selenium", "openai", "anthropic", "nbclient", "gguf"):
            r = subprocess.run([venv_py, "-c", f"import importlib.util as u; print(u.find_spec('{pkg}') is None)"],
                               capture_output=True, text=True)
            assert r.stdout.strip() == "True", f"./scripts/run installed the test package {pkg}"
        props = httpx.get(run.url + "/props", timeout=10).json()
        assert props["model_path"].endswith("SmolLM2-135M-Instruct.Q4_1.gguf"), props["model_path"]

        d = driver
        open_page(d, run.url, {"temperature": 0, "max_tokens": MAX_TOKENS})
        send(d, QUESTION)
        wait_idle(d, timeout=300)
        reply = texts(d, "assistant")[-1]
        print(f"first reply to {QUESTION!r}:\n{reply}")
        last = stored(d)[0]["messages"][-1]
        n = last.get("stats", {}).get("n")  # the tokens generated, from the server's timings
        assert not last.get("stopped") and n is not None and 0 < n < MAX_TOKENS, f"the reply did not end by itself: {last}"
        ids = httpx.post(run.url + "/tokenize", json={"content": reply}, timeout=10).json()["tokens"]
        assert 0 < len(ids) < MAX_TOKENS
        longest, n = 1, 1
        for a, b in zip(ids, ids[1:]):
            n = n + 1 if a == b else 1
            longest = max(longest, n)
        assert longest <= 5, f"a token repeated {longest} times in a row: {reply!r}"
    finally:
        run.stop()
    first_log = (tmp_path / "first.log").read_text()
    assert "XDG_RUNTIME_DIR" not in first_log and "Traceback" not in first_log, first_log[-4000:]
    assert f"ready: open {run.url}/" in first_log

    again = Run(repo, env, tmp_path / "second.log")
    try:
        took = again.wait_healthy(120)
    finally:
        again.stop()
    second_log = (tmp_path / "second.log").read_text()
    print(f"second ./scripts/run: healthy after {took:.1f}s")
    assert "setup: building" not in second_log and "setup: installing" not in second_log, second_log
    assert took < 30, f"a second ./scripts/run took {took:.0f}s to serve"
