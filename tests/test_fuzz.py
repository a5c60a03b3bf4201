"""Bounded fuzzing of the parsers a client or a file controls (hypothesis): the GBNF and
Lark grammar converters, the JSON-schema path, and the GGUF reader. Every input either
works or raises a `LlamarsError` subclass; none crashes the process, raises anything
else, or takes unbounded time. Each test runs a fixed number of examples under a
deadline, with a fixed seed so a CI failure reproduces; inputs that once failed are
kept as `@example`s.

`LLAMARS_FUZZ_EXAMPLES` scales the example counts (default 1; e.g. 20 for a long
local run)."""
from __future__ import annotations

import json
import os
import struct
import time
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, example, given, seed, settings, strategies as st

import llamars
import tiny_models as tm

SCALE = max(1, int(os.environ.get("LLAMARS_FUZZ_EXAMPLES", "1")))
# One compile must finish well inside this; the limits (rules, nesting, $refs, repetition
# bounds) are what keep it so.
DEADLINE = timedelta(seconds=20)
COMMON = dict(deadline=DEADLINE, derandomize=False, database=None, print_blob=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture])
ACCEPTED = (llamars.InvalidRequestError, llamars.NotSupportedError)
STATS: dict = {}


def _count(name: str, ok: bool) -> None:
    s = STATS.setdefault(name, {"tried": 0, "accepted": 0, "refused": 0, "t0": time.monotonic()})
    s["tried"] += 1
    s["t1"] = time.monotonic()
    s["accepted" if ok else "refused"] += 1


@pytest.fixture(scope="module", autouse=True)
def _report():
    yield
    for name, s in STATS.items():
        print(f"\nfuzz {name}: {s['tried']} inputs ({s['accepted']} accepted, {s['refused']} refused with a "
              f"clear error) in {s['t1'] - s['t0']:.1f} s")


def _compile(engine, name: str, **kw) -> None:
    try:
        engine._core.compile_grammar(**kw)
        _count(name, True)
    except ACCEPTED as e:
        assert str(e), "an error without a message"
        _count(name, False)


# ---------------------------------------------------------------- GBNF / Lark

RULES = ["a", "b", "item", "x-y", "r1", "ws", "value"]
_CHARS = st.characters(codec="utf-8", exclude_categories=("Cs",))
GOOD_ESC = st.sampled_from(["\\n", "\\t", "\\\\", '\\"', "\\x41", "\\u00e9", "\\U0001F600", "\\]", "\\-"])
BAD_ESC = st.sampled_from(["\\x", "\\u12", "\\q", "\\U0011FFFF", "\\"])


def _mostly(good, *rare, percent: int = 95):
    """`good` in `percent` % of draws, one of `rare` otherwise (so most inputs get deep)."""
    return st.integers(0, 99).flatmap(lambda r: good if r < percent or not rare else rare[r % len(rare)])


ESC = _mostly(GOOD_ESC, BAD_ESC)
REPEAT = _mostly(
    st.sampled_from(["", "", "", "*", "+", "?"]),
    st.tuples(st.integers(0, 40), st.integers(0, 40)).map(lambda t: "{%d,%d}" % (min(t), max(t))),
    st.integers(0, 40).map(lambda n: "{%d}" % n),
    st.integers(0, 40).map(lambda n: "{%d,}" % n),
    st.integers(0, 2**64 + 5).map(lambda n: "{%d}" % n),  # past the repetition limit
    st.sampled_from(["{", "{1,", "{,3}", "{-1}", "{3,1}"]),  # malformed
    percent=90,
)


def _literal():
    return st.lists(st.one_of(st.text(_CHARS.filter(lambda c: c not in '"\\\n'), max_size=6), ESC), max_size=4).map(
        lambda parts: '"' + "".join(parts) + '"')


def _char_class():
    item = st.one_of(st.text(_CHARS.filter(lambda c: c not in "]\\\n"), min_size=1, max_size=1),
                     st.tuples(st.sampled_from("a0A"), st.sampled_from("z9Z")).map(lambda t: f"{t[0]}-{t[1]}"), ESC)
    return st.tuples(st.booleans(), st.lists(item, min_size=1, max_size=4)).map(
        lambda t: "[" + ("^" if t[0] else "") + "".join(t[1]) + "]")


