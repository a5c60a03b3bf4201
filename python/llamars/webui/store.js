// Browser storage: conversations, settings and theme in localStorage; export/import as JSON.
const KEYS = { convs: 'llamars.conversations', current: 'llamars.current', settings: 'llamars.settings', theme: 'llamars.theme',
  model: 'llamars.model' };

export const DEFAULT_SETTINGS = {
  api_key: '', system: '', temperature: '', top_k: '', top_p: '', min_p: '', repeat_penalty: '',
  max_tokens: '', seed: '', grammar: '', json_schema: '',
  tools_use: 'on', tools_auto: '', // the server's tools: offered to the model; run without asking
};

function read(key, fallback) {
  try {
    const v = localStorage.getItem(key);
    return v === null ? fallback : JSON.parse(v);
  } catch {
    return fallback;
  }
}

function write(key, value) {
  try {
    localStorage.setItem(key, JSON.stringify(value));
  } catch (e) {
    console.warn('llamars: could not save to localStorage', e);
  }
}

// router mode: the model the page talks to
export const loadModel = () => read(KEYS.model, '');
export const saveModel = (id) => write(KEYS.model, id);

export const newId = () => Date.now().toString(36) + Math.random().toString(36).slice(2, 8);

export function newConversation() {
  const t = Date.now();
  return { id: newId(), title: '', created: t, updated: t, messages: [] };
}

const ROLES = new Set(['system', 'user', 'assistant', 'tool']);

// Keep only the fields the UI knows, with the right types (imported files are untrusted).
function clean(conv) {
  if (!conv || typeof conv !== 'object' || !Array.isArray(conv.messages)) return null;
  const str = (v) => (typeof v === 'string' ? v : '');
  const messages = conv.messages
    .filter((m) => m && ROLES.has(m.role))
    .map((m) => {
      const out = { role: m.role, content: str(m.content) };
      if (m.reasoning) out.reasoning = str(m.reasoning);
      if (m.error) out.error = str(m.error);
      if (m.stopped) out.stopped = true;
      if (m.role === 'tool') { // a server tool's result (a call left waiting counts as stopped)
        out.tool_call_id = str(m.tool_call_id);
        out.name = str(m.name);
        out.args = str(m.args);
        out.state = ['done', 'denied', 'error', 'stopped'].includes(m.state) ? m.state : 'stopped';
      }
      if (Array.isArray(m.tool_calls)) {
        out.tool_calls = m.tool_calls.map((c) => ({
          id: str(c && c.id), type: 'function',
          function: { name: str(c && c.function && c.function.name), arguments: str(c && c.function && c.function.arguments) },
        }));
      }
      if (m.stats && typeof m.stats === 'object') {
        out.stats = {};
        for (const k of ['n', 'tps', 'prompt_n', 'prompt_tps', 'ttft']) if (Number.isFinite(m.stats[k])) out.stats[k] = m.stats[k];
      }
      return out;
    });
  const n = (v) => (Number.isFinite(v) ? v : Date.now());
  return { id: str(conv.id) || newId(), title: str(conv.title), created: n(conv.created), updated: n(conv.updated), messages };
}

export function loadConversations() {
  const list = read(KEYS.convs, []);
  return (Array.isArray(list) ? list.map(clean).filter(Boolean) : []).sort((a, b) => b.updated - a.updated);
}

export const saveConversations = (list) => write(KEYS.convs, list);
export const loadCurrent = () => read(KEYS.current, null);
export const saveCurrent = (id) => write(KEYS.current, id);

export function loadSettings() {
  const s = read(KEYS.settings, {});
  const out = { ...DEFAULT_SETTINGS };
  for (const k of Object.keys(out)) if (s && typeof s[k] === 'string') out[k] = s[k];
  return out;
}

export const saveSettings = (s) => write(KEYS.settings, s);
export const loadTheme = () => read(KEYS.theme, null);
export const saveTheme = (t) => write(KEYS.theme, t);

export function exportJSON(list) {
  return JSON.stringify({ format: 'llamars-conversations', version: 1, conversations: list }, null, 2);
}

// Parses an export (or a bare array of conversations); throws on anything else.
export function importJSON(text) {
  const data = JSON.parse(text);
  const list = Array.isArray(data) ? data : data && data.conversations;
  if (!Array.isArray(list)) throw new Error('not a conversations export');
  return list.map(clean).filter(Boolean);
}
