"""POST /infill: fill-in-the-middle with the model's FIM tokens (metadata ids, else the
usual token texts), repo-level layout when it has repo/file-separator tokens."""
from __future__ import annotations

import asyncio

from typing import Callable, Dict, List, Optional

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


# "\n\n--- snippet ---\n\n": llama.cpp's separator of extra chunks when the model has no FIM_SEP
_SNIPPET = "\n\n--- snippet ---\n\n"


def build(tok: Callable[[str], List[int]], fim: Dict[str, int], bos: List[int], prefix: str, suffix: str, prompt: str,
          extra: list, *, n_batch: int = 2048, n_ctx: int = 4096, n_predict: int = -1, spm: bool = False,
          prompt_tok: Optional[Callable[[str], List[int]]] = None) -> List[int]:
    """llama.cpp's format_prompt_infill: [extra] [BOS] <PRE> prefix prompt <SUF> suffix <MID>
    (with --spm-infill: [extra] [BOS] <SUF> suffix <PRE> prefix prompt <MID>). The extra
    context is in the repo-level layout (<REP>myproject\n <SEP>name\n text ... <SEP>filename\n)
    when the model has those tokens. As llama.cpp, the prefix keeps its last 3/4 of a
    batch, the suffix its first quarter less the prompt, and the extra context its last
    tokens that leave room for a batch and twice n_predict."""
    extra_ids: List[int] = []
    if "rep" in fim:
        extra_ids += [fim["rep"]] + tok("myproject\n")
    for x in extra:
        if "sep" in fim:
            extra_ids += [fim["sep"]] + tok(x.filename + "\n")
        else:
            extra_ids += tok(_SNIPPET)
        extra_ids += tok(x.text)
    if "sep" in fim:
        extra_ids += [fim["sep"]] + tok("filename\n")
    pre, suf, mid = tok(prefix), tok(suffix), (prompt_tok or tok)(prompt)  # (the prompt's special tokens are parsed)
    n_pre = min(len(pre), 3 * (n_batch // 4))
    n_suf = min(len(suf), max(0, n_batch // 4 - (2 + len(mid))))
    n_extra = min(max(0, n_ctx - n_batch - 2 * n_predict), len(extra_ids))
    head = [fim["pre"]] + pre[len(pre) - n_pre:] + mid
    tail = [fim["suf"]] + suf[:n_suf]
    first, second = (tail, head) if spm else (head, tail)
    return extra_ids[len(extra_ids) - n_extra:] + list(bos) + first + second + [fim["mid"]]


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
        # (as llama-server: the server's -n, not the request's, sizes the extra context)
        ids = build(tok, fim, bos, data.input_prefix, data.input_suffix, data.prompt, data.input_extra,
                    n_batch=svc.config.n_batch, n_ctx=e.n_ctx_slot, n_predict=svc.config.sampling.n_predict,
                    spm=svc.config.spm_infill, prompt_tok=lambda s: e.tokenize(s, add_special=False, parse_special=True) if s else [])
        return svc.request(ids, fields, NATIVE_NAMES)

    req = await asyncio.to_thread(prepare)
    if data.stream:
        return await native_stream(svc, req, data)
    r = await svc.aengine.collect(req)
    return shapes.native_final(e, r, req.settings(), svc.model_id, 0, data.return_tokens, req.n_probs > 0, data.post_sampling_probs)


ROUTES = [infill]
