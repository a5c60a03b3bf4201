"""POST /infill: fill-in-the-middle with the model's FIM tokens (metadata ids, else the
usual token texts), repo-level layout when it has repo/file-separator tokens."""
from __future__ import annotations

import asyncio

from typing import Callable, Dict, List

from litestar.di import NamedDependency
from litestar.params import JSONBody
from litestar import post

from ...schemas.native import InfillRequest
from ..errors import ApiError
from ..service import Service
from .. import shapes
from .completion import NATIVE_NAMES, native_fields, native_stream

FIM_TEXTS = {
    "pre": ["<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<PRE>", "<|fim▁begin|>"],
    "suf": ["<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<SUF>", "<|fim▁hole|>"],
    "mid": ["<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<MID>", "<|fim▁end|>"],
    "rep": ["<|repo_name|>", "<repo_name>", "<reponame>"],
    "sep": ["<|file_sep|>", "<file_sep>"],
}


def fim_tokens(e) -> Dict[str, int]:
    """FIM token ids from the GGUF metadata, else found by their usual texts."""
    found = dict(e.info.get("fim_tokens") or {})
    for role, texts in FIM_TEXTS.items():
        if role in found:
            continue
        for t in texts:
            ids = e.tokenize(t, add_special=False, parse_special=True)
            if len(ids) == 1 and e.token_to_piece(ids[0], special=True) == t.encode():
                found[role] = ids[0]
                break
    return found


def build(tok: Callable[[str], List[int]], fim: Dict[str, int], bos: List[int], prefix: str, suffix: str, prompt: str, extra: list) -> List[int]:
    """[BOS] [extra] <PRE> prefix <SUF> suffix <MID> prompt, extra in the repo-level
    layout (<REP>myproject\\n <SEP>name\\n text ... <SEP>filename\\n) when possible."""
    out = list(bos)
    if "rep" in fim and "sep" in fim:
        out += [fim["rep"]] + tok("myproject\n")
        for x in extra:
            out += [fim["sep"]] + tok(x.filename + "\n") + tok(x.text)
        out += [fim["sep"]] + tok("filename\n")
    else:
        for x in extra:
            out += tok(x.text)
    out += [fim["pre"]] + tok(prefix) + [fim["suf"]] + tok(suffix) + [fim["mid"]] + tok(prompt)
    return out


@post("/infill", status_code=200, summary="fill in the middle")
async def infill(data: JSONBody[InfillRequest], svc: NamedDependency[Service]) -> object:
    e = svc.need()
    fim = fim_tokens(e)
    missing = [r for r in ("pre", "suf", "mid") if r not in fim]
    if missing:
        raise ApiError(400, f"this model has no fill-in-the-middle tokens ({', '.join('FIM_' + m.upper() for m in missing)} missing); /infill needs a code model with FIM support")
    if not isinstance(data.prompt, str):
        raise ApiError(400, "prompt: must be a string for /infill")
    fields = native_fields(svc, data)

    def tok(s: str) -> List[int]:
        return e.tokenize(s, add_special=False, parse_special=False) if s else []

    bos = [e.info["bos"]] if e.info.get("add_bos") and e.info.get("bos") is not None else []

    def prepare():
        ids = build(tok, fim, bos, data.input_prefix, data.input_suffix, data.prompt, data.input_extra)
        return svc.request(ids, fields, NATIVE_NAMES)

    req = await asyncio.to_thread(prepare)
    if data.stream:
        return await native_stream(svc, req, data)
    r = await svc.aengine.collect(req)
    return shapes.native_final(e, r, req.settings(), svc.model_id, 0, data.return_tokens, req.n_probs > 0, data.post_sampling_probs)


ROUTES = [infill]
