"""llama.cpp's token ids, mean-pooled embeddings and rerank scores for the tiny
XLM-RoBERTa checkpoints of tests/xlmr_model.py (an encoder and a sequence classifier with
the Unigram tokenizer of tests/fixtures/ugm/) converted by `llamars-convert`: the reference
`tests/test_xlmr.py` compares llamars with.

    python scripts/parity/xlmr_reference.py [OUT.json]

Needs llama-cpp-python 0.3.36 importable (see tiny_reference.py), numpy, gguf and
tokenizers. Each GGUF's sha256 is recorded; the test skips a file that converts
differently (another gguf package version).
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "fixtures" / "xlmr_llamacpp.json"
QUERY = "the naïve fox"
DOCS = ["kashi to the café", "東京 日本語", "Москва привет the dog", "x", "über déjà vu résumé Straße"]


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else OUT
    sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "python")]
    import xlmr_model as X
    from llama_cpp import Llama

    from llamars.convert import convert

    ref = {"strings": X.ORDINARY + X.EDGE, "texts": X.ORDINARY, "query": QUERY, "documents": DOCS, "models": {}}
    with tempfile.TemporaryDirectory() as d:
        enc = X.write_checkpoint(Path(d) / "enc")
        cls = X.write_checkpoint(Path(d) / "cls", classifier=True)
        for ty in ("f32", "f16", "q8_0"):
            path = convert(enc, Path(d) / f"enc-{ty}.gguf", ty)
            m = Llama(model_path=str(path), embedding=True, verbose=False, n_ctx=128, n_batch=128, n_ubatch=128, n_threads=2, pooling_type=1)
            ref["models"][f"embed-{ty}"] = {
                "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
                "tokens": [m.tokenize(s.encode(), add_bos=True, special=True) for s in ref["strings"]],
                "embeddings": [[float(f"{x:.7g}") for x in m.embed(t, normalize=True)] for t in X.ORDINARY],
            }
            del m
        path = convert(cls, Path(d) / "cls-f32.gguf", "f32")
        m = Llama(model_path=str(path), embedding=True, verbose=False, n_ctx=128, n_batch=128, n_ubatch=128, n_threads=2, pooling_type=4)
        # llama-server's format_prompt_rerank: BOS q EOS SEP d EOS (</s> is both EOS and SEP)
        q = m.tokenize(QUERY.encode(), add_bos=False, special=False)
        pairs = [[m.token_bos()] + q + [m.token_eos(), m.token_eos()] + m.tokenize(doc.encode(), add_bos=False, special=False) + [m.token_eos()] for doc in DOCS]
        by_key = {str(i).encode(): p for i, p in enumerate(pairs)}
        m.tokenize = lambda b, *a, **k: by_key[b]  # embed() evaluates these ids as given
        ref["models"]["rerank-f32"] = {"sha256": hashlib.sha256(path.read_bytes()).hexdigest(), "pairs": pairs,
                                       "scores": [float(m.embed(str(i))[0]) for i in range(len(pairs))]}
        del m
    out.write_text(json.dumps(ref, ensure_ascii=False, separators=(",", ":")) + "\n", encoding="utf-8")
    print(f"wrote {out}", file=sys.stderr)


if __name__ == "__main__":
    os.environ.setdefault("LLAMA_LOG_LEVEL", "error")
    main()
