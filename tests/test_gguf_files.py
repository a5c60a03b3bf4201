"""Bad and unusual GGUF files: every malformed file raises a LlamarsError whose message
names the file (and, for format errors, the byte offset of the bad field); none
crashes or hangs the interpreter. Also: `inspect` and its CLI, split models,
non-default alignment, GGUF v2, files written by the gguf package's own writer.

Files are built with tests/tiny_models.py, whose encoder records the offset of every
field, so each corruption targets a known field and the reported offset is checked.
"""
from __future__ import annotations

import io
import json
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from gguf import GGMLQuantizationType as QT, GGUFValueType as VT

import llamars
import tiny_models as tm
from tiny_models import KV, Arr, Tensor

ARCH = "llama"  # the base model corrupted below: 3 layers, GQA, Q4_0 weights
WTYPE = "Q4_0"
IDS = [1, 40, 300, 7, 99, 260, 5, 120]


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """(bytes, layout, path) of a valid tiny model."""
    d = tmp_path_factory.mktemp("base")
    kvs, tensors = tm.model_kvs(ARCH), tm.model_tensors(ARCH, WTYPE)
    data, lay = tm.build_gguf(kvs, tensors)
    p = d / "base.gguf"
    p.write_bytes(data)
    return data, lay, p


@pytest.fixture(scope="module")
def base_logits(base):
    return llamars.Engine(str(base[2]), n_ctx=32, n_threads=1).logits(IDS)


def patched(data: bytes, at: int, fmt: str, value) -> bytes:
    b = bytearray(data)
    struct.pack_into(fmt, b, at, value)
    return bytes(b)


def load_error(path, exc=llamars.ModelLoadError) -> str:
    """Engine(path) must raise `exc`; returns the message."""
    with pytest.raises(exc) as ei:
        llamars.Engine(str(path), n_ctx=32, n_threads=1)
    return str(ei.value)


def format_error(path, offset=None) -> str:
    """Both inspect() and Engine() reject the file as malformed GGUF, naming the file
    and the byte offset (exactly `offset` when given)."""
    with pytest.raises(llamars.ModelLoadError) as ei:
        llamars.inspect(str(path), file=io.StringIO())
    msg = load_error(path)
    assert msg == str(ei.value)
    assert Path(path).name in msg
    assert "invalid GGUF file at byte offset" in msg
    if offset is not None:
        assert f"byte offset {offset}:" in msg
    return msg


def write(tmp_path, name: str, data: bytes) -> Path:
    p = tmp_path / name
    p.write_bytes(data)
    return p


# ---------------------------------------------------------------- header


@pytest.mark.parametrize("magic", [b"GGUG", b"\0\0\0\0", b"PK\x03\x04", b"FUGG"])
def test_wrong_magic(tmp_path, base, magic):
    p = write(tmp_path, "magic.gguf", magic + base[0][4:])
    msg = format_error(p, offset=0)
    assert "magic" in msg and "not a GGUF file" in msg


@pytest.mark.parametrize(
    "version,hint",
    [(1, "obsolete"), (4, "supported versions: 2, 3"), (0x03000000, "big-endian"), (0x02000000, "big-endian"), (0xFFFFFFFF, "supported")],
)
def test_unsupported_version(tmp_path, base, version, hint):
    p = write(tmp_path, "version.gguf", patched(base[0], 4, "<I", version))
    msg = format_error(p, offset=4)
    assert f"unsupported GGUF version {version}" in msg
    assert hint in msg


def test_empty_file_and_missing_paths(tmp_path):
    empty = write(tmp_path, "empty.gguf", b"")
    format_error(empty, offset=0)
    missing = tmp_path / "does-not-exist.gguf"
    assert "does-not-exist.gguf" in load_error(missing)
    with pytest.raises(llamars.ModelLoadError, match="does-not-exist.gguf"):
        llamars.inspect(str(missing), file=io.StringIO())
    assert tmp_path.name in load_error(tmp_path)  # a directory


# ---------------------------------------------------------------- crash safety (subprocess)

