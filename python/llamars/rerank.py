"""Reranking with llama-server's semantics: a query-document pair laid out as
`format_prompt_rerank` lays it out (the GGUF's `rerank` template when it has one, else
BOS query EOS SEP document EOS as the vocabulary adds them), scored by the model's
classifier (its first output), results sorted by score, highest first, cut to `top_n`."""
from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

from .errors import InvalidRequestError


def pair_ids(engine, query: str, document: str) -> List[int]:
    """The token ids llama-server evaluates for one (query, document) pair."""
    info = engine.info
    tpl = (info.get("chat_templates") or {}).get("rerank")
    if tpl:
        return engine.tokenize(tpl.replace("{query}", query).replace("{document}", document), add_special=False, parse_special=True)
    q = engine.tokenize(query, add_special=False, parse_special=False)
    d = engine.tokenize(document, add_special=False, parse_special=False)
    eos = info.get("eos") if info.get("eos") is not None else info.get("sep")
    ids: List[int] = []
    if info.get("add_bos") and info.get("bos") is not None:
        ids.append(info["bos"])
    ids += q
    if info.get("add_eos") and eos is not None:
        ids.append(eos)
    if info.get("add_sep") and info.get("sep") is not None:
        ids.append(info["sep"])
    ids += d
    if info.get("add_eos") and eos is not None:
        ids.append(eos)
    return ids


def check(query, documents, top_n) -> Tuple[str, List[str], Optional[int]]:
    """Validated (query, document texts, top_n); documents are strings or `{"text": ...}`
    objects (Jina's / LocalAI's form)."""
    if not isinstance(query, str):
        raise InvalidRequestError('"query" must be a string')
    if not isinstance(documents, (list, tuple)) or not documents:
        raise InvalidRequestError('"documents" must be a non-empty string array')
    texts = []
    for i, d in enumerate(documents):
        if isinstance(d, dict) and isinstance(d.get("text"), str):
            d = d["text"]
        if not isinstance(d, str):
            raise InvalidRequestError(f'documents[{i}]: must be a string or an object with a "text" string')
        texts.append(d)
    if top_n is not None and (isinstance(top_n, bool) or not isinstance(top_n, int) or top_n < 0):
        raise InvalidRequestError('"top_n" must be a non-negative integer')
    return query, texts, top_n


def order(scores: Sequence[float], top_n: Optional[int]) -> List[Tuple[int, float]]:
    """(index, score) by score, highest first; the first `top_n` (all when None)."""
    ranked = sorted(enumerate(scores), key=lambda p: -p[1])
    return ranked if top_n is None else ranked[:top_n]
