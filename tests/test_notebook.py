"""The notebook experience: Engine's HTML view, display_stream, progress bars, Engine's
own agenerate/astream inside a running event loop, and examples/quickstart.ipynb run
end to end in a real Jupyter kernel against the real model."""
from __future__ import annotations

import asyncio
import io
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

import llamars
from llamars import Engine, GenerationResult, display_stream
from llamars.progress import progress_bar

ROOT = Path(__file__).resolve().parent.parent
PROMPT = "The capital of France is"


@pytest.fixture(scope="module")
def eng(model_path):
    e = Engine(model_path, n_ctx=1024, progress=False)
    yield e
    e.close()


# ---------------------------------------------------------------- rich repr
def test_repr_html_shows_the_model_and_escapes(eng):
    page = eng._repr_html_()
    assert page.startswith("<table") and page.endswith("</table>")
    for fact in ("gemma3", "gemma-3-270m-q4_k_m.gguf", "Q4_K - Medium", "262,144", "avx", "n_ctx_slot 1024"):
        assert fact in page, fact
    assert eng.chat_template.name in page
    assert "Engine(" in repr(eng)  # the plain repr stays

    from llamars.notebook import engine_html

    class Evil:  # values come from a file: they must never become markup
        info = {**eng.info, "name": "<script>alert(1)</script>", "arch": "a&b<i>"}
        chat_template = SimpleNamespace(name='"><img src=x onerror=alert(1)>')

    html = engine_html(Evil())
    assert "<script>" not in html and "<img" not in html and "<i>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "a&amp;b&lt;i&gt;" in html


# ---------------------------------------------------------------- display_stream
def test_display_stream_prints_outside_ipython_and_returns_result(eng, capsys):
    want = eng.generate(PROMPT, max_tokens=8, temperature=0)
    got = display_stream(eng.stream(PROMPT, max_tokens=8, temperature=0))
    assert isinstance(got, GenerationResult) and got.text == want.text
    assert capsys.readouterr().out == want.text + "\n"

    chunks = [SimpleNamespace(text=t) for t in ("a", "", "b<", "c")]
    buf = io.StringIO()
    assert display_stream(iter(chunks), file=buf) == "ab<c"  # no result: the text
    assert buf.getvalue() == "ab<c\n"


def test_display_stream_of_async_streams(eng, capsys):
    want = eng.generate(PROMPT, max_tokens=8, temperature=0).text

    async def main():
        a = await display_stream(eng.astream(PROMPT, max_tokens=8, temperature=0))
        b = await display_stream(eng._async().astream(PROMPT, max_tokens=8, temperature=0))  # a bare coroutine
        return a, b

    a, b = asyncio.run(main())
    assert a.text == b.text == want
    assert capsys.readouterr().out == (want + "\n") * 2


# ---------------------------------------------------------------- asyncio on Engine
def test_agenerate_and_astream_in_a_running_loop_equal_generate(eng):
    want = eng.generate(PROMPT, max_tokens=12, temperature=0, ignore_eos=True)

    async def main():
        assert asyncio.get_running_loop().is_running()
        r = await eng.agenerate(PROMPT, max_tokens=12, temperature=0, ignore_eos=True)
        s = eng.astream(PROMPT, max_tokens=12, temperature=0, ignore_eos=True)
        assert s.result is None
        toks = [c.token async for c in s]  # async for directly, no await first
        s2 = await eng.astream(PROMPT, max_tokens=12, temperature=0, ignore_eos=True)  # or await → AsyncStream
        text2 = "".join([c.text async for c in s2])
        both = await asyncio.gather(*(eng.agenerate(PROMPT, max_tokens=12, temperature=0, ignore_eos=True)
                                      for _ in range(2)))
        return r, toks, s.result, text2, both

    r, toks, sres, text2, both = asyncio.run(main())
    assert r.tokens == toks == want.tokens and r.text == sres.text == text2 == want.text
    assert [b.tokens for b in both] == [want.tokens] * 2
    # a second loop (as after a kernel restart of the loop) works with the same engine
    assert asyncio.run(eng.agenerate(PROMPT, max_tokens=4, temperature=0)).tokens == want.tokens[:4]


def test_close_stops_the_engine_s_async_front(model_path):
    e = Engine(model_path, n_ctx=256, progress=False)
    asyncio.run(e.agenerate(PROMPT, max_tokens=2, temperature=0))
    front = e._aengine
    e.close()
    assert front._closed
    front._thread.join(2)
    assert not front._thread.is_alive()


# ---------------------------------------------------------------- progress bars
@pytest.mark.parametrize("use_tqdm", [True, False], ids=["tqdm", "text"])
def test_progress_bar_renders_to_a_file_when_asked(use_tqdm):
    if use_tqdm:
        pytest.importorskip("tqdm")
    done = [0]

    def poll():
        done[0] = min(done[0] + 30, 90)
        return done[0]

    buf = io.StringIO()
    with progress_bar("assembling", enabled=True, total=100, poll=poll, interval=0.01, file=buf, use_tqdm=use_tqdm):
        time.sleep(0.1)
    out = buf.getvalue()
    assert "assembling" in out and "100%" in out and out.endswith("\n")

    buf = io.StringIO()  # no total: a spinner with the elapsed time
    with progress_bar("loading", enabled=True, interval=0.01, file=buf, use_tqdm=use_tqdm):
        time.sleep(0.05)
    assert "loading" in buf.getvalue() and "done" in buf.getvalue()

    buf = io.StringIO()  # failure: the bar ends where it was
    with pytest.raises(KeyError):
        with progress_bar("x", enabled=True, total=100, poll=lambda: 40, file=buf, use_tqdm=use_tqdm):
            time.sleep(0.05)
            raise KeyError("boom")
    assert "100%" not in buf.getvalue() and "40" in buf.getvalue()


