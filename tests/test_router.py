"""Router mode (llama-server's --models-dir / --models-preset): a real `llamars-server`
router on loopback with a models directory holding the real model, two tiny generated
models (one split in three files), a corrupt GGUF, a projector and a LoRA adapter file
(neither listed), and a preset that serves the real model under another name with its
own defaults. Each model runs in its own child server process."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Dict, List

import httpx
import openai
import pytest

import tiny_models as tm
from server_util import wait_healthy

from llamars import Engine

PROMPT = "a b c"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Router:
    def __init__(self, tmp: Path, args: List[str]) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tmp / f"router-{self.port}.log"
        env = {k: v for k, v in os.environ.items() if not k.startswith("LLAMA_ARG_")}
        self.p = subprocess.Popen([sys.executable, "-m", "llamars.cli", *args, "--port", str(self.port)], env=env,
                                  stdout=open(self.log, "wb"), stderr=subprocess.STDOUT)
        wait_healthy(self.p, self.url, self.log, limit=60)
        self.c = httpx.Client(base_url=self.url, timeout=120)

    def models(self) -> Dict[str, dict]:
        return {m["id"]: m for m in self.c.get("/v1/models").json()["data"]}

    def complete(self, model: str, prompt: str = PROMPT, n: int = 6, **kw) -> httpx.Response:
        return self.c.post("/completion", json={"model": model, "prompt": prompt, "n_predict": n, "temperature": 0, **kw})

    def children(self) -> Dict[str, int]:
        """model name -> pid of its child server (read from /proc: the router's children)."""
        out = {}
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                stat = Path(f"/proc/{d}/stat").read_text()
                argv = Path(f"/proc/{d}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == self.p.pid and b"--alias" in argv:
                out[argv[argv.index(b"--alias") + 1].decode()] = int(d)
        return out

    def stop(self) -> None:
        self.c.close()
        self.p.terminate()
        try:
            self.p.wait(30)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _wait(pred, what: str, limit: float = 60.0):
    t0 = time.monotonic()
    while True:
        v = pred()
        if v:
            return v
        assert time.monotonic() - t0 < limit, f"timed out waiting for {what}"
        time.sleep(0.1)


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory, model_path) -> Path:
    d = tmp_path_factory.mktemp("models")
    os.symlink(model_path, d / "gemma.gguf")
    tm.write_model(d / "tiny-llama.gguf", "llama", "F32", seed=1)
    (d / "tiny-qwen").mkdir()
    tm.write_split_model(d / "tiny-qwen", "tiny-qwen", "qwen2", "F32", seed=2, n_parts=3)
    (d / "broken.gguf").write_bytes(b"GGUF\x03\x00\x00\x00" + b"\xff" * 40)
    tm.write_model(d / "mmproj-tiny.gguf", "llama", "F32", seed=3)
    tm.write_model(d / "adapter.gguf", "llama", "F32", seed=4,
                   extra_kvs=[tm.KV("general.type", tm.VT.STRING, "adapter"), tm.KV("adapter.type", tm.VT.STRING, "lora")],
                   drop_kvs=["general.type"])
    (d / "local-gemma.yaml").write_text("""name: local-gemma
backend: llama-cpp
parameters:
  model: gemma.gguf
  temperature: 0
  max_tokens: 5
context_size: 768
stopwords: ["QQQ"]
options:
  - parallel:1
  - cache_ram:0
favourite_colour: blue
""")
    (d / "chat-msg.tmpl").write_text('''<|im_start|>{{if eq .RoleName "assistant"}}assistant{{else}}{{.RoleName}}{{end}}
{{- if .FunctionCall }} calls {{toJson .FunctionCall}}{{end}}
{{ .Content }}<|im_end|>''')
    (d / "templated.yaml").write_text("""name: templated
parameters:
  model: tiny-llama.gguf
roles:
  user: "USER:"
system_prompt: "Be terse."
template:
  chat_message: chat-msg
  chat: |
    {{- if .SystemPrompt }}<|im_start|>system
    {{ .SystemPrompt }}<|im_end|>
    {{ end -}}
    {{ .Input }}
    <|im_start|>assistant
  completion: "Q: {{ .Input }}\\nA:"
  edit: "{{ .Instruction }} >>> {{ .Input }} <<<"
""")
    (d / "badtemplate.yaml").write_text("name: badtemplate\nparameters:\n  model: tiny-llama.gguf\n"
                                        "template:\n  chat: \"{{ if .X }}unclosed\"\n")
    (d / "elsewhere.yml").write_text("name: elsewhere\nbackend: vllm\nparameters:\n  model: some/hf-model\n")
    return d


@pytest.fixture(scope="module")
def preset(tmp_path_factory, model_path) -> Path:
    p = tmp_path_factory.mktemp("preset") / "models.ini"
    p.write_text(f"""version = 1
; every model
[*]
c = 1024

[short-gemma]
model = {model_path}
n-predict = 3          ; its own default length
LLAMA_ARG_CTX_SIZE = 768
np = 1                 ; the router's own -np 2 wins
""")
    return p


@pytest.fixture(scope="module")
def router(tmp_path_factory, models_dir, preset):
    r = Router(tmp_path_factory.mktemp("router"), ["--models-dir", str(models_dir), "--models-preset", str(preset), "-np", "2"])
    yield r
    r.stop()


def test_listing_and_statuses(router):
    m = router.models()
    # no projector, no adapter; the LocalAI configs by their names
    assert sorted(m) == ["badtemplate", "broken", "elsewhere", "gemma", "local-gemma", "short-gemma", "templated", "tiny-llama",
                         "tiny-qwen"]
    for v in m.values():
        assert v["object"] == "model" and v["status"]["value"] in ("unloaded", "loading", "loaded")
        assert v["status"]["args"][0] == "llamars-server"
    assert m["short-gemma"]["source"] == "preset" and m["gemma"]["source"] == "models_dir"
    assert m["tiny-qwen"]["path"].endswith("tiny-qwen-00001-of-00003.gguf")
    args = m["short-gemma"]["status"]["args"]
    assert args[args.index("--ctx-size") + 1] == "768" and args[args.index("-np") + 1] == "2" and "1024" not in args
    args = m["gemma"]["status"]["args"]
    assert args[args.index("--ctx-size") + 1] == "1024"  # [*] applies to the directory's models too
    assert [x["id"] for x in router.c.get("/models").json()["data"]] == sorted(m)  # (the same list at both paths)
    props = router.c.get("/props").json()
    assert props["role"] == "router" and props["max_instances"] == 4 and props["models_autoload"] is True
    # a config naming another backend is listed as failed, with the reason, from the start
    st = m["elsewhere"]["status"]
    assert st["value"] == "unloaded" and st["failed"] is True and "backend 'vllm' is not available in llamars" in st["error"]
    r = router.complete("elsewhere")
    assert r.status_code == 500 and "backend 'vllm'" in r.json()["error"]["message"]
    # what a config holds that llamars does not use is reported once, at start
    log = router.log.read_text()
    assert log.count("local-gemma.yaml: favourite_colour is not used by llamars") == 1


def test_localai_go_templates(router):
    msgs = [{"role": "user", "content": "hi"},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "42"}]
    r = router.c.post("/apply-template", json={"model": "templated", "messages": msgs})
    assert r.status_code == 200, r.text
    assert r.json()["prompt"] == ("<|im_start|>system\nBe terse.<|im_end|>\n"
                                  "<|im_start|>user\nhi<|im_end|>\n"
                                  "<|im_start|>assistant calls [{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":{\"a\":1}}}]\n<|im_end|>\n"
                                  "<|im_start|>tool\n42<|im_end|>\n<|im_start|>assistant\n")
    def n_tokens(text: str) -> int:
        return len(router.c.post("/tokenize", params={"model": "templated"}, json={"model": "templated", "content": text}).json()["tokens"])

    r = router.c.post("/v1/completions", json={"model": "templated", "prompt": "2+2?", "max_tokens": 2, "temperature": 0})
    assert r.status_code == 200 and r.json()["usage"]["prompt_tokens"] == n_tokens("Q: 2+2?\nA:") + 1  # (+ BOS)
    r = router.c.post("/v1/edits", json={"model": "templated", "instruction": "fix", "input": "teh cat", "max_tokens": 2, "n": 2})
    assert r.status_code == 200 and r.json()["usage"]["prompt_tokens"] == n_tokens("fix >>> teh cat <<<") + 1
    assert len(r.json()["choices"]) == 2
    st = router.models()["badtemplate"]["status"]
    assert st["failed"] is True and "template.chat: line 1: {{if}} without {{end}}" in st["error"], st


def test_localai_config_defaults_and_edits(router):
    m = router.models()["local-gemma"]
    assert m["source"] == "localai" and m["path"].endswith("gemma.gguf")
    r = router.c.post("/v1/chat/completions", json={"model": "local-gemma", "messages": [{"role": "user", "content": "Hello"}]})
    assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] == 5  # the config's max_tokens
    settings = r.json() and router.c.get("/props", params={"model": "local-gemma"}).json()
    assert settings["total_slots"] == 1 and settings["default_generation_settings"]["n_ctx"] == 768
    params = settings["default_generation_settings"]["params"]
    assert params["temperature"] == 0 and "QQQ" in params["stop"]
    # /v1/edits on the config's model and on a plain GGUF: OpenAI's edits shape
    for name in ("local-gemma", "gemma"):
        r = router.c.post("/v1/edits", json={"model": name, "instruction": "rephrase", "input": "Black cat jumped out of the window",
                                             "temperature": 0, "max_tokens": 6, "n": 2})
        assert r.status_code == 200, r.text
        e = r.json()
        assert e["object"] == "edit" and [c["index"] for c in e["choices"]] == [0, 1]
        assert all(isinstance(c["text"], str) and c["text"] for c in e["choices"]) and e["choices"][0]["text"] == e["choices"][1]["text"]
        assert e["usage"]["completion_tokens"] == 12 and e["usage"]["prompt_tokens"] > 10
    r = router.c.post("/v1/edits", json={"model": "gemma", "input": "x"})
    assert r.status_code == 400 and "instruction" in r.json()["error"]["message"]


