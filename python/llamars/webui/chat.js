// One streamed reply: POST /v1/chat/completions with stream=true, folding the chunks
// (content, reasoning_content, tool-call fragments, timings, usage, errors) into `msg`.
import { chatBody, postChat } from './api.js';
import { readSSE } from './sse.js';

// OpenAI streams tool calls as fragments keyed by `index`: the first carries id and
// function.name, later ones append to function.arguments.
function mergeToolCalls(msg, deltas) {
  msg.tool_calls = msg.tool_calls || [];
  for (const d of deltas) {
    const i = Number.isInteger(d.index) ? d.index : msg.tool_calls.length;
    const call = (msg.tool_calls[i] = msg.tool_calls[i] || { id: '', type: 'function', function: { name: '', arguments: '' } });
    if (d.id) call.id = d.id;
    const f = d.function || {};
    if (f.name) call.function.name += f.name;
    if (typeof f.arguments === 'string') call.function.arguments += f.arguments;
    else if (f.arguments && typeof f.arguments === 'object') call.function.arguments += JSON.stringify(f.arguments);
  }
}

// Streams the reply to `history` into `msg`; `onUpdate` runs after every chunk. Resolves
// when the reply ends, fails or `signal` aborts it (then msg.stopped is set). `model`:
// the model a router serves it with (none for a one-model server).
// `tools`: the server tools' definitions offered to the model.
export async function streamReply(history, msg, settings, signal, onUpdate, model, tools) {
  const body = chatBody(history, settings, model, tools); // a SettingsError here means nothing is sent
  const t0 = performance.now();
  let tFirst = 0;
  let pieces = 0;
  msg.stats = {};
  try {
    const response = await postChat(body, settings, signal);
    for await (const ev of readSSE(response)) {
      if (ev.error) {
        msg.error = (ev.error && ev.error.message) || String(ev.error);
        break;
      }
      const choice = (ev.choices && ev.choices[0]) || {};
      const d = choice.delta || {};
      let got = false;
      if (typeof d.content === 'string' && d.content) { msg.content += d.content; got = true; }
      if (typeof d.reasoning_content === 'string' && d.reasoning_content) { msg.reasoning = (msg.reasoning || '') + d.reasoning_content; got = true; }
      if (Array.isArray(d.tool_calls) && d.tool_calls.length) { mergeToolCalls(msg, d.tool_calls); got = true; }
      if (got) {
        pieces += 1;
        const now = performance.now();
        if (!tFirst) tFirst = now;
        // client-side figures until the server's timings arrive (one chunk ≈ one token)
        msg.stats.n = pieces;
        if (pieces > 1) msg.stats.tps = ((pieces - 1) * 1000) / (now - tFirst);
        msg.stats.ttft = tFirst - t0;
      }
      if (choice.finish_reason) msg.finish = choice.finish_reason;
      const t = ev.timings;
      if (t && typeof t === 'object') {
        if (Number.isFinite(t.predicted_n) && t.predicted_n > 0) msg.stats.n = t.predicted_n;
        if (Number.isFinite(t.predicted_per_second) && t.predicted_per_second > 0) msg.stats.tps = t.predicted_per_second;
        if (Number.isFinite(t.prompt_n)) msg.stats.prompt_n = t.prompt_n;
        if (Number.isFinite(t.prompt_per_second)) msg.stats.prompt_tps = t.prompt_per_second;
        msg.stats.server = true;
      }
      const u = ev.usage;
      if (u && typeof u === 'object') {
        if (Number.isFinite(u.completion_tokens)) msg.stats.n = u.completion_tokens;
        if (Number.isFinite(u.prompt_tokens)) msg.stats.prompt_n = u.prompt_tokens;
      }
      onUpdate();
    }
  } catch (e) {
    if (e && e.name === 'AbortError') msg.stopped = true;
    else msg.error = (e && e.message) || String(e);
    if (e && e.status) msg.status = e.status;
  }
  onUpdate();
}
