"""Responses over WebSocket (ws:// and wss://), with a real WebSocket client (`websockets`)
against a real uvicorn server: multi-turn store=false chains replayed from the connection,
generate=false, one response in flight per connection, the connection-local limits, stored
responses shared with the HTTP routes and owned by the API key, bad messages answered with
error events, and a client that leaves frees its slot."""
from __future__ import annotations

import asyncio
import json
import ssl
import time

import httpx
import openai
import pytest
import websockets

from llamars.config import ServerConfig
from llamars.server import responses_ws
from llamars.server.app import create_app
from server_util import LiveServer, self_signed_cert

KEY = "ws-key"
G = {"temperature": 0, "max_output_tokens": 12}
TERMINAL = ("response.completed", "response.incomplete", "response.failed")


@pytest.fixture(scope="module")
def server(model_path, tmp_path_factory):
    cfg = ServerConfig(model=model_path, n_ctx=4096, n_parallel=2, alias="ws-test", api_keys=[KEY],
                       data_dir=str(tmp_path_factory.mktemp("wsdata")))
    s = LiveServer(create_app(cfg)).start()
    yield s
    s.stop()


def _ws_url(s) -> str:
    return s.url.replace("http://", "ws://").replace("https://", "wss://") + "/v1/responses"


def _connect(s, key=KEY, **kw):
    return websockets.connect(_ws_url(s), additional_headers={"Authorization": f"Bearer {key}"}, max_size=None, **kw)


async def _recv(ws, timeout=120) -> dict:
    return json.loads(await asyncio.wait_for(ws.recv(), timeout))


async def _turn(ws, **body) -> list:
    """Send one response.create and collect its events up to the terminal one (or an error)."""
    await ws.send(json.dumps({"type": "response.create", **body}))
    out = []
    while True:
        ev = await _recv(ws)
        out.append(ev)
        if ev["type"] in TERMINAL or ev["type"] == "error":
            return out


def _http(s) -> httpx.Client:
    return httpx.Client(base_url=s.url, headers={"Authorization": f"Bearer {KEY}"}, timeout=120)


def test_multi_turn_local_chain_equals_the_whole_conversation_posted(server):
    async def go():
        async with _connect(server) as ws:
            t1 = await _turn(ws, input="My name is Ada. Remember it.", store=False, **G)
            r1 = t1[-1]["response"]
            assert [e["type"] for e in t1][:2] == ["response.created", "response.in_progress"]
            assert [e["sequence_number"] for e in t1] == list(range(len(t1)))
            t2 = await _turn(ws, input="What is my name?", store=False, previous_response_id=r1["id"], **G)
            t3 = await _turn(ws, input="Say it again.", store=False, previous_response_id=t2[-1]["response"]["id"], **G)
            return r1, t2[-1]["response"], t3[-1]["response"]

    r1, r2, r3 = asyncio.run(go())
    assert r2["usage"]["input_tokens"] > r1["usage"]["input_tokens"] + r1["usage"]["output_tokens"]
    # the chain is the conversation oldest first: the same answer as posting it whole
    conv = [{"role": "user", "content": "My name is Ada. Remember it."}, *r1["output"],
            {"role": "user", "content": "What is my name?"}, *r2["output"], {"role": "user", "content": "Say it again."}]
    with _http(server) as h:
        whole = h.post("/v1/responses", json={"input": conv, "store": False, **G}).json()
        assert whole["output"][0]["content"][0]["text"] == r3["output"][0]["content"][0]["text"]
        assert whole["usage"]["input_tokens"] == r3["usage"]["input_tokens"]
        # connection-local: not in the store
        assert h.get(f"/v1/responses/{r1['id']}").status_code == 404

    async def later():  # and gone with its connection
        async with _connect(server) as ws:
            return await _turn(ws, input="And now?", store=False, previous_response_id=r3["id"], **G)

    [err] = asyncio.run(later())
    assert err["type"] == "error" and err["error"]["code"] == "previous_response_not_found"
    assert err["error"]["param"] == "previous_response_id"


def test_generate_false_prepares_without_inference(server):
    async def go():
        async with _connect(server) as ws:
            warm = await _turn(ws, input="The secret word is tangerine.", store=False, generate=False, **G)
            go_on = await _turn(ws, input="What is the secret word?", store=False, previous_response_id=warm[-1]["response"]["id"], **G)
            plain = await _turn(ws, input="What is the secret word?", store=False, **G)
            return warm, go_on, plain

    warm, go_on, plain = asyncio.run(go())
    assert [e["type"] for e in warm] == ["response.created", "response.completed"]
    assert warm[-1]["response"]["output"] == [] and warm[-1]["response"]["status"] == "completed"
    assert go_on[-1]["response"]["usage"]["input_tokens"] > plain[-1]["response"]["usage"]["input_tokens"]


def test_second_create_while_one_runs_is_refused_and_the_first_completes(server):
    async def go():
        async with _connect(server) as ws:
            await ws.send(json.dumps({"type": "response.create", "input": "Count to twenty.", "store": False, **G}))
            first = await _recv(ws)
            await ws.send(json.dumps({"type": "response.create", "input": "Interrupt!", "store": False, **G}))
            seen = [first]
            while seen[-1]["type"] not in TERMINAL:
                seen.append(await _recv(ws))
            return seen

    seen = asyncio.run(go())
    errors = [e for e in seen if e["type"] == "error"]
    assert len(errors) == 1 and errors[0]["error"]["code"] == "response_already_in_flight"
    assert seen[-1]["type"] == "response.completed" or seen[-1]["type"] == "response.incomplete"
    text = seen[-1]["response"]["output"][0]["content"][0]["text"]
    assert text and [e["sequence_number"] for e in seen if e["type"] != "error"] == list(range(len(seen) - 1))


