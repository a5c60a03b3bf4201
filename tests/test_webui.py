"""The chat Web UI at `/`, driven in real headless Chromium (Debian's `chromium` +
`chromium-driver`, through selenium) against a real server on the real model: streaming,
stop (the slot is freed), regenerate, edit, reload, settings (JSON schema, grammar, API
key), markdown, model output shown as text only, no external requests, page weight,
phone width, themes. Screenshots go to a temporary directory printed with `-s`."""
from __future__ import annotations

import json
import re
import time
from pathlib import Path

import httpx
import pytest
from browser_util import busy, by, console_errors, driver, js, open_page, send, shot, shots, stored, texts, wait, wait_idle  # noqa: F401
from server_util import LiveServer

from llamars import Engine
from llamars.config import ServerConfig
from llamars.server.app import create_app

XSS = "<img src=x onerror=alert(1)> <script>alert(2)</script> [x](javascript:alert(3))"


# ------------------------------------------------------------------ fixtures


@pytest.fixture(scope="module")
def eng(model_path):
    e = Engine(model_path, n_ctx=4096, n_parallel=2)
    yield e
    e.close()


def _serve(eng, **cfg):
    base = dict(model="unused", n_ctx=4096, n_parallel=2, alias="gemma-webui")
    base.update(cfg)
    return LiveServer(create_app(ServerConfig(**base), eng)).start(path=base.get("api_prefix", "") + "/health")


@pytest.fixture(scope="module")
def server(eng):
    s = _serve(eng)
    yield s
    s.stop()


# ------------------------------------------------------------------ serving


def test_page_and_assets_are_served_with_csp(server):
    r = httpx.get(server.url + "/")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    csp = r.headers["content-security-policy"]
    for part in ("default-src 'self'", "script-src 'self'", "style-src 'self'", "connect-src 'self'", "object-src 'none'", "frame-ancestors 'none'"):
        assert part in csp
    assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
    assert r.headers["x-content-type-options"] == "nosniff" and r.headers["cache-control"] == "no-cache"
    html = r.text
    # nothing the policy would block: no inline script or style, no style attributes
    assert "<script>" not in html and "<style" not in html and "style=" not in html
    types = {"style.css": "text/css", "app.js": "text/javascript", "markdown.js": "text/javascript", "favicon.svg": "image/svg+xml"}
    for name, ctype in types.items():
        a = httpx.get(f"{server.url}/webui/{name}", headers={"Accept-Encoding": "gzip"})
        assert a.status_code == 200 and a.headers["content-type"].startswith(ctype), name
        assert "content-security-policy" in a.headers
        again = httpx.get(f"{server.url}/webui/{name}", headers={"If-None-Match": a.headers["etag"]})
        assert again.status_code == 304 and not again.content
    assert httpx.get(server.url + "/webui/nope.js").status_code == 404
    # the icon browsers fetch on their own, whatever the page declares
    ico = httpx.get(server.url + "/favicon.ico")
    assert ico.status_code == 200 and ico.headers["content-type"].startswith("image/svg+xml")
    assert httpx.get(server.url + "/webui/..%2F..%2Fconfig.py").status_code == 404
    # the page is not an API route
    assert "/" not in httpx.get(server.url + "/openapi/openapi.json").json()["paths"]


def test_webui_files_ship_in_the_wheel():
    """maturin puts every file under python/llamars into the wheel unless .gitignore'd."""
    import subprocess

    root = Path(__file__).resolve().parent.parent
    files = sorted((root / "python/llamars/webui").iterdir())
    assert {f.name for f in files} >= {"index.html", "style.css", "app.js", "markdown.js", "sse.js", "store.js"}
    ignored = subprocess.run(["git", "check-ignore", *map(str, files)], cwd=root, capture_output=True, text=True).stdout
    assert not ignored.strip(), f"gitignored, so left out of the wheel: {ignored}"


