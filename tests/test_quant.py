"""Quantized tensor types seen from Python: our dequantize against the `gguf` package's
(a numpy port of ggml's dequantize_row_*), and our dot kernels, under every instruction set
this machine has, against a float64 dot of gguf-dequantized weights.

Blocks are random bytes with sane f16 scales written over the scale fields, so every bit
pattern of the quantized fields is exercised.
"""
from __future__ import annotations

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")
from gguf import GGMLQuantizationType  # noqa: E402
from gguf.quants import dequantize as gguf_dequantize  # noqa: E402

core = pytest.importorskip("llamars._core")
if not all(hasattr(core, f) for f in ("dequantize", "vec_dot", "isa")):
    pytest.skip("llamars._core lacks dequantize / vec_dot / isa", allow_module_level=True)

# name -> (elements per block, bytes per block, offsets of f16 scale fields, offsets of f16 min fields)
# Layouts: ggml-common.h.
BLOCKS = {
    "Q4_0": (32, 18, [0], []),
    "Q4_1": (32, 20, [0, 2], [2]),
    "Q5_0": (32, 22, [0], []),
    "Q5_1": (32, 24, [0, 2], [2]),
    "Q8_0": (32, 34, [0], []),
    "Q2_K": (256, 84, [80, 82], [82]),
    "Q3_K": (256, 110, [108], []),
    "Q4_K": (256, 144, [0, 2], [2]),
    "Q5_K": (256, 176, [0, 2], [2]),
    "Q6_K": (256, 210, [208], []),
    "IQ4_NL": (32, 18, [0], []),
    "IQ4_XS": (256, 136, [0], []),
    # byte 0 is an E8M0 exponent, not an f16 field (random_weights keeps it sane)
    "MXFP4": (32, 17, [], []),
    # ternary: codes (value + 1) in the bytes before the f16 d (TQ2_0's code 3 is value 2)
    "TQ1_0": (256, 54, [52], []),
    "TQ2_0": (256, 66, [64], []),
    # grid types: every byte pattern indexes a valid grid entry
    "IQ2_XXS": (256, 66, [0], []),
    "IQ2_XS": (256, 74, [0], []),
    "IQ2_S": (256, 82, [0], []),
    "IQ3_XXS": (256, 98, [0], []),
    "IQ3_S": (256, 110, [0], []),
    "IQ1_S": (256, 50, [0], []),
    # the f16 scale is spread over the top nibbles of the scale words (random_weights)
    "IQ1_M": (256, 56, [], []),
}
TERNARY = ("TQ1_0", "TQ2_0")
FLOATS = ("F32", "F16", "BF16")
TYPES = list(FLOATS) + list(BLOCKS)

# Dequantize: the same f32 operations in the same order as gguf-py, so results are bit-equal.
# Dot vs float64 reference: f32 accumulation over a few thousand terms.
REL_DOT = 1e-5
# Weights with a minimum (Q4_1, Q5_1) dot against Q8_1, whose s = f16(d * sum(q)) is rounded
# to f16 (2^-11 relative) and multiplies the weight minimum.
REL_DOT_Q8_1 = 2e-3
# Different ISAs: same integer block sums, different f32 summation order.
REL_ISA = 1e-5

ISAS = ("scalar", "avx2", "avx512", "neon")
AVAILABLE = set(core.isa()[1])


def f16_bytes(values: np.ndarray) -> np.ndarray:
    return values.astype(np.float16).view(np.uint8).reshape(-1, 2)


