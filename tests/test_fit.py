"""--fit: the memory a model needs before it is loaded (`llamars.fit.need`: the KV cache
exactly as the engine allocates it), the context size chosen when the user left it
unset, on a real llamars-server, and router mode refusing a load that would overcommit."""
from __future__ import annotations

import os
import subprocess
import sys

import httpx
import pytest

import tiny_models as tm
from test_router import Router, _free_port
from server_util import wait_healthy

from llamars import Engine, inspect
from llamars.fit import MiB, available, fit_ctx, need


@pytest.mark.parametrize("n_ctx,n_parallel,swa_full", [(1024, 2, False), (2048, 1, False), (1024, 4, True)])
def test_kv_estimate_is_what_the_engine_allocates(model_path, n_ctx, n_parallel, swa_full):
    e = Engine(model_path, n_ctx=n_ctx, n_parallel=n_parallel, swa_full=swa_full)
    try:
        got = need(model_path, n_ctx, n_parallel, 512, swa_full)
        assert got.kv == e.metrics()["kv_cache_bytes"] > 0
        with open(os.devnull, "w") as quiet:
            assert got.weights == sum(t[4] for t in inspect(model_path, file=quiet)["tensors"])
        assert got.n_ctx == n_ctx and got.n_ctx_train == 32768
    finally:
        e.close()


def test_kv_estimate_tiny_full_attention(tmp_path):
    p = tmp_path / "tiny.gguf"
    tm.write_model(p, "qwen2", "F32", seed=1)
    e = Engine(str(p), n_ctx=128, n_parallel=2)
    try:
        assert need(str(p), 128, 2).kv == e.metrics()["kv_cache_bytes"]
    finally:
        e.close()
    assert need(str(p), 0, 1).n_ctx == 128  # 0: the training context


def test_fit_ctx_choices(model_path):
    full = need(model_path, 0, 1)
    assert full.n_ctx == 32768
    # room for everything: the training context, nothing to say
    n, chosen, line = fit_ctx(model_path, 1, 512, False, 0, 4096, free=full.total + 1)
    assert (n, chosen.total, line) == (32768, full.total, "")
    # room for about 10k tokens: the largest multiple of 256 that fits
    budget = need(model_path, 10000, 1).total
    n, chosen, line = fit_ctx(model_path, 1, 512, False, 100 * MiB, 4096, free=budget + 100 * MiB)
    assert 4096 <= n < 10000 and n % 256 == 0 and chosen.total <= budget < need(model_path, n + 256, 1).total
    assert "--fit: n_ctx 32768 needs" in line and f"using n_ctx {n}" in line
    # no room: the smallest context --fit may choose, said so
    n, _, line = fit_ctx(model_path, 1, 512, False, 0, 4096, free=1)
    assert n == 4096 and "even the smallest context" in line