def test_progress_false_or_auto_off_prints_nothing(capsys):
    buf = io.StringIO()
    for enabled in (False, None):  # None: StringIO is no terminal, and this is no notebook
        with progress_bar("x", enabled=enabled, total=10, poll=lambda: 5, interval=0.01, file=buf):
            time.sleep(0.05)
    assert buf.getvalue() == ""
    assert capsys.readouterr() == ("", "")


def test_engine_load_progress(model_path, capsys):
    Engine(model_path, n_ctx=256, progress=False).close()
    assert capsys.readouterr() == ("", "")
    Engine(model_path, n_ctx=256, progress=True).close()
    err = capsys.readouterr().err
    assert "loading gemma-3-270m-q4_k_m.gguf" in err and "done" in err


def test_default_model_assembly_shows_a_bar(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LLAMARS_CACHE", str(tmp_path))
    from llamars.models import reference_model

    path = reference_model(progress=True)
    assert path.parent == tmp_path and path.stat().st_size > 200 << 20
    err = capsys.readouterr().err
    assert "assembling gemma-3-270m-q4_k_m.gguf" in err and "100%" in err and "ready" in err
    assert reference_model(progress=True) == path  # already there: quiet
    assert capsys.readouterr().err == ""


def test_reference_model_assembly_is_not_rehashed_and_a_damaged_file_is_redone(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LLAMARS_CACHE", str(tmp_path))
    import llamars.models as models

    path = models.reference_model(progress=False)
    assert (tmp_path / (path.name + ".verified")).is_file()
    assert not list(tmp_path.glob("*.partial-*"))
    hashed = []
    real = models._sha256
    monkeypatch.setattr(models, "_sha256", lambda p: hashed.append(p) or real(p))
    assert models.reference_model(progress=False) == path
    assert hashed == []  # verified once, unchanged since: no 240 MB re-hash
    # an interrupted assembly from an older release: a short file under the final name
    with path.open("r+b") as f:
        f.truncate(1 << 20)
    assert models.reference_model(progress=False) == path
    assert path.stat().st_size > 200 << 20 and len(hashed) == 2  # the short file, then the new one
    assert "assembling it again" in capsys.readouterr().err


# ---------------------------------------------------------------- the quickstart notebook
def test_quickstart_notebook_runs_in_a_real_kernel(model_path):
    try:
        import ipykernel  # noqa: F401
        import nbformat
        from nbclient import NotebookClient
    except ImportError as e:
        pytest.fail(f"{e.name} is not installed (nbclient, ipykernel and nbformat run the notebook); run ./scripts/setup")
    nb_path = ROOT / "examples" / "quickstart.ipynb"
    nb = nbformat.read(nb_path, as_version=4)
    nbformat.validate(nb)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), "commit the notebook without outputs"
    client = NotebookClient(nb, timeout=300, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str(nb_path.parent)}})
    t0 = time.monotonic()
    client.execute()
    print(f"quickstart.ipynb ran in {time.monotonic() - t0:.1f} s")
    errors = [(i, o.get("ename"), o.get("evalue")) for i, c in enumerate(nb.cells) if c.cell_type == "code"
              for o in c.outputs if o.output_type == "error"]
    assert not errors, errors
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    # the engine cell shows the HTML table; display_stream left one live display with the text
    assert any("SmolLM2-135M-Instruct" in o.get("data", {}).get("text/html", "") for o in outputs)
    shown = [o for o in outputs if o.output_type == "display_data" and "<pre" in o.get("data", {}).get("text/html", "")]
    assert shown and all(o["data"]["text/plain"].strip() for o in shown)
    assert "stop: " in shown[0]["data"]["text/plain"]  # the final update (with its footer) arrived
    assert llamars.display_stream is display_stream


def test_devices_text_shows_the_system_memory_on_the_cpu_line(monkeypatch):
    """A GPU's memory must not be printed on the CPU line (it once was: the loop reused
    the variable holding the system memory)."""
    import llamars.devices as d

    fake = [{"name": "Vulkan0", "description": "Big GPU", "memory_bytes": 80 << 30, "kind": "discrete", "backend": "vulkan",
             "max_buffer_bytes": 4 << 30}]
    monkeypatch.setattr(d._core, "list_devices", lambda: fake)
    monkeypatch.setattr(d, "system_memory_mib", lambda: 12345)
    lines = d.devices_text().splitlines()
    gpu = next(ln for ln in lines if "Vulkan0" in ln)
    cpu = next(ln for ln in lines if ln.strip().startswith("CPU:"))
    assert "81920 MiB" in gpu
    assert "12345 MiB" in cpu and "81920" not in cpu