def random_weights(name: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """`n` elements of `name` as raw uint8 bytes."""
    if name == "F32":
        return rng.uniform(-1, 1, n).astype("<f4").view(np.uint8)
    if name == "F16":
        return rng.uniform(-1, 1, n).astype("<f2").view(np.uint8)
    if name == "BF16":
        bits = rng.uniform(-1, 1, n).astype("<f4").view("<u4") >> 16  # truncation is a valid bf16
        return bits.astype("<u2").view(np.uint8)
    bs, ts, scales, _ = BLOCKS[name]
    nb = n // bs
    blocks = rng.integers(0, 256, size=(nb, ts), dtype=np.uint8)
    for off in scales:
        mag = rng.uniform(1e-3, 0.1, nb)
        sign = np.where(rng.integers(0, 2, nb) == 0, 1.0, -1.0)
        blocks[:, off : off + 2] = f16_bytes(mag * sign)
    if name == "IQ1_M":
        import tiny_models

        mag = rng.uniform(1e-3, 0.1, nb)
        tiny_models.set_iq1_m_scale(blocks, mag * np.where(rng.integers(0, 2, nb) == 0, 1.0, -1.0))
    if name == "MXFP4":
        blocks[:, 0] = rng.integers(118, 128, nb)  # scales 2^-10 .. 2^-1
        blocks[:2, 0] = [0, 1]  # and the denormal corners
    return blocks.reshape(-1)


def lossless_activations(n: int, rng: np.random.Generator) -> np.ndarray:
    """Integers in [-127, 127] with a +-127 in every 32: Q8_0 / Q8_K quantize them exactly
    (d = +-1), F16 / BF16 hold them exactly, so the reference needs no model of the quantizer."""
    a = rng.integers(-127, 128, n).astype(np.float32)
    a[::32] = np.where(rng.integers(0, 2, n // 32) == 0, 127.0, -127.0)
    return a


def ours_dequantize(name: str, w: np.ndarray, n: int) -> np.ndarray:
    out = np.frombuffer(core.dequantize(name, w.tobytes(), n), dtype="<f4")
    assert out.shape == (n,)
    return out


def gguf_reference(name: str, w: np.ndarray) -> np.ndarray:
    return np.asarray(gguf_dequantize(w, GGMLQuantizationType[name]), dtype=np.float32).reshape(-1)


def n_for(name: str) -> int:
    return 4096 if name in FLOATS else 16 * BLOCKS[name][0]


@pytest.mark.parametrize("name", TYPES)
def test_dequantize_matches_gguf(name):
    rng = np.random.default_rng(TYPES.index(name))
    n = n_for(name)
    w = random_weights(name, n, rng)
    ours = ours_dequantize(name, w, n)
    ref = gguf_reference(name, w)
    assert ref.shape == ours.shape
    bad = np.flatnonzero(ours.view("<u4") != ref.view("<u4"))
    assert bad.size == 0, (
        f"{name}: {bad.size} of {n} values differ, first at {bad[0]}: ours {ours[bad[0]]!r} gguf {ref[bad[0]]!r}"
    )


@pytest.mark.parametrize("name", ["Q4_K", "Q6_K", "Q8_0", "Q5_0"])
def test_dequantize_extreme_bytes(name):
    # every quant byte 0x00 / 0xFF / 0x80 (scales sane): the corners of every bit field
    rng = np.random.default_rng(7)
    bs, ts, scales, _ = BLOCKS[name]
    for byte in (0x00, 0xFF, 0x80, 0x7F):
        blocks = np.full((4, ts), byte, dtype=np.uint8)
        for off in scales:
            blocks[:, off : off + 2] = f16_bytes(rng.uniform(1e-3, 0.1, 4))
        w = blocks.reshape(-1)
        np.testing.assert_array_equal(ours_dequantize(name, w, 4 * bs), gguf_reference(name, w))


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("name", TYPES)
def test_vec_dot_matches_gguf_dequantized_dot(name, isa):
    if isa not in AVAILABLE:
        pytest.skip(f"{isa} not available on this machine")
    rng = np.random.default_rng(1000 + TYPES.index(name))
    n = n_for(name)
    for _ in range(3):
        w = random_weights(name, n, rng)
        a = lossless_activations(n, rng)
        x = gguf_reference(name, w).astype(np.float64)
        want = float(np.dot(x, a.astype(np.float64)))
        got = core.vec_dot(name, w.tobytes(), a.tolist(), isa)
        # bound on every partial sum a kernel forms: |x| plus the weight's scale-only part
        mins = BLOCKS.get(name, (0, 0, [], []))[3]
        if mins:
            w0 = w.reshape(-1, BLOCKS[name][1]).copy()
            for off in mins:
                w0[:, off : off + 2] = 0
            x0 = gguf_reference(name, w0.reshape(-1)).astype(np.float64)
        elif name in TERNARY:
            # the kernels subtract the activation sums for the `- 1` of every code, lane by
            # lane: partial sums reach |d| · |a| per element (all-zero codes dequantize to -d)
            w0 = w.reshape(-1, BLOCKS[name][1]).copy()
            w0[:, : BLOCKS[name][2][0]] = 0
            x0 = gguf_reference(name, w0.reshape(-1)).astype(np.float64)
        else:
            x0 = x
        mag = float(np.dot(np.abs(x) + np.abs(x0), np.abs(a)))
        rel = REL_DOT_Q8_1 if name in ("Q4_1", "Q5_1") else REL_DOT
        assert abs(got - want) <= rel * mag, f"{name} {isa}: got {got}, want {want}, mag {mag}"


@pytest.mark.parametrize("name", TYPES)
def test_vec_dot_isas_agree(name):
    rng = np.random.default_rng(2000 + TYPES.index(name))
    n = n_for(name)
    w = random_weights(name, n, rng)
    a = rng.standard_normal(n).astype(np.float32)  # real quantization this time
    results = {isa: core.vec_dot(name, w.tobytes(), a.tolist(), isa) for isa in ISAS if isa in AVAILABLE}
    x = gguf_reference(name, w).astype(np.float64)
    mag = float(np.dot(np.abs(x), np.abs(a))) * 2 + 1e-30
    base = results["scalar"]
    for isa, got in results.items():
        assert abs(got - base) <= REL_ISA * mag, f"{name}: {isa} {got} vs scalar {base}"
    # and the quantized dot stays near the float one (8-bit activations: ~1% of the magnitude)
    want = float(np.dot(x, a.astype(np.float64)))
    assert abs(base - want) <= 2e-2 * mag, f"{name}: {base} vs float dot {want}"


def test_rejects_bad_lengths_and_types():
    with pytest.raises(core.InvalidRequestError):
        core.dequantize("Q4_K", b"\0" * 143, 256)
    with pytest.raises(core.InvalidRequestError):
        core.dequantize("I32", b"\0" * 1024, 256)
    with pytest.raises(core.InvalidRequestError):
        core.vec_dot("Q8_0", b"\0" * 34, [0.0] * 31, "scalar")


def test_iq_grid_tables_equal_the_gguf_packages():
    """rust/quant/grids/*.bin (compiled into the kernels) hold gguf's copies of ggml's grids."""
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parent.parent / "scripts" / "gen_iq_grids.py"
    out = subprocess.run([sys.executable, str(script), "--check"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
