"""The batching loop on the real model: concurrency never changes greedy results,
prompt caching, cancellation, slot save/restore, context limits and shift."""
from __future__ import annotations

import threading
import time

import pytest

from llamars import ContextOverflowError, Engine, InvalidRequestError, NotSupportedError

PROMPTS = [
    "The capital of France is",
    "Once upon a time, in a small village,",
    "The three primary colors are",
    "def fibonacci(n):",
    "Water boils at a temperature of",
    "My favourite book is",
    "The quick brown fox",
    "In 1969, the first person to walk on the Moon was",
]


@pytest.fixture(scope="module")
def eng8(model_path):
    e = Engine(model_path, n_ctx=8 * 512, n_parallel=8)
    yield e
    e.close()


def _wait_idle(e: Engine, timeout: float = 5.0) -> list:
    t = time.monotonic()
    while time.monotonic() - t < timeout:
        s = e.slots()
        if not any(x["is_processing"] for x in s):
            return s
        time.sleep(0.01)
    raise AssertionError(f"slots still busy after {timeout}s: {e.slots()}")


def test_eight_concurrent_greedy_streams_match_serial_runs(eng8):
    serial = [eng8.generate(p, max_tokens=24, temperature=0.0, ignore_eos=True, cache_prompt=False).tokens for p in PROMPTS]
    results: dict = {}

    def run(i):
        results[i] = eng8.generate(PROMPTS[i], max_tokens=24, temperature=0.0, ignore_eos=True, cache_prompt=False).tokens

    ts = [threading.Thread(target=run, args=(i,)) for i in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for i in range(8):
        assert results[i] == serial[i], f"prompt {i} differs when batched"
    m = eng8.metrics()
    # the concurrent half really was batched: fewer forward passes than tokens
    assert m["n_busy_slots_total"] > m["n_decode_total"]


def test_concurrent_sampled_streams_are_reproducible_by_seed(eng8):
    alone = eng8.generate(PROMPTS[1], max_tokens=16, temperature=0.9, seed=7, ignore_eos=True)
    out: dict = {}

    def run(i):
        out[i] = eng8.generate(PROMPTS[1] if i == 0 else PROMPTS[i], max_tokens=16, temperature=0.9, seed=7 if i == 0 else i, ignore_eos=True)

    ts = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert out[0].tokens == alone.tokens and out[0].seed == 7


def test_repeated_long_prompt_is_cached(model_path):
    e = Engine(model_path, n_ctx=2048)
    prompt = " ".join(f"item {i}:" for i in range(150))
    ids = e.tokenize(prompt)
    assert len(ids) > 400
    a = e.generate(ids, max_tokens=4, temperature=0.0)
    b = e.generate(ids, max_tokens=4, temperature=0.0)
    assert a.tokens_cached == 0 and a.timings.prompt_n == len(ids)
    assert b.tokens_cached >= len(ids) - 1 and b.timings.prompt_n == len(ids) - b.tokens_cached
    assert b.tokens == a.tokens
    assert b.timings.prompt_ms < a.timings.prompt_ms
    # a prompt sharing a prefix reuses exactly that prefix
    c = e.generate(ids[:200] + e.tokenize(" something else", add_special=False), max_tokens=2, temperature=0.0)
    assert c.tokens_cached == 200
    # cache_prompt=False evaluates everything
    d = e.generate(ids, max_tokens=1, temperature=0.0, cache_prompt=False)
    assert d.tokens_cached == 0 and d.tokens == a.tokens[:1]
    e.close()


def test_sliding_window_ring_matches_full_cache(model_path):
    """Gemma 3's local layers keep a ring of window + n_ubatch - 1 rows; a prompt longer
    than the window gives the same greedy tokens as with every position kept."""
    ring = Engine(model_path, n_ctx=2048, n_ubatch=128)
    full = Engine(model_path, n_ctx=2048, n_ubatch=128, swa_full=True)
    ids = ring.tokenize(" ".join(f"line {i} says hello." for i in range(160)))
    assert len(ids) > 900
    a = ring.generate(ids, max_tokens=12, temperature=0.0, ignore_eos=True)
    b = full.generate(ids, max_tokens=12, temperature=0.0, ignore_eos=True)
    assert a.tokens == b.tokens
    # resuming just before the end is possible with the ring ...
    a2 = ring.generate(ids, max_tokens=4, temperature=0.0)
    assert a2.tokens_cached == len(ids) - 1 and a2.tokens == a.tokens[:4]
    # ... but far back the ring no longer holds the window: the ring resumes from a
    # prompt-chunk checkpoint before the divergence (the full cache anywhere), with
    # identical results either way
    short = ids[:300] + ring.tokenize(" and then", add_special=False)
    r = ring.generate(short, max_tokens=6, temperature=0.0, ignore_eos=True)
    f = full.generate(short, max_tokens=6, temperature=0.0, ignore_eos=True)
    assert 0 < r.tokens_cached <= 300 and r.tokens_cached % 128 == 0 and f.tokens_cached == 300
    assert r.tokens == f.tokens
    ring.close()
    full.close()


def test_cancel_mid_stream_frees_slot(eng8):
    s = eng8.stream(PROMPTS[0], max_tokens=500, temperature=0.0, ignore_eos=True, id_slot=3)
    for i, _ in enumerate(s):
        if i == 2:
            break
    assert eng8.slots()[3]["is_processing"]
    s.close()
    slots = _wait_idle(eng8)
    assert slots[3]["n_decoded"] < 500


def test_cancel_by_id_from_another_thread(eng8):
    s = eng8.stream(PROMPTS[2], max_tokens=2000, temperature=0.0, ignore_eos=True)
    other = eng8.stream(PROMPTS[3], max_tokens=12, temperature=0.0, ignore_eos=True)
    next(s)
    threading.Timer(0.2, eng8.cancel, args=(s.id,)).start()
    from llamars import CancelledError

    with pytest.raises(CancelledError):
        for _ in s:
            pass
    # the other request is unaffected
    list(other)
    assert other.result is not None and len(other.result.tokens) == 12
    _wait_idle(eng8)


def test_dropping_a_stream_cancels_it(eng8):
    s = eng8.stream(PROMPTS[4], max_tokens=2000, temperature=0.0, ignore_eos=True, id_slot=5)
    next(s)
    del s
    _wait_idle(eng8)


def test_slot_save_restore_continues_identically(model_path, tmp_path):
    e = Engine(model_path, n_ctx=1024, n_parallel=2, slot_save_path=tmp_path)
    ids = e.tokenize(PROMPTS[7])
    a = e.generate(ids, max_tokens=20, temperature=0.0, ignore_eos=True, id_slot=0)
    saved = e.slot_save(0, "moon.bin")
    assert saved["n_tokens"] == len(ids) + 19 and (tmp_path / "moon.bin").stat().st_size == saved["n_bytes"]
    e.slot_erase(1)
    restored = e.slot_restore(1, "moon.bin")
    assert restored["n_tokens"] == saved["n_tokens"]
    assert e.slots()[1]["n_cached"] == saved["n_tokens"]
    b = e.generate(ids + a.tokens[:10], max_tokens=10, temperature=0.0, ignore_eos=True, id_slot=1)
    assert b.tokens_cached == len(ids) + 9
    assert b.tokens == a.tokens[10:20]
    # erase forgets
    assert e.slot_erase(1)["n_tokens"] > 0 and e.slots()[1]["n_cached"] == 0
    # hostile or wrong files are refused with a clear error
    for bad in ["../x", "a/b", "..", ".hidden", ""]:
        with pytest.raises(InvalidRequestError, match="filename"):
            e.slot_save(0, bad)
    with pytest.raises(InvalidRequestError, match="does not exist"):
        e.slot_restore(0, "missing.bin")
    (tmp_path / "corrupt.bin").write_bytes(b"LLMRSLOT" + b"\x01\x00\x00\x00" + b"\x00" * 5)
    with pytest.raises(InvalidRequestError, match="corrupt.bin"):
        e.slot_restore(0, "corrupt.bin")
    data = (tmp_path / "moon.bin").read_bytes()
    other = bytearray(data)
    other[12] ^= 0xFF  # the model fingerprint
    (tmp_path / "other.bin").write_bytes(bytes(other))
    with pytest.raises(InvalidRequestError, match="different model"):
        e.slot_restore(0, "other.bin")
    (tmp_path / "short.bin").write_bytes(data[: len(data) // 2])
    with pytest.raises(InvalidRequestError, match="truncated"):
        e.slot_restore(0, "short.bin")
    e.close()
    plain = Engine(model_path, n_ctx=256)
    with pytest.raises(NotSupportedError, match="slot_save_path"):
        plain.slot_save(0, "x.bin")
    plain.close()


def test_prompt_overflow_and_truncation_accounting(model_path):
    e = Engine(model_path, n_ctx=64)
    prompt = [2] + list(range(1000, 1069))  # 70 tokens
    with pytest.raises(ContextOverflowError):
        e.generate(prompt, max_tokens=1)
    r = e.generate(prompt, max_tokens=2, temperature=0.0, truncate=True)
    # n_keep = 0 + BOS = 1; blocks of (64 - 1) // 2 = 31; (70 - 1 - 31) // 31 = 1 block erased
    assert r.prompt_tokens == prompt[:1] + prompt[32:]
    assert r.truncated and r.tokens_evaluated == 39
    r = e.generate(prompt, max_tokens=2, temperature=0.0, truncate=True, n_keep=10)
    # n_keep 11; blocks of 26; (70 - 11 - 26) // 26 = 1
    assert r.prompt_tokens == prompt[:11] + prompt[37:]
    e.close()


def test_generation_stops_at_end_of_context(model_path):
    e = Engine(model_path, n_ctx=64)
    prompt = e.tokenize(PROMPTS[1])
    r = e.generate(prompt, max_tokens=None, temperature=0.0, ignore_eos=True)
    # llama.cpp stops once n_past + 1 reaches n_ctx: n_ctx - n_prompt tokens come out
    assert len(r.tokens) == 64 - len(prompt)
    assert r.truncated and r.stop_reason == "limit"
    assert e.slots()[0]["n_cached"] == 63
    e.close()


def test_context_shift_accounting(model_path):
    e = Engine(model_path, n_ctx=64, context_shift=True)
    prompt = e.tokenize(PROMPTS[1])
    n_keep = 4
    r = e.generate(prompt, max_tokens=100, temperature=0.0, ignore_eos=True, n_keep=n_keep)
    assert len(r.tokens) == 100 and r.stop_reason == "limit" and not r.truncated
    # replay llama.cpp's rule: before evaluating a token, if n_past + 1 >= n_ctx keep
    # n_keep + BOS tokens and discard half of the rest
    n_past, keep, shifts = len(prompt), n_keep + 1, 0
    for _ in range(99):
        if n_past + 1 >= 64:
            n_past -= (n_past - keep) // 2
            shifts += 1
        n_past += 1
    assert shifts >= 2
    assert e.slots()[0]["n_cached"] == n_past
    # before the first shift the tokens equal an unshifted run
    plain = Engine(model_path, n_ctx=64)
    p = plain.generate(prompt, max_tokens=None, temperature=0.0, ignore_eos=True)
    assert r.tokens[: len(p.tokens)] == p.tokens
    r2 = e.generate(prompt, max_tokens=100, temperature=0.0, ignore_eos=True, n_keep=n_keep, n_discard=10, cache_prompt=False)
    n_past = len(prompt)
    for _ in range(99):
        if n_past + 1 >= 64:
            n_past -= 10
        n_past += 1
    assert len(r2.tokens) == 100 and e.slots()[0]["n_cached"] == n_past
    e.close()
    plain.close()


def test_queued_requests_wait_for_a_slot_and_metrics_count(model_path):
    e = Engine(model_path, n_ctx=512, n_parallel=2)
    out: dict = {}

    def run(i):
        out[i] = e.generate(PROMPTS[i], max_tokens=8, temperature=0.0, ignore_eos=True)

    ts = [threading.Thread(target=run, args=(i,)) for i in range(5)]
    for t in ts:
        t.start()
    saw_deferred = 0
    while any(t.is_alive() for t in ts):
        saw_deferred = max(saw_deferred, e.metrics()["requests_deferred"])
        time.sleep(0.005)
    assert all(len(out[i].tokens) == 8 for i in range(5))
    m = e.metrics()
    assert saw_deferred >= 1
    assert m["tokens_predicted_total"] == 40 and m["n_requests_total"] == 5
    assert m["prompt_tokens_total"] == sum(len(e.tokenize(PROMPTS[i])) for i in range(5)) - sum(out[i].tokens_cached for i in range(5))
    assert m["requests_processing"] == 0 and m["requests_deferred"] == 0
    assert 0 < m["kv_cache_usage_ratio"] <= 1
    e.close()


def test_bad_request_parameters(eng8):
    with pytest.raises(InvalidRequestError, match="id_slot"):
        eng8.generate("x", id_slot=8)
    with pytest.raises(InvalidRequestError, match="n_keep"):
        eng8.generate("x", n_keep=-5)
    with pytest.raises(InvalidRequestError, match="unknown generation parameter"):
        eng8.generate("x", max_token=3)
    with pytest.raises(InvalidRequestError, match="n_parallel"):
        Engine(eng8.model_path, n_parallel=0)


def test_ram_prompt_cache_brings_back_an_evicted_prompt(model_path):
    e = Engine(model_path, n_ctx=1024, cache_ram=64)
    a_ids = e.tokenize(" ".join(f"alpha {i}" for i in range(60)))
    b_ids = e.tokenize(" ".join(f"beta {i}" for i in range(60)))
    a = e.generate(a_ids, max_tokens=4, temperature=0.0)
    e.generate(b_ids, max_tokens=4, temperature=0.0)  # the only slot now holds b; a goes to RAM
    assert e.metrics()["prompt_cache_entries"] == 1
    a2 = e.generate(a_ids, max_tokens=4, temperature=0.0)
    assert a2.tokens_cached == len(a_ids) - 1 and a2.tokens == a.tokens
    assert e.metrics()["prompt_cache_hits"] == 1
    e.close()


def test_context_shift_with_sliding_window_ring(model_path):
    """A shift on a sequence longer than Gemma 3's window. The ring layers no longer hold
    the kept prefix (llama.cpp's non-full SWA cache drops it too), so after the shift
    the local layers attend to what the ring holds; before it, ring and full caches agree."""
    kw = dict(n_ctx=640, n_ubatch=32, context_shift=True)
    ring = Engine(model_path, **kw)
    full = Engine(model_path, swa_full=True, **kw)
    ids = ring.tokenize(" ".join(f"step {i} is done." for i in range(85)))
    assert 560 < len(ids) < 620
    a = ring.generate(ids, max_tokens=80, temperature=0.0, ignore_eos=True, n_keep=8)
    b = full.generate(ids, max_tokens=80, temperature=0.0, ignore_eos=True, n_keep=8)
    assert len(a.tokens) == 80 and len(b.tokens) == 80 and not a.truncated
    n_before = 640 - len(ids)  # tokens sampled before the first shift
    assert a.tokens[:n_before] == b.tokens[:n_before]
    assert ring.slots()[0]["n_cached"] == full.slots()[0]["n_cached"] < 640 - 200
    # the shifted ring sequence keeps generating text, not noise: it repeats the pattern
    assert "done" in a.text[len(ring.detokenize(a.tokens[:n_before])):]
    ring.close()
    full.close()


def test_cache_reuse_shifts_matching_chunks_into_place(model_path):
    e = Engine(model_path, n_ctx=1024, cache_reuse=8, swa_full=True)
    x = e.tokenize(" ".join(f"alpha {i}" for i in range(40)))
    y = e.tokenize(" ".join(f"omega {i}" for i in range(40)), add_special=False)
    e.generate(x + y, max_tokens=2, temperature=0.0)
    r = e.generate(x[:20] + y, max_tokens=4, temperature=0.0)
    # the common prefix (20) plus the chunk y moved down over the removed part of x
    assert r.tokens_cached == 20 + len(y) - 1
    assert r.timings.prompt_n == 1 and len(r.tokens) == 4
    off = Engine(model_path, n_ctx=1024, swa_full=True)
    off.generate(x + y, max_tokens=2, temperature=0.0)
    assert off.generate(x[:20] + y, max_tokens=1, temperature=0.0).tokens_cached == 20
    e.close()
    off.close()


def test_sliding_window_checkpoints_keep_far_back_prefix_reuse(model_path):
    """After a long generation the ring no longer holds the window behind the prompt; a
    new prompt diverging inside the old one resumes from the latest prompt-chunk
    checkpoint before the divergence, with the same tokens as a full cache."""
    ring = Engine(model_path, n_ctx=2048, n_ubatch=128)
    full = Engine(model_path, n_ctx=2048, n_ubatch=128, swa_full=True)
    ids = ring.tokenize(" ".join(f"entry {i} reads fine." for i in range(130)))
    assert len(ids) > 800
    ring.generate(ids, max_tokens=300, temperature=0.0, ignore_eos=True)
    full.generate(ids, max_tokens=300, temperature=0.0, ignore_eos=True)
    new = ids[:700] + ring.tokenize(" Something else entirely.", add_special=False)
    r = ring.generate(new, max_tokens=10, temperature=0.0, ignore_eos=True)
    f = full.generate(new, max_tokens=10, temperature=0.0, ignore_eos=True)
    # chunks of 128 tokens: the last checkpoint at or before position 700 is at 640
    assert r.tokens_cached == 640 and f.tokens_cached == 700
    assert r.tokens == f.tokens
    ring.close()
    full.close()