def _expr(atoms, depth: int, rep=REPEAT):
    atom = atoms
    if depth > 0:
        atom = st.one_of(atom, _expr(atoms, depth - 1, rep).map(lambda e: f"({e})"))
    seq = st.lists(st.tuples(atom, rep).map("".join), min_size=1, max_size=4).map(" ".join)
    return st.lists(seq, min_size=1, max_size=3).map(" | ".join)


# a random edit of the text: the near-valid inputs that reach deep into a parser
GARBAGE_CHARS = list('::=|()[]^*+?{},"\\.- \n#/%azAZ09é😀')


@st.composite
def _mutate(draw, text):
    text = draw(text)
    for _ in range(draw(st.sampled_from([0, 0, 0, 1, 2]))):
        at = draw(st.integers(0, len(text)))
        cut = draw(st.integers(0, 3))
        text = text[:at] + draw(st.text(st.sampled_from(GARBAGE_CHARS), max_size=3)) + text[at + cut:]
    return text


@st.composite
def _gbnf(draw):
    names = ["root"] + draw(st.lists(st.sampled_from(RULES), unique=True, max_size=4))
    refs = st.sampled_from(names + ["undefined-rule"] if draw(st.integers(0, 9)) == 0 else names)
    atoms = st.one_of(_literal(), _literal(), _char_class(), refs, st.just("."))
    body = "\n".join(f"{n} ::= {draw(_expr(atoms, 3))}" + draw(st.sampled_from(["", "  # comment"])) for n in names)
    return body


@st.composite
def _lark(draw):
    names = ["start"] + draw(st.lists(st.sampled_from([r.replace("-", "_") for r in RULES]), unique=True, max_size=4))
    atoms = st.one_of(_literal(), st.sampled_from(names), PATTERNS.map(lambda p: "/" + p.replace("/", "") + "/"))
    rep = st.sampled_from(["", "", "*", "+", "?", "{2,5}", "{3}", "{99999999999}"])
    return "%llguidance {}\n" + "\n".join(f"{n}: {draw(_expr(atoms, 2, rep))}" for n in names)


PATTERNS = st.one_of(st.sampled_from(["^[a-z]+$", "a{2,5}", "(ab|cd)*", "[", "(", "a{99999}", "\\d{1,3}", ".*", "^$", "x**"]),
                     st.text(st.sampled_from(list("ab()[]{}|*+?^$.\\d0-9,")), max_size=20))
GBNF = _mutate(_gbnf())
LARK = _mutate(_lark())
GARBAGE = st.text(st.sampled_from(GARBAGE_CHARS), max_size=200)


@seed(20261201)
@settings(max_examples=250 * SCALE, **COMMON)
@given(g=st.one_of(GBNF, GARBAGE))
@example(g='root ::= "a"{0,18446744073709551615}')
@example(g='root ::= ' + "(" * 40 + '"x"' + ")" * 40)
@example(g='root ::= [\\')
def test_gbnf_converter_survives_arbitrary_grammars(engine, g):
    _compile(engine, "gbnf", grammar=g)


@seed(20261202)
@settings(max_examples=120 * SCALE, **COMMON)
@given(g=LARK)
def test_lark_converter_survives_arbitrary_grammars(engine, g):
    _compile(engine, "lark", grammar=g)


# ---------------------------------------------------------------- JSON schema

SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=False, allow_infinity=False),
                    st.text(max_size=8))
FORMATS = st.sampled_from(["date", "time", "date-time", "uuid", "email", "uri", "nonsense"])
KEYS = st.sampled_from(["a", "b", "name", "x y", "é", ""])


def _schema_of(children):
    obj = st.fixed_dictionaries({"type": st.just("object")}, optional={
        "properties": st.dictionaries(KEYS, children, max_size=4),
        "required": st.lists(KEYS, max_size=3),
        "additionalProperties": st.one_of(st.booleans(), children),
        "minProperties": st.integers(-1, 5), "maxProperties": st.integers(-1, 2**40)})
    arr = st.fixed_dictionaries({"type": st.just("array")}, optional={
        "items": children, "prefixItems": st.lists(children, max_size=3),
        "minItems": st.integers(-1, 2**40), "maxItems": st.integers(-1, 2**40), "uniqueItems": st.booleans()})
    string = st.fixed_dictionaries({"type": st.just("string")}, optional={
        "minLength": st.integers(-1, 2**40), "maxLength": st.integers(-1, 2**40), "pattern": PATTERNS, "format": FORMATS})
    number = st.fixed_dictionaries({"type": st.sampled_from(["integer", "number"])}, optional={
        "minimum": SCALARS, "maximum": SCALARS, "exclusiveMinimum": SCALARS, "exclusiveMaximum": SCALARS})
    return st.one_of(
        obj, arr, string, number,
        st.tuples(st.sampled_from(["anyOf", "oneOf", "allOf"]), st.lists(children, max_size=3)).map(lambda t: {t[0]: t[1]}),
        st.lists(SCALARS, max_size=4).map(lambda v: {"enum": v}),
        SCALARS.map(lambda v: {"const": v}),
        st.sampled_from(["#/$defs/a", "#/$defs/missing", "#", "#/definitions/a", "http://example.com/s.json", "#/$defs/a/b"]).map(
            lambda r: {"$ref": r}),
        st.lists(st.sampled_from(["string", "null", "integer", "boolean", "object", "array", "bogus"]), max_size=3).map(
            lambda t: {"type": t}),
    )