def test_requests_reach_the_named_model_interleaved_and_concurrent(router, models_dir):
    alone = {name: Engine(str(models_dir / f), n_ctx=256).generate(PROMPT, max_tokens=6, temperature=0.0).tokens
             for name, f in (("tiny-llama", "tiny-llama.gguf"), ("tiny-qwen", "tiny-qwen/tiny-qwen-00001-of-00003.gguf"),
                             ("gemma", "gemma.gguf"))}
    results: Dict[str, List[List[int]]] = {k: [] for k in alone}
    errors: List[str] = []

    def ask(name: str) -> None:
        try:
            r = router.complete(name, return_tokens=True)
            assert r.status_code == 200, r.text
            assert r.json()["model"] == name
            results[name].append(r.json()["tokens"])
        except Exception as e:  # (reported below)
            errors.append(f"{name}: {e}")

    threads = [threading.Thread(target=ask, args=(n,)) for n in ["tiny-llama", "tiny-qwen", "gemma"] * 2]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    for name, want in alone.items():
        assert results[name] == [want, want], name  # each answered by its own model, greedy as served alone
    assert {k: v["status"]["value"] for k, v in router.models().items() if k in alone} == dict.fromkeys(alone, "loaded")


def test_preset_defaults_and_openai_sdk(router):
    oai = openai.OpenAI(base_url=router.url + "/v1", api_key="none", max_retries=0)
    ids = [m.id for m in oai.models.list()]
    assert "short-gemma" in ids and "gemma" in ids
    r = oai.chat.completions.create(model="short-gemma", messages=[{"role": "user", "content": "Hello"}], temperature=0)
    assert r.model == "short-gemma" and r.usage.completion_tokens == 3  # the preset's n-predict
    props = router.c.get("/props", params={"model": "short-gemma"}).json()
    assert props["total_slots"] == 2 and props["default_generation_settings"]["n_ctx"] == 384  # 768 over 2 slots
    s = list(oai.chat.completions.create(model="gemma", messages=[{"role": "user", "content": "Hello"}], max_tokens=4,
                                         temperature=0, stream=True))
    assert sum(1 for c in s if c.choices and c.choices[0].delta.content) >= 1


