"""llama.cpp's logits on the tiny models of the later architectures (tests/tiny_archs.py:
mixture-of-experts decoders, Granite): the reference `tests/test_tiny_archs.py` compares
llamars with (teacher-forced log-probs and top-1 within bounds, and bit for bit where it
matches).

    python scripts/parity/arch_reference.py [OUT.json] [--arch qwen3moe ...] [--type Q4_K ...]

Needs llama-cpp-python 0.3.36 importable, as scripts/parity/tiny_reference.py explains
(the same settings: 2 threads, n_batch 512 for the prompt, n_batch 1 for the decode). Per
model: its file's sha256, then per position of the prompt batch and of the one-by-one
sequence: the sha256 of the f32 logits (its first 16 hex digits), the top 3 (id, f32 bits) and the log-prob of the
next token of the sequence (None at the last position).
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests"))
import tiny_archs  # noqa: E402
from tiny_reference import digest, write_reference  # noqa: E402

OUT = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "fixtures", "tiny_llamacpp_archs.json")
TYPES = ["F32", "F16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ4_NL", "IQ4_XS", "BF16", "MXFP4"]


def next_logprobs(rows: np.ndarray, ids: list) -> list:
    """log softmax(row)[ids[i+1]] per position (None at the last)."""
    out = []
    for i, r in enumerate(np.asarray(rows, dtype=np.float64)):
        if i + 1 >= len(ids):
            out.append(None)
            continue
        m = r.max()
        out.append(float(r[ids[i + 1]] - m - np.log(np.exp(r - m).sum())))
    return out


def with_logprobs(rows: np.ndarray, ids: list) -> list:
    """`digest` with the sha256 cut to its first 16 hex digits (64 bits tell rows apart here,
    and keep the fixture small) and the next token's log-prob."""
    d = digest(rows)
    for x, lp in zip(d, next_logprobs(rows, ids)):
        x["sha256"] = x["sha256"][:16]
        x["lp"] = lp
    return d


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", nargs="?", default=OUT)
    ap.add_argument("--arch", nargs="*", default=tiny_archs.ARCHS)
    ap.add_argument("--type", nargs="*", default=TYPES)
    a = ap.parse_args()
    write_reference(a.out, [(x, t) for x in a.arch for t in a.type], tiny_archs.write_model, lambda x: tiny_archs.SPECS[x].ctx, with_logprobs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
