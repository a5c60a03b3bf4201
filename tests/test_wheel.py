"""The distribution: `maturin build --release` gives an abi3 wheel (cp39-abi3, manylinux,
`auditwheel show` printed to the log), installed into a clean virtual environment with
no build tools on the PATH and smoke-tested there by scripts/smoke.py (import, Engine
greedy on the real model equal to this checkout's, llamars-server answering /health and
a chat request, a quiet start);
the sdist holds the sources and builds."""
from __future__ import annotations

import json
import re
import os
import shutil
import subprocess
import sys
import tarfile
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROMPT = "The capital of France is"  # as scripts/smoke.py


def _sh(cmd, timeout=900, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    assert r.returncode == 0, f"{cmd} failed ({r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r


def _maturin():
    exe = shutil.which("maturin", path=os.path.dirname(sys.executable)) or shutil.which("maturin")
    assert exe, "maturin is not installed; run ./scripts/setup"
    return exe


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("dist")
    _sh([_maturin(), "build", "--release", "-q", "-o", str(out)], cwd=ROOT)
    wheels = list(out.glob("*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def test_wheel_is_abi3_with_the_web_ui_and_manylinux(wheel):
    assert "-cp39-abi3-" in wheel.name, wheel.name
    import zipfile

    names = zipfile.ZipFile(wheel).namelist()
    assert any(n.startswith("llamars/_core") and n.endswith((".so", ".pyd")) for n in names)
    assert "llamars/webui/index.html" in names and "llamars/py.typed" in names
    entry = next(n for n in names if n.endswith("entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry).decode()
    assert all(re.search(rf"^{e} ?= ?", text, re.M) for e in ("llamars", "llamars-server", "llamars-inspect")), text
    if sys.platform != "linux":
        pytest.skip("auditwheel checks Linux wheels only")
    auditwheel = shutil.which("auditwheel", path=os.path.dirname(sys.executable)) or shutil.which("auditwheel")
    assert auditwheel, "auditwheel is not installed; run ./scripts/setup --tests"
    r = _sh([auditwheel, "show", str(wheel)])
    print(f"\nauditwheel show {wheel.name}:\n{r.stdout}")
    said = " ".join(r.stdout.split())
    tag = wheel.name.split("-")[-1][: -len(".whl")]
    # the tag maturin gave is the one auditwheel finds
    assert tag.startswith("manylinux") and f'is consistent with the following platform tag: "{tag}"' in said, said


def test_wheel_in_a_clean_venv(wheel, tmp_path, model_path):
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True, clear=True).create(env_dir)
    bindir = env_dir / ("Scripts" if os.name == "nt" else "bin")
    py = str(bindir / "python")
    _sh([py, "-m", "pip", "install", "-q", "--disable-pip-version-check", str(wheel)])
    # only the venv on the PATH: no cargo, maturin or compiler to fall back on
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHON", "CARGO", "RUSTUP"))}
    env["PATH"] = str(bindir)
    for tool in ("cargo", "rustc", "maturin", "cc", "gcc"):
        assert shutil.which(tool, path=env["PATH"]) is None, tool
    r = _sh([py, str(ROOT / "scripts" / "smoke.py"), model_path], env=env, cwd=str(tmp_path))
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["file"].startswith(str(env_dir))  # the installed wheel, not this checkout
    from llamars import Engine

    with Engine(model_path, n_ctx=256) as e:
        assert got["tokens"] == e.generate(PROMPT, max_tokens=12, temperature=0.0).tokens
    log = got["server_log"]
    assert "XDG_RUNTIME_DIR" not in log and "Traceback" not in log and "ready: open http://127.0.0.1:" in log, log


def test_sdist_holds_the_sources_and_builds(tmp_path):
    out = tmp_path / "sdist"
    _sh([_maturin(), "sdist", "-o", str(out)], cwd=ROOT)
    (sdist,) = list(out.glob("*.tar.gz"))
    names = tarfile.open(sdist).getnames()
    top = names[0].split("/")[0]
    for need in ("pyproject.toml", "Cargo.toml", "Cargo.lock", "rust/lib.rs", "python/llamars/__init__.py",
                 "python/llamars/webui/index.html", "README.md"):
        assert f"{top}/{need}" in names, need
    # the wheel built from the sdist (the Rust dependencies already compiled in target/ are reused)
    env = dict(os.environ, CARGO_TARGET_DIR=str(ROOT / "target"))
    _sh([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(tmp_path / "w"), str(sdist)],
        env=env, timeout=1800)
    assert len(list((tmp_path / "w").glob("llamars-*-cp39-abi3-*.whl"))) == 1