def test_missing_unknown_and_per_model_routes(router):
    r = router.c.post("/completion", json={"prompt": "x", "n_predict": 1})
    assert r.status_code == 400 and r.json()["error"]["message"] == "model name is missing from the request"
    r = router.c.get("/slots")
    assert r.status_code == 400 and r.json()["error"]["message"] == "model name is missing from the request"
    r = router.complete("nope")
    assert r.status_code == 400 and r.json()["error"]["message"] == "model 'nope' not found"
    assert router.complete("gemma").status_code == 200
    slots = router.c.get("/slots", params={"model": "gemma"}).json()
    assert len(slots) == 2
    r = router.c.post("/v1/messages", json={"max_tokens": 2, "messages": [{"role": "user", "content": "x"}]})
    assert r.status_code == 400 and r.json()["type"] == "error"  # the Anthropic route answers in its dialect
    assert router.c.post("/models/load", json={"model": "nope"}).status_code == 404
    assert router.c.post("/models/load", json={"model": "gemma"}).json()["error"]["message"] == "model is already running"


def test_corrupt_model_fails_with_a_reason_and_the_others_serve(router):
    r = router.complete("broken")
    assert r.status_code == 500 and r.json()["error"]["type"] == "server_error"
    msg = r.json()["error"]["message"]  # llama-server's message, and why
    assert msg.startswith("model name=broken failed to load: ") and "broken.gguf" in msg and "invalid GGUF" in msg
    st = router.models()["broken"]["status"]
    assert st["value"] == "unloaded" and st["failed"] is True and st["exit_code"] == 1 and "invalid GGUF" in st["error"]
    assert router.complete("tiny-llama").status_code == 200