_PROBE = r"""
import io, json, sys, llamars
for path in json.load(sys.stdin):
    r = {"path": path}
    for what in ("inspect", "engine"):
        try:
            if what == "inspect":
                llamars.inspect(path, file=io.StringIO())
            else:
                e = llamars.Engine(path, n_ctx=16, n_threads=1)
                e.logits([1, 2, 3])
            r[what] = ["ok", True, ""]
        except BaseException as ex:
            r[what] = [type(ex).__name__, isinstance(ex, llamars.LlamarsError), str(ex)]
    print(json.dumps(r), flush=True)
"""


def probe(paths, timeout=180):
    """Open every file with inspect() and Engine() (+ one logits call) in a child
    interpreter, so a crash or hang fails the test instead of killing the run."""
    paths = [str(p) for p in paths]
    try:
        r = subprocess.run(
            [sys.executable, "-c", _PROBE], input=json.dumps(paths), capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired as e:
        done = (e.stdout or b"").count(b"\n") if isinstance(e.stdout, bytes) else (e.stdout or "").count("\n")
        pytest.fail(f"hung on {paths[done] if done < len(paths) else '?'} (no answer within {timeout} s)")
    results = [json.loads(line) for line in r.stdout.splitlines()]
    if r.returncode != 0:
        bad = paths[len(results)] if len(results) < len(paths) else "?"
        pytest.fail(f"interpreter died (rc {r.returncode}) on {bad}:\n{r.stderr[-3000:]}")
    assert len(results) == len(paths)
    return results


def _cut_points(lay: tm.Layout):
    kv = lay.kv
    tok_key, _, tok_val, tok_end = kv["tokenizer.ggml.tokens"]
    first_t = lay.tensor_info["token_embd.weight"]
    last_name = list(lay.tensor_data)[-1]
    last_start, last_n = lay.tensor_data[last_name]
    first_start, first_n = lay.tensor_data["token_embd.weight"]
    mid = lay.tensor_info["blk.1.attn_k.weight"]
    cuts = {
        "empty": 0,
        "in magic": 2,
        "after magic": 4,
        "in version": 6,
        "after version": 8,
        "in tensor count": 12,
        "in kv count": 20,
        "after header": 24,
        "in first key length": 27,
        "in first key": kv["general.architecture"][0] + 10,
        "before first value type": kv["general.architecture"][1],
        "in first value type": kv["general.architecture"][1] + 2,
        "in string value": kv["general.architecture"][2] + 9,
        "in f32 value": kv[f"{ARCH}.rope.freq_base"][2] + 1,
        "in array element type": tok_val + 2,
        "in array count": tok_val + 7,
        "in array items": (tok_val + tok_end) // 2,
        "last kv, bool value": kv["tokenizer.ggml.add_eos_token"][2],
        "start of tensor infos": first_t["name"],
        "in tensor name": first_t["name"] + 12,
        "in n_dims": first_t["n_dims"] + 1,
        "in dims": first_t["dims"] + 11,
        "in tensor type": mid["type"] + 3,
        "in tensor offset": mid["offset"] + 4,
        "end of tensor infos": lay.header_end,
        "in alignment padding": lay.data_offset - 1 if lay.data_offset > lay.header_end else lay.header_end,
        "start of data": lay.data_offset,
        "in first tensor data": first_start + first_n // 2,
        "one byte short of first tensor": first_start + first_n - 1,
        "in last tensor data": last_start + last_n // 2,
        "one byte short of last tensor": last_start + last_n - 1,
    }
    return cuts


def test_truncated_files_raise_model_load_error(tmp_path, base):
    data, lay, _ = base
    cuts = _cut_points(lay)
    assert len(set(cuts.values())) >= 25
    paths = []
    for i, (what, n) in enumerate(cuts.items()):
        assert 0 <= n < len(data)
        paths.append(write(tmp_path, f"cut{i:02d}.gguf", data[:n]))
    for (what, n), r in zip(cuts.items(), probe(paths)):
        for side in ("inspect", "engine"):
            name, is_llamars, msg = r[side]
            assert name == "ModelLoadError", f"cut at {n} ({what}), {side}: {name}: {msg}"
            assert Path(r["path"]).name in msg and "byte offset" in msg, f"cut at {n} ({what}): {msg}"


def test_bit_flips_load_or_raise_llamars_error(tmp_path, base):
    """Random single-bit flips (fixed seed) in the first 512 bytes (header, general.* and
    llama.* keys, start of the vocabulary) and in the tensor-info table: each file either
    loads (and computes) or raises a LlamarsError; nothing else, no crash, no hang."""
    data, lay, _ = base
    rng = np.random.default_rng(20240601)
    infos_at = lay.kv["tokenizer.ggml.add_eos_token"][3]
    positions = list(rng.integers(0, 512, 160)) + list(rng.integers(infos_at, lay.header_end, 100))
    paths = []
    for i, pos in enumerate(positions):
        b = bytearray(data)
        b[pos] ^= 1 << int(rng.integers(0, 8))
        paths.append(write(tmp_path, f"flip{i:03d}.gguf", bytes(b)))
    results = probe(paths)
    outcomes = {"ok": 0, "error": 0}
    for pos, r in zip(positions, results):
        for side in ("inspect", "engine"):
            name, is_llamars, msg = r[side]
            assert name == "ok" or is_llamars, f"flip at byte {pos}, {side}: {name}: {msg}"
        outcomes["ok" if r["engine"][0] == "ok" else "error"] += 1
    # both outcomes occur, so the test exercises error paths and the forward pass alike
    assert outcomes["ok"] > 0 and outcomes["error"] > 0, outcomes


_HUGE = {
    "block_count_2**31": (f"{ARCH}.block_count", VT.UINT32, 2**31),
    "block_count_2**40": (f"{ARCH}.block_count", VT.UINT64, 2**40),
    "head_count_2**40": (f"{ARCH}.attention.head_count", VT.UINT64, 2**40),
    "feed_forward_length_2**40": (f"{ARCH}.feed_forward_length", VT.UINT64, 2**40),
}


@pytest.mark.parametrize("case", list(_HUGE))
def test_huge_hyperparameters_raise_instead_of_aborting(tmp_path, case):
    """Hyper-parameters from metadata that would need absurd allocations: inspect only
    reads them; the engine must refuse the file with a ModelLoadError, not abort."""
    key, vtype, value = _HUGE[case]
    p = tmp_path / "huge.gguf"
    tm.write_model(p, ARCH, WTYPE, drop_kvs=[key], extra_kvs=[KV(key, vtype, value)])
    (r,) = probe([p], timeout=120)
    assert r["inspect"][0] == "ok", r["inspect"]
    assert r["engine"][0] == "ModelLoadError", r["engine"]
    assert p.name in r["engine"][2], r["engine"]


def test_huge_training_context_with_n_ctx_zero(tmp_path):
    """n_ctx=0 means 'the model's context_length': a file claiming 2**29 tokens (a KV
    cache of ~800 GB, below the engine's 1 TiB sanity limit) must give a LlamarsError
    rather than abort the interpreter on the failed allocation."""
    key = f"{ARCH}.context_length"
    p = tmp_path / "huge-ctx.gguf"
    tm.write_model(p, ARCH, WTYPE, drop_kvs=[key], extra_kvs=[KV(key, VT.UINT64, 2**29)])
    script = textwrap.dedent(
        f"""
        import llamars
        try:
            llamars.Engine({str(p)!r}, n_ctx=0, n_threads=1).logits([1, 2])
            print("ok")
        except llamars.LlamarsError as e:
            print(type(e).__name__, e)
        """
    )
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"interpreter died (rc {r.returncode}): {r.stderr[:500]}"


# ---------------------------------------------------------------- oversized counts and bad fields


@pytest.mark.parametrize(
    "field",
    ["tensor_count", "kv_count", "key_length", "string_value_length", "array_length", "tensor_name_length", "tensor_dim", "n_dims"],
)
def test_oversized_counts(tmp_path, base, field):
    data, lay, _ = base
    t = lay.tensor_info["blk.0.attn_q.weight"]
    at, fmt, value = {
        "tensor_count": (8, "<Q", 2**60),
        "kv_count": (16, "<Q", 2**60),
        "key_length": (lay.kv["general.name"][0], "<Q", 2**60),
        "string_value_length": (lay.kv["general.architecture"][2], "<Q", 2**60),
        "array_length": (lay.kv["tokenizer.ggml.scores"][2] + 4, "<Q", 2**60),
        "tensor_name_length": (t["name"], "<Q", 2**60),
        "tensor_dim": (t["dims"] + 8, "<Q", 2**60),
        "n_dims": (t["n_dims"], "<I", 2**31),
    }[field]
    p = write(tmp_path, f"{field}.gguf", patched(data, at, fmt, value))
    msg = format_error(p, offset=at)
    assert str(value) in msg


def test_tensor_count_slightly_too_large(tmp_path, base):
    """One more tensor than the infos hold: the parser runs into the data section."""
    data, lay, _ = base
    p = write(tmp_path, "count.gguf", patched(data, 8, "<Q", len(lay.tensor_info) + 1))
    format_error(p)


def test_unknown_metadata_value_type(tmp_path, base):
    data, lay, _ = base
    _, type_at, _, _ = lay.kv["general.name"]
    for bad in (13, 0xFFFFFFFF):
        p = write(tmp_path, f"vtype{bad}.gguf", patched(data, type_at, "<I", bad))
        msg = format_error(p, offset=type_at)
        assert f"unknown value type {bad}" in msg and "general.name" in msg


def test_unknown_array_element_type(tmp_path, base):
    data, lay, _ = base
    at = lay.kv["tokenizer.ggml.scores"][2]
    p = write(tmp_path, "etype.gguf", patched(data, at, "<I", 99))
    msg = format_error(p, offset=at)
    assert "unknown array element type 99" in msg and "tokenizer.ggml.scores" in msg


def test_invalid_bool_byte(tmp_path, base):
    data, lay, _ = base
    at = lay.kv["tokenizer.ggml.add_bos_token"][2]
    p = write(tmp_path, "bool.gguf", patched(data, at, "<B", 2))
    msg = format_error(p, offset=at)
    assert "bool" in msg and "tokenizer.ggml.add_bos_token" in msg


def test_deeply_nested_array_is_rejected(tmp_path):
    v = Arr(VT.UINT8, [1])
    for _ in range(200):
        v = Arr(VT.ARRAY, [v])
    p = tmp_path / "deep.gguf"
    tm.write_gguf(p, tm.model_kvs(ARCH, extra=[KV("test.deep", VT.ARRAY, v)]), tm.model_tensors(ARCH, WTYPE))
    msg = format_error(p)
    assert "nested" in msg and "test.deep" in msg


@pytest.mark.parametrize("type_id", [4, 5, 31, 99, 2**31])
def test_unknown_tensor_type_id(tmp_path, base, type_id):
    data, lay, _ = base
    at = lay.tensor_info["blk.0.attn_q.weight"]["type"]
    p = write(tmp_path, "ttype.gguf", patched(data, at, "<I", type_id))
    msg = format_error(p, offset=at)
    assert f"unknown tensor type {type_id}" in msg and "blk.0.attn_q.weight" in msg


def test_known_tensor_type_without_kernel(tmp_path):
    """I32 parses (inspect lists it) but has no matmul kernel: a clear load error."""
    ts = tm.model_tensors(ARCH, WTYPE)
    i = next(k for k, t in enumerate(ts) if t.name == "blk.1.ffn_down.weight")
    n = tm.tensor_nbytes(QT.I32, ts[i].dims)
    ts[i] = Tensor(ts[i].name, int(QT.I32), ts[i].dims, bytes(n))
    p = tmp_path / "i32.gguf"
    tm.write_gguf(p, tm.model_kvs(ARCH), ts)
    info = llamars.inspect(str(p), file=io.StringIO())
    assert ("blk.1.ffn_down.weight", "I32") in [(t[0], t[1]) for t in info["tensors"]]
    msg = load_error(p)
    assert "blk.1.ffn_down.weight" in msg and "I32" in msg
    # and what would load instead
    assert "Q4_K" in msg and "TQ2_0" in msg
    assert p.name in msg, f"message does not name the file: {msg}"


def test_tensor_data_past_end_of_file(tmp_path, base):
    data, lay, _ = base
    name = list(lay.tensor_data)[-1]
    at = lay.tensor_info[name]["offset"]
    (rel,) = struct.unpack_from("<Q", data, at)
    for i, off in enumerate([rel + 2**20, 2**64 - 32, 2**63]):
        p = write(tmp_path, f"past{i}.gguf", patched(data, at, "<Q", off))
        msg = format_error(p, offset=at)
        assert name in msg and "past the end" in msg


def test_misaligned_tensor_offset(tmp_path, base):
    data, lay, _ = base
    at = lay.tensor_info["blk.0.ffn_up.weight"]["offset"]
    (rel,) = struct.unpack_from("<Q", data, at)
    p = write(tmp_path, "misaligned.gguf", patched(data, at, "<Q", rel + 4))
    msg = format_error(p, offset=at)
    assert "alignment" in msg and "blk.0.ffn_up.weight" in msg


def _with_extra_tensor(tmp_path, name, t: Tensor) -> Path:
    p = tmp_path / name
    tm.write_gguf(p, tm.model_kvs(ARCH), tm.model_tensors(ARCH, WTYPE) + [t])
    return p


def test_row_length_not_divisible_by_block_size(tmp_path):
    p = _with_extra_tensor(tmp_path, "rows.gguf", Tensor("extra.weight", int(QT.Q4_0), [48, 2], bytes(3 * 18)))
    msg = format_error(p)
    assert "extra.weight" in msg and "row length 48" in msg and "block size 32" in msg


@pytest.mark.parametrize("dims", [[], [256, 1, 1, 1, 1], [0, 4], [256, 0]])
def test_bad_tensor_dimensions(tmp_path, dims):
    p = _with_extra_tensor(tmp_path, "dims.gguf", Tensor("extra.weight", int(QT.F32), dims, b""))
    msg = format_error(p)
    assert "extra.weight" in msg


def test_element_count_overflow(tmp_path):
    p = _with_extra_tensor(tmp_path, "ovf.gguf", Tensor("extra.weight", int(QT.F32), [2**40, 2**40, 2**40], b""))
    msg = format_error(p)
    assert "extra.weight" in msg


def test_duplicate_tensor_name(tmp_path):
    ts = tm.model_tensors(ARCH, WTYPE)
    p = _with_extra_tensor(tmp_path, "dup.gguf", ts[1])
    msg = format_error(p)
    assert "duplicate" in msg and ts[1].name in msg


@pytest.mark.parametrize("alignment", [0, 48, 2**63 + 1])
def test_bad_alignment_value(tmp_path, alignment):
    kvs = tm.model_kvs(ARCH, extra=[KV("general.alignment", VT.UINT64, 32)])
    data, lay = tm.build_gguf(kvs, tm.model_tensors(ARCH, WTYPE))
    p = write(tmp_path, "align.gguf", patched(data, lay.kv["general.alignment"][2], "<Q", alignment))
    msg = format_error(p)
    assert "general.alignment" in msg and "power of two" in msg


# ---------------------------------------------------------------- model-level errors


@pytest.mark.parametrize(
    "key",
    [f"{ARCH}.block_count", f"{ARCH}.embedding_length", f"{ARCH}.attention.head_count", f"{ARCH}.feed_forward_length", "general.architecture"],
)
def test_missing_required_key(tmp_path, key):
    p = tmp_path / "nokey.gguf"
    tm.write_model(p, ARCH, WTYPE, drop_kvs=[key])
    llamars.inspect(str(p), file=io.StringIO())  # the file itself is fine
    msg = load_error(p)
    assert key in msg and "missing" in msg and p.name in msg


def test_key_with_wrong_type(tmp_path):
    p = tmp_path / "keytype.gguf"
    key = f"{ARCH}.block_count"
    tm.write_model(p, ARCH, WTYPE, drop_kvs=[key], extra_kvs=[KV(key, VT.STRING, "3")])
    msg = load_error(p)
    assert key in msg and "STRING" in msg and p.name in msg


def test_unsupported_architecture(tmp_path):
    kvs = [KV("general.architecture", VT.STRING, "mamba9") if kv.key == "general.architecture" else kv for kv in tm.model_kvs(ARCH)]
    p = tmp_path / "arch.gguf"
    tm.write_gguf(p, kvs, tm.model_tensors(ARCH, WTYPE))
    msg = load_error(p)
    assert "mamba9" in msg
    for a in ("llama", "qwen2", "qwen3", "gemma3", "phi3"):
        assert a in msg
    assert p.name in msg, f"message does not name the file: {msg}"


@pytest.mark.parametrize("tensor", ["token_embd.weight", "output_norm.weight", "blk.2.ffn_down.weight", "blk.0.attn_k.weight"])
def test_missing_tensor(tmp_path, tensor):
    p = tmp_path / "notensor.gguf"
    tm.write_model(p, ARCH, WTYPE, drop_tensors=[tensor])
    msg = load_error(p)
    assert tensor in msg and "missing" in msg and p.name in msg


def test_tensor_with_wrong_shape(tmp_path):
    ts = tm.model_tensors(ARCH, WTYPE)
    i = next(k for k, t in enumerate(ts) if t.name == "blk.0.attn_k.weight")
    ts[i] = Tensor(ts[i].name, ts[i].ggml_type, [ts[i].dims[1], ts[i].dims[0]], ts[i].data)  # [128, 256]: same bytes
    p = tmp_path / "shape.gguf"
    tm.write_gguf(p, tm.model_kvs(ARCH), ts)
    msg = load_error(p)
    assert "blk.0.attn_k.weight" in msg and "shape" in msg and p.name in msg


def test_unsupported_tokenizer_model(tmp_path):
    kvs = [KV("tokenizer.ggml.model", VT.STRING, "rwkv") if kv.key == "tokenizer.ggml.model" else kv for kv in tm.model_kvs(ARCH)]
    p = tmp_path / "tok.gguf"
    tm.write_gguf(p, kvs, tm.model_tensors(ARCH, WTYPE))
    with pytest.raises(llamars.TokenizerError) as ei:
        llamars.Engine(str(p), n_ctx=32, n_threads=1)
    assert "rwkv" in str(ei.value) and "t5 (Unigram)" in str(ei.value) and p.name in str(ei.value)
    assert isinstance(ei.value, llamars.LlamarsError)


# ---------------------------------------------------------------- inspect and its CLI

_ALL_TYPES = [
    KV("test.u8", VT.UINT8, 200),
    KV("test.i8", VT.INT8, -100),
    KV("test.u16", VT.UINT16, 60000),
    KV("test.i16", VT.INT16, -30000),
    KV("test.u32", VT.UINT32, 4_000_000_000),
    KV("test.i32", VT.INT32, -2_000_000_000),
    KV("test.f32", VT.FLOAT32, 0.1),
    KV("test.bool", VT.BOOL, False),
    KV("test.string", VT.STRING, "h\u00e9llo \u2713 \U0001f999"),
    KV("test.u64", VT.UINT64, 2**63 + 5),
    KV("test.i64", VT.INT64, -(2**62) - 3),
    KV("test.f64", VT.FLOAT64, 1 / 3),
    KV("test.arr_i16", VT.ARRAY, Arr(VT.INT16, [1, -2, 3])),
    KV("test.arr_f64", VT.ARRAY, Arr(VT.FLOAT64, [0.5, -1e300])),
    KV("test.arr_str", VT.ARRAY, Arr(VT.STRING, ["a", "", "bc d"])),
    KV("test.arr_bool", VT.ARRAY, Arr(VT.BOOL, [True, False])),
    KV("test.arr_empty", VT.ARRAY, Arr(VT.UINT32, [])),
    KV("test.arr_nested", VT.ARRAY, Arr(VT.ARRAY, [Arr(VT.UINT16, [1, 2]), Arr(VT.UINT16, []), Arr(VT.UINT16, [3])])),
    KV("test.arr_nested3", VT.ARRAY, Arr(VT.ARRAY, [Arr(VT.ARRAY, [Arr(VT.STRING, ["x", "y"])])])),
]


def _expected(vtype, v):
    """The Python value inspect() should return: lists for arrays, f32-rounded FLOAT32."""
    if vtype == VT.ARRAY:
        return [_expected(v.elem_type, x) for x in v.items]
    if vtype == VT.FLOAT32:
        return float(np.float32(v))
    return v


def _type_name(kv: KV) -> str:
    if kv.vtype == VT.ARRAY:
        return f"ARRAY[{VT(kv.value.elem_type).name}]"
    return VT(kv.vtype).name


@pytest.fixture(scope="module")
def typed_model(tmp_path_factory):
    p = tmp_path_factory.mktemp("typed") / "typed.gguf"
    kvs = tm.model_kvs(ARCH, extra=_ALL_TYPES)
    tensors = tm.model_tensors(ARCH, WTYPE)
    lay = tm.write_gguf(p, kvs, tensors)
    return p, kvs, tensors, lay


def test_inspect_lists_every_key_and_tensor(typed_model):
    p, kvs, tensors, lay = typed_model
    buf = io.StringIO()
    info = llamars.inspect(str(p), file=buf)
    assert info["version"] == 3
    assert info["alignment"] == 32
    assert info["data_offset"] == lay.data_offset
    assert info["n_files"] == 1
    assert info["file_size"] == lay.size == p.stat().st_size
    assert [m[0] for m in info["metadata"]] == [kv.key for kv in kvs]
    for (key, ty, value), kv in zip(info["metadata"], kvs):
        assert ty == _type_name(kv), key
        want = _expected(kv.vtype, kv.value)
        assert value == want and type(value) is type(want), key
    assert len(info["tensors"]) == len(tensors)
    for row, t in zip(info["tensors"], tensors):
        name, ty, dims, offset, nbytes, file_index = row
        assert (name, ty, list(dims), file_index) == (t.name, QT(t.ggml_type).name, t.dims, 0)
        assert (offset, nbytes) == lay.tensor_data[t.name]
    text = buf.getvalue()
    for kv in kvs:
        assert kv.key in text
    for t in tensors:
        assert t.name in text


def test_encoder_agrees_with_gguf_reader(typed_model):
    """tests/tiny_models.py's encoder, read back by the gguf package: same keys, values, tensors."""
    from gguf import GGUFReader

    p, kvs, tensors, lay = typed_model
    r = GGUFReader(str(p))
    assert [k for k in r.fields if not k.startswith("GGUF.")] == [kv.key for kv in kvs]
    for kv in kvs:
        if kv.key.startswith("test.") and kv.vtype != VT.ARRAY:
            assert r.fields[kv.key].contents() == _expected(kv.vtype, kv.value), kv.key
    for rt, t in zip(r.tensors, tensors):
        assert rt.name == t.name and int(rt.tensor_type) == t.ggml_type
        assert [int(d) for d in rt.shape] == t.dims
        assert int(rt.data_offset) == lay.tensor_data[t.name][0]


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "llamars.inspect", *map(str, args)], capture_output=True, text=True, timeout=120)


