// Server-sent events over a fetch() Response body (a ReadableStream), so requests can
// carry headers and be aborted: yields each event's `data:` payload parsed as JSON, and
// stops at `[DONE]`. https://html.spec.whatwg.org/multipage/server-sent-events.html
export async function* readSSE(response) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buf = '';
  let data = [];

  function* dispatch() {
    if (!data.length) return;
    const payload = data.join('\n');
    data = [];
    if (payload === '[DONE]') {
      yield null;
      return;
    }
    try {
      yield JSON.parse(payload);
    } catch {
      yield { error: { message: `unreadable event from the server: ${payload.slice(0, 200)}` } };
    }
  }

  function* lines(final) {
    let i;
    while ((i = buf.indexOf('\n')) >= 0 || (final && buf)) {
      let line = i >= 0 ? buf.slice(0, i) : buf;
      buf = i >= 0 ? buf.slice(i + 1) : '';
      if (line.endsWith('\r')) line = line.slice(0, -1);
      if (line === '') yield* dispatch();
      else if (line.startsWith('data:')) data.push(line.slice(line[5] === ' ' ? 6 : 5));
      // other fields (event:, id:, retry:) and `:` comments (pings) are ignored
    }
    if (final) yield* dispatch();
  }

  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += decoder.decode(value, { stream: true });
      for (const ev of lines(false)) {
        if (ev === null) return;
        yield ev;
      }
    }
    buf += decoder.decode();
    for (const ev of lines(true)) {
      if (ev === null) return;
      yield ev;
    }
  } finally {
    reader.cancel().catch(() => {});
  }
}
