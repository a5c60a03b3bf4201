"""A client that leaves cancels its work, streamed or not: ASGI middleware that, once a
request's body has been read, watches the connection, and when the client disconnects
before the response is complete cancels the handler's task. The cancellation reaches
every generation the handler awaits (non-streamed completions, `n` / `n_cmpl` fan-outs,
queued prompts, embedding batches), whose streams cancel their requests in the engine
as they close, so the slots are free within one loop iteration."""
from __future__ import annotations

import asyncio


def disconnect_middleware(app):
    async def middleware(scope, receive, send):
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        body_read = asyncio.Event()
        gone = asyncio.Event()  # the client disconnected
        response_done = False

        async def app_receive():
            if body_read.is_set():
                # the body is read: what comes next is the disconnect (the watcher holds
                # the connection's receive; share what it learns)
                await gone.wait()
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.disconnect":
                gone.set()
            elif not message.get("more_body", False):
                body_read.set()
            return message

        async def app_send(message):
            nonlocal response_done
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                response_done = True
            await send(message)

        async def watch():
            await body_read.wait()
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    gone.set()
                    return

        task = asyncio.ensure_future(app(scope, app_receive, app_send))
        watcher = asyncio.ensure_future(watch())
        try:
            done, _ = await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
            if task not in done and not response_done:
                task.cancel()  # the client left: its generations are cancelled with the task
                try:
                    await task
                except asyncio.CancelledError:
                    pass
                return
            await task
        except asyncio.CancelledError:
            task.cancel()
            raise
        finally:
            watcher.cancel()

    return middleware
