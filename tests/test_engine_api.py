"""The Python Engine API on the real model: shapes, stop handling, errors."""
import numpy as np
import pytest

import llamars
from llamars import ContextOverflowError, Engine, InvalidRequestError, LlamarsError, ModelLoadError


def test_info(engine):
    assert engine.arch == "gemma3"
    assert engine.n_vocab == 262144
    assert engine.info["n_layer"] == 18
    assert "gemma" in repr(engine)


def test_logits_shape_and_prefix_consistency(engine):
    ids = engine.tokenize("The quick brown fox")
    full = engine.logits(ids)
    assert full.shape == (len(ids), engine.n_vocab) and full.dtype == np.float32
    part = engine.logits(ids[:3])
    # Same tokens, same positions: the batched evaluation of a prefix matches.
    np.testing.assert_allclose(part, full[:3], atol=1e-3, rtol=0)


def test_generate_greedy_is_deterministic(engine):
    a = engine.generate("The capital of France is", max_tokens=12, temperature=0.0, cache_prompt=False)
    b = engine.generate("The capital of France is", max_tokens=12, temperature=0.0)
    assert a.tokens == b.tokens and a.text == b.text
    assert a.stop_reason == "limit" and len(a.tokens) == 12
    assert a.timings.prompt_n == 6 and a.timings.predicted_n == 12
    assert b.tokens_cached == 5 and b.timings.prompt_n == 1
    assert a.text == engine.detokenize(a.tokens)


def test_string_prompt_gets_bos_token_prompt_does_not(engine):
    r1 = engine.generate("Hello", max_tokens=1, temperature=0.0)
    assert r1.prompt_tokens[0] == engine.info["bos"]
    ids = engine.tokenize("Hello", add_special=False)
    r2 = engine.generate(ids, max_tokens=1, temperature=0.0)
    assert r2.prompt_tokens == ids


def test_stream_concatenates_to_result(engine):
    s = engine.stream("Once upon a time", max_tokens=20, temperature=0.0)
    chunks = list(s)
    assert s.result is not None
    assert "".join(c.text for c in chunks) == s.result.text
    assert [c.token for c in chunks if c.token is not None] == s.result.tokens


def test_stop_word(engine):
    base = engine.generate("The capital of France is", max_tokens=16, temperature=0.0)
    # pick a word from the greedy continuation and stop on it
    word = base.text.split()[2]
    r = engine.generate("The capital of France is", max_tokens=16, temperature=0.0, stop=[word])
    assert r.stop_reason == "word" and r.stopping_word == word
    assert word not in r.text
    assert base.text.startswith(r.text)
    # streaming shows exactly the same text (the partial stop is held back)
    s = engine.stream("The capital of France is", max_tokens=16, temperature=0.0, stop=[word])
    assert "".join(c.text for c in s) == r.text


def test_max_tokens_zero(engine):
    r = engine.generate("Hi", max_tokens=0, temperature=0.0)
    assert r.tokens == [] and r.stop_reason == "limit"


def test_sampling_with_seed_is_reproducible(engine):
    a = engine.generate("Once upon a time", max_tokens=16, temperature=0.9, seed=42)
    b = engine.generate("Once upon a time", max_tokens=16, temperature=0.9, seed=42)
    assert a.tokens == b.tokens and a.seed == 42


def test_n_probs(engine):
    r = engine.generate("The capital of France is", max_tokens=3, temperature=0.0, n_probs=5)
    assert len(r.probs) == 3
    for p in r.probs:
        assert len(p["top_logprobs"]) == 5
        assert p["top_logprobs"][0]["id"] == p["id"]  # greedy picks the top one
        assert p["logprob"] <= 0.0


def test_bad_token_ids(engine):
    with pytest.raises(InvalidRequestError, match="out of range"):
        engine.generate([1, 2, 10**9], max_tokens=1)
    with pytest.raises(InvalidRequestError):
        engine.logits([-1])
    with pytest.raises(InvalidRequestError):
        engine.logits([])
    with pytest.raises(InvalidRequestError):
        engine.generate(b"bytes")


def test_bad_parameters(engine):
    with pytest.raises(InvalidRequestError, match="top_p"):
        engine.generate("x", top_p=2.0)
    with pytest.raises(InvalidRequestError, match="n_batch"):
        Engine(engine.model_path, n_batch=0)


def test_context_overflow(model_path):
    small = Engine(model_path, n_ctx=16)
    with pytest.raises(ContextOverflowError, match="n_ctx"):
        small.generate(list(range(100, 140)), max_tokens=1)
    # generation that reaches the end of the context stops and says so
    r = small.generate(list(range(100, 110)), max_tokens=100, temperature=0.0, ignore_eos=True)
    assert r.truncated and r.stop_reason == "limit" and len(r.tokens) <= 16 - 10 + 1


def test_missing_file_names_it(tmp_path):
    p = tmp_path / "nope.gguf"
    with pytest.raises(ModelLoadError, match="nope.gguf"):
        Engine(p)


def test_error_hierarchy():
    for e in (ModelLoadError, InvalidRequestError, ContextOverflowError, llamars.TokenizerError, llamars.CancelledError):
        assert issubclass(e, LlamarsError)