def test_inspect_cli(typed_model, tmp_path):
    p, kvs, tensors, lay = typed_model
    r = _cli(p)
    assert r.returncode == 0, r.stderr
    assert "GGUF v3" in r.stdout
    for kv in kvs:
        assert kv.key in r.stdout
    for t in tensors:
        assert t.name in r.stdout
    assert "<0xFF>" not in r.stdout  # long arrays are abbreviated ...
    full = _cli(p, "--all")
    assert full.returncode == 0 and "<0xFF>" in full.stdout  # ... unless --all

    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + struct.pack("<I", 7) + bytes(16))
    r = _cli(bad)
    assert r.returncode == 1 and r.stdout == ""
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("error: ") and "bad.gguf" in last and "byte offset 4" in last
    assert "Traceback" not in r.stderr
    r = _cli(tmp_path / "nope.gguf")
    last = r.stderr.strip().splitlines()[-1]
    assert r.returncode == 1 and last.startswith("error: ") and "nope.gguf" in last


def test_inspect_cli_prints_nothing_to_stderr_on_success(typed_model):
    """`python -m llamars.inspect` must not emit warnings (e.g. runpy's 'found in
    sys.modules' RuntimeWarning when the package __init__ imports the module)."""
    r = _cli(typed_model[0])
    assert r.returncode == 0
    assert r.stderr == ""


