"""The one table from exceptions to HTTP status + error body, in llama.cpp's / OpenAI's
shape: {"error": {"code": N, "message": "...", "type": "..."}}."""
from __future__ import annotations

from typing import Optional

from litestar import Request, Response
from litestar.exceptions import HTTPException, NotAuthorizedException, NotFoundException, ValidationException

from .. import errors as E
from ..chat.templates import TemplateError
from ..tools.spec import ToolSpecError
from .timeouts import RequestTimeoutError


class ApiError(Exception):
    """Raised by route handlers for client mistakes the engine cannot see."""

    def __init__(self, status: int, message: str, type_: str = "invalid_request_error", extra: Optional[dict] = None) -> None:
        super().__init__(message)
        self.status, self.message, self.type, self.extra = status, message, type_, extra


# exception class -> (status, error type); the first matching entry wins
TABLE = [
    (RequestTimeoutError, 408, "timeout_error"),
    (E.ContextOverflowError, 400, "exceed_context_size_error"),
    (E.InvalidRequestError, 400, "invalid_request_error"),
    (E.TokenizerError, 400, "invalid_request_error"),
    (TemplateError, 400, "invalid_request_error"),
    (ToolSpecError, 400, "invalid_request_error"),
    (E.NotSupportedError, 501, "not_supported_error"),
    (E.UnavailableError, 503, "unavailable_error"),
    (E.CancelledError, 499, "cancelled_error"),
    (E.GpuError, 500, "server_error"),
    (E.InternalError, 500, "server_error"),
]


# Anthropic's error types by status (https://docs.anthropic.com/en/api/errors)
_ANTHROPIC_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error", 404: "not_found_error",
                    413: "request_too_large", 429: "rate_limit_error", 503: "overloaded_error", 529: "overloaded_error"}


def dialect(path: str) -> str:
    """Which API's error shape a route answers in: "anthropic" for the Messages API."""
    p = path.rstrip("/")
    return "anthropic" if p.endswith("/messages") or p.endswith("/messages/count_tokens") else "openai"


def body(status: int, message: str, type_: str, dialect_: str = "openai", extra: Optional[dict] = None) -> dict:
    if dialect_ == "anthropic":
        return {"type": "error", "error": {"type": _ANTHROPIC_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error"), "message": message}}
    return {"error": {"code": status, "message": message, "type": type_, **(extra or {})}}


def error_response(status: int, message: str, type_: str, request: Optional[Request] = None,
                   extra: Optional[dict] = None) -> Response:
    d = dialect(request.url.path) if request is not None else "openai"
    return Response(body(status, message, type_, d, extra), status_code=status, media_type="application/json")


def overflow(n_prompt_tokens: int, n_ctx: int) -> "ApiError":
    """llama-server's context-overflow error: its message, and the counts in the body."""
    return ApiError(400, f"request ({n_prompt_tokens} tokens) exceeds the available context size ({n_ctx} tokens), "
                         "try increasing it", "exceed_context_size_error",
                    extra={"n_prompt_tokens": n_prompt_tokens, "n_ctx": n_ctx})


def extra_fields(exc: BaseException) -> Optional[dict]:
    """Fields an error body carries besides code, message and type."""
    if isinstance(exc, ApiError):
        return exc.extra
    n, c = getattr(exc, "n_prompt_tokens", None), getattr(exc, "n_ctx", None)
    if isinstance(exc, E.ContextOverflowError) and n is not None and c is not None:
        return {"n_prompt_tokens": n, "n_ctx": c}
    return None


def classify(exc: BaseException) -> tuple:
    if isinstance(exc, ApiError):
        return exc.status, exc.message, exc.type
    if isinstance(exc, RecursionError):  # the JSON decoder or a template on a body nested past Python's stack
        return 400, "request body: nested too deeply (arrays / objects inside each other); flatten it", "invalid_request_error"
    n, c = getattr(exc, "n_prompt_tokens", None), getattr(exc, "n_ctx", None)
    if isinstance(exc, E.ContextOverflowError) and n is not None and c is not None:
        return overflow(n, c).status, overflow(n, c).message, "exceed_context_size_error"
    for cls, status, type_ in TABLE:
        if isinstance(exc, cls):
            return status, str(exc), type_
    return 500, f"internal error: {type(exc).__name__}: {exc}", "server_error"


def _validation(request: Request, exc: ValidationException) -> Response:
    extra = exc.extra if isinstance(exc.extra, list) else []
    parts = []
    for item in extra:
        if isinstance(item, dict):
            key, msg = item.get("key"), item.get("message", "")
            parts.append(f"{key}: {msg}" if key else str(msg))
    message = "; ".join(parts) or exc.detail or "invalid request body"
    if "Expected" in message or "Object" in message or "JSON" in message or parts:
        pass
    return error_response(400, f"invalid request: {message}", "invalid_request_error", request)


def _http(request: Request, exc: HTTPException) -> Response:
    status = exc.status_code
    if isinstance(exc, NotAuthorizedException):
        return error_response(401, exc.detail or "Invalid API Key", "authentication_error", request)
    if isinstance(exc, NotFoundException):
        return error_response(404, exc.detail if exc.detail and exc.detail != "Not Found" else f"route not found: {request.method} {request.url.path}", "not_found_error", request)
    type_ = {400: "invalid_request_error", 405: "invalid_request_error", 413: "invalid_request_error", 503: "unavailable_error"}.get(status, "server_error")
    return error_response(status, exc.detail or "error", type_, request)


def _other(request: Request, exc: Exception) -> Response:
    status, message, type_ = classify(exc)
    if status == 500:
        request.logger.exception("unhandled error on %s %s", request.method, request.url.path)
    return error_response(status, message, type_, request, extra_fields(exc))


HANDLERS = {ValidationException: _validation, HTTPException: _http, Exception: _other}
