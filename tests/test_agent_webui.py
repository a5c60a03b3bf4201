"""The Web UI running the tool loop in real headless Chromium against a real server with
`--tools read_file` on the default chat model (whose template has no tool format of its
own, so the tool-call grammar constrains every reply: it calls the tool reliably): the
tools shown, the approval prompt, the result, the reply that uses it; Deny; auto-approve;
Stop while a call waits. Calls to tools the server does not have end the loop (covered in
test_webui's tool-call rendering test)."""
from __future__ import annotations

import httpx
import pytest
from browser_util import by, console_errors, driver, js, open_page, send, shot, shots, stored, wait, wait_idle  # noqa: F401
from server_util import LiveServer

from llamars import Engine
from llamars.config import ServerConfig
from llamars.models import default_model
from llamars.server.app import create_app

ASK = "Read the file secret.txt and tell me the secret word."


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("tools-root")
    (root / "secret.txt").write_text("The secret word is PINEAPPLE.\n")
    eng = Engine(str(default_model()), n_ctx=4096, n_parallel=2)
    app = create_app(ServerConfig(model="unused", n_ctx=4096, n_parallel=2, tools=["read_file"], tools_root=str(root)), eng)
    s = LiveServer(app).start()
    yield s
    s.stop()
    eng.close()


def steps(d):
    return js(d, "return [...document.querySelectorAll('[data-testid=tool-step]')].map(e => e.dataset.state)")


def ask_and_wait_for_approval(d, server):
    open_page(d, server.url, {"temperature": 0})
    wait(lambda: by(d, "tools-info").is_displayed(), 30, what="the tools badge")
    send(d, ASK)
    wait(lambda: js(d, "return !!document.querySelector('[data-testid=tool-approve]')"), 120, what="the approval prompt")


def test_tool_loop_with_approval(driver, server, shots):
    d = driver
    ask_and_wait_for_approval(d, server)
    assert by(d, "tools-info").text == "1 tool" and by(d, "tools-info").get_attribute("title") == "read_file"
    assert steps(d) == ["pending"]
    call = by(d, "tool-call")
    assert "read_file" in call.text and "secret.txt" in call.text
    assert "Run read_file on the server?" in by(d, "tool-step").text
    shot(d, shots, "approval")
    by(d, "tool-approve").click()
    wait_idle(d)
    assert steps(d) == ["done"]
    assert "The secret word is PINEAPPLE." in by(d, "tool-output").get_attribute("textContent")
    replies = js(d, "return [...document.querySelectorAll('[data-testid=message-assistant] [data-testid=message-content]')].map(e => e.textContent)")
    assert replies and "PINEAPPLE" in replies[-1]
    shot(d, shots, "answered")
    msgs = stored(d)[0]["messages"]
    assert [m["role"] for m in msgs] == ["user", "assistant", "tool", "assistant"]
    assert msgs[2]["state"] == "done" and msgs[2]["tool_call_id"] == msgs[1]["tool_calls"][0]["id"]
    # the result step is collapsible
    assert by(d, "tool-result").tag_name == "details"
    assert not console_errors(d)


@pytest.mark.parametrize("button,state", [("tool-deny", "denied"), ("stop", "stopped")])
def test_deny_or_stop_while_a_call_waits(driver, server, button, state):
    d = driver
    ask_and_wait_for_approval(d, server)
    by(d, button).click()
    wait_idle(d)
    assert steps(d) == [state]
    contents = " ".join(js(d, "return [...document.querySelectorAll('[data-testid=message-content]')].map(e => e.textContent)"))
    assert "PINEAPPLE" not in contents
    roles = [m["role"] for m in stored(d)[0]["messages"]]
    if state == "denied":  # the model is told, and answers
        assert by(d, "tool-output").get_attribute("textContent") == "The user denied this tool call."
        assert roles == ["user", "assistant", "tool", "assistant"]
    else:  # the loop ends there, and nothing is left running on the server
        assert roles == ["user", "assistant", "tool"]
        assert all(s["is_processing"] is False for s in httpx.get(server.url + "/slots").json())


def test_auto_approve_setting(driver, server):
    d = driver
    open_page(d, server.url, {"temperature": 0, "tools_auto": "on"})
    wait(lambda: by(d, "tools-info").is_displayed(), 30, what="the tools badge")
    by(d, "open-settings").click()
    assert by(d, "tools-auto").is_selected() and by(d, "tools-use").is_selected()
    assert [e.text for e in d.find_elements("css selector", "[data-testid=tools-list-item]")] == ["read_file Read file"]
    by(d, "close-settings").click()
    send(d, ASK)
    wait_idle(d)
    assert steps(d) == ["done"]
    assert not js(d, "return !!document.querySelector('[data-testid=tool-approve]')")


def test_tools_off_setting_sends_no_tools(driver, server):
    d = driver
    open_page(d, server.url, {"temperature": 0, "tools_use": "", "max_tokens": 8})
    wait(lambda: by(d, "tools-info").is_displayed(), 30, what="the tools badge")
    js(d, """const real = window.fetch; window.fetch = (url, init) => {
        if (String(url).endsWith('/v1/chat/completions')) window.__sent = JSON.parse(init.body);
        return real(url, init); };""")
    send(d, "Hello")
    wait_idle(d)
    assert "tools" not in js(d, "return window.__sent") and steps(d) == []


def test_requests_may_reference_server_tools_by_name(server):
    """A function tool that gives only the name of a server tool is that tool's definition
    to the chat template (the same prompt as with the full definition)."""
    listing = httpx.get(server.url + "/tools").json()
    msgs = [{"role": "user", "content": ASK}]

    def count(tools):
        body = {"messages": msgs, **({"tools": tools} if tools else {})}
        r = httpx.post(server.url + "/v1/chat/completions/input_tokens", json=body)
        assert r.status_code == 200, r.text
        return r.json()["input_tokens"]

    by_name = count([{"type": "function", "function": {"name": "read_file"}}])
    assert by_name == count([listing[0]["definition"]]) > count(None)
    r = httpx.post(server.url + "/v1/chat/completions", json={"messages": msgs, "temperature": 0, "max_tokens": 80,
                                                             "tools": [{"type": "function", "function": {"name": "read_file"}}]})
    call = r.json()["choices"][0]["message"]["tool_calls"][0]["function"]
    assert call["name"] == "read_file" and "secret.txt" in call["arguments"]
