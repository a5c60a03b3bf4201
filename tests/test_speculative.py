"""Speculative decoding (n-gram lookup): drafts verified in the engine loop never change a
token. Greedy and seeded outputs equal those without speculation (alone and under
concurrent streams), a rejected draft leaves the cache holding exactly the accepted tokens
(slot files compared byte for byte, sliding-window ring included), the counters report
what was drafted and accepted, and the server's flags, fields, /slots and /metrics speak
llama-server's names."""
from __future__ import annotations

import collections

import httpx
import pytest
from server_util import LiveServer

import tiny_archs as ta
from llamars import Engine, InvalidRequestError
from llamars.cli_parse import CLIError, parse_args
from llamars.server.app import create_app

# input-grounded prompts (the output quotes the input) and ordinary ones
PROMPTS = [
    "Copy the list exactly.\nList: apples, pears, plums, cherries, grapes, lemons, limes.\nCopy: apples, pears,",
    "def add(a, b):\n    return a + b\n\n\ndef add(a, b):\n    return",
    "The quick brown fox jumps over the lazy dog. The quick brown fox jumps over the lazy dog. The quick",
    "Question: What is the capital of France?\nAnswer:",
    "One, two, three, four, five, six, seven, eight, nine, ten. One, two, three,",
    "Once upon a time",
]
SPEC = {"type": "ngram-simple", "ngram_simple_size_n": 2, "ngram_simple_size_m": 16}


def _gen(e: Engine, prompt, **kw):
    kw = {"max_tokens": 40, "temperature": 0.0, "cache_prompt": False, "ignore_eos": True, **kw}
    return e.generate(prompt, **kw)


@pytest.fixture(scope="module")
def engines(model_path):
    plain = Engine(model_path, n_ctx=2048, n_parallel=4)
    spec = Engine(model_path, n_ctx=2048, n_parallel=4, speculative=SPEC)
    yield plain, spec
    plain.close()
    spec.close()


def test_greedy_tokens_equal_without_speculation(engines):
    plain, spec = engines
    drafted = accepted = 0
    for p in PROMPTS:
        a, b = _gen(plain, p, n_probs=3), _gen(spec, p, n_probs=3)
        assert b.tokens == a.tokens, p
        # the logits' bits too: the reported log-probabilities are the same floats
        assert repr(b.probs) == repr(a.probs), p
        assert a.timings.draft_n == 0
        drafted += b.timings.draft_n
        accepted += b.timings.draft_n_accepted
    assert drafted > 0 and 0 < accepted <= drafted
    m = spec.metrics()
    assert m["n_drafted_total"] >= drafted and m["n_drafted_accepted_total"] >= accepted and m["n_draft_steps_total"] > 0
    # fewer forward passes than generated tokens: accepted drafts came in the same pass
    assert m["n_decode_total"] < m["tokens_predicted_total"]


def test_concurrent_streams_equal_serial_plain_runs(engines):
    plain, spec = engines
    want = [_gen(plain, p).tokens for p in PROMPTS[:4]]
    reqs = [spec.request(p, max_tokens=40, temperature=0.0, cache_prompt=False, ignore_eos=True) for p in PROMPTS[:4]]
    streams = [spec.submit(r, quiet=True) for r in reqs]
    for i, s in enumerate(streams):
        for _ in s:
            pass
        assert s.result.tokens == want[i], PROMPTS[i]


def test_reference_prompts_under_eight_streams_give_llama_cpp_tokens(model_path, reference):
    """The 12 reference prompts, 8 at a time, with speculation: each greedy continuation is
    llama.cpp's (one-token decoding there)."""
    e = Engine(model_path, n_ctx=8 * 256, n_parallel=8, speculative=SPEC)
    try:
        refs = reference["greedy"]
        reqs = [e.request(g["prompt_tokens"], max_tokens=len(g["generated_tokens"]), temperature=0.0, cache_prompt=False)
                for g in refs]
        streams = [e.submit(r, quiet=True) for r in reqs]
        for g, s in zip(refs, streams):
            for _ in s:
                pass
            assert s.result.tokens == g["generated_tokens"], g["prompt"]
        m = e.metrics()
        assert m["n_drafted_total"] > 0 and m["n_busy_slots_total"] > m["n_decode_total"]
    finally:
        e.close()


