"""OpenAI Responses API: POST /v1/responses (and /responses), GET / DELETE
/v1/responses/{id} (GET ?stream=true&starting_after=N replays a background or streamed
response's events and follows the live ones), POST /v1/responses/{id}/cancel, GET
/v1/responses/{id}/input_items, and WebSocket mode on ws://…/v1/responses. The work is in
server/responses_jobs.py (generation, store), server/responses_ws.py (a WebSocket
connection) and server/responses_convert.py (shapes)."""
from __future__ import annotations

from typing import Optional

from litestar import Request, WebSocket, delete, get, post, websocket
from litestar.di import NamedDependency
from litestar.params import FromPath, FromQuery, JSONBody

from ...schemas.responses import ResponsesRequest
from ..auth import tenant
from ..responses_jobs import Responses
from ..responses_ws import Session
from ..service import Service


@post(["/v1/responses", "/responses"], status_code=200, summary="OpenAI Responses: create a response")
async def create_response(data: JSONBody[ResponsesRequest], svc: NamedDependency[Service], responses: NamedDependency[Responses],
                          request: Request) -> object:
    return await responses.create(svc, data, _tenant(request, responses))


@get(["/v1/responses/{response_id:str}", "/responses/{response_id:str}"], summary="OpenAI Responses: retrieve (or resume its stream)")
async def get_response(response_id: FromPath[str], responses: NamedDependency[Responses], request: Request, stream: FromQuery[bool] = False,
                       starting_after: FromQuery[Optional[int]] = None) -> object:
    if stream:
        return await responses.stream(response_id, -1 if starting_after is None else starting_after, _tenant(request, responses))
    return await responses.retrieve(response_id, _tenant(request, responses))


@post(["/v1/responses/{response_id:str}/cancel", "/responses/{response_id:str}/cancel"], status_code=200, summary="OpenAI Responses: cancel a background response")
async def cancel_response(response_id: FromPath[str], responses: NamedDependency[Responses], request: Request) -> dict:
    return await responses.cancel(response_id, _tenant(request, responses))


@delete(["/v1/responses/{response_id:str}", "/responses/{response_id:str}"], status_code=200, summary="OpenAI Responses: delete a stored response")
async def delete_response(response_id: FromPath[str], responses: NamedDependency[Responses], request: Request) -> dict:
    return await responses.delete(response_id, _tenant(request, responses))


@get(["/v1/responses/{response_id:str}/input_items", "/responses/{response_id:str}/input_items"], summary="OpenAI Responses: list input items")
async def list_input_items(response_id: FromPath[str], responses: NamedDependency[Responses], request: Request,
                           after: FromQuery[Optional[str]] = None, limit: FromQuery[int] = 20, order: FromQuery[str] = "desc") -> dict:
    return await responses.input_items(response_id, after=after, limit=limit, order=order, tenant=_tenant(request, responses))


def _tenant(request: Request, responses: Responses) -> str:
    """Stored responses belong to the API key that created them (others get 404)."""
    return tenant(request.headers, responses.config.api_keys)


@websocket(["/v1/responses", "/responses"])
async def responses_socket(socket: WebSocket, svc: NamedDependency[Service], responses: NamedDependency[Responses]) -> None:
    """WebSocket mode: `response.create` messages in, the stream's events out (responses_ws.py)."""
    await Session(responses, svc, socket, tenant(socket.headers, responses.config.api_keys)).run()


ROUTES = [responses_socket, create_response, get_response, cancel_response, delete_response, list_input_items]