def test_threads_release_gil(engine):
    import threading

    results = {}

    def run(k):
        results[k] = engine.generate("The capital of France is", max_tokens=6, temperature=0.0).tokens

    ts = [threading.Thread(target=run, args=(k,)) for k in range(3)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert results[0] == results[1] == results[2]


def test_eos_stops_generation(tmp_path):
    """A tiny model whose EOS id is set to the token greedy decoding produces at step 3:
    generation stops there with stop_reason "eos", and the EOS token is not in the output."""
    import tiny_models as tm

    plain = tmp_path / "plain.gguf"
    tm.write_model(plain, "llama", "F32", seed=3)
    prompt = [5, 6, 7, 8]
    base = Engine(plain, n_ctx=64).generate(prompt, max_tokens=8, temperature=0.0)
    k = next(i for i in range(1, 8) if base.tokens[i] not in base.tokens[:i])
    eos_tok = base.tokens[k]
    rigged = tmp_path / "rigged.gguf"
    tm.write_model(
        rigged,
        "llama",
        "F32",
        seed=3,
        drop_kvs=["tokenizer.ggml.eos_token_id"],
        extra_kvs=[tm.KV("tokenizer.ggml.eos_token_id", tm.VT.UINT32, eos_tok)],
    )
    eng = Engine(rigged, n_ctx=64)
    r = eng.generate(prompt, max_tokens=8, temperature=0.0)
    assert r.stop_reason == "eos"
    assert r.tokens == base.tokens[:k]
    # ignore_eos keeps going through it
    r2 = eng.generate(prompt, max_tokens=8, temperature=0.0, ignore_eos=True)
    assert r2.tokens == base.tokens and r2.stop_reason == "limit"


def test_ctrl_c_interrupts_generation(model_path):
    """SIGINT during a long generation raises KeyboardInterrupt promptly (between tokens)."""
    import signal
    import subprocess
    import sys
    import time

    code = (
        "import sys, llamars\n"
        f"e = llamars.Engine({model_path!r}, n_ctx=4096, n_threads=1)\n"
        "print('ready', flush=True)\n"
        "try:\n"
        "    e.generate('Once upon a time', max_tokens=4000, temperature=0.0, ignore_eos=True)\n"
        "    print('finished', flush=True)\n"
        "except KeyboardInterrupt:\n"
        "    print('interrupted', flush=True)\n"
    )
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "ready"
        time.sleep(1.0)
        t = time.monotonic()
        p.send_signal(signal.SIGINT)
        out, _ = p.communicate(timeout=30)
        assert "interrupted" in out
        assert time.monotonic() - t < 5.0
    finally:
        if p.poll() is None:
            p.kill()


def test_closed_engine_refuses_requests(model_path):
    import time

    from llamars import UnavailableError

    e = Engine(model_path, n_ctx=256)
    s = e.stream("Once upon a time", max_tokens=500, ignore_eos=True)
    next(s)
    e.close()
    with pytest.raises(llamars.CancelledError):
        for _ in s:
            pass
    t = time.monotonic()
    with pytest.raises(UnavailableError, match="closed"):
        e.generate("Hello", max_tokens=2)
    with pytest.raises(UnavailableError, match="closed"):
        e.slot_erase(0)
    assert time.monotonic() - t < 2


def test_n_indent_and_t_max_predict_ms(engine):
    prompt = "def add(a, b):\n    "
    full = engine.generate(prompt, max_tokens=40, temperature=0.0, ignore_eos=True)
    assert "\n\ndef " in full.text
    # a line indented less than 4 ends the generation; the line is cut (llama.cpp's n_indent)
    r = engine.generate(prompt, max_tokens=40, temperature=0.0, ignore_eos=True, n_indent=4)
    assert r.stop_reason == "limit" and r.text == full.text[: full.text.index("\n\n") + 2]
    # t_max_predict_ms: once past the time limit, stop at the first token after a new line
    t = engine.generate(prompt, max_tokens=40, temperature=0.0, ignore_eos=True, t_max_predict_ms=1)
    first_nl = next(i for i in range(len(full.tokens)) if "\n" in engine.detokenize(full.tokens[: i + 1]))
    assert t.tokens == full.tokens[: first_nl + 1] and t.stop_reason == "limit"


def test_generation_defaults_are_what_a_bare_request_gets(engine):
    d = llamars.generation_defaults()
    assert d["max_tokens"] == 16 and d["temperature"] == 0.8 and d["top_k"] == 40 and d["stop"] == []
    assert engine.request("hi").settings() == d
    s = engine.request("hi", temperature=0.1, stop="x").settings()
    assert s["temperature"] == pytest.approx(0.1) and s["stop"] == ["x"] and s["top_k"] == d["top_k"]


def test_tokenize_json_is_tokenize_as_json(engine):
    import json

    for text in ["Hello world", "", "<start_of_turn>user\nhi ünïcødé 😀", "a" * 5000]:
        for flags in [(True, True), (False, False), (True, False)]:
            assert json.loads(engine.tokenize_json(text, *flags)) == {"tokens": engine.tokenize(text, *flags)}
