"""The llamars exception hierarchy (defined in the Rust core, rooted at LlamarsError)."""
from ._core import (
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

__all__ = [
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
