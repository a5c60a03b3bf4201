// The tool loop: the server's tools (GET /tools) offered to the model, and each call it
// makes shown as a tool step that waits for Approve / Deny (or runs at once with
// auto-approve), runs on the server (POST /tools) and gives its result back, after which
// the model continues; it ends on a reply without calls, on Stop, or after MAX_STEPS.
import { callTool, getTools } from './api.js';

export const MAX_STEPS = 10;
export const DENIED = 'The user denied this tool call.';

let tools = []; // GET /tools entries
const waiting = new Map(); // tool message -> resolve(approved)

export async function loadTools(settings) {
  try {
    tools = await getTools(settings);
  } catch {
    tools = [];
  }
  return tools;
}

export const serverTools = () => tools;

// the definitions the model is offered (none when the setting turns them off)
export function offered(settings) {
  return settings.tools_use === 'on' ? tools.map((t) => t.definition) : [];
}

// What the model reads back: plain_text_response, an error, MCP's text content, else JSON.
export function resultText(r) {
  if (r && typeof r === 'object') {
    if (typeof r.plain_text_response === 'string') return r.plain_text_response;
    if (r.error !== undefined && r.error !== null) {
      return `Error: ${typeof r.error === 'object' ? r.error.message || JSON.stringify(r.error) : r.error}`;
    }
    if (Array.isArray(r.content)) {
      const text = r.content.map((c) => (c && c.type === 'text' ? c.text : JSON.stringify(c))).join('\n');
      return r.isError ? `Error: ${text}` : text;
    }
  }
  return JSON.stringify(r);
}

// the approval buttons of a waiting step
export function answer(toolMsg, approved) {
  const resolve = waiting.get(toolMsg);
  if (resolve) resolve(approved);
}

function approval(toolMsg, signal) {
  return new Promise((resolve) => {
    const done = (v) => {
      waiting.delete(toolMsg);
      signal.removeEventListener('abort', onAbort);
      resolve(v);
    };
    const onAbort = () => done(false);
    waiting.set(toolMsg, done);
    signal.addEventListener('abort', onAbort);
  });
}

// Runs the turns of one reply in `conv`. ctx: settings, signal, stream(msg) (streams one
// model turn into msg), changed() (re-render), step(msg) (the message now streaming).
export async function runTurns(conv, ctx) {
  const names = new Set(tools.map((t) => t.tool));
  for (let step = 0; step < MAX_STEPS; step += 1) {
    const msg = { role: 'assistant', content: '' };
    conv.messages.push(msg);
    ctx.step(msg);
    await ctx.stream(msg);
    const calls = (msg.tool_calls || []).filter((c) => names.has(c.function.name));
    if (!calls.length || msg.error || msg.stopped || calls.length !== msg.tool_calls.length) return;
    for (const call of calls) {
      const t = { role: 'tool', tool_call_id: call.id, name: call.function.name, args: call.function.arguments, content: '', state: 'pending' };
      conv.messages.push(t);
      ctx.changed();
      const ok = ctx.settings.tools_auto === 'on' || await approval(t, ctx.signal);
      if (ctx.signal.aborted) {
        t.state = 'stopped';
        t.content = 'Stopped by the user.';
        ctx.changed();
        return;
      }
      if (!ok) {
        t.state = 'denied';
        t.content = DENIED;
        ctx.changed();
        continue;
      }
      t.state = 'running';
      ctx.changed();
      let params;
      try {
        params = JSON.parse(call.function.arguments || '{}');
      } catch {
        params = null;
      }
      try {
        if (!params || typeof params !== 'object' || Array.isArray(params)) throw new Error('the arguments are not a JSON object');
        const r = await callTool(t.name, params, ctx.settings, ctx.signal);
        t.content = resultText(r);
        t.state = r && r.error ? 'error' : 'done';
      } catch (e) {
        if (e && e.name === 'AbortError') {
          t.state = 'stopped';
          t.content = 'Stopped by the user.';
          ctx.changed();
          return;
        }
        t.state = 'error';
        t.content = `Error: ${(e && e.message) || e}`;
      }
      ctx.changed();
    }
  }
}
