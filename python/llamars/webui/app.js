// The chat page: conversation state, the composer, the side list and the header, wired
// to the DOM in index.html. Streaming lives in chat.js, storage in store.js, settings in
// settings.js, DOM building in view.js and markdown.js.
import { getModels, getProps } from './api.js';
import { answer, loadTools, offered, runTurns } from './agent.js';
import { streamReply } from './chat.js';
import { setupSettings } from './settings.js';
import * as store from './store.js';
import { conversationItem, el, emptyState, messageEl, toolsBadge } from './view.js';

const $ = (id) => document.getElementById(id);
const ui = {
  messages: $('messages'), prompt: $('prompt'), send: $('send'), stop: $('stop'), list: $('conversations'),
  modelName: $('model-name'), modelInfo: $('model-info'), modelSelect: $('model-select'), composer: $('composer'),
};

let convs = store.loadConversations();
let current = convs.find((c) => c.id === store.loadCurrent()) || store.newConversation();
let busy = null; // { controller, conv, msg } while a reply streams
let editing = -1; // index of the user message being edited
let props = null;
let pending = 0; // requestAnimationFrame handle for the streaming message
let propsKey = null; // the API key /props was last asked with
let askedForKey = false;
let routerModel = ''; // router mode: the model chosen in the header ('' for a one-model server)

// a changed API key: ask /props again
const settings = setupSettings((s) => {
  if (s.api_key !== propsKey) loadProps();
});

// ------------------------------------------------------------------ persistence
function save() {
  convs = convs.filter((c) => c.messages.length);
  if (current.messages.length && !convs.includes(current)) convs.unshift(current);
  convs.sort((a, b) => b.updated - a.updated);
  store.saveConversations(convs);
  store.saveCurrent(current.id);
}

// ------------------------------------------------------------------ rendering
function renderList() {
  ui.list.replaceChildren(...convs.map((c) => conversationItem(c, c === current)));
}

function nearBottom() {
  const m = ui.messages;
  return m.scrollHeight - m.scrollTop - m.clientHeight < 120;
}

function renderMessages() {
  const stick = nearBottom();
  const msgs = current.messages;
  const lastAssistant = msgs.length && msgs[msgs.length - 1].role === 'assistant' ? msgs.length - 1 : -1;
  const nodes = msgs.map((m, i) => messageEl(m, i, {
    last: i === lastAssistant, streaming: busy !== null && busy.msg === m, editing: i === editing,
  }));
  ui.messages.replaceChildren(...(nodes.length ? nodes : [emptyState(props)]));
  if (stick) ui.messages.scrollTop = ui.messages.scrollHeight;
  const box = ui.messages.querySelector('.edit-box');
  if (box) box.focus();
}

function render() {
  renderList();
  renderMessages();
  ui.send.hidden = busy !== null;
  ui.stop.hidden = busy === null;
}

// Re-renders only the streaming message, at most once per frame.
function scheduleStreaming(conv) {
  if (pending || conv !== current) return;
  pending = requestAnimationFrame(() => {
    pending = 0;
    if (!busy || busy.conv !== current) return;
    const i = current.messages.indexOf(busy.msg);
    const old = ui.messages.querySelector(`[data-index="${i}"]`);
    if (!old) return renderMessages();
    const stick = nearBottom();
    old.replaceWith(messageEl(busy.msg, i, { last: true, streaming: true }));
    if (stick) ui.messages.scrollTop = ui.messages.scrollHeight;
  });
}

let toastTimer = 0;
function toast(text) {
  let t = document.querySelector('.toast');
  if (!t) {
    t = el('div', 'toast');
    t.dataset.testid = 'toast';
    document.body.append(t);
  }
  t.textContent = text;
  t.hidden = false;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => { t.hidden = true; }, 4000);
}

// ------------------------------------------------------------------ chat actions
async function generate(conv) {
  const problem = settings.check();
  if (problem) { // e.g. a JSON schema that is not JSON: say so, send nothing
    conv.messages.push({ role: 'assistant', content: '', error: `Not sent: ${problem}` });
    save();
    render();
    return;
  }
  const s = settings.get();
  const controller = new AbortController();
  busy = { controller, conv, msg: null };
  let last = null;
  await runTurns(conv, {
    settings: s, signal: controller.signal,
    step: (msg) => { busy.msg = last = msg; conv.updated = Date.now(); save(); render(); },
    stream: (msg) => streamReply(conv.messages.slice(0, conv.messages.indexOf(msg)), msg, s, controller.signal,
      () => scheduleStreaming(conv), routerModel, offered(s)),
    changed: () => { conv.updated = Date.now(); save(); if (conv === current) renderMessages(); },
  });
  busy = null;
  conv.updated = Date.now();
  save();
  render();
  if (last && last.status === 401) {
    askedForKey = true;
    settings.open('The server needs an API key: enter it here, then press Regenerate.', 'api_key');
    ui.modelInfo.textContent = 'API key required';
  }
  if (last) delete last.status;
  if (conv === current) ui.prompt.focus();
}