def test_connection_local_limits(server, monkeypatch):
    monkeypatch.setattr(responses_ws, "MAX_LOCAL", 3)

    async def go():
        async with _connect(server) as ws:
            for i in range(3):
                ok = await _turn(ws, input=f"note {i}", store=False, generate=False)
                assert ok[-1]["type"] == "response.completed"
            [err] = await _turn(ws, input="one more", store=False, generate=False)
            stored = await _turn(ws, input="stored is fine", store=True, generate=False)
            return err, stored

    err, stored = asyncio.run(go())
    assert err["error"]["code"] == "connection_store_limit_reached" and err["error"]["param"] == "store"
    assert stored[-1]["type"] == "response.completed"
    monkeypatch.setattr(responses_ws, "MAX_LOCAL", 128)
    monkeypatch.setattr(responses_ws, "MAX_LOCAL_BYTES", 2000)

    async def big():
        async with _connect(server) as ws:
            ok = await _turn(ws, input="x" * 900, store=False, generate=False)
            [err] = await _turn(ws, input="y" * 1200, store=False, generate=False)
            return ok, err

    ok, err = asyncio.run(big())
    assert ok[-1]["type"] == "response.completed" and err["error"]["code"] == "connection_store_limit_reached"


def test_stored_responses_are_shared_with_http_and_owned_by_the_key(server):
    async def go():
        async with _connect(server) as ws:
            t = await _turn(ws, input="Name a fruit.", store=True, **G)
            local = await _turn(ws, input="Local.", store=False, generate=False)
            [bad] = await _turn(ws, input="Keep it.", store=True, previous_response_id=local[-1]["response"]["id"])
            # a stored one continues on the socket from the store
            more = await _turn(ws, input="Another?", store=True, previous_response_id=t[-1]["response"]["id"], **G)
            return t[-1]["response"], bad, more[-1]["response"]

    r, bad, more = asyncio.run(go())
    assert bad["error"]["code"] == "invalid_store_transition" and bad["error"]["param"] == "store"
    c = openai.OpenAI(base_url=server.url + "/v1", api_key=KEY, max_retries=0, timeout=60)
    got = c.responses.retrieve(r["id"])
    assert got.output_text == r["output"][0]["content"][0]["text"] and got.status == r["status"]
    assert c.responses.retrieve(more["id"]).usage.input_tokens > r["usage"]["input_tokens"]
    assert asyncio.run(_refused_without_key(server))


async def _refused_without_key(server) -> bool:
    try:
        async with _connect(server, key="wrong") as ws:
            await _turn(ws, input="hi", store=False, generate=False)
    except (websockets.exceptions.InvalidStatus, websockets.exceptions.ConnectionClosed):
        return True
    return False


BAD = [
    ("not json", None, None),
    (json.dumps([1, 2]), None, None),
    (json.dumps({"type": "session.update"}), None, "type"),
    (json.dumps({"type": "response.create", "input": "x", "temperature": "hot"}), None, "temperature"),
    (json.dumps({"type": "response.create", "input": "x", "generate": "no"}), None, "generate"),
    (json.dumps({"type": "response.create", "input": "x", "background": True}), None, "background"),
    (json.dumps({"type": "response.create", "input": [{"type": "bogus"}]}), None, "input[0].type"),
    (json.dumps({"type": "response.create", "input": "x", "max_output_tokens": 0}), None, "max_output_tokens"),
    (json.dumps({"type": "response.create", "input": "x", "previous_response_id": "resp_nope"}), "previous_response_not_found", "previous_response_id"),
]


def test_bad_messages_get_error_events_and_the_connection_stays(server):
    async def go():
        out = []
        async with _connect(server) as ws:
            for raw, _, _ in BAD:
                await ws.send(raw)
                out.append(await _recv(ws))
            ok = await _turn(ws, input="Still there?", store=False, **G)
        return out, ok

    out, ok = asyncio.run(go())
    for ev, (raw, code, param) in zip(out, BAD):
        assert ev["type"] == "error" and 400 <= ev["status"] < 500, (raw, ev)
        assert ev["error"]["message"]
        if code:
            assert ev["error"]["code"] == code
        if param:
            assert ev["error"]["param"] == param, (raw, ev)
    assert ok[-1]["type"] in TERMINAL


def test_a_client_that_leaves_frees_the_slot(server):
    async def go():
        ws = await _connect(server)
        await ws.send(json.dumps({"type": "response.create", "input": "Write a very long story.", "store": False,
                                  "temperature": 0, "max_output_tokens": 3000, "ignore_eos": True}))
        for _ in range(6):
            await _recv(ws)
        await ws.close()

    with _http(server) as h:
        asyncio.run(go())
        t0 = time.monotonic()
        while any(x["is_processing"] for x in h.get("/slots").json()):
            assert time.monotonic() - t0 < 3, "the slot still generates after the WebSocket closed"
            time.sleep(0.05)


def test_wss(model_path, tmp_path):
    cert, key = self_signed_cert(tmp_path)
    s = LiveServer(create_app(ServerConfig(model=model_path, n_ctx=1024, data_dir=str(tmp_path))), ssl_certfile=cert, ssl_keyfile=key).start()
    try:
        ctx = ssl.create_default_context(cafile=cert)
        ctx.check_hostname = False  # (the openssl CLI fallback makes a certificate without the IP in it)

        async def go():
            async with websockets.connect(_ws_url(s), ssl=ctx) as ws:
                return await _turn(ws, input="Hello", store=False, **G)

        evs = asyncio.run(go())
        assert _ws_url(s).startswith("wss://") and evs[-1]["type"] in TERMINAL
    finally:
        s.stop()
