"""The one table from exceptions to HTTP status + error body, in llama.cpp's / OpenAI's
shape: {"error": {"code": N, "message": "...", "type": "..."}}."""
from __future__ import annotations

from litestar import Request, Response
from litestar.exceptions import HTTPException, NotAuthorizedException, NotFoundException, ValidationException

from .. import errors as E
from ..chat.templates import TemplateError


class ApiError(Exception):
    """Raised by route handlers for client mistakes the engine cannot see."""

    def __init__(self, status: int, message: str, type_: str = "invalid_request_error") -> None:
        super().__init__(message)
        self.status, self.message, self.type = status, message, type_


# exception class -> (status, error type); the first matching entry wins
TABLE = [
    (E.ContextOverflowError, 400, "exceed_context_size_error"),
    (E.InvalidRequestError, 400, "invalid_request_error"),
    (E.TokenizerError, 400, "invalid_request_error"),
    (TemplateError, 400, "invalid_request_error"),
    (E.NotSupportedError, 501, "not_supported_error"),
    (E.UnavailableError, 503, "unavailable_error"),
    (E.CancelledError, 499, "cancelled_error"),
]


def body(status: int, message: str, type_: str) -> dict:
    return {"error": {"code": status, "message": message, "type": type_}}


def error_response(status: int, message: str, type_: str) -> Response:
    return Response(body(status, message, type_), status_code=status, media_type="application/json")


def classify(exc: BaseException) -> tuple:
    if isinstance(exc, ApiError):
        return exc.status, exc.message, exc.type
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
    return error_response(400, f"invalid request: {message}", "invalid_request_error")


def _http(request: Request, exc: HTTPException) -> Response:
    status = exc.status_code
    if isinstance(exc, NotAuthorizedException):
        return error_response(401, exc.detail or "Invalid API Key", "authentication_error")
    if isinstance(exc, NotFoundException):
        return error_response(404, f"route not found: {request.method} {request.url.path}", "not_found_error")
    type_ = {400: "invalid_request_error", 405: "invalid_request_error", 413: "invalid_request_error", 503: "unavailable_error"}.get(status, "server_error")
    return error_response(status, exc.detail or "error", type_)


def _other(request: Request, exc: Exception) -> Response:
    status, message, type_ = classify(exc)
    if status == 500:
        request.logger.exception("unhandled error on %s %s", request.method, request.url.path)
    return error_response(status, message, type_)


HANDLERS = {ValidationException: _validation, HTTPException: _http, Exception: _other}