def test_cli_flags():
    from llamars.cli import parse_args

    assert parse_args(["--path", "/srv/ui"]).static_path == "/srv/ui"
    assert parse_args([], env={"LLAMA_ARG_STATIC_PATH": "/srv/env"}).static_path == "/srv/env"
    assert parse_args([]).static_path is None and parse_args([]).webui is True
    assert parse_args(["--no-webui"]).webui is False


def test_no_webui_and_static_path(eng, tmp_path):
    s = _serve(eng, webui=False)
    try:
        assert httpx.get(s.url + "/").status_code == 404
        assert httpx.get(s.url + "/webui/app.js").status_code == 404
        assert httpx.get(s.url + "/health").status_code == 200
    finally:
        s.stop()
    (tmp_path / "index.html").write_text("<!doctype html><title>mine</title><script src='js/x.js'></script>")
    (tmp_path / "js").mkdir()
    (tmp_path / "js" / "x.js").write_text("console.log(1)")
    (tmp_path / ".secret").write_text("no")
    s = _serve(eng, static_path=str(tmp_path), api_keys=["k"])
    try:
        r = httpx.get(s.url + "/")
        assert r.status_code == 200 and "mine" in r.text
        assert httpx.get(s.url + "/js/x.js").headers["content-type"].startswith("text/javascript")
        (tmp_path / "js" / "x.js").write_text("console.log('changed')")  # picked up while serving
        assert httpx.get(s.url + "/js/x.js").text == "console.log('changed')"
        assert httpx.get(s.url + "/.secret").status_code == 404
        assert httpx.get(s.url + "/webui/app.js").status_code == 404  # the built-in UI is replaced
        assert httpx.get(s.url + "/health").status_code == 200
        assert httpx.post(s.url + "/tokenize", json={"content": "x"}).status_code == 401
    finally:
        s.stop()


# ------------------------------------------------------------------ chat in the browser


def test_send_streams_reply_token_by_token(driver, server, shots):
    from selenium.webdriver.common.keys import Keys

    d = driver
    open_page(d, server.url, {"temperature": 0, "max_tokens": 40})
    assert by(d, "model-name").text == "gemma-webui"
    assert by(d, "model-info").text == "ctx 2048 · 2 slots"
    box = by(d, "prompt")
    box.send_keys("one", Keys.SHIFT, Keys.ENTER, Keys.SHIFT, "two")  # Shift+Enter: a new line, nothing sent
    assert box.get_attribute("value") == "one\ntwo" and not texts(d, "user")
    box.clear()
    box.send_keys("Count from 1 to 30, separated by commas.", Keys.ENTER)  # Enter sends
    seen = []
    t0 = time.monotonic()
    while time.monotonic() - t0 < 120:
        cur = js(d, "const m = document.querySelectorAll('[data-testid=message-assistant] .markdown'); return m.length ? m[m.length-1].textContent : ''")
        if cur and (not seen or cur != seen[-1]):
            seen.append(cur)
        if not busy(d) and texts(d, "assistant"):
            break
        time.sleep(0.02)
    assert not busy(d)
    final = js(d, "const m = document.querySelectorAll('[data-testid=message-assistant] .markdown'); return m[m.length-1].textContent")
    assert texts(d, "user") == ["Count from 1 to 30, separated by commas."]
    # the reply grew across polls: several partial texts before the end, each a prefix of the next
    partial = [t for t in seen if t != final]
    assert len(partial) >= 3, seen
    for a, b in zip(partial + [final], partial[1:] + [final]):
        assert b.startswith(a) and len(b) > len(a), (a, b)
    stats = by(d, "stats").text
    assert re.fullmatch(r"prompt \d+ tok · \d+ tok/s · \d+ tok · [\d.]+ tok/s", stats), stats  # the server's timings
    assert not console_errors(d)
    shot(d, shots, "reply-light")


