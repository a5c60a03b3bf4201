"""One chat turn through the engine, the same pipeline for chat completions, Anthropic
messages and Responses: the template plan (prompt text, tool-call grammar, reply parser)
rendered off the event loop, the prompt's token ids, one validated `GenerationRequest`,
then the generation run to completion or streamed, its text parsed into content,
reasoning and tool calls by the plan's parser."""
from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator, List, Optional, Tuple

from ..chat.plan import ChatPlan
from ..results import Chunk, GenerationResult
from ..tools.reply import Reply, ReplyDelta
from .errors import ApiError


class ChatTurn:
    def __init__(self, svc, plan: ChatPlan, ids: List[int], req) -> None:
        self.svc, self.plan, self.ids, self.req = svc, plan, ids, req
        self.stream = None
        self.result: Optional[GenerationResult] = None
        self.reply: Optional[Reply] = None
        self.last: Optional[ReplyDelta] = None

    @classmethod
    async def prepare(cls, svc, messages: list, sampling: Any, *, tools=None, tool_choice=None, parallel_tool_calls=None,
                      reasoning_format=None, template_kwargs=None, schema=None, conflict: str, n_predict: Optional[int],
                      stop, names: Optional[dict] = None, **extra) -> "ChatTurn":
        """Plan the turn and build its request. `schema`: a JSON schema the reply must
        match (response_format, text.format, output_config); `conflict`: the message for
        tools combined with a schema or grammar; `names`: the route's names for fields."""
        plan = await asyncio.to_thread(svc.plan_chat, messages, tools=tools, tool_choice=tool_choice, parallel_tool_calls=parallel_tool_calls,
                                       reasoning_format=reasoning_format, template_kwargs=template_kwargs)
        if plan.constraint is not None and (schema is not None or getattr(sampling, "grammar", None) or getattr(sampling, "json_schema", None)):
            raise ApiError(400, conflict)
        if schema is not None:
            extra["json_schema"] = schema
        fields = svc.gen_fields(sampling, n_predict=n_predict, stop=stop, **extra, **plan.gen_kwargs())

        def build():
            ids = svc.chat_prompt_ids(plan.prompt)
            return ids, svc.request(ids, fields, names)

        ids, req = await asyncio.to_thread(build)
        return cls(svc, plan, ids, req)

    def parse(self, r: GenerationResult) -> Reply:
        """The whole reply of a finished generation."""
        rp = self.plan.parser()
        rp.text = r.text
        return rp.finish()[0]

    async def complete(self, n: int = 1) -> List[Tuple[GenerationResult, Reply]]:
        """Run `n` generations of the turn to completion (together, in the batch)."""
        results = await asyncio.gather(*(self.svc.aengine.collect(self.req) for _ in range(n)))
        return [(r, self.parse(r)) for r in results]

    async def start(self) -> "ChatTurn":
        """Queue the streamed generation (a refused request fails here, before any reply)."""
        self.stream = await self.svc.aengine.start(self.req)
        return self

    async def deltas(self) -> AsyncIterator[Tuple[Chunk, Optional[ReplyDelta]]]:
        """Each streamed chunk with what it adds to the reply (None when nothing); once
        done, `result`, `reply` and `last` (the parser's held-back tail) are set."""
        rp = self.plan.parser()
        async for c in self.stream:
            yield c, (rp.feed(c.text) if c.text else None)
        self.result = self.stream.result
        self.reply, self.last = rp.finish()

    async def aclose(self) -> None:
        if self.stream is not None:
            await self.stream.aclose()