def _server(tmp_path, args):
    port = _free_port()
    log = tmp_path / f"server-{port}.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLAMA_ARG_")}
    p = subprocess.Popen([sys.executable, "-m", "llamars.cli", *args, "--port", str(port), "-np", "1"], env=env,
                         stdout=open(log, "wb"), stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    wait_healthy(p, url, log, limit=120)
    return p, url, log


def test_server_fits_an_unset_context(tmp_path, model_path):
    # With --swa-full every layer keeps the whole context: 32768 tokens take ~0.5 GiB more
    # than 16384, a band wider than what other processes change of the available memory
    # between this measurement and the server's. A margin that leaves room for ~16k tokens;
    # if the machine freed that much meanwhile (no fitting needed), measure again.
    for attempt in range(3):
        free = available()
        assert free is not None
        margin_mib = (free - need(model_path, 16384, 1, 512, True).total) // MiB
        p, url, log = _server(tmp_path, ["-m", model_path, "--swa-full", "--fit-target", str(margin_mib)])
        try:
            n_ctx = httpx.get(url + "/props").json()["default_generation_settings"]["n_ctx"]
            text = log.read_text()
            assert httpx.post(url + "/completion", json={"prompt": "Hi", "n_predict": 2}).status_code == 200
        finally:
            p.terminate()
            p.wait(30)
        if n_ctx < 32768:
            break
    assert 4096 <= n_ctx < 32768 and n_ctx % 256 == 0, text[-2000:]
    assert "--fit: n_ctx 32768 needs" in text and f"using n_ctx {n_ctx}" in text
    print(f"--fit-target {margin_mib} MiB ({free // MiB} MiB available, --swa-full): n_ctx {n_ctx}")
    margin_mib = (available() - need(model_path, 16384, 1, 512, True).total) // MiB
    for args, want in ((["--swa-full", "--fit-target", str(margin_mib), "-c", "2048"], 2048),
                       (["--fit", "off", "-c", "0"], 32768), (["--fit-target", "0"], 32768)):
        p, url, log = _server(tmp_path, ["-m", model_path, *args])
        try:
            n_ctx = httpx.get(url + "/props").json()["default_generation_settings"]["n_ctx"]
            assert n_ctx == want and "--fit:" not in log.read_text()  # a size given is kept; off is off
        finally:
            p.terminate()
            p.wait(30)
    r = subprocess.run([sys.executable, "-m", "llamars.cli", "-m", model_path, "--fit-target", "lots"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 1 and "invalid value for --fit-target: 'lots' (expected MiB" in r.stderr


def test_router_refuses_a_load_that_does_not_fit(tmp_path, model_path):
    d = tmp_path / "models"
    d.mkdir()
    os.symlink(model_path, d / "gemma.gguf")
    huge = (available() or 0) // MiB + 10**6
    r = Router(tmp_path, ["--models-dir", str(d), "--fit-target", str(huge)])
    try:
        resp = r.complete("gemma")
        assert resp.status_code == 503, resp.text
        msg = resp.json()["error"]["message"]
        assert msg.startswith("model 'gemma' needs ~") and "--fit-target" in msg and "unload a model" in msg
        assert r.models()["gemma"]["status"]["value"] == "unloaded" and not r.children()  # nothing was started
    finally:
        r.stop()


def test_router_unloads_idle_models_to_make_room(tmp_path):
    """Two tiny models with a large KV cache each (the engine writes its KV pages at load, so
    each child really holds it): with room for one and a half, loading the second unloads
    the first (idle) one."""
    d = tmp_path / "models"
    d.mkdir()
    tm.write_model(d / "a.gguf", "llama", "F32", seed=1)
    tm.write_model(d / "b.gguf", "llama", "F32", seed=2)
    # ~3 GiB of KV each: the half-model slack (~1.5 GiB) stays far above how much the
    # machine's available memory moves on its own while the test runs (~0.5 GiB seen)
    ctx = 1 << 21
    want = need(str(d / "a.gguf"), ctx, 1).total
    free = available() or 0
    if free < 3 * want:
        pytest.skip(f"needs {3 * want // MiB} MiB of available memory, {free // MiB} MiB here")
    margin_mib = (free - want * 3 // 2) // MiB
    r = Router(tmp_path, ["--models-dir", str(d), "-c", str(ctx), "-np", "1", "--models-max", "0", "--fit-target", str(margin_mib)])
    try:
        assert r.complete("a").status_code == 200
        with open(f"/proc/{r.children()['a']}/status") as f:
            rss = int(next(x for x in f if x.startswith("VmRSS")).split()[1]) * 1024
        assert rss > want * 9 // 10, f"a's server holds {rss // MiB} MiB, {want // MiB} MiB reckoned"
        rb = r.complete("b")
        assert rb.status_code == 200, rb.text  # no room beside a: a (idle) was unloaded first
        st = {k: v["status"]["value"] for k, v in r.models().items()}
        assert st == {"a": "unloaded", "b": "loaded"}, st
        print(f"make room: each model ~{want // MiB} MiB, a's server held {rss // MiB} MiB; "
              f"{free // MiB} MiB available, margin {margin_mib} MiB: a unloaded for b")
    finally:
        r.stop()