def test_stop_aborts_and_frees_the_slot(driver, server):
    d = driver
    open_page(d, server.url, {"max_tokens": 1500, "temperature": 0.8})
    send(d, "Write a very long story about a dragon.")
    wait(lambda: len(texts(d, "assistant")[-1]) > 30, 60, what="some streamed text")
    assert any(s["is_processing"] for s in httpx.get(server.url + "/slots").json())
    by(d, "stop").click()
    wait(lambda: not busy(d), 10, what="the stop button to end the reply")
    # the aborted request frees its slot
    wait(lambda: not any(s["is_processing"] for s in httpx.get(server.url + "/slots").json()), 10, 0.1, "every slot idle")
    text = texts(d, "assistant")[-1]
    assert "Stopped." in text
    time.sleep(0.5)
    assert texts(d, "assistant")[-1] == text  # nothing more arrives
    assert stored(d)[0]["messages"][1]["stopped"] is True, stored(d)


def test_regenerate_edit_and_reload(driver, server):
    d = driver
    open_page(d, server.url, {"max_tokens": 12, "temperature": 0})
    send(d, "Say hello.")
    wait_idle(d)
    first = texts(d, "assistant")
    assert len(first) == 1 and first[0]
    requests_before = js(d, "return performance.getEntriesByType('resource').filter(e => e.name.endsWith('/v1/chat/completions')).length")
    by(d, "regenerate").click()
    wait(lambda: busy(d) or js(d, "return performance.getEntriesByType('resource').filter(e => e.name.endsWith('/v1/chat/completions')).length") > requests_before, 10, what="regeneration to start")
    wait_idle(d)
    assert js(d, "return performance.getEntriesByType('resource').filter(e => e.name.endsWith('/v1/chat/completions')).length") == requests_before + 1
    assert len(texts(d, "assistant")) == 1 and texts(d, "assistant")[0] == first[0]  # replaced (greedy: same text)

    # edit the user message and send it again: the conversation restarts from there
    by(d, "edit").click()
    box = by(d, "edit-input")
    box.clear()
    box.send_keys("Say goodbye.")
    by(d, "edit-save").click()
    wait(lambda: texts(d, "user") == ["Say goodbye."], 10, what="the edited message")
    wait_idle(d)
    assert len(texts(d, "assistant")) == 1 and texts(d, "assistant")[0]
    conv = stored(d)
    assert len(conv) == 1 and [m["role"] for m in conv[0]["messages"]] == ["user", "assistant"]
    assert conv[0]["messages"][0]["content"] == "Say goodbye." and conv[0]["title"] == "Say goodbye."
    reply = conv[0]["messages"][1]["content"]

    # a reload finds the conversation kept
    d.refresh()
    wait(lambda: texts(d, "user") == ["Say goodbye."], 20, what="the stored conversation after reload")
    assert len(texts(d, "assistant")) == 1 and reply.split()[0] in texts(d, "assistant")[0]
    assert by(d, "conversation").text.startswith("Say goodbye.")

    # new chat, then switch back through the side list
    by(d, "new-chat").click()
    assert not texts(d, "user")
    send(d, "Second chat.")
    wait_idle(d)
    items = js(d, "return [...document.querySelectorAll('[data-testid=conversation] .conv-title')].map(e => e.textContent)")
    assert items == ["Second chat.", "Say goodbye."]
    js(d, "document.querySelectorAll('[data-testid=conversation] .conv-title')[1].click()")
    assert texts(d, "user") == ["Say goodbye."]
    # delete the second chat (with the confirmation)
    js(d, "document.querySelectorAll('[data-testid=delete-chat]')[0].click()")
    d.switch_to.alert.accept()
    wait(lambda: len(stored(d)) == 1, 5, what="the deletion")
    assert stored(d)[0]["title"] == "Say goodbye."


