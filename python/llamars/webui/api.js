// The server's HTTP API as the page uses it: URLs relative to where the page is served
// (so --api-prefix works), the API key header, /props, and chat request bodies.

// this module is served from <prefix>/webui/api.js; the API lives at <prefix>/
const BASE = new URL('../', import.meta.url);
export const apiUrl = (path) => new URL(path.replace(/^\//, ''), BASE).href;

export class ApiError extends Error {
  constructor(message, status) {
    super(message);
    this.status = status;
  }
}

// A settings value the user must fix before anything is sent.
export class SettingsError extends Error {}

export function headers(settings) {
  const h = { 'Content-Type': 'application/json' };
  const key = settings.api_key.trim();
  if (key) h.Authorization = `Bearer ${key}`;
  return h;
}

// `{"error": {"message": ...}}` (OpenAI and llama-server), else the text or the status.
export async function errorOf(response) {
  let text = '';
  try {
    text = await response.text();
    const body = JSON.parse(text);
    const e = body && body.error;
    const msg = (e && (e.message || (typeof e === 'string' && e))) || (body && body.message);
    if (msg) return new ApiError(`${msg} (HTTP ${response.status})`, response.status);
  } catch {
    /* not JSON */
  }
  return new ApiError(`${text.slice(0, 500) || response.statusText || 'request failed'} (HTTP ${response.status})`, response.status);
}

// /props of the server, or in router mode of one of its models (`model`)
export async function getProps(settings, model) {
  const r = await fetch(apiUrl(model ? `props?model=${encodeURIComponent(model)}` : 'props'), { headers: headers(settings) });
  if (!r.ok) throw await errorOf(r);
  return r.json();
}

// router mode: the models it serves, with their status
export async function getModels(settings) {
  const r = await fetch(apiUrl('v1/models'), { headers: headers(settings) });
  if (!r.ok) throw await errorOf(r);
  return (await r.json()).data || [];
}

const NUMBERS = { temperature: false, top_k: true, top_p: false, min_p: false, repeat_penalty: false, max_tokens: true, seed: true };

// Checks the settings and returns the request fields they add (empty = server default).
export function samplingFields(settings) {
  const out = {};
  for (const [k, integer] of Object.entries(NUMBERS)) {
    const raw = String(settings[k] ?? '').trim();
    if (!raw) continue;
    const v = Number(raw);
    if (!Number.isFinite(v) || (integer && !Number.isInteger(v))) {
      throw new SettingsError(`${k}: ${integer ? 'an integer' : 'a number'} is required, got "${raw}"`);
    }
    out[k] = v;
  }
  if (settings.grammar.trim()) out.grammar = settings.grammar;
  const schemaText = settings.json_schema.trim();
  if (schemaText) {
    let schema;
    try {
      schema = JSON.parse(schemaText);
    } catch (e) {
      throw new SettingsError(`JSON schema: not valid JSON (${e.message})`);
    }
    if (!schema || typeof schema !== 'object' || Array.isArray(schema)) {
      throw new SettingsError('JSON schema: must be a JSON object');
    }
    out.response_format = { type: 'json_schema', json_schema: { name: 'reply', schema } };
  }
  return out;
}

// OpenAI messages from a conversation: failed replies are left out, reasoning is not sent back.
export function chatMessages(messages, settings) {
  const out = [];
  if (settings.system.trim()) out.push({ role: 'system', content: settings.system });
  for (const m of messages) {
    if (m.role === 'assistant' && m.error && !m.content && !m.tool_calls) continue;
    const msg = { role: m.role, content: m.content };
    if (m.tool_calls && m.tool_calls.length) msg.tool_calls = m.tool_calls;
    if (m.role === 'tool') msg.tool_call_id = m.tool_call_id;
    out.push(msg);
  }
  return out;
}

// `tools`: the definitions of the server tools offered to the model (none: no tools field)
export function chatBody(messages, settings, model, tools) {
  return {
    ...(model ? { model } : {}),
    messages: chatMessages(messages, settings),
    ...(tools && tools.length ? { tools } : {}),
    stream: true,
    stream_options: { include_usage: true },
    timings_per_token: true,
    ...samplingFields(settings),
  };
}

export async function postChat(body, settings, signal) {
  const r = await fetch(apiUrl('v1/chat/completions'), {
    method: 'POST', headers: headers(settings), body: JSON.stringify(body), signal,
  });
  if (!r.ok) throw await errorOf(r);
  return r;
}

// GET /tools: the server's tools (llama-server's shape); [] when it has none or is older
export async function getTools(settings) {
  const r = await fetch(apiUrl('tools'), { headers: headers(settings) });
  if (r.status === 404) return [];
  if (!r.ok) throw await errorOf(r);
  const list = await r.json();
  return Array.isArray(list) ? list : [];
}

// POST /tools: one call run on the server; resolves to the tool's result JSON
export async function callTool(name, params, settings, signal) {
  const r = await fetch(apiUrl('tools'), {
    method: 'POST', headers: headers(settings), body: JSON.stringify({ tool: name, params }), signal,
  });
  if (!r.ok) throw await errorOf(r);
  return r.json();
}
