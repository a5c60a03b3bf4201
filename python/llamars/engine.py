"""`Engine`: load a GGUF model and run it in-process (tokenize, logits, generate, stream)."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Iterator, Optional, Sequence, Union

import numpy as np

from . import _core
from .errors import InvalidRequestError

Prompt = Union[str, Sequence[int]]


@dataclass
class Chunk:
    """One streamed step: the text that became safe to show and the token sampled."""

    text: str
    token: Optional[int]
    logprob: Optional[float] = None
    top_logprobs: list = field(default_factory=list)


@dataclass
class Timings:
    prompt_n: int
    prompt_ms: float
    predicted_n: int
    predicted_ms: float

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

    @property
    def n_prompt_tokens(self) -> int:
        return len(self.prompt_tokens)

    @property
    def n_tokens(self) -> int:
        return len(self.tokens)


class Stream:
    """Iterator over `Chunk`s of one generation. `result` holds the summary once done.

    Breaking out of the loop (or dropping the stream) ends the generation and frees it.
    """

    def __init__(self, gen: "_core.Generation") -> None:
        self._gen = gen
        self._probs: list = []
        self.result: Optional[GenerationResult] = None

    def __iter__(self) -> "Stream":
        return self

    def __next__(self) -> Chunk:
        if self._gen is None:
            raise StopIteration
        ev = self._gen.step()
        if ev is None:
            self._finish()
            raise StopIteration
        token, text, logprob, top = ev
        if logprob is not None and token is not None:
            self._probs.append({"id": token, "logprob": logprob, "top_logprobs": [{"id": i, "logprob": lp} for i, lp in top]})
        return Chunk(text=text, token=token, logprob=logprob, top_logprobs=top)

    def _finish(self) -> None:
        g = self._gen
        t = g.timings
        self.result = GenerationResult(
            text=g.text,
            tokens=g.tokens,
            stop_reason=g.stop_reason or "limit",
            stopping_word=g.stopping_word,
            truncated=g.truncated,
            prompt_tokens=g.prompt_tokens,
            seed=g.seed,
            timings=Timings(t["prompt_n"], t["prompt_ms"], t["predicted_n"], t["predicted_ms"]),
            probs=self._probs,
        )
        self._gen = None

    def close(self) -> None:
        """Stop generating now; the partial result stays available."""
        if self._gen is not None:
            self._finish()


class Engine:
    """A loaded GGUF model.

    >>> eng = Engine("model.gguf", n_ctx=2048)
    >>> eng.generate("The capital of France is", max_tokens=8, temperature=0.0).text
    """

    def __init__(
        self,
        model: Union[str, os.PathLike],
        *,
        n_ctx: int = 4096,
        n_threads: Optional[int] = None,
        n_batch: int = 512,
    ) -> None:
        if n_ctx < 0:
            raise InvalidRequestError(f"n_ctx must be >= 0 (0 = the model's training context), got {n_ctx}")
        if n_batch < 1:
            raise InvalidRequestError(f"n_batch must be >= 1, got {n_batch}")
        if n_threads is not None and n_threads < 1:
            raise InvalidRequestError(f"n_threads must be >= 1, got {n_threads}")
        self.model_path = os.fspath(model)
        self._core = _core.Engine(self.model_path, n_ctx, n_threads, n_batch)
        self.info = self._core.info()

    # ---------------------------------------------------------------- facts
    @property
    def n_vocab(self) -> int:
        return self.info["n_vocab"]

    @property
    def n_ctx(self) -> int:
        return self.info["n_ctx"]

    @property
    def arch(self) -> str:
        return self.info["arch"]

    def __repr__(self) -> str:
        i = self.info
        return f"Engine({os.path.basename(i['path'])!r}, arch={i['arch']}, n_params={i['n_params']:,}, n_ctx={i['n_ctx']})"

    # ---------------------------------------------------------------- tokens
    def tokenize(self, text: str, add_special: bool = True, parse_special: bool = True) -> list:
        return self._core.tokenize(text, add_special, parse_special)

    def detokenize(self, ids: Sequence[int], remove_special: bool = False, unparse_special: bool = False) -> str:
        return self._core.detokenize(list(ids), remove_special, unparse_special)

    def token_to_piece(self, token: int, special: bool = True) -> bytes:
        return self._core.token_to_piece(token, special)

    # ---------------------------------------------------------------- compute
    def logits(self, ids: Sequence[int]) -> np.ndarray:
        """float32 [len(ids), n_vocab]: logits at every position, in a fresh context."""
        buf, n, nv = self._core.logits(list(ids))
        return np.frombuffer(buf, dtype=np.float32).reshape(n, nv)

    def _prompt_ids(self, prompt: Prompt) -> list:
        if isinstance(prompt, str):
            return self.tokenize(prompt, add_special=True, parse_special=True)
        if isinstance(prompt, (bytes, bytearray)):
            raise InvalidRequestError("prompt must be a str or a list of token ids, not bytes")
        ids = list(prompt)
        if not all(isinstance(t, (int, np.integer)) and not isinstance(t, bool) for t in ids):
            raise InvalidRequestError("prompt must be a str or a list of token ids (ints)")
        return [int(t) for t in ids]

    def stream(
        self,
        prompt: Prompt,
        *,
        max_tokens: Optional[int] = 16,
        stop: Union[str, Sequence[str], None] = None,
        temperature: float = 0.8,
        top_k: int = 40,
        top_p: float = 0.95,
        min_p: float = 0.05,
        seed: Optional[int] = None,
        ignore_eos: bool = False,
        n_probs: int = 0,
    ) -> Stream:
        """Start a generation and iterate over its chunks as they are produced.

        A str prompt is tokenized with BOS (when the model asks for it) and special
        tokens parsed; a list of ids is used as given. temperature <= 0 is greedy.
        """
        if isinstance(stop, str):
            stop = [stop]
        gen = self._core.generate(
            self._prompt_ids(prompt),
            max_tokens,
            list(stop or []),
            float(temperature),
            int(top_k),
            float(top_p),
            float(min_p),
            seed,
            bool(ignore_eos),
            int(n_probs),
        )
        return Stream(gen)

    def generate(self, prompt: Prompt, **kwargs) -> GenerationResult:
        """Generate to completion; same parameters as `stream`."""
        s = self.stream(prompt, **kwargs)
        for _ in s:
            pass
        assert s.result is not None
        return s.result