def test_import_export(driver, server, tmp_path):
    d = driver
    open_page(d, server.url)
    conv = {"format": "llamars-conversations", "version": 1, "conversations": [
        {"id": "abc", "title": "Imported one", "created": 1, "updated": 2,
         "messages": [{"role": "user", "content": "hi <b>there</b>"}, {"role": "assistant", "content": "**hello**"}, {"role": "alien", "content": "x"}]}]}
    f = tmp_path / "export.json"
    f.write_text(json.dumps(conv))
    by(d, "import-file").send_keys(str(f))
    wait(lambda: js(d, "return [...document.querySelectorAll('.conv-title')].map(e => e.textContent)") == ["Imported one"], 10, what="the import")
    js(d, "document.querySelector('.conv-title').click()")
    assert texts(d, "user") == ["hi <b>there</b>"]  # as text
    assert js(d, "return document.querySelector('[data-testid=message-assistant] strong').textContent") == "hello"
    assert len(stored(d)[0]["messages"]) == 2  # the unknown role is dropped
    assert "Imported 1 conversation" in by(d, "toast").text
    # export: the download link's blob holds every stored conversation
    exported = d.execute_async_script("""
        const done = arguments[0], make = URL.createObjectURL;
        let blob = null;
        URL.createObjectURL = (b) => { blob = b; return make(b); };
        HTMLAnchorElement.prototype.click = function () {
          blob.text().then(t => done({ name: this.download, text: t }));
        };
        document.querySelector('[data-testid=export]').click();""")
    assert exported["name"].startswith("llamars-conversations") and exported["name"].endswith(".json")
    data = json.loads(exported["text"])
    assert data["format"] == "llamars-conversations" and [c["title"] for c in data["conversations"]] == ["Imported one"]


def test_json_schema_setting(driver, server, shots):
    d = driver
    open_page(d, server.url, {"max_tokens": 120, "temperature": 0})
    by(d, "open-settings").click()
    schema_box = by(d, "json-schema")
    schema_box.send_keys('{"type": "object", "properties": ')  # not JSON
    wait(lambda: by(d, "settings-error").is_displayed(), 5, what="the schema error")
    assert "JSON schema" in by(d, "settings-error").text
    shot(d, shots, "settings-dialog")
    by(d, "save-settings").click()
    n_requests = js(d, "return performance.getEntriesByType('resource').filter(e => e.name.endsWith('/v1/chat/completions')).length")
    send(d, "Give the name and age of a person as JSON.")
    wait(lambda: d.find_elements("css selector", "[data-testid=message-error]"), 5, what="the settings error in the conversation")
    assert "JSON schema" in by(d, "message-error").text
    assert js(d, "return performance.getEntriesByType('resource').filter(e => e.name.endsWith('/v1/chat/completions')).length") == n_requests

    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 24}, "age": {"type": "integer", "minimum": 0, "maximum": 150}},
              "required": ["name", "age"], "additionalProperties": False}
    by(d, "open-settings").click()
    schema_box = by(d, "json-schema")
    schema_box.clear()
    schema_box.send_keys(json.dumps(schema))
    wait(lambda: not by(d, "settings-error").is_displayed(), 5, what="the error to clear")
    by(d, "close-settings").click()
    by(d, "regenerate").click()
    wait(lambda: busy(d), 10, what="the request")
    wait_idle(d)
    reply = stored(d)[0]["messages"][1]
    assert not reply.get("error"), reply
    value = json.loads(reply["content"])
    assert set(value) == {"name", "age"} and isinstance(value["name"], str) and len(value["name"]) <= 24
    assert isinstance(value["age"], int) and not isinstance(value["age"], bool) and 0 <= value["age"] <= 150
    # the settings are remembered
    d.refresh()
    wait(lambda: json.loads(js(d, "return localStorage.getItem('llamars.settings')"))["json_schema"] == json.dumps(schema), 5, what="stored settings")
    by(d, "open-settings").click()
    assert json.loads(by(d, "json-schema").get_attribute("value")) == schema
    assert by(d, "max-tokens").get_attribute("value") == "120"
    by(d, "close-settings").click()