def test_a_crashed_model_fails_only_its_requests_and_loads_again(router):
    assert router.complete("tiny-qwen").status_code == 200
    pid = router.children()["tiny-qwen"]
    os.kill(pid, signal.SIGKILL)
    st = _wait(lambda: router.models()["tiny-qwen"]["status"].get("failed") and router.models()["tiny-qwen"]["status"],
               "the crash to show")
    assert st["value"] == "unloaded" and st["exit_code"] == -signal.SIGKILL
    assert router.complete("tiny-llama").status_code == 200  # the others serve on
    r = router.complete("tiny-qwen")  # and it loads again on demand
    assert r.status_code == 200 and router.models()["tiny-qwen"]["status"]["value"] == "loaded"
    assert router.children()["tiny-qwen"] != pid


def test_unload_load_and_status_events(router):
    events: List[str] = []

    def listen() -> None:
        with httpx.Client(base_url=router.url, timeout=30) as c, c.stream("GET", "/models/sse") as r:
            for line in r.iter_lines():
                if line.startswith("data: "):
                    events.append(line)
                    if len(events) >= 3:
                        return

    t = threading.Thread(target=listen, daemon=True)
    t.start()
    time.sleep(0.5)
    assert router.complete("tiny-llama").status_code == 200
    pid = router.children()["tiny-llama"]
    assert router.c.post("/models/unload", json={"model": "tiny-llama"}).json() == {"success": True}
    st = router.models()["tiny-llama"]["status"]
    assert st["value"] == "unloaded" and "failed" not in st and st["preset"].startswith("[tiny-llama]\n")
    assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text()
    r = router.c.post("/models/unload", json={"model": "tiny-llama"})
    assert r.status_code == 400 and r.json()["error"]["message"] == "model is not running"
    assert router.c.post("/models/load", json={"model": "tiny-llama"}).json() == {"success": True}
    _wait(lambda: router.models()["tiny-llama"]["status"]["value"] == "loaded", "tiny-llama to load")
    t.join(30)
    import json as _json

    got = [(_json.loads(e[6:])["model"], _json.loads(e[6:])["data"]["status"]) for e in events]
    assert got == [("tiny-llama", "unloaded"), ("tiny-llama", "loading"), ("tiny-llama", "loaded")]


