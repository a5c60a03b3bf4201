"""llamars: fast local LLM inference (GGUF, quantized SIMD kernels) with a Rust core."""
from ._core import __version__
from .engine import Chunk, Engine, GenerationResult, Stream, Timings
from .errors import (
    CancelledError,
    ContextOverflowError,
    InvalidRequestError,
    LlamarsError,
    ModelLoadError,
    TokenizerError,
)
from ._inspect import inspect

__all__ = [
    "__version__",
    "Engine",
    "Stream",
    "Chunk",
    "GenerationResult",
    "Timings",
    "inspect",
    "LlamarsError",
    "ModelLoadError",
    "TokenizerError",
    "InvalidRequestError",
    "ContextOverflowError",
    "CancelledError",
]