def test_seeded_sampling_equals_the_plain_draws(engines):
    """Each committed token is the sampler's draw from the target's logits for its prefix,
    with the same random numbers: seeded outputs are identical, so the distribution at
    every step is the target's. The chi-square statistic of the token counts at step 3
    over many seeds is therefore 0 (and the test would see any drift)."""
    plain, spec = engines
    prompt = PROMPTS[2]
    counts = {"plain": collections.Counter(), "spec": collections.Counter()}
    drafted = 0
    for seed in range(40):
        kw = dict(temperature=0.9, top_k=20, seed=seed, max_tokens=12)
        a, b = _gen(plain, prompt, **kw), _gen(spec, prompt, **kw)
        assert b.tokens == a.tokens, seed
        counts["plain"][a.tokens[3]] += 1
        counts["spec"][b.tokens[3]] += 1
        drafted += b.timings.draft_n
    assert drafted > 0
    keys = set(counts["plain"]) | set(counts["spec"])
    chi2 = sum((counts["spec"][k] - counts["plain"][k]) ** 2 / max(counts["plain"][k], 1) for k in keys)
    assert chi2 == 0.0


def test_per_request_limits_and_turning_it_off(engines):
    _, spec = engines
    p = PROMPTS[2]
    off = _gen(spec, p, speculative=False)
    assert off.timings.draft_n == 0
    one = _gen(spec, p, speculative={"n_max": 1})
    assert one.tokens == off.tokens
    assert 0 < one.timings.draft_n <= one.timings.predicted_n  # at most one per step
    # n_min above any draft: nothing verified
    assert _gen(spec, p, speculative={"n_min": 200, "n_max": 200}).timings.draft_n == 0
    # the dotted names llama-server's bodies use
    r = spec.request(p, **{"speculative.n_max": 4, "speculative.p_min": 0.5})
    assert r.settings()["speculative.n_max"] == 4
    with pytest.raises(InvalidRequestError, match=r"speculative\.n_max: must be within \[0, 256\]"):
        spec.request(p, **{"speculative.n_max": -1})
    with pytest.raises(InvalidRequestError, match="unknown key"):
        spec.request(p, speculative={"n_maxx": 3})


def test_engine_refuses_what_it_does_not_run(model_path):
    with pytest.raises(InvalidRequestError, match="'draft-mtp' needs a draft head"):
        Engine(model_path, speculative="draft-mtp")
    with pytest.raises(InvalidRequestError, match="draft-simple needs a draft model"):
        Engine(model_path, speculative="draft-simple")
    with pytest.raises(InvalidRequestError, match="unknown speculative decoding type"):
        Engine(model_path, speculative="ngram-bogus")
    with pytest.raises(InvalidRequestError, match="unknown speculative decoding parameter 'ngram_size_n'"):
        Engine(model_path, speculative={"type": "ngram-simple", "ngram_size_n": 3})
    with pytest.raises(InvalidRequestError, match="ngram_mod_n_match must be >= 1"):
        Engine(model_path, speculative={"type": "ngram-mod", "ngram_mod_n_match": 0})


@pytest.mark.parametrize("kind, params", [
    ("ngram-map-k", {"ngram_map_k_size_n": 2, "ngram_map_k_size_m": 16}),
    ("ngram-map-k4v", {"ngram_map_k4v_size_n": 2, "ngram_map_k4v_size_m": 4}),
    ("ngram-mod", {"ngram_mod_n_match": 2, "ngram_mod_n_min": 1, "ngram_mod_n_max": 16}),
    ("ngram-cache", {}),
    ("ngram-mod,ngram-map-k4v,ngram-simple", {"ngram_simple_size_n": 3, "ngram_simple_size_m": 8, "ngram_map_k4v_size_n": 2,
                                              "ngram_map_k4v_size_m": 4, "ngram_mod_n_match": 2, "ngram_mod_n_min": 1}),
])
def test_every_ngram_source_drafts_and_changes_no_token(engines, model_path, kind, params):
    """Each of llama.cpp's n-gram sources (and several at once, asked in llama.cpp's order)
    drafts on the input-grounded prompts, and greedy outputs, with their log-probabilities,
    are those of plain decoding."""
    plain, _ = engines
    e = Engine(model_path, n_ctx=1024, n_parallel=2, speculative={"type": kind, **params})
    try:
        assert e.info["spec_type"] == ",".join(k for k in ("ngram-simple", "ngram-map-k", "ngram-map-k4v", "ngram-mod", "ngram-cache")
                                               if k in kind.split(","))
        assert all(e.info["spec_params"][k] == v for k, v in params.items())
        drafted = accepted = 0
        for p in PROMPTS[:3] + PROMPTS[4:5]:
            a, b = _gen(plain, p, n_probs=2), _gen(e, p, n_probs=2)
            assert b.tokens == a.tokens and repr(b.probs) == repr(a.probs), (kind, p)
            drafted += b.timings.draft_n
            accepted += b.timings.draft_n_accepted
        assert 0 < accepted <= drafted, (kind, drafted, accepted)
    finally:
        e.close()


