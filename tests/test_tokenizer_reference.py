"""Tokenization of the real model's SPM vocabulary, exact with llama.cpp three ways."""
import json
from pathlib import Path

import pytest

from conftest import _reference_dir

_CASES = json.loads((_reference_dir() / "gemma3-270m-q4_k_m.llama-cpp.json").read_text())["tokenize"] if (
    _reference_dir() / "gemma3-270m-q4_k_m.llama-cpp.json"
).exists() else []


@pytest.mark.parametrize("case", _CASES, ids=[repr(c["text"])[:40] for c in _CASES])
def test_tokenize_matches_llama_cpp(engine, case):
    text = case["text"]
    assert engine.tokenize(text, add_special=True, parse_special=True) == case["add_bos_parse_special"]
    assert engine.tokenize(text, add_special=False, parse_special=False) == case["no_bos_no_special"]
    assert engine.tokenize(text, add_special=False, parse_special=True) == case["no_bos_parse_special"]


def test_reference_cases_present():
    assert len(_CASES) == 20


@pytest.mark.parametrize("text", ["Hello world", "café naïve résumé", "emoji: 🦙🔥👍🏽", "  two  spaces\n\nand lines", "日本語"])
def test_detokenize_roundtrip(engine, text):
    ids = engine.tokenize(text, add_special=False, parse_special=False)
    assert engine.detokenize(ids) == text


def test_control_tokens_render_only_when_asked(engine):
    ids = engine.tokenize("<start_of_turn>user\nhi<end_of_turn>", add_special=True, parse_special=True)
    assert engine.detokenize(ids) == "user\nhi"
    assert engine.detokenize(ids, unparse_special=True) == "<bos><start_of_turn>user\nhi<end_of_turn>"
    assert engine.detokenize(ids, remove_special=True, unparse_special=True) == "<start_of_turn>user\nhi<end_of_turn>"


def test_special_text_not_parsed_without_parse_special(engine):
    plain = engine.tokenize("<end_of_turn>", add_special=False, parse_special=False)
    parsed = engine.tokenize("<end_of_turn>", add_special=False, parse_special=True)
    assert len(parsed) == 1 and len(plain) > 1