def test_model_output_is_shown_as_text(driver, server, shots):
    """A reply (forced by the grammar setting) that is HTML and a javascript: link stays text."""
    from selenium.common.exceptions import NoAlertPresentException

    d = driver
    gbnf = 'root ::= "' + XSS.replace("\\", "\\\\").replace('"', '\\"') + '"'
    open_page(d, server.url, {"grammar": gbnf, "max_tokens": 80})
    send(d, "Say something.")
    wait_idle(d)
    time.sleep(0.5)  # an injected handler would have fired by now
    with pytest.raises(NoAlertPresentException):
        d.switch_to.alert.text
    msg = by(d, "message-assistant")
    assert stored(d)[0]["messages"][1]["content"] == XSS
    assert msg.find_elements("css selector", "script, img, iframe, object") == []
    assert msg.find_elements("css selector", "a") == []  # javascript: links lose the link
    text = msg.text
    assert "<img src=x onerror=alert(1)>" in text and "<script>alert(2)</script>" in text
    assert js(d, "return document.querySelectorAll('script').length") == 1  # only app.js
    shot(d, shots, "xss-as-text")


def test_markdown_rendering(driver, server, shots):
    md = ("# Title\n\nSome **bold**, *italic* and `code` text.\n\n- first item\n- second with [a link](https://example.com/x)\n"
          "  - nested\n\n1. one\n2. two\n\n| col a | col b |\n|:--|--:|\n| 1 | 2 |\n\n```python\nprint(\"<b>hi</b>\")\n```\n")
    gbnf = 'root ::= "' + md.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    d = driver
    open_page(d, server.url, {"grammar": gbnf, "max_tokens": 200})
    send(d, "Show markdown.")
    wait_idle(d)
    root = "[data-testid=message-assistant] .markdown"
    q = lambda sel: js(d, f"return [...document.querySelectorAll('{root} {sel}')].map(e => e.textContent)")  # noqa: E731
    assert q("h1") == ["Title"]
    assert q("strong") == ["bold"] and q("em") == ["italic"] and "code" in q("p code")
    assert q("ul > li")[0] == "first item" and q("ul ul li") == ["nested"] and q("ol li") == ["one", "two"]
    assert js(d, f"return document.querySelector('{root} a').href") == "https://example.com/x"
    assert js(d, f"return document.querySelector('{root} a').rel") == "noopener noreferrer nofollow"
    assert q("th") == ["col a", "col b"] and q("td") == ["1", "2"]
    assert q("pre code") == ['print("<b>hi</b>")'] and q(".code-lang") == ["python"]
    assert q("pre b") == []
    assert q("[data-testid=copy-code]") == ["Copy"]
    shot(d, shots, "markdown-light")
    by(d, "theme-toggle").click()
    assert js(d, "return document.documentElement.dataset.theme") == "dark"
    shot(d, shots, "markdown-dark")
    bg = js(d, "return getComputedStyle(document.body).backgroundColor")
    d.refresh()  # the theme choice is remembered
    wait(lambda: js(d, "return document.documentElement.dataset.theme") == "dark", 10, what="the stored theme")
    assert js(d, "return getComputedStyle(document.body).backgroundColor") == bg
    by(d, "theme-toggle").click()
    assert js(d, "return getComputedStyle(document.body).backgroundColor") != bg


A = ' target="_blank" rel="noopener noreferrer nofollow"'
MARKDOWN_CASES = [
    ("<b>x</b> & <script>alert(1)</script>", "<p>&lt;b&gt;x&lt;/b&gt; &amp; &lt;script&gt;alert(1)&lt;/script&gt;</p>"),
    ('<img src=x onerror="alert(1)">', '<p>&lt;img src=x onerror="alert(1)"&gt;</p>'),
    ("[a](javascript:alert(1)) [b](data:text/html,x) [c](https://e.com/a_(b))", f'<p>a b <a href="https://e.com/a_(b)"{A}>c</a></p>'),
    ("![alt](https://e.com/x.png)", f'<p><a href="https://e.com/x.png"{A}>alt</a></p>'),
    ("snake_case and _it_ **b** ***bi*** ~~d~~ 2 * 3", "<p>snake_case and <em>it</em> <strong>b</strong> <strong><em>bi</em></strong> <del>d</del> 2 * 3</p>"),
    ("see https://e.com/p. ok", f'<p>see <a href="https://e.com/p"{A}>https://e.com/p</a>. ok</p>'),
    ("```js\nif (a < b) {}\n", '<div class="code-block"><div class="code-bar"><span class="code-lang">js</span><button class="copy-code" '
     'type="button" data-testid="copy-code">Copy</button></div><pre><code>if (a &lt; b) {}</code></pre></div>'),
    ("1. a\n2. b\n\n- x\n  - y", "<ol><li>a</li><li>b</li></ol><ul><li>x<ul><li>y</li></ul></li></ul>"),
    ("| a | b |\n|:-:|--:|\n| `x|y` | **2** |", '<div class="table-wrap"><table><thead><tr><th class="al-center">a</th><th class="al-right">b</th></tr></thead>'
     '<tbody><tr><td class="al-center"><code>x|y</code></td><td class="al-right"><strong>2</strong></td></tr></tbody></table></div>'),
    ("# H\n> q\n\np\nq\n\n---", "<h1>H</h1><blockquote><p>q</p></blockquote><p>p<br>q</p><hr>"),
]