def _lookup_file(path, records):
    """A lookup cache in llama.cpp's format (llama-lookup-create's): per n-gram four i32
    tokens (-1 past its length), the number of followers, then (token, count) pairs."""
    import struct

    with open(path, "wb") as f:
        for gram, followers in records:
            f.write(struct.pack("<5i", *(list(gram) + [-1] * (4 - len(gram))), len(followers)))
            for t, c in followers:
                f.write(struct.pack("<2i", t, c))


def test_ngram_cache_reads_llama_cpp_lookup_files(engines, model_path, tmp_path):
    """A static lookup cache made from the continuation plain decoding gives (every bigram
    of it followed by its next token): ngram-cache drafts from it from the first step, the
    drafts are accepted, and the tokens are plain decoding's. Broken files are refused
    naming the flag's field."""
    plain, _ = engines
    p = PROMPTS[3]
    want = _gen(plain, p)
    toks = plain.tokenize(p) + want.tokens
    _lookup_file(tmp_path / "static.bin", [((a, b), [(c, 5)]) for a, b, c in zip(toks, toks[1:], toks[2:])])
    e = Engine(model_path, n_ctx=512, speculative={"type": "ngram-cache", "lookup_cache_static": str(tmp_path / "static.bin")})
    try:
        r = _gen(e, p)
        assert r.tokens == want.tokens
        assert r.timings.draft_n_accepted >= len(want.tokens) // 2, (r.timings.draft_n, r.timings.draft_n_accepted)
    finally:
        e.close()
    _lookup_file(tmp_path / "bad.bin", [((1, 2), [(10**7, 1)])])
    with pytest.raises(InvalidRequestError, match="lookup_cache_dynamic: .*bad.bin is not a lookup cache .*token 10000000 outside"):
        Engine(model_path, speculative={"type": "ngram-cache", "lookup_cache_dynamic": str(tmp_path / "bad.bin")})
    (tmp_path / "short.bin").write_bytes((tmp_path / "static.bin").read_bytes()[:-2])
    with pytest.raises(InvalidRequestError, match="truncated"):
        Engine(model_path, speculative={"type": "ngram-cache", "lookup_cache_static": str(tmp_path / "short.bin")})
    c = parse_args(["-m", model_path, "--spec-type", "ngram-cache", "-lcs", str(tmp_path / "static.bin")], env={})
    assert c.engine_kwargs()["speculative"]["lookup_cache_static"] == str(tmp_path / "static.bin")


def _sampled_run_saved(model, tmp_path, name, gen_kw=None, **engine_kw):
    """A temperature-1 seeded run of 60 tokens on the tiny model in slot 0, saved to
    `name`.bin: (tokens, the save's reply, (drafted, accepted))."""
    e = Engine(str(model), n_ctx=256, n_ubatch=8, n_batch=8, slot_save_path=str(tmp_path), **engine_kw)
    try:
        r = e.generate([1, 5, 9, 5, 9, 7, 5, 9, 11, 5], max_tokens=60, temperature=1.0, top_k=0, top_p=1.0, min_p=0.0,
                       seed=7, ignore_eos=True, id_slot=0, **(gen_kw or {}))
        return r.tokens, e.slot_save(0, f"{name}.bin"), (r.timings.draft_n, r.timings.draft_n_accepted)
    finally:
        e.close()


