"""llamars: fast local LLM inference (GGUF, quantized SIMD kernels) with a Rust core."""
import os as _os

# Mesa's Vulkan device-select layer orders GPUs for a display session; compute does its own
# choice (-dev / -mg), and without a session the layer prints "XDG_RUNTIME_DIR is invalid"
# on every adapter probe. Set NODEVICE_SELECT=0 to keep the layer.
if _os.environ.get("NODEVICE_SELECT") == "0":
    del _os.environ["NODEVICE_SELECT"]
else:
    _os.environ.setdefault("NODEVICE_SELECT", "1")

from ._core import GenerationRequest, __version__  # noqa: E402
from .async_engine import AsyncEngine, AsyncStream
from .engine import Engine, generation_defaults
from .results import Chunk, GenerationResult, Stream, Timings
from .errors import (
    CancelledError,
    ContextOverflowError,
    GpuError,
    InternalError,
    InvalidRequestError,
    LlamarsError,
    ModelLoadError,
    NotSupportedError,
    TokenizerError,
    UnavailableError,
)
from ._inspect import inspect
from .notebook import display_stream
from .router.inprocess import Router
from .chat import session as _chat_session  # noqa: F401 (registers Engine.chat)
from .agent import loop as _agent_loop  # noqa: F401 (registers Engine.chat(..., execute=True))

__all__ = [
    "__version__",
    "Engine",
    "GenerationRequest",
    "generation_defaults",
    "AsyncEngine",
    "AsyncStream",
    "Stream",
    "Chunk",
    "GenerationResult",
    "Timings",
    "inspect",
    "display_stream",
    "Router",
    "LlamarsError",
    "ModelLoadError",
    "TokenizerError",
    "InvalidRequestError",
    "ContextOverflowError",
    "CancelledError",
    "UnavailableError",
    "NotSupportedError",
    "GpuError",
    "InternalError",
]