def test_markdown_cases(driver, server):
    """markdown.js on its own, in the page: what each construct becomes (as serialized DOM)."""
    d = driver
    open_page(d, server.url)
    got = d.execute_async_script("""
        const [cases, done] = arguments;
        import(new URL('webui/markdown.js', location.href)).then(m => done(cases.map(c => {
          const div = document.createElement('div'); div.append(m.renderMarkdown(c)); return div.innerHTML; })));""",
        [c for c, _ in MARKDOWN_CASES])
    for (src, want), html in zip(MARKDOWN_CASES, got):
        assert html == want, src


def test_server_error_is_shown(driver, server):
    d = driver
    open_page(d, server.url, {"grammar": "root ::= (", "max_tokens": 8})
    send(d, "Hi")
    wait_idle(d)
    err = by(d, "message-error").text
    assert "HTTP 400" in err and "grammar" in err.lower(), err


def test_reasoning_and_tool_call_deltas(driver, server):
    """Streamed reasoning_content and tool-call fragments (the server sends these only with
    models and features that produce them: here a stubbed fetch replays such a stream, with
    a `data:` line split across network chunks)."""
    d = driver
    open_page(d, server.url)
    chunks = [
        {"choices": [{"index": 0, "delta": {"role": "assistant", "content": None}}]},
        {"choices": [{"index": 0, "delta": {"reasoning_content": "Let me think"}}]},
        {"choices": [{"index": 0, "delta": {"reasoning_content": " about <b>it</b>."}}]},
        {"choices": [{"index": 0, "delta": {"content": "Checking the weather."}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": ""}}]}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "{\"city\": "}}]}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "\"Paris\"}"}}]}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}], "timings": {"prompt_n": 5, "prompt_per_second": 100.0, "predicted_n": 12, "predicted_per_second": 42.5}},
    ]
    stream = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + ": ping\n\ndata: [DONE]\n\n"
    parts = [stream[i:i + 37] for i in range(0, len(stream), 37)]
    js(d, """
        const parts = arguments[0], real = window.fetch;
        window.fetch = (url, init) => {
          if (!String(url).endsWith('/v1/chat/completions')) return real(url, init);
          window.__sent = JSON.parse(init.body);
          const enc = new TextEncoder();
          const body = new ReadableStream({ async pull(c) {
            const p = parts.shift(); if (p === undefined) return c.close();
            await new Promise(r => setTimeout(r, 5)); c.enqueue(enc.encode(p)); } });
          return Promise.resolve(new Response(body, { headers: { 'Content-Type': 'text/event-stream' } }));
        };""", parts)
    send(d, "Weather in Paris?")
    wait_idle(d)
    sent = js(d, "return window.__sent")
    assert sent["stream"] is True and sent["messages"] == [{"role": "user", "content": "Weather in Paris?"}]
    details = by(d, "reasoning")
    assert details.tag_name == "details" and details.get_attribute("open") is None
    assert js(d, "return document.querySelector('[data-testid=reasoning] .reasoning-text').textContent") == "Let me think about <b>it</b>."
    assert by(d, "message-content").text == "Checking the weather."
    call = by(d, "tool-call")
    assert "get_weather" in call.text and json.loads(call.find_element("css selector", ".tool-args").text) == {"city": "Paris"}
    assert by(d, "stats").text == "prompt 5 tok · 100 tok/s · 12 tok · 42.5 tok/s"
    saved = stored(d)[0]["messages"][1]
    assert saved["tool_calls"] == [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]


