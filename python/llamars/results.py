"""What a generation gives back: `Chunk`s while it streams (through `Stream`), and a
`GenerationResult` (with `Timings`) when it is done."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from . import _core


@dataclass
class Chunk:
    """One streamed step: the text that became safe to show and the token sampled."""

    text: str
    token: Optional[int]
    logprob: Optional[float] = None
    top_logprobs: list = field(default_factory=list)
    # prompt processing report (total, cache, processed, time_ms) when return_progress=True;
    # such chunks carry no token
    progress: Optional[dict] = None


@dataclass
class Timings:
    prompt_n: int
    prompt_ms: float
    predicted_n: int
    predicted_ms: float
    #: speculative decoding: tokens drafted, and how many of them the model accepted
    draft_n: int = 0
    draft_n_accepted: int = 0

    @property
    def prompt_per_second(self) -> float:
        return 1e3 * self.prompt_n / self.prompt_ms if self.prompt_ms > 0 else 0.0

    @property
    def predicted_per_second(self) -> float:
        return 1e3 * self.predicted_n / self.predicted_ms if self.predicted_ms > 0 else 0.0


@dataclass
class GenerationResult:
    text: str
    tokens: list
    stop_reason: str  # "eos" | "limit" | "word"
    stopping_word: str
    truncated: bool
    prompt_tokens: list
    seed: int
    timings: Timings
    probs: list = field(default_factory=list)
    tokens_cached: int = 0
    tokens_evaluated: int = 0
    id_slot: int = 0

    @property
    def n_prompt_tokens(self) -> int:
        return len(self.prompt_tokens)

    @property
    def n_tokens(self) -> int:
        return len(self.tokens)


class Stream:
    """Iterator over `Chunk`s of one generation. `result` holds the summary once done.

    Breaking out of the loop, calling `close()` or dropping the stream cancels the
    generation and frees its slot.
    """

    def __init__(self, req: "_core.Request", progress: bool = False) -> None:
        self._req: Optional["_core.Request"] = req
        self.id: int = req.id
        self._progress = progress
        # the last prompt-processing report (set once the prompt is evaluated)
        self.prompt_progress: Optional[dict] = None
        self.result: Optional[GenerationResult] = None

    def __iter__(self) -> "Stream":
        return self

    def __next__(self) -> Chunk:
        while True:
            if self._req is None:
                raise StopIteration
            ev = self._req.next()
            if ev is None:
                self._req = None
                raise StopIteration
            kind, payload = ev
            if kind == "done":
                self.result = _result(payload)
                self._req = None
                raise StopIteration
            if kind == "progress":
                self.prompt_progress = payload
                if self._progress:
                    return Chunk(text="", token=None, progress=payload)
                continue
            token, text, logprob, top = payload
            return Chunk(text=text, token=token, logprob=logprob, top_logprobs=top)

    def close(self) -> None:
        """Stop generating now (the slot is freed); `result` stays None."""
        if self._req is not None:
            self._req.cancel()
            self._req = None

    def __enter__(self) -> "Stream":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _result(d: dict) -> GenerationResult:
    t = d["timings"]
    return GenerationResult(
        text=d["text"],
        tokens=d["tokens"],
        stop_reason=d["stop_reason"],
        stopping_word=d["stopping_word"],
        truncated=d["truncated"],
        prompt_tokens=d["prompt_tokens"],
        seed=d["seed"],
        timings=Timings(t["prompt_n"], t["prompt_ms"], t["predicted_n"], t["predicted_ms"], t["draft_n"], t["draft_n_accepted"]),
        probs=d["probs"],
        tokens_cached=d["tokens_cached"],
        tokens_evaluated=d["tokens_evaluated"],
        id_slot=d["id_slot"],
    )