# ---------------------------------------------------------------- unusual but valid files


def test_version_2_and_alignment_64_give_identical_logits(tmp_path, base, base_logits):
    v2 = tmp_path / "v2.gguf"
    tm.write_model(v2, ARCH, WTYPE, version=2)
    assert llamars.inspect(str(v2), file=io.StringIO())["version"] == 2
    np.testing.assert_array_equal(llamars.Engine(str(v2), n_ctx=32, n_threads=1).logits(IDS), base_logits)

    a64 = tmp_path / "a64.gguf"
    lay = tm.write_model(a64, ARCH, WTYPE, extra_kvs=[KV("general.alignment", VT.UINT32, 64)])
    info = llamars.inspect(str(a64), file=io.StringIO())
    assert info["alignment"] == 64 and info["data_offset"] == lay.data_offset and lay.data_offset % 64 == 0
    assert all(t[3] % 64 == 0 for t in info["tensors"])
    np.testing.assert_array_equal(llamars.Engine(str(a64), n_ctx=32, n_threads=1).logits(IDS), base_logits)


def test_file_from_gguf_package_writer_loads_identically(tmp_path, base_logits):
    """The same model written by gguf.GGUFWriter (its own padding and layout)."""
    from gguf import GGUFWriter

    p = tmp_path / "official.gguf"
    w = GGUFWriter(str(p), ARCH)
    for kv in tm.model_kvs(ARCH):
        if kv.key == "general.architecture":
            continue
        if kv.vtype == VT.ARRAY:
            w.add_key_value(kv.key, kv.value.items, VT.ARRAY, sub_type=VT(kv.value.elem_type))
        else:
            w.add_key_value(kv.key, kv.value, VT(kv.vtype))
    for t in tm.model_tensors(ARCH, WTYPE):
        if t.ggml_type == QT.F32:
            arr = np.frombuffer(t.data, dtype=np.float32).reshape(list(reversed(t.dims)))
            w.add_tensor(t.name, arr)
        else:
            arr = np.frombuffer(t.data, dtype=np.uint8).reshape(t.dims[1], -1)
            w.add_tensor(t.name, arr, raw_dtype=QT(t.ggml_type))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    np.testing.assert_array_equal(llamars.Engine(str(p), n_ctx=32, n_threads=1).logits(IDS), base_logits)