def test_api_key_prompted_and_sent(driver, eng):
    s = _serve(eng, api_keys=["webui-secret"])
    d = driver
    try:
        assert httpx.get(s.url + "/").status_code == 200  # the page itself is public
        assert httpx.get(s.url + "/webui/app.js").status_code == 200
        assert httpx.get(s.url + "/props").status_code == 401
        open_page(d, s.url, {"max_tokens": 8, "temperature": 0})
        # /props answered 401: the header says so and the settings ask for the key
        assert by(d, "model-info").text == "API key required"
        wait(lambda: by(d, "settings").is_displayed(), 5, what="the settings dialog")
        assert by(d, "settings-note").is_displayed()
        by(d, "close-settings").click()
        send(d, "Hello")
        wait_idle(d)
        assert "HTTP 401" in by(d, "message-error").text
        wait(lambda: by(d, "api-key").is_displayed(), 5, what="the API key field")
        assert js(d, "return document.activeElement.dataset.testid") == "api-key"
        by(d, "api-key").send_keys("webui-secret")
        by(d, "save-settings").click()
        wait(lambda: by(d, "model-name").text == "gemma-webui", 10, what="/props with the key")
        by(d, "regenerate").click()
        wait(lambda: busy(d), 10, what="the request")
        wait_idle(d)
        reply = stored(d)[0]["messages"][1]
        assert reply["content"] and not reply.get("error"), reply
    finally:
        s.stop()


def test_api_prefix(driver, eng):
    """With --api-prefix the page lives at <prefix>/ and talks to the API under the prefix."""
    s = _serve(eng, api_prefix="/llm")
    d = driver
    try:
        assert httpx.get(s.url + "/").status_code == 404
        r = httpx.get(s.url + "/llm")
        assert r.status_code == 308 and r.headers["location"] == "/llm/"
        d.get(s.url + "/llm/health")
        js(d, "localStorage.clear(); localStorage.setItem('llamars.settings', JSON.stringify({max_tokens: '6'}))")
        d.get(s.url + "/llm")
        wait(lambda: by(d, "model-name").text == "gemma-webui", 30, what="/llm/props in the header")
        assert d.current_url == s.url + "/llm/"
        send(d, "Hi")
        wait_idle(d)
        reply = stored(d)[0]["messages"][1]
        assert reply["content"] and not reply.get("error"), reply
        assert js(d, "return performance.getEntriesByType('resource').some(e => e.name === arguments[0])", s.url + "/llm/v1/chat/completions")
    finally:
        s.stop()


def test_no_external_requests_and_page_weight(driver, server):
    d = driver
    d.get(server.url + "/health")
    js(d, "localStorage.clear()")
    d.execute_cdp_cmd("Network.enable", {})
    d.execute_cdp_cmd("Network.clearBrowserCache", {})  # a first visit: nothing cached
    d.get_log("performance")  # only what loading the page does from here on
    d.get_log("browser")
    d.get(server.url + "/")
    wait(lambda: by(d, "model-name").text == "gemma-webui", 30, what="/props in the header")
    time.sleep(0.5)
    urls, sizes, kinds = set(), {}, {}
    for entry in d.get_log("performance"):
        m = json.loads(entry["message"])["message"]
        p = m.get("params", {})
        if m["method"] == "Network.requestWillBeSent":
            urls.add(p["request"]["url"])
            kinds[p["requestId"]] = (p["request"]["url"], p.get("type"))
        elif m["method"] == "Network.loadingFinished":
            sizes[p["requestId"]] = p["encodedDataLength"]
    urls |= set(js(d, "return performance.getEntries().map(e => e.name).filter(n => n.includes(':'))"))
    origin = server.url
    external = sorted(u for u in urls if not (u.startswith(origin + "/") or u == origin or u.startswith(("data:", "blob:"))))
    assert not external, external
    page = {kinds[r][0]: n for r, n in sizes.items() if r in kinds and kinds[r][1] in ("Document", "Stylesheet", "Script", "Image", "Other")}
    page = {u: n for u, n in page.items() if u.startswith(origin)}
    assert origin + "/" in page and origin + "/webui/app.js" in page
    total = sum(page.values())
    raw = sum(len(httpx.get(u).content) for u in page)
    print(f"\nwebui page weight: {total} bytes transferred for {len(page)} requests ({raw} bytes uncompressed)")
    for u, n in sorted(page.items()):
        print(f"  {n:6d}  {u[len(origin):]}")
    assert total < 60_000
    assert not console_errors(d)


