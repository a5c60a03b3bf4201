"""llamars-server replicas on Ray Serve (`pip install 'llamars[ray]'`).

    serve run llamars.ray:app model=/models/m.gguf replicas=2 args="-c 8192 -np 4 --responses-store postgresql://…"

or, from Python, `serve.run(llamars.ray.build(model=..., replicas=2, server_args=[...]))`.

Each replica runs one `llamars-server` (replica.py) with the same flags; an ingress
deployment (ingress.py) relays HTTP requests to them, keeping the turns of a conversation on
the replica whose prompt cache holds it (routing.py: a key from the model and the opening
messages, rendezvous-hashed over the replicas; the least loaded when that one is full or the
request has no key). Serve health-checks the replicas through `/health`, and on scale-down
drains a replica (its in-flight requests and streams finish, up to
`graceful_shutdown_timeout_s`) before stopping its server. For stored Responses that every
replica can serve, give them one `--responses-store postgresql://…`. WebSocket mode is not
relayed: connect to a replica's own server for it."""
from __future__ import annotations

import shlex
from typing import Dict, Optional, Sequence

from .routing import AffinityRouter, affinity_key, rank

__all__ = ["build", "app", "affinity_key", "rank", "AffinityRouter"]


def build(model: Optional[str] = None, replicas: int = 1, server_args: Sequence[str] = (), *, num_cpus: float = 1.0,
          affinity: bool = True, max_ongoing_requests: Optional[int] = None, graceful_shutdown_timeout_s: float = 300.0,
          health_check_period_s: float = 5.0, name: str = "llamars"):
    """The Serve application: `replicas` llamars-server replicas behind one ingress.
    `server_args`: llamars-server flags (`-m` is added from `model` when given; without
    either, each replica serves the default model), checked here. `max_ongoing_requests`
    per replica defaults to its slots (`-np`): a conversation's turn goes to its home
    replica while that has a free slot, else to the least loaded one (a request waits at the
    router when every slot of every replica is busy)."""
    try:
        from ray import serve
        from ray.serve.config import RequestRouterConfig
    except ImportError:
        raise ImportError("llamars.ray needs Ray Serve: pip install 'llamars[ray]'") from None
    from .ingress import LlamarsIngress
    from .replica import LlamarsReplica

    if replicas < 1:
        raise ValueError(f"replicas: must be >= 1, got {replicas}")
    args = list(server_args)
    if model is not None:
        args = ["-m", str(model), *args]
    from ..cli_argv import CLIError
    from ..cli_parse import parse_args

    try:
        slots = parse_args(args).resolved_parallel()
    except CLIError as e:
        raise ValueError(f"server_args: {e}") from None
    if max_ongoing_requests is None:
        max_ongoing_requests = slots
    router = RequestRouterConfig(request_router_class=AffinityRouter) if affinity else None
    server = serve.deployment(LlamarsReplica, name=f"{name}-replica").options(
        num_replicas=replicas, ray_actor_options={"num_cpus": num_cpus}, max_ongoing_requests=max_ongoing_requests,
        graceful_shutdown_timeout_s=graceful_shutdown_timeout_s, graceful_shutdown_wait_loop_s=0.5,
        health_check_period_s=health_check_period_s, health_check_timeout_s=60,
        **({"request_router_config": router} if router is not None else {}),
    )
    ingress = serve.deployment(LlamarsIngress, name=f"{name}-ingress").options(
        num_replicas=1, ray_actor_options={"num_cpus": 0}, max_ongoing_requests=max(1000, 4 * max_ongoing_requests * replicas),
    )
    return ingress.bind(server.bind(args), affinity)


def _truthy(v: str) -> bool:
    return str(v).strip().lower() in ("1", "true", "yes", "on")


def app(args: Dict[str, str]):
    """`serve run llamars.ray:app model=PATH replicas=N args="FLAGS" num_cpus=1 affinity=true`."""
    known = {"model", "replicas", "args", "num_cpus", "affinity", "max_ongoing_requests", "graceful_shutdown_timeout_s", "name"}
    bad = sorted(set(args) - known)
    if bad:
        raise ValueError(f"llamars.ray:app: unknown argument(s) {', '.join(bad)}; known: {', '.join(sorted(known))}")
    return build(
        model=args.get("model"), replicas=int(args.get("replicas", 1)), server_args=shlex.split(args.get("args", "")),
        num_cpus=float(args.get("num_cpus", 1)), affinity=_truthy(args.get("affinity", "true")),
        max_ongoing_requests=int(args["max_ongoing_requests"]) if "max_ongoing_requests" in args else None,
        graceful_shutdown_timeout_s=float(args.get("graceful_shutdown_timeout_s", 300)), name=args.get("name", "llamars"),
    )
