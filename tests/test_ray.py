"""llamars-server replicas on Ray Serve (the `ray` extra; ./scripts/setup --tests installs
it): a local Ray head on 127.0.0.1, two replicas of the real model sharing a PostgreSQL
response store, conversations kept on the replica that holds their prompt cache (and equal
to a single server's greedy answers), stored responses readable whichever replica answers,
and a scale-down from 2 to 1 that drains without failing a request."""
from __future__ import annotations

import socket
import threading

import httpx
import pytest

from llamars.config import ServerConfig
from llamars.server.app import create_app
from server_util import LiveServer

ray = pytest.importorskip("ray", reason="the ray extra is not installed (pip install 'llamars[ray]'; ./scripts/setup --tests installs it)")
from ray import serve  # noqa: E402

from llamars.ray import build, rank  # noqa: E402

ARGS = ["-c", "2048", "-np", "2", "-t", "1"]
G = {"temperature": 0, "max_tokens": 8}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def cluster(model_path, pg):
    store = pg.new_database()
    ray.init(num_cpus=4, include_dashboard=False, _node_ip_address="127.0.0.1", log_to_driver=False,
             runtime_env={"env_vars": {"RAY_SERVE_PROXY_HOST": "127.0.0.1"}})
    port = _free_port()
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    args = [*ARGS, "--responses-store", store]

    def deploy(n: int) -> None:
        serve.run(build(model=model_path, replicas=n, server_args=args), name="llamars", route_prefix="/")

    deploy(2)
    try:
        yield f"http://127.0.0.1:{port}", deploy
    finally:
        serve.shutdown()
        ray.shutdown()


@pytest.fixture(scope="module")
def single(model_path, tmp_path_factory):
    s = LiveServer(create_app(ServerConfig(model=model_path, n_ctx=2048, n_parallel=2, n_threads=1,
                                           data_dir=str(tmp_path_factory.mktemp("single"))))).start()
    yield s.url
    s.stop()


def _conversation(c: httpx.Client, i: int) -> list:
    """Three turns of conversation i: [(replica, cached tokens, answer)]."""
    msgs = [{"role": "system", "content": f"You are assistant number {i}."}, {"role": "user", "content": f"Give me a word about topic {i}."}]
    out = []
    for follow in ("Another one?", "And a last one?"):
        r = c.post("/v1/chat/completions", json={"messages": msgs, **G})
        assert r.status_code == 200, r.text
        d = r.json()
        answer = d["choices"][0]["message"]["content"]
        out.append((r.headers.get("x-llamars-replica"), d["usage"]["prompt_tokens_details"]["cached_tokens"], answer))
        msgs = msgs + [{"role": "assistant", "content": answer}, {"role": "user", "content": follow}]
    r = c.post("/v1/chat/completions", json={"messages": msgs, **G})
    d = r.json()
    out.append((r.headers.get("x-llamars-replica"), d["usage"]["prompt_tokens_details"]["cached_tokens"], d["choices"][0]["message"]["content"]))
    return out


def test_conversations_stay_on_their_replica_and_equal_a_single_server(cluster, single):
    url, _ = cluster
    with httpx.Client(base_url=url, timeout=300) as c, httpx.Client(base_url=single, timeout=300) as s:
        homes = set()
        for i in range(20):
            turns = _conversation(c, i)
            ref = _conversation(s, i)
            assert [t[2] for t in turns] == [t[2] for t in ref], f"conversation {i}: replicas differ from a single server"
            assert turns[0][0] and all(t[0] == turns[0][0] for t in turns), f"conversation {i} moved: {[t[0] for t in turns]}"
            assert all(t[1] > 0 for t in turns[1:]), f"conversation {i}: later turns found no cached prompt {[t[1] for t in turns]}"
            homes.add(turns[0][0])
        assert len(homes) == 2  # both replicas serve conversations


def test_stored_responses_from_any_replica(cluster):
    url, _ = cluster
    with httpx.Client(base_url=url, timeout=300) as c:
        r = c.post("/v1/responses", json={"input": "Name a color.", "max_output_tokens": 6, "temperature": 0}).json()
        seen = set()
        for _ in range(8):  # no affinity key: least loaded, so both replicas get some
            x = c.get(f"/v1/responses/{r['id']}")
            assert x.status_code == 200 and x.json()["output"] == r["output"]
            seen.add(x.headers["x-llamars-replica"])
        follow = c.post("/v1/responses", json={"input": "Another?", "previous_response_id": r["id"], "max_output_tokens": 6}).json()
        assert follow["usage"]["input_tokens"] > r["usage"]["input_tokens"]


def test_scale_down_drains_without_failing_a_request(cluster):
    url, deploy = cluster
    results, errors = [], []

    def stream(i: int, started: threading.Event) -> None:
        try:
            with httpx.Client(base_url=url, timeout=300) as c:
                body = {"prompt": f"Story {i}: once upon a time", "n_predict": 64, "stream": True, "ignore_eos": True, "temperature": 0}
                with c.stream("POST", "/completion", json=body) as r:
                    assert r.status_code == 200
                    n, last = 0, ""
                    for line in r.iter_lines():
                        if line.startswith("data: "):
                            n += 1
                            last = line
                            started.set()
                    results.append((r.headers.get("x-llamars-replica"), n, last))
        except Exception as e:  # a failed request is the failure under test
            errors.append(repr(e))
            started.set()

    events = [threading.Event() for _ in range(6)]
    threads = [threading.Thread(target=stream, args=(i, e)) for i, e in enumerate(events)]
    for t in threads:
        t.start()
    for e in events:
        assert e.wait(120)
    deploy(1)  # scale 2 -> 1 while the streams run
    for t in threads:
        t.join(300)
    assert not errors, errors
    assert len(results) == 6 and len({r[0] for r in results}) == 2
    for replica, n, last in results:
        assert '"stop":true' in last.replace(" ", "") and n >= 64, (replica, n, last[:200])
    states = serve.status().applications["llamars"].deployments["llamars-replica"].replica_states
    assert states.get("RUNNING") == 1, states
    with httpx.Client(base_url=url, timeout=300) as c:
        assert c.post("/completion", json={"prompt": "after", "n_predict": 2}).status_code == 200


def test_rendezvous_ranking_moves_only_the_removed_replicas_keys():
    keys = [f"k{i}" for i in range(400)]
    three = {k: rank(k, ["a", "b", "c"])[0] for k in keys}
    two = {k: rank(k, ["a", "b"])[0] for k in keys}
    moved = [k for k in keys if three[k] != two[k]]
    assert all(three[k] == "c" for k in moved) and 90 < len(moved) < 180