function send() {
  const text = ui.prompt.value;
  if (busy || !text.trim()) return;
  ui.prompt.value = '';
  autosize();
  editing = -1;
  current.messages.push({ role: 'user', content: text });
  if (!current.title) current.title = text.trim().replace(/\s+/g, ' ').slice(0, 60);
  generate(current);
}

function regenerate() {
  const msgs = current.messages;
  if (busy || !msgs.length || msgs[msgs.length - 1].role !== 'assistant') return;
  while (msgs.length && msgs[msgs.length - 1].role !== 'user') msgs.pop(); // the reply and its tool steps
  generate(current);
}

async function copyText(text, button) {
  try {
    await navigator.clipboard.writeText(text);
  } catch {
    // no Clipboard API (plain http on another host): the old way
    const ta = el('textarea');
    ta.value = text;
    ta.className = 'offscreen';
    document.body.append(ta);
    ta.select();
    document.execCommand('copy');
    ta.remove();
  }
  if (button) {
    const old = button.textContent;
    button.textContent = 'Copied';
    setTimeout(() => { button.textContent = old; }, 1200);
  }
}

function onMessageClick(e) {
  const codeCopy = e.target.closest('.copy-code');
  if (codeCopy) {
    copyText(codeCopy.closest('.code-block').querySelector('code').textContent, codeCopy);
    return;
  }
  const b = e.target.closest('[data-action]');
  const article = e.target.closest('article');
  if (!b || !article) return;
  const i = Number(article.dataset.index);
  const msg = current.messages[i];
  switch (b.dataset.action) {
    case 'copy': {
      const calls = (msg.tool_calls || []).map((c) => `${c.function.name}(${c.function.arguments})`).join('\n');
      copyText(msg.content || calls, b);
      break;
    }
    case 'edit':
      if (!busy) { editing = i; renderMessages(); }
      break;
    case 'edit-cancel':
      editing = -1;
      renderMessages();
      break;
    case 'edit-save': {
      const text = article.querySelector('.edit-box').value;
      if (busy || !text.trim()) return;
      editing = -1;
      current.messages = current.messages.slice(0, i);
      current.messages.push({ role: 'user', content: text });
      if (i === 0) current.title = text.trim().replace(/\s+/g, ' ').slice(0, 60);
      generate(current);
      break;
    }
    case 'regenerate':
      regenerate();
      break;
    case 'tool-approve':
    case 'tool-deny':
      answer(msg, b.dataset.action === 'tool-approve');
      break;
    default:
  }
}

// ------------------------------------------------------------------ conversations
function openConversation(conv) {
  current = conv;
  editing = -1;
  store.saveCurrent(conv.id);
  document.body.classList.remove('side-open');
  render();
  ui.prompt.focus();
}

function onListClick(e) {
  const b = e.target.closest('[data-action]');
  const item = e.target.closest('.conv');
  if (!b || !item) return;
  const conv = convs.find((c) => c.id === item.dataset.id) || (current.id === item.dataset.id ? current : null);
  if (!conv) return;
  if (b.dataset.action === 'open') {
    openConversation(conv);
  } else if (b.dataset.action === 'delete') {
    if (conv.messages.length && !window.confirm(`Delete "${conv.title || 'New chat'}"?`)) return;
    if (busy && busy.conv === conv) busy.controller.abort();
    convs = convs.filter((c) => c !== conv);
    if (conv === current) current = convs[0] || store.newConversation();
    save();
    render();
  }
}

