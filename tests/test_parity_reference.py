"""The real model against llama.cpp's reference outputs (../shared/reference):
greedy continuations and teacher-forced log-probabilities."""
import numpy as np
import pytest

# The project's targets for parity with llama.cpp (printed with every run):
TARGET_EXACT_GREEDY = 10  # of 12 prompts, 32 greedy tokens each
STRICT_MARGIN = 0.1  # where llama.cpp's top-1/top-2 margin is at least this, argmax should agree
TARGET_ARGMAX_AGREEMENT = 0.98  # over all steps
TARGET_MEAN_TOP1_DLOGPROB = 0.03  # mean |Δ log-prob| of llama.cpp's top token
#
#
# The forward pass reproduces llama.cpp's x86 arithmetic operation by operation (the f32
# accumulation order of each of its kernels, see README "Parity with llama.cpp"), on every
# instruction set, so the logits are bit-identical: measured on 2026-11-30, greedy exact
# 12/12, argmax agreement 1.0, no strict failures, mean |Δ| 0.0000 (the reference rounds
# log-probs to 5 decimals). The tests assert the targets, and that the log-probs stay at
# the rounding level of the reference file.
ROUNDING_LEVEL = 1e-4


def _log_softmax(x):
    x = x.astype(np.float64)
    m = x.max(axis=-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


@pytest.fixture(scope="module")
def teacher_forced(engine, reference):
    """Per prompt: our log-probs at every position llama.cpp reported steps for."""
    out = []
    for g in reference["greedy"]:
        toks = g["prompt_tokens"] + g["generated_tokens"]
        n = len(g["prompt_tokens"])
        lp = _log_softmax(engine.logits(toks)[n - 1 :])
        out.append((g, lp))
    return out


def test_prompt_tokens_match(engine, reference):
    for g in reference["greedy"]:
        assert engine.tokenize(g["prompt"], add_special=True, parse_special=True) == g["prompt_tokens"], g["prompt"]


def test_greedy_continuations(engine, reference):
    exact = 0
    report = []
    for g in reference["greedy"]:
        want = g["generated_tokens"]
        # a fresh evaluation of the whole prompt, as the reference was made (a reused cached
        # prefix changes the batch shapes, and llama.cpp's arithmetic with them)
        res = engine.generate(g["prompt_tokens"], max_tokens=len(want), temperature=0.0, cache_prompt=False)
        same = res.tokens == want
        exact += same
        if not same:
            k = next((i for i, (a, b) in enumerate(zip(res.tokens, want)) if a != b), min(len(res.tokens), len(want)))
            report.append(f"{g['prompt'][:30]!r}: first difference at token {k}")
    print(f"greedy exact: {exact}/{len(reference['greedy'])} (target {TARGET_EXACT_GREEDY}); " + "; ".join(report))
    assert exact >= TARGET_EXACT_GREEDY, report


def test_teacher_forced_argmax(teacher_forced):
    agree = total = 0
    strict_fail = []
    for g, lp in teacher_forced:
        for i, st in enumerate(g["steps"]):
            ok = int(np.argmax(lp[i])) == st["top_ids"][0]
            agree += ok
            total += 1
            if not ok and st["top_logprobs"][0] - st["top_logprobs"][1] >= STRICT_MARGIN:
                strict_fail.append((g["prompt"][:24], i, st["top_logprobs"][0] - st["top_logprobs"][1]))
    print(
        f"argmax agreement {agree}/{total} = {agree / total:.4f} (target {TARGET_ARGMAX_AGREEMENT}); "
        f"strict failures (margin >= {STRICT_MARGIN}, target 0): {strict_fail}"
    )
    assert agree / total >= TARGET_ARGMAX_AGREEMENT
    assert not strict_fail


def test_teacher_forced_logprobs(teacher_forced):
    diffs = []
    for g, lp in teacher_forced:
        for i, st in enumerate(g["steps"]):
            diffs.append(abs(lp[i][st["top_ids"][0]] - st["top_logprobs"][0]))
    mean = float(np.mean(diffs))
    print(
        f"mean |Δ logprob| of llama.cpp's top token: {mean:.4f} over {len(diffs)} steps "
        f"(max {max(diffs):.3f}; target {TARGET_MEAN_TOP1_DLOGPROB})"
    )
    assert mean <= TARGET_MEAN_TOP1_DLOGPROB
    assert max(diffs) <= ROUNDING_LEVEL, "no longer bit-exact with llama.cpp"