def test_rejected_drafts_leave_the_cache_as_plain_decoding_does(tmp_path):
    """A tiny gemma2 (sliding window 4 on every other layer: the ring) sampled at
    temperature 1, so that most drafts are rejected: the saved slots of a speculative and a
    plain run are the same bytes."""
    path = tmp_path / "gemma2.gguf"
    ta.write_model(path, "gemma2", "Q8_0", seed=3)
    files = {name: _sampled_run_saved(path, tmp_path, name, speculative=spec)
             for name, spec in (("plain", None), ("spec", {"type": "ngram-simple", "ngram_simple_size_n": 1, "ngram_simple_size_m": 6}))}
    stats = files["spec"][2]
    assert files["spec"][0] == files["plain"][0]
    assert files["spec"][1]["n_tokens"] == files["plain"][1]["n_tokens"] == 10 + 59
    assert stats[0] > stats[1], f"no draft was rejected: {stats}"
    assert (tmp_path / "spec.bin").read_bytes() == (tmp_path / "plain.bin").read_bytes()


def test_server_flags_fields_slots_and_metrics(model_path):
    with pytest.raises(CLIError, match="'draft-eagle3' needs a draft head"):
        parse_args(["-m", model_path, "--spec-type", "draft-eagle3"])
    c = parse_args(["-m", model_path, "--spec-type", "ngram-simple", "--spec-ngram-simple-size-n", "2",
                    "--spec-draft-n-max", "8"], env={})
    assert c.spec_type == ["ngram-simple"] and c.spec_ngram_simple_size_n == 2
    assert c.sampling.fields()["speculative.n_max"] == 8
    c = parse_args(["-m", model_path], env={"LLAMA_ARG_SPEC_TYPE": "ngram-simple"})
    assert c.spec_type == ["ngram-simple"]
    c = parse_args(["-m", model_path, "--spec-type", "ngram-map-k4v,ngram-mod", "--spec-ngram-map-k4v-size-m", "6",
                    "--spec-ngram-mod-n-match", "16", "--spec-ngram-map-k-min-hits", "2"], env={})
    kw = c.engine_kwargs()["speculative"]
    assert kw["type"] == "ngram-map-k4v,ngram-mod" and kw["ngram_map_k4v_size_m"] == 6 and kw["ngram_mod_n_match"] == 16
    assert kw["ngram_map_k_min_hits"] == 2 and kw["ngram_simple_size_n"] == 12 and len(kw) == 15
    with pytest.raises(CLIError, match="--spec-ngram-mod-n-match"):
        parse_args(["-m", model_path, "--spec-ngram-mod-n-match", "0"], env={})

    config = parse_args(["-m", model_path, "-c", "1024", "-np", "1", "--spec-type", "ngram-simple",
                         "--spec-ngram-simple-size-n", "2", "--spec-ngram-simple-size-m", "8", "--spec-draft-n-max", "8",
                         "--metrics"], env={})
    s = LiveServer(create_app(config)).start()
    try:
        with httpx.Client(base_url=s.url, timeout=120) as c:
            body = {"prompt": PROMPTS[2], "n_predict": 32, "temperature": 0, "cache_prompt": False}
            r = c.post("/completion", json=body).json()
            t = r["timings"]
            assert 0 < t["draft_n_accepted"] <= t["draft_n"]
            assert r["generation_settings"]["speculative.n_max"] == 8
            off = c.post("/completion", json={**body, "speculative.n_max": 0}).json()
            assert off["content"] == r["content"] and "draft_n" not in off["timings"]
            bad = c.post("/completion", json={**body, "speculative.n_min": "x"})
            assert bad.status_code == 400 and "speculative.n_min" in bad.json()["error"]["message"]
            assert c.get("/slots").json()[0]["speculative"] is True
            assert c.get("/props").json()["default_generation_settings"]["speculative"] is True
            metrics = c.get("/metrics").text
            drafted = next(float(ln.split()[-1]) for ln in metrics.splitlines()
                           if ln.startswith("llamacpp:spec_decode_num_draft_tokens_total"))
            assert drafted == t["draft_n"]
    finally:
        s.stop()


