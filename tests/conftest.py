"""Shared fixtures: the real model (assembled from its PyPI package), llama.cpp's
reference outputs from ../shared/reference, and a session-wide Engine."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))


def _reference_dir() -> Path:
    env = os.environ.get("LLAMARS_REFERENCE_DIR")
    if env:
        return Path(env)
    return ROOT.parent / "shared" / "reference"


@pytest.fixture(scope="session")
def model_path() -> str:
    from llamars.models import reference_model

    return str(reference_model(progress=False))


@pytest.fixture(scope="session")
def reference() -> dict:
    p = _reference_dir() / "gemma3-270m-q4_k_m.llama-cpp.json"
    if not p.exists():
        pytest.fail(f"llama.cpp reference outputs not found at {p} (set LLAMARS_REFERENCE_DIR)")
    return json.loads(p.read_text())


@pytest.fixture(scope="session")
def engine(model_path):
    from llamars import Engine

    return Engine(model_path, n_ctx=2048)


@pytest.fixture(scope="module")
def pg():
    """A real PostgreSQL server for the module (pg_util.Postgres: initdb in a temp dir, 127.0.0.1)."""
    from pg_util import Postgres, pg_bin

    if pg_bin() is None:
        pytest.fail("PostgreSQL is not installed; ./scripts/setup --tests installs Debian's postgresql package")
    with Postgres() as p:
        yield p
