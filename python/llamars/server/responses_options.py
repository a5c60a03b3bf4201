"""The Responses API's generation options beyond chat completions' (OpenAI's semantics):

- `reasoning: {effort, summary}`: `effort` goes to the chat template as `reasoning_effort`
  (as `--reasoning-effort` does; templates without it ignore it); with `summary` set, each
  reasoning item's `summary` carries the model's reasoning text (llamars runs no separate
  summarizer);
- `max_tool_calls`: at most that many `function_call` items (0: the tools are not offered;
  1: no parallel calls);
- `top_logprobs` (0–20), or `include: ["message.output_text.logprobs"]`: the log-probability
  of each token of the message text (and its top alternatives) on `output_text` parts and
  their delta events;
- `truncation: "auto"`: a conversation longer than the context loses its oldest turns (cut
  at user messages) until the input fits; `"disabled"` (the default) refuses it."""
from __future__ import annotations

from typing import Any, Callable, List, Optional, Tuple

from .errors import ApiError

EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")
SUMMARIES = ("auto", "concise", "detailed")
INCLUDES = ("message.output_text.logprobs", "reasoning.encrypted_content", "message.input_image.image_url",
            "computer_call_output.output.image_url", "file_search_call.results", "web_search_call.action.sources",
            "web_search_call.results", "code_interpreter_call.outputs")
LOGPROBS_INCLUDE = "message.output_text.logprobs"


def check(data) -> None:
    """400s naming the field for values these options cannot take."""
    if data.truncation not in (None, "auto", "disabled"):
        raise ApiError(400, f"truncation: must be auto or disabled, got {data.truncation!r}")
    if data.max_tool_calls is not None and data.max_tool_calls < 0:
        raise ApiError(400, f"max_tool_calls: must be >= 0, got {data.max_tool_calls}")
    if data.top_logprobs is not None and not 0 <= data.top_logprobs <= 20:
        raise ApiError(400, f"top_logprobs: must be within [0, 20], got {data.top_logprobs}")
    for i, x in enumerate(data.include or []):
        if x not in INCLUDES:
            raise ApiError(400, f"include[{i}]: unknown value {x!r}; llamars fills {LOGPROBS_INCLUDE!r}")
    r = data.reasoning
    if r is None:
        return
    if not isinstance(r, dict):
        raise ApiError(400, "reasoning: must be an object with effort and summary")
    for k in r:
        if k not in ("effort", "summary", "generate_summary"):
            raise ApiError(400, f"reasoning.{k}: unknown field; reasoning takes effort and summary")
    if r.get("effort") is not None and r["effort"] not in EFFORTS:
        raise ApiError(400, f"reasoning.effort: must be one of {', '.join(EFFORTS)}, got {r['effort']!r}")
    for k in ("summary", "generate_summary"):
        if r.get(k) is not None and r[k] not in SUMMARIES:
            raise ApiError(400, f"reasoning.{k}: must be one of {', '.join(SUMMARIES)}, got {r[k]!r}")


def template_kwargs(data) -> Optional[dict]:
    effort = (data.reasoning or {}).get("effort")
    if effort is None:
        return data.chat_template_kwargs
    return {"reasoning_effort": effort, **(data.chat_template_kwargs or {})}


def wants_summary(data) -> bool:
    r = data.reasoning or {}
    return r.get("summary") is not None or r.get("generate_summary") is not None


def tool_settings(data) -> Tuple[Any, bool, Any]:
    """(tools, parallel_tool_calls, tool_choice) after `max_tool_calls`."""
    tools, parallel, choice = data.tools, bool(data.parallel_tool_calls), data.tool_choice
    if data.max_tool_calls == 0:
        return None, False, None
    if data.max_tool_calls == 1:
        parallel = False
    return tools, parallel, choice


def n_probs(data) -> int:
    if data.top_logprobs:
        return data.top_logprobs
    return 1 if LOGPROBS_INCLUDE in (data.include or []) or data.top_logprobs == 0 else 0


def token_logprob(piece: Callable[[int], Tuple[str, list]], tok: int, lp: float, top: List[Tuple[int, float]], n_top: int) -> dict:
    """One entry of an output_text part's `logprobs`."""
    text, bs = piece(tok)
    alts = []
    for i, v in top[:n_top]:
        t, b = piece(i)
        alts.append({"token": t, "logprob": v, "bytes": b})
    return {"token": text, "logprob": lp, "bytes": bs, "top_logprobs": alts}


def content_logprobs(piece, text: str, content: str, probs: list, n_top: int) -> List[dict]:
    """The entries of the tokens that make `content` inside the generated `text` (after any
    reasoning): the tokens whose text overlaps the content's span."""
    start = text.rfind(content) if content else -1
    if start < 0:
        return []
    end, off, out = start + len(content), 0, []
    for p in probs:
        t = piece(p["id"])[0]
        if off < end and off + len(t) > start:
            out.append(token_logprob(piece, p["id"], p["logprob"], [(x["id"], x["logprob"]) for x in p["top_logprobs"]], n_top))
        off += len(t)
    return out


def shape_output(output: List[dict], data, logprobs: Optional[List[dict]] = None) -> List[dict]:
    """A finished output list under these options (non-streamed responses)."""
    out, calls = [], 0
    for it in output:
        if it["type"] == "function_call":
            calls += 1
            if data.max_tool_calls is not None and calls > data.max_tool_calls:
                continue
        if it["type"] == "reasoning" and wants_summary(data):
            it = {**it, "summary": [{"type": "summary_text", "text": it["content"][0]["text"] if it.get("content") else ""}]}
        if it["type"] == "message" and logprobs is not None:
            it = {**it, "content": [{**p, "logprobs": logprobs} for p in it["content"]]}
        out.append(it)
    return out


async def fit(prepare, data, items: List[dict], context: List[dict], n_ctx: int):
    """`prepare(context, items)` → a turn whose prompt fits `n_ctx` with room for one token:
    with truncation "auto", the fewest oldest turns dropped (a binary search over the user
    messages where the conversation can be cut); otherwise the turn as it is. Returns the
    turn and the context it kept."""
    turn = await prepare(context, items)
    if data.truncation != "auto" or len(turn.ids) < n_ctx:
        return turn, context
    whole = context + items
    cuts = [i for i, it in enumerate(whole) if i > 0 and it.get("role") == "user" and it.get("type", "message") == "message"]

    def split(k: int):
        return context[k:], items[max(0, k - len(context)):]

    lo, hi, best = 0, len(cuts) - 1, None
    while lo <= hi:
        mid = (lo + hi) // 2
        t = await prepare(*split(cuts[mid]))
        if len(t.ids) < n_ctx:
            best, hi = (t, cuts[mid]), mid - 1
        else:
            lo = mid + 1
    if best is None:
        raise ApiError(400, f"input: {len(turn.ids)} tokens, and the last user turn with what follows it does not fit the context "
                            f"of {n_ctx} tokens even with truncation=auto; shorten it or raise --ctx-size", "exceed_context_size_error")
    return best[0], split(best[1])[0]