# ---------------------------------------------------------------- split models


@pytest.fixture(scope="module")
def split_model(tmp_path_factory):
    d = tmp_path_factory.mktemp("split")
    return tm.write_split_model(d, "tiny", ARCH, WTYPE, n_parts=3)


def test_split_model_loads_as_one(split_model, base, base_logits):
    parts = split_model
    assert [p.name for p in parts] == ["tiny-00001-of-00003.gguf", "tiny-00002-of-00003.gguf", "tiny-00003-of-00003.gguf"]
    info = llamars.inspect(str(parts[0]), file=io.StringIO())
    assert info["n_files"] == 3
    assert info["file_size"] == sum(p.stat().st_size for p in parts)
    names = [t[0] for t in info["tensors"]]
    assert names == [t.name for t in tm.model_tensors(ARCH, WTYPE)]
    assert sorted({t[5] for t in info["tensors"]}) == [0, 1, 2]
    eng = llamars.Engine(str(parts[0]), n_ctx=32, n_threads=1)
    assert eng.info["n_params"] == sum(int(np.prod(t.dims)) for t in tm.model_tensors(ARCH, WTYPE))
    # same bytes through the same kernels: bit-identical to the single-file model
    np.testing.assert_array_equal(eng.logits(IDS), base_logits)


def test_split_model_opened_from_a_later_part(split_model, base_logits):
    eng = llamars.Engine(str(split_model[1]), n_ctx=32, n_threads=1)
    np.testing.assert_array_equal(eng.logits(IDS), base_logits)


def test_split_model_missing_part(split_model, tmp_path):
    import shutil

    for k in (1, 2):
        d = tmp_path / f"missing{k}"
        d.mkdir()
        for i, p in enumerate(split_model):
            if i != k:
                shutil.copy(p, d / p.name)
        first = d / split_model[0].name
        msg = load_error(first)
        assert split_model[k].name in msg and "missing" in msg
        with pytest.raises(llamars.ModelLoadError, match=split_model[k].name):
            llamars.inspect(str(first), file=io.StringIO())


def test_split_part_with_wrong_split_no(tmp_path):
    parts = tm.write_split_model(tmp_path, "bad", ARCH, WTYPE, n_parts=3)
    data, lay = tm.build_gguf(
        [KV("split.no", VT.UINT16, 1), KV("split.count", VT.UINT16, 3), KV("split.tensors.count", VT.INT32, 1)], []
    )
    parts[2].write_bytes(data)  # part 3 claims to be part 2 (and holds no tensors)
    msg = load_error(parts[0])
    assert "split.no" in msg and parts[2].name in msg
