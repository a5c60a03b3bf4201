"""The fast mode (`Engine(exact=False)`) on the real all-MiniLM-L6-v2 encoder: on AVX-512
BF16 machines its F32 / F16 matmuls round both sides to bf16 (`rust/quant/bf16_dot.rs`), a
different result from llama.cpp's f32 chains, held here to the bounds the exact mode meets
against the checkpoint (a numpy implementation) and against llama.cpp: cosine >= 0.9999."""
import numpy as np
import pytest

from llamars import Engine
from test_encoder import REF, _cos, _reference_bert, gguf_of  # noqa: F401  (gguf_of: a fixture)

BOUND = 0.9999


@pytest.fixture(scope="module")
def reference():
    return _reference_bert(REF["texts"])


@pytest.mark.parametrize("ty", ["f32", "f16"])
def test_fast_mode_embeddings_keep_the_cosine_bounds(gguf_of, reference, ty):  # noqa: F811
    fast = Engine(str(gguf_of(ty)), n_threads=2, exact=False)
    exact = Engine(str(gguf_of(ty)), n_threads=2, exact=True)
    try:
        assert fast.info["exactness"] == "fast"
        got = np.array([r[0] for r in fast.embed(REF["texts"])])
        want = np.array([r[0] for r in exact.embed(REF["texts"])])
        c_ref, c_cpp = _cos(got, reference), _cos(got, REF["models"][ty]["embeddings"])
        print(f"{ty} fast mode: cosine vs checkpoint min {c_ref.min():.7f}, vs llama.cpp min {c_cpp.min():.7f}, "
              f"vs exact mode min {_cos(got, want).min():.7f}")
        assert c_ref.min() >= BOUND, f"{ty}: cosine {np.round(c_ref, 7).tolist()}"
        assert c_cpp.min() >= BOUND, f"{ty}: cosine {np.round(c_cpp, 7).tolist()}"
        # batches of several inputs give each input its bits alone (the tiles' chains do not
        # depend on the tokens sharing a call)
        seqs = [fast.tokenize(t) for t in REF["texts"][:6]]
        for s, h in zip(seqs, fast.hidden_states_many(seqs)):
            assert np.array_equal(h, fast.hidden_states(s))
        if np.array_equal(got, want):
            pytest.skip("no AVX-512 BF16 here: the fast mode multiplies F32 / F16 weights as the exact mode does")
    finally:
        fast.close()
        exact.close()