def test_phone_width(driver, server, shots):
    d = driver
    try:
        d.set_window_size(390, 844)
        open_page(d, server.url, {"max_tokens": 16, "temperature": 0})
        wait(lambda: js(d, "return innerWidth") <= 400, 5, what="the phone-width viewport")
        width = js(d, "return innerWidth")
        for testid in ("prompt", "send", "menu"):
            el = by(d, testid)
            r = el.rect
            assert el.is_displayed() and r["x"] >= 0 and r["x"] + r["width"] <= width + 0.5, (testid, r)
        # the conversation list is collapsed into a drawer
        wait(lambda: by(d, "new-chat").rect["x"] + by(d, "new-chat").rect["width"] <= 0, 5, what="the drawer to be closed")
        send(d, "Hi!")
        wait_idle(d)
        shot(d, shots, "phone-light")
        by(d, "menu").click()
        wait(lambda: by(d, "new-chat").rect["x"] >= 0, 5, what="the drawer to open")
        shot(d, shots, "phone-drawer")
        by(d, "new-chat").click()
        wait(lambda: by(d, "new-chat").rect["x"] + by(d, "new-chat").rect["width"] <= 0, 5, what="the drawer to close")
        by(d, "theme-toggle").click()
        shot(d, shots, "phone-dark")
        by(d, "open-settings").click()
        assert by(d, "save-settings").rect["x"] + by(d, "save-settings").rect["width"] <= width + 0.5
        shot(d, shots, "phone-settings")
        by(d, "close-settings").click()
    finally:
        d.set_window_size(1280, 860)


def test_router_mode_model_picker(driver, model_path, tmp_path):
    """Against a router: the header is a picker of its models; the chosen one's /props fills
    the header, and the chat is sent to it (the body's `model`)."""
    import os

    import tiny_models as tm
    from selenium.webdriver.support.ui import Select
    from test_router import Router

    d_models = tmp_path / "models"
    d_models.mkdir()
    os.symlink(model_path, d_models / "gemma.gguf")
    tm.write_model(d_models / "tiny.gguf", "llama", "F32", seed=1)
    r = Router(tmp_path, ["--models-dir", str(d_models), "-c", "1024", "-np", "1"])
    d = driver
    try:
        open_page(d, r.url, {"max_tokens": 6, "temperature": 0})
        wait(lambda: by(d, "model-select").is_displayed(), 20, what="the model picker")
        assert not by(d, "model-name").is_displayed()
        pick = Select(by(d, "model-select"))
        assert [o.get_attribute("value") for o in pick.options] == ["gemma", "tiny"]
        pick.select_by_value("gemma")
        wait(lambda: "ctx 1024" in by(d, "model-info").text, 60, what="gemma's /props in the header")
        send(d, "Hello")
        wait_idle(d)
        reply = stored(d)[0]["messages"][1]
        assert reply["content"] and not reply.get("error"), reply
        assert r.models()["gemma"]["status"]["value"] == "loaded"
        assert js(d, "return JSON.parse(localStorage.getItem('llamars.model'))") == "gemma"
        d.refresh()  # the choice is kept
        wait(lambda: js(d, "return document.querySelector('[data-testid=model-select]').value") == "gemma", 20,
             what="the stored choice")
        assert not console_errors(d)
    finally:
        r.stop()
