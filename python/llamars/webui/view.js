// DOM for messages and the conversation list. Text goes in through textContent or
// renderMarkdown (which builds nodes too), never through innerHTML.
import { renderMarkdown } from './markdown.js';

export function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

function button(label, action, testid, title) {
  const b = el('button', 'tool', label);
  b.type = 'button';
  b.dataset.action = action;
  b.dataset.testid = testid;
  if (title) b.title = title;
  return b;
}

function prettyArgs(text) {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}

export function statsText(s) {
  if (!s || !s.n) return '';
  const parts = [];
  if (Number.isFinite(s.prompt_n)) parts.push(`prompt ${s.prompt_n} tok${Number.isFinite(s.prompt_tps) && s.prompt_tps > 0 ? ` · ${s.prompt_tps.toFixed(0)} tok/s` : ''}`);
  parts.push(`${s.n} tok`);
  if (s.tps) parts.push(`${s.tps.toFixed(1)} tok/s`);
  return parts.join(' · ');
}

// The inside of an assistant message: reasoning, text, tool calls, error, stats.
function assistantBody(msg, streaming) {
  const body = el('div', 'body');
  if (msg.reasoning) {
    const d = el('details', 'reasoning');
    d.dataset.testid = 'reasoning';
    d.append(el('summary', null, streaming && !msg.content ? 'Thinking…' : 'Reasoning'));
    d.append(el('div', 'reasoning-text', msg.reasoning));
    body.append(d);
  }
  if (msg.content) {
    const md = el('div', 'markdown');
    md.dataset.testid = 'message-content';
    md.append(renderMarkdown(msg.content));
    body.append(md);
  }
  for (const call of msg.tool_calls || []) {
    const t = el('details', 'tool-call');
    t.dataset.testid = 'tool-call';
    t.open = true;
    const head = el('summary', 'tool-head');
    head.append(el('span', 'muted', 'Tool call '), el('code', 'tool-name', call.function.name || '?'));
    t.append(head, el('pre', 'tool-args', prettyArgs(call.function.arguments)));
    body.append(t);
  }
  if (streaming && !msg.content && !msg.reasoning && !(msg.tool_calls || []).length) body.append(el('div', 'typing', '…'));
  if (msg.error) {
    const e = el('div', 'error', msg.error);
    e.dataset.testid = 'message-error';
    body.append(e);
  }
  if (msg.stopped) body.append(el('div', 'muted small', 'Stopped.'));
  return body;
}

const TOOL_STATE = { pending: 'waiting for approval', running: 'running…', done: 'result', error: 'error', denied: 'denied', stopped: 'stopped' };

// A server tool step: its state, Approve / Deny while it waits, the result (collapsible).
function toolStep(msg, index) {
  const wrap = el('article', `msg tool ${msg.state || 'done'}`);
  wrap.dataset.testid = 'tool-step';
  wrap.dataset.index = String(index);
  wrap.dataset.state = msg.state || 'done';
  const d = el('details', 'tool-result');
  d.dataset.testid = 'tool-result';
  d.open = msg.state === 'pending' || msg.state === 'error';
  const head = el('summary', 'tool-head');
  head.append(el('code', 'tool-name', msg.name || '?'), el('span', 'muted', ` ${TOOL_STATE[msg.state] || ''}`));
  d.append(head, el('pre', 'tool-args', prettyArgs(msg.args || '')));
  if (msg.content) {
    const out = el('pre', 'tool-output', msg.content);
    out.dataset.testid = 'tool-output';
    d.append(out);
  }
  wrap.append(d);
  if (msg.state === 'pending') {
    const bar = el('div', 'actions approve');
    const yes = button('Approve', 'tool-approve', 'tool-approve', 'Run this tool call');
    const no = button('Deny', 'tool-deny', 'tool-deny', 'Do not run it; the model is told so');
    yes.className = 'btn primary small';
    no.className = 'btn small';
    bar.append(el('span', 'muted', `Run ${msg.name} on the server?`), yes, no);
    wrap.append(bar);
  }
  return wrap;
}

// The header's tools badge and the settings' list of tools (hidden when there are none).
export function toolsBadge(badge, tools) {
  badge.hidden = !tools.length;
  badge.textContent = `${tools.length} tool${tools.length === 1 ? '' : 's'}`;
  badge.title = tools.map((t) => t.tool).join(', ');
  const list = document.getElementById('tools-list');
  if (!list) return;
  list.replaceChildren(...tools.map((t) => {
    const li = el('li');
    li.dataset.testid = 'tools-list-item';
    li.append(el('code', null, t.tool), el('span', 'muted', ` ${t.display_name || ''}${t.permissions && t.permissions.write ? ' (writes)' : ''}${t.type === 'mcp' ? ' (MCP)' : ''}`));
    return li;
  }));
  document.getElementById('tools-section').hidden = !tools.length;
}

// One message element; `last` marks the final assistant reply (gets Regenerate).
export function messageEl(msg, index, { last, streaming, editing }) {
  if (msg.role === 'tool') return toolStep(msg, index);
  const wrap = el('article', `msg ${msg.role}`);
  wrap.dataset.testid = `message-${msg.role}`;
  wrap.dataset.index = String(index);
  if (msg.role === 'user' && editing) {
    const ta = el('textarea', 'edit-box');
    ta.value = msg.content;
    ta.dataset.testid = 'edit-input';
    const bar = el('div', 'actions');
    bar.append(button('Save & send', 'edit-save', 'edit-save'), button('Cancel', 'edit-cancel', 'edit-cancel'));
    wrap.append(ta, bar);
    return wrap;
  }
  if (msg.role === 'assistant') {
    wrap.append(assistantBody(msg, streaming));
  } else {
    const body = el('div', 'body');
    body.append(el('div', 'plain', msg.content));
    wrap.append(body);
  }
  const bar = el('div', 'actions');
  if (msg.role === 'assistant') {
    const s = el('span', 'stats', statsText(msg.stats));
    s.dataset.testid = 'stats';
    bar.append(s);
  }
  if (!streaming) {
    bar.append(button('Copy', 'copy', 'copy', 'Copy the message'));
    if (msg.role === 'user') bar.append(button('Edit', 'edit', 'edit', 'Edit and send again'));
    if (msg.role === 'assistant' && last) bar.append(button('Regenerate', 'regenerate', 'regenerate', 'Generate this reply again'));
  }
  wrap.append(bar);
  return wrap;
}

export function conversationItem(conv, current) {
  const item = el('div', `conv${current ? ' current' : ''}`);
  item.dataset.id = conv.id;
  item.dataset.testid = 'conversation';
  const open = el('button', 'conv-title', conv.title || 'New chat');
  open.type = 'button';
  open.dataset.action = 'open';
  open.title = conv.title || 'New chat';
  const del = el('button', 'conv-delete', '✕');
  del.type = 'button';
  del.dataset.action = 'delete';
  del.dataset.testid = 'delete-chat';
  del.title = 'Delete this conversation';
  del.setAttribute('aria-label', 'Delete this conversation');
  item.append(open, del);
  return item;
}

export function emptyState(props) {
  const d = el('div', 'empty');
  d.append(el('h1', null, 'llamars'), el('p', 'muted', props ? `Chat with ${props.name}.` : 'Chat with the loaded model.'));
  return d;
}