function exportAll() {
  save();
  const url = URL.createObjectURL(new Blob([store.exportJSON(convs)], { type: 'application/json' }));
  const a = el('a');
  a.href = url;
  a.download = `llamars-conversations-${new Date().toISOString().slice(0, 10)}.json`;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

async function importFile(file) {
  try {
    const incoming = store.importJSON(await file.text());
    const ids = new Set(incoming.map((c) => c.id));
    convs = [...incoming, ...convs.filter((c) => !ids.has(c.id))];
    if (ids.has(current.id)) current = incoming.find((c) => c.id === current.id);
    save();
    render();
    toast(`Imported ${incoming.length} conversation${incoming.length === 1 ? '' : 's'}.`);
  } catch (e) {
    toast(`Import failed: ${e.message}`);
  }
}

// ------------------------------------------------------------------ header, theme
async function loadProps() {
  const s = settings.get();
  propsKey = s.api_key;
  try {
    let p = await getProps(s);
    if (p.role === 'router') p = await chooseModel(s);
    const dgs = p.default_generation_settings || {};
    const path = String(p.model_path || '');
    props = { name: p.model_alias || path.split(/[\\/]/).pop() || 'model', n_ctx: dgs.n_ctx, slots: p.total_slots };
    ui.modelName.textContent = props.name;
    ui.modelName.title = path;
    const info = [];
    if (props.n_ctx) info.push(`ctx ${props.n_ctx}`);
    if (props.slots) info.push(`${props.slots} slot${props.slots === 1 ? '' : 's'}`);
    ui.modelInfo.textContent = info.join(' · ');
    toolsBadge($('tools-info'), await loadTools(s));
    if (!current.messages.length) renderMessages();
  } catch (e) {
    props = null;
    ui.modelInfo.textContent = e.status === 401 ? 'API key required' : routerModel ? 'model unavailable' : 'server unavailable';
    ui.modelInfo.title = e.message || '';
    if (e.status === 401 && !askedForKey) {
      askedForKey = true;
      settings.open('The server needs an API key.', 'api_key');
    }
  }
}

// router mode: a model picker in the header (the one chosen last, else a loaded one); its
// /props loads it, as a request for it would
async function chooseModel(s) {
  const models = await getModels(s);
  const ids = models.map((m) => m.id);
  const stored = store.loadModel();
  const loaded = models.find((m) => m.status && m.status.value === 'loaded');
  routerModel = ids.includes(stored) ? stored : loaded ? loaded.id : ids[0] || '';
  if (routerModel !== stored) store.saveModel(routerModel);
  ui.modelSelect.replaceChildren(...models.map((m) => {
    const failed = m.status && m.status.failed;
    const o = el('option', null, failed ? `${m.id} (failed)` : m.id);
    o.value = m.id;
    o.selected = m.id === routerModel;
    return o;
  }));
  ui.modelSelect.hidden = false;
  ui.modelName.hidden = true;
  if (!routerModel) return { model_alias: 'no models', default_generation_settings: {} };
  return getProps(s, routerModel);
}

ui.modelSelect.addEventListener('change', () => {
  store.saveModel(ui.modelSelect.value);
  ui.modelInfo.textContent = 'loading…';
  loadProps();
});

function applyTheme(theme) {
  if (theme) document.documentElement.dataset.theme = theme;
  else delete document.documentElement.dataset.theme;
}

function toggleTheme() {
  const dark = document.documentElement.dataset.theme
    ? document.documentElement.dataset.theme === 'dark'
    : window.matchMedia('(prefers-color-scheme: dark)').matches;
  const next = dark ? 'light' : 'dark';
  applyTheme(next);
  store.saveTheme(next);
}

function autosize() {
  ui.prompt.style.height = 'auto';
  ui.prompt.style.height = `${Math.min(ui.prompt.scrollHeight + 2, 220)}px`;
  ui.prompt.classList.toggle('scroll', ui.prompt.scrollHeight + 2 > 220);
}

// ------------------------------------------------------------------ wiring
applyTheme(store.loadTheme());
ui.composer.addEventListener('submit', (e) => { e.preventDefault(); send(); });
ui.prompt.addEventListener('keydown', (e) => {
  if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
    e.preventDefault();
    send();
  }
});
ui.prompt.addEventListener('input', autosize);
ui.stop.addEventListener('click', () => busy && busy.controller.abort());
document.addEventListener('keydown', (e) => {
  if (e.key === 'Escape' && busy && !$('settings').open) busy.controller.abort();
});
ui.messages.addEventListener('click', onMessageClick);
ui.messages.addEventListener('keydown', (e) => { // in the edit box: Enter saves and sends, Escape cancels
  if (!e.target.classList.contains('edit-box')) return;
  const action = e.key === 'Escape' ? 'edit-cancel' : e.key === 'Enter' && !e.shiftKey && !e.isComposing ? 'edit-save' : '';
  if (!action) return;
  e.preventDefault();
  e.stopPropagation();
  e.target.closest('article').querySelector(`[data-action="${action}"]`).click();
});
ui.list.addEventListener('click', onListClick);
$('new-chat').addEventListener('click', () => {
  if (current.messages.length) openConversation(store.newConversation());
  else openConversation(current);
});
$('menu').addEventListener('click', () => document.body.classList.toggle('side-open'));
$('scrim').addEventListener('click', () => document.body.classList.remove('side-open'));
$('theme').addEventListener('click', toggleTheme);
$('open-settings').addEventListener('click', () => settings.open());
$('export').addEventListener('click', exportAll);
$('import').addEventListener('click', () => $('import-file').click());
$('import-file').addEventListener('change', (e) => {
  const f = e.target.files && e.target.files[0];
  if (f) importFile(f);
  e.target.value = '';
});
window.addEventListener('pagehide', () => busy && save()); // keep a reply cut short by leaving
window.addEventListener('storage', (e) => { // another tab changed the conversations
  if (e.key !== 'llamars.conversations' || busy) return;
  convs = store.loadConversations();
  current = convs.find((c) => c.id === current.id) || (current.messages.length ? convs[0] || store.newConversation() : current);
  render();
});

render();
autosize();
loadProps();
ui.prompt.focus();