def test_a_request_during_an_unload_waits_and_loads_the_model_again(tmp_path, models_dir):
    """A request for a model whose server is being stopped (an unload in progress, here held
    open by pausing the child so it cannot act on its SIGTERM yet) is not sent to that
    server: it waits for the unload to end, then the model loads again and answers."""
    r = Router(tmp_path, ["--models-dir", str(models_dir), "-c", "512"])
    try:
        assert r.complete("tiny-llama").status_code == 200
        pid = r.children()["tiny-llama"]
        os.kill(pid, signal.SIGSTOP)
        got: Dict[str, httpx.Response] = {}
        try:
            unload = threading.Thread(target=lambda: got.setdefault("unload", r.c.post("/models/unload", json={"model": "tiny-llama"})))
            unload.start()
            time.sleep(0.5)  # (the router has sent SIGTERM and waits for the child)
            req = threading.Thread(target=lambda: got.setdefault("complete", r.complete("tiny-llama")))
            req.start()
            time.sleep(0.5)  # (the request reached the router while the unload is in progress)
        finally:
            os.kill(pid, signal.SIGCONT)
        unload.join(60)
        req.join(120)
        assert got["unload"].status_code == 200, got["unload"].text
        assert got["complete"].status_code == 200, got["complete"].text
        assert got["complete"].json()["tokens_predicted"] == 6
        assert r.children()["tiny-llama"] != pid  # answered by a new server
    finally:
        r.stop()


def test_models_max_unloads_the_least_recently_used(tmp_path, models_dir):
    r = Router(tmp_path, ["--models-dir", str(models_dir), "--models-max", "1", "-c", "512"])
    try:
        assert r.complete("gemma").status_code == 200
        gemma_pid = r.children()["gemma"]
        rss = _rss_kib(gemma_pid)
        # a busy model is not unloaded under a request: the other model's request waits for nothing, it is told
        body = {"model": "gemma", "prompt": "Once upon a time", "n_predict": 100, "ignore_eos": True, "stream": True}
        with httpx.Client(base_url=r.url, timeout=60) as c, c.stream("POST", "/completion", json=body) as s:
            lines = s.iter_lines()  # (held: a dropped iterator would close the stream, which cancels it)
            for x in lines:
                if x.startswith("data: "):
                    break
            busy = r.complete("tiny-llama")
            assert busy.status_code == 503 and "--models-max 1: every loaded model is busy" in busy.json()["error"]["message"]
        _wait(lambda: not any(x["is_processing"] for x in r.c.get("/slots", params={"model": "gemma"}).json()), "gemma idle")
        assert r.complete("tiny-llama").status_code == 200
        st = {k: v["status"]["value"] for k, v in r.models().items()}
        assert st["gemma"] == "unloaded" and st["tiny-llama"] == "loaded"
        _wait(lambda: not Path(f"/proc/{gemma_pid}").exists(), "gemma's server to end")
        kids = r.children()
        assert list(kids) == ["tiny-llama"]
        freed = rss - _rss_kib(kids["tiny-llama"])
        print(f"models-max 1: gemma's server ({rss} KiB RSS) ended; the one left holds {rss - freed} KiB")
        assert freed > 100 * 1024  # the real model's weights and KV left with its process
        # two models asked for at once: a model a request waits for is never unloaded under
        # it; each request is answered, or told every loaded model is busy
        got: List[httpx.Response] = []
        ts = [threading.Thread(target=lambda n=n: got.append(r.complete(n))) for n in ("gemma", "tiny-llama", "gemma")]
        for t in ts:
            t.start()
        for t in ts:
            t.join(120)
        assert len(got) == 3 and any(x.status_code == 200 for x in got)
        for x in got:
            assert x.status_code == 200 or (x.status_code == 503 and "every loaded model is busy" in x.json()["error"]["message"]), x.text
    finally:
        r.stop()
    assert not any(Path(f"/proc/{p}").exists() for p in kids.values()), "children outlived the router"


def test_client_that_leaves_cancels_the_childs_work(router):
    assert router.complete("gemma").status_code == 200
    body = {"model": "gemma", "prompt": "Once upon a time", "n_predict": 2000, "ignore_eos": True, "temperature": 0, "stream": True}
    with httpx.Client(base_url=router.url, timeout=60) as c, c.stream("POST", "/completion", json=body) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        n = 0
        for line in r.iter_lines():
            if line.startswith("data: "):
                n += 1
                if n == 3:
                    break
    busy = lambda: [s for s in router.c.get("/slots", params={"model": "gemma"}).json() if s["is_processing"]]  # noqa: E731
    _wait(lambda: not busy(), "the child to cancel the generation", limit=15)
    freed = [s for s in router.c.get("/slots", params={"model": "gemma"}).json() if s.get("next_token", [{}])[0].get("has_next_token")]
    assert freed, "the cancelled task shows in the child's /slots"