def test_draft_model_of_the_same_weights_is_mostly_accepted(engines, model_path):
    """The model as its own draft (draft-simple, `draft_model=`): its confident greedy
    tokens are the target's, so nearly every drafted token is accepted; the outputs are
    plain decoding's, alone and under concurrent streams."""
    plain, _ = engines
    e = Engine(model_path, n_ctx=2048, n_parallel=2, draft_model=model_path)
    try:
        assert e.info["spec_type"] == "draft-simple" and e.info["draft_model"] == model_path
        drafted = accepted = 0
        for p in (PROMPTS[3], PROMPTS[5]):
            a, b = _gen(plain, p, n_probs=2), _gen(e, p, n_probs=2)
            assert b.tokens == a.tokens and repr(b.probs) == repr(a.probs), p
            drafted += b.timings.draft_n
            accepted += b.timings.draft_n_accepted
        assert drafted > 0 and accepted >= 0.8 * drafted, (drafted, accepted)
        want = [_gen(plain, p).tokens for p in PROMPTS[:2]]
        streams = [e.submit(e.request(p, max_tokens=40, temperature=0.0, cache_prompt=False, ignore_eos=True), quiet=True)
                   for p in PROMPTS[:2]]
        for w, st in zip(want, streams):
            for _ in st:
                pass
            assert st.result.tokens == w
    finally:
        e.close()


def test_draft_model_rejections_leave_outputs_and_caches_exact(tmp_path):
    """A tiny gemma2 target (sliding-window ring) drafted for by another tiny model with the
    same vocabulary and other weights, every draft taken (p_min 0), sampled at temperature
    1: most drafts are rejected, and the tokens and the saved slot are plain decoding's."""
    target, draft = tmp_path / "gemma2.gguf", tmp_path / "draft.gguf"
    ta.write_model(target, "gemma2", "Q8_0", seed=3)
    ta.write_model(draft, "gemma2", "Q8_0", seed=4)
    call = {"speculative": {"p_min": 0.0, "n_max": 4}}
    files = {"plain": _sampled_run_saved(target, tmp_path, "plain", call),
             "spec": _sampled_run_saved(target, tmp_path, "spec", call, draft_model=str(draft))}
    stats = files["spec"][2]
    assert files["spec"][0] == files["plain"][0]
    assert stats[0] > stats[1], f"no draft was rejected: {stats}"
    assert (tmp_path / "spec.bin").read_bytes() == (tmp_path / "plain.bin").read_bytes()


def test_draft_model_flags_and_incompatible_vocabularies(model_path, tmp_path):
    tiny = tmp_path / "tiny.gguf"
    ta.write_model(tiny, "gemma2", "Q8_0", seed=1)
    with pytest.raises(InvalidRequestError, match=r"tiny.gguf cannot draft for .*: the BOS tokens differ \(target: added true, id 2; "):
        Engine(model_path, draft_model=str(tiny))
    c = parse_args(["-m", str(tiny), "-md", str(tiny), "-c", "256"], env={})
    kw = c.engine_kwargs()
    assert kw["draft_model"] == str(tiny) and kw["speculative"]["type"] == "draft-simple"
    assert parse_args(["-m", str(tiny), "-md", str(tiny), "-cd", "512"], env={}).engine_kwargs()["draft_n_ctx"] == 512
    with pytest.raises(InvalidRequestError, match="draft model's context of 16 tokens leaves 4 per slot; raise -cd"):
        Engine(str(tiny), n_ctx=256, n_parallel=4, draft_model=str(tiny), draft_n_ctx=16)
    c = parse_args(["-m", str(tiny), "--spec-type", "ngram-simple,draft-simple"], env={"LLAMA_ARG_SPEC_DRAFT_MODEL": str(tiny)})
    assert c.model_draft == str(tiny) and c.spec_type == ["ngram-simple", "draft-simple"]
    s = LiveServer(create_app(parse_args(["-m", str(tiny), "-md", str(tiny), "-c", "256", "-np", "1", "--spec-draft-p-min", "0",
                                          "--spec-draft-n-max", "4"], env={}))).start()
    try:
        with httpx.Client(base_url=s.url, timeout=60) as h:
            r = h.post("/completion", json={"prompt": "a b a b a b", "n_predict": 16, "temperature": 0}).json()
            assert r["timings"]["draft_n"] > 0 and r["timings"]["draft_n_accepted"] > 0
            assert h.get("/slots").json()[0]["speculative"] is True
    finally:
        s.stop()