LEAF = st.one_of(st.booleans(), st.just({}), st.sampled_from([{"type": "string"}, {"type": "integer"}, {"type": "null"}]))
SCHEMA = st.recursive(LEAF, _schema_of, max_leaves=12)
ROOT = st.tuples(SCHEMA, st.dictionaries(st.sampled_from(["a", "b"]), SCHEMA, max_size=2)).map(
    lambda t: {**t[0], "$defs": t[1]} if isinstance(t[0], dict) else t[0])


@seed(20261203)
@settings(max_examples=250 * SCALE, **COMMON)
@given(s=st.one_of(ROOT, st.text(max_size=40)))
@example(s={"$ref": "#"})
@example(s={"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"})
@example(s={"type": "string", "minLength": 2**40})
def test_json_schema_path_survives_arbitrary_schemas(engine, s):
    text = s if isinstance(s, str) else json.dumps(s)
    _compile(engine, "json_schema", json_schema=text)


# ---------------------------------------------------------------- GGUF reader


@pytest.fixture(scope="module")
def gguf_base():
    data, lay = tm.build_gguf(tm.model_kvs("llama"), tm.model_tensors("llama", "Q4_0"))
    return data, lay


def _count_offsets(lay) -> list:
    """Byte offsets of the u64 counts and lengths the reader trusts least: the tensor and
    KV counts, every string length and array count, every tensor's dims and data offset."""
    at = [8, 16]
    for key_at, type_at, value_at, _end in lay.kv.values():
        at += [key_at, value_at]
        at.append(value_at + 4)  # an array's count, after its element type
    for info in lay.tensor_info.values():
        at += [info["name"], info["dims"], info["offset"]]
    return at


def _load(path) -> None:
    """Everything a user does with a downloaded file: inspect it, load it, run a token."""
    llamars._core.inspect(str(path))
    e = llamars.Engine(str(path), n_ctx=16, n_threads=1)
    try:
        e.logits([1, 2])
    finally:
        e.close()


@seed(20261204)
@settings(max_examples=150 * SCALE, **COMMON)
@given(data=st.data())
def test_gguf_reader_survives_corrupted_files(gguf_base, tmp_path_factory, data):
    raw, lay = gguf_base
    b = bytearray(raw)
    kind = data.draw(st.sampled_from(["truncate", "flip", "count", "splice"]), label="kind")
    if kind == "truncate":
        b = b[: data.draw(st.integers(0, len(b) - 1), label="length")]
    elif kind == "flip":
        for _ in range(data.draw(st.integers(1, 8), label="flips")):
            at = data.draw(st.integers(0, min(len(b), lay.data_offset + 64) - 1), label="at")
            b[at] ^= 1 << data.draw(st.integers(0, 7), label="bit")
    elif kind == "count":
        at = data.draw(st.sampled_from(_count_offsets(lay)), label="at")
        value = data.draw(st.sampled_from([0, 1, 2**31, 2**32 - 1, 2**32, 2**62, 2**63, 2**64 - 1]) | st.integers(0, 2**64 - 1),
                          label="value")
        if at + 8 <= len(b):
            struct.pack_into("<Q", b, at, value)
    else:  # splice a run of random bytes over the header
        at = data.draw(st.integers(0, lay.data_offset), label="at")
        b[at:at + 16] = data.draw(st.binary(min_size=1, max_size=16), label="bytes")
    path = tmp_path_factory.mktemp("fuzz") / "f.gguf"
    path.write_bytes(bytes(b))
    try:
        _load(path)
        _count("gguf", True)
    except llamars.LlamarsError as e:
        assert str(e), "an error without a message"
        _count("gguf", False)