def test_no_autoload_and_api_key(tmp_path, models_dir):
    r = Router(tmp_path, ["--models-dir", str(models_dir), "--no-models-autoload", "--api-key", "sekrit"])
    r.c.headers["Authorization"] = "Bearer sekrit"
    try:
        assert httpx.post(r.url + "/completion", json={"model": "tiny-llama", "prompt": "a"}).status_code == 401
        resp = r.complete("tiny-llama")
        assert resp.status_code == 400 and resp.json()["error"]["message"] == "model is not loaded"
        assert r.c.post("/completion?autoload=true", json={"model": "tiny-llama", "prompt": "a", "n_predict": 1}).status_code == 200
        assert r.complete("tiny-llama").status_code == 200  # loaded now
    finally:
        r.stop()


def test_bad_preset_is_refused_at_start(tmp_path, models_dir):
    bad = tmp_path / "bad.ini"
    bad.write_text("[x]\nmodel = /nowhere.gguf\nno-such-flag = 1\n")
    p = subprocess.run([sys.executable, "-m", "llamars.cli", "--models-preset", str(bad), "--port", str(_free_port())],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 1 and "option 'no-such-flag' not recognized in preset 'x'" in p.stderr
    p = subprocess.run([sys.executable, "-m", "llamars.cli", "--models-dir", str(tmp_path / "none"), "--port", str(_free_port())],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 1 and "does not exist or is not a directory" in p.stderr


def test_in_process_router(models_dir, preset):
    from llamars import ModelLoadError, Router

    with Router(models_dir, preset=preset, max_loaded=1, n_ctx=512) as router:
        assert router.names() == ["badtemplate", "broken", "elsewhere", "gemma", "local-gemma", "short-gemma", "templated",
                                  "tiny-llama", "tiny-qwen"]
        want = Engine(str(models_dir / "tiny-llama.gguf"), n_ctx=256).generate(PROMPT, max_tokens=6, temperature=0.0).tokens
        tiny = router.engine("tiny-llama")
        assert tiny.generate(PROMPT, max_tokens=6, temperature=0.0).tokens == want
        assert router.engine("tiny-llama") is tiny  # loaded once
        g = router.engine("local-gemma")  # max_loaded 1: tiny-llama is closed first
        assert router.status()["tiny-llama"] == {"value": "unloaded"} and router.status()["local-gemma"]["value"] == "loaded"
        assert g.n_parallel == 1 and g.n_ctx == 768  # the config's parallel:1 and context_size win over n_ctx=512
        assert router.defaults("local-gemma")["n_predict"] == 5 and router.defaults("short-gemma")["n_predict"] == 3
        with pytest.raises(ModelLoadError, match="invalid GGUF"):
            router.engine("broken")
        assert router.status()["broken"]["failed"] is True
        with pytest.raises(ModelLoadError, match="backend 'vllm'"):
            router.engine("elsewhere")
        assert router.engine("tiny-qwen").generate(PROMPT, max_tokens=2, temperature=0.0).tokens
        with pytest.raises(Exception, match="not found"):
            router.engine("nope")


def test_reload_reads_the_sources_again(tmp_path):
    d = tmp_path / "models"
    d.mkdir()
    tm.write_model(d / "a.gguf", "llama", "F32", seed=1)
    r = Router(tmp_path, ["--models-dir", str(d)])
    try:
        assert r.complete("a").status_code == 200
        pid = r.children()["a"]
        tm.write_model(d / "b.gguf", "llama", "F32", seed=2)
        assert sorted(r.models()) == ["a"]  # not read again without ?reload
        (d / "a.gguf").unlink()
        got = {m["id"]: m["status"]["value"] for m in r.c.get("/models", params={"reload": "1"}).json()["data"]}
        assert got == {"b": "unloaded"}  # a was running and is gone from the source: unloaded and dropped
        _wait(lambda: not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text(), "a's server to end")
        assert r.complete("b").status_code == 200
        assert r.complete("a").status_code == 400
    finally:
        r.stop()
