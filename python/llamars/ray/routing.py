"""Prefix-affinity routing for llamars replicas on Ray Serve: the turns of one conversation
go to the replica whose prompt cache holds it.

`affinity_key(body)` hashes the model and the opening of the conversation (the first two
chat messages / Responses input items / the prompt's first 512 characters), so every later
turn of a conversation, which repeats that opening, gets the same key; requests without one
(GETs, `previous_response_id` continuations) get "". `AffinityRouter` sends a keyed request
to the replica that ranks first for the key by rendezvous hashing (adding or removing a
replica moves only that replica's share of conversations), and to the least loaded of the
others when that one is full (its `max_ongoing_requests`, by default its slots, are all
taken); unkeyed requests go to the least loaded replica."""
from __future__ import annotations

import hashlib
import json
from typing import Any, List, Optional

OPENING_ITEMS = 2  # chat messages / input items that name a conversation
OPENING_CHARS = 512  # of a plain prompt


def affinity_key(body: bytes) -> str:
    """The conversation's key ("" when the request has none)."""
    if not body or body[:1] not in (b"{",):
        return ""
    try:
        d = json.loads(body)
    except (ValueError, RecursionError):
        return ""
    if not isinstance(d, dict) or d.get("previous_response_id"):
        return ""  # a Responses continuation names no opening: least loaded (the store is shared)
    opening: Any
    if isinstance(d.get("messages"), list):
        opening = d["messages"][:OPENING_ITEMS]
        if isinstance(d.get("system"), (str, list)):  # Anthropic's system prompt sits beside the messages
            opening = [d["system"], *opening]
    elif isinstance(d.get("input"), list):
        opening = d["input"][:OPENING_ITEMS]
    elif isinstance(d.get("input"), str):
        opening = d["input"][:OPENING_CHARS]
    elif isinstance(d.get("prompt"), str):
        opening = d["prompt"][:OPENING_CHARS]
    elif isinstance(d.get("prompt"), list):
        opening = d["prompt"][:OPENING_CHARS]
    else:
        return ""
    if isinstance(d.get("instructions"), str):
        opening = [d["instructions"], opening]
    blob = json.dumps([d.get("model") or "", opening], sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode("utf-8", "replace")).hexdigest()[:32]


def rank(key: str, replica_ids: List[str]) -> List[str]:
    """Replica ids in rendezvous-hash order for `key` (the first is the conversation's home)."""
    return sorted(replica_ids, key=lambda r: hashlib.sha256(f"{key}\x00{r}".encode()).digest(), reverse=True)


try:  # the router needs Ray; the key and the ranking above do not
    from ray.serve.request_router import PendingRequest, RequestRouter, RunningReplica
except ImportError:  # pragma: no cover - without the ray extra
    RequestRouter = object  # type: ignore[misc,assignment]
    PendingRequest = RunningReplica = Any  # type: ignore[misc,assignment]


class AffinityRouter(RequestRouter):  # type: ignore[misc,valid-type]
    """Ray Serve request router: the key is the first argument of the replica call."""

    async def choose_replicas(self, candidate_replicas: List["RunningReplica"],
                              pending_request: Optional["PendingRequest"] = None) -> List[List["RunningReplica"]]:
        if not candidate_replicas:
            return []
        args = pending_request.args if pending_request is not None else []
        key = args[0] if args and isinstance(args[0], str) else ""
        if not key:
            return [list(candidate_replicas)]  # one rank: Serve picks its least loaded replica
        by_id = {r.replica_id.unique_id: r for r in candidate_replicas}
        order = rank(key, list(by_id))
        return [[by_id[order[0]]], [by_id[i] for i in order[1:]]] if len(order) > 1 else [[by_id[order[0]]]]
