// Markdown → DOM nodes, for model replies. Every piece of the source ends up in a text
// node (textContent / createTextNode); no HTML string is ever parsed, so a reply cannot
// inject markup or script. Covers what chat models write: paragraphs, headings, emphasis,
// lists (nested), block quotes, fenced code (with a copy button), inline code, links
// (http/https only), tables, rules. Raw HTML in the source is shown as text.

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([^\s`]*)/;
const HEADING = /^ {0,3}(#{1,6})(?:\s+(.*?))?(?:\s+#+)?\s*$/;
const RULE = /^ {0,3}([-*_])(?:\s*\1){2,}\s*$/;
const QUOTE = /^ {0,3}>/;
const ITEM = /^( *)([-*+]|\d{1,9}[.)])(?:\s+(.*)|$)/;
const TABLE_SEP = /^ {0,3}\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$/;
const indentOf = (l) => l.length - l.trimStart().length;

const isTable = (lines, i) => lines[i].includes('|') && i + 1 < lines.length && lines[i + 1].includes('-') && TABLE_SEP.test(lines[i + 1]) && (lines[i + 1].includes('|') || splitRow(lines[i]).length > 1);

function startsBlock(lines, i) {
  const l = lines[i];
  return FENCE.test(l) || HEADING.test(l) || RULE.test(l) || QUOTE.test(l) || ITEM.test(l) || isTable(lines, i);
}

export function renderMarkdown(src) {
  const frag = document.createDocumentFragment();
  blocks(String(src).replace(/\r\n?/g, '\n').split('\n'), frag);
  return frag;
}

function blocks(lines, parent) {
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    let m;
    if (!line.trim()) {
      i++;
    } else if ((m = FENCE.exec(line))) {
      const close = new RegExp(`^ {0,3}${m[1][0] === '`' ? '`' : '~'}{${m[1].length},}\\s*$`);
      const body = [];
      for (i++; i < lines.length && !close.test(lines[i]); i++) body.push(lines[i]);
      if (i >= lines.length) while (body.length && !body[body.length - 1].trim()) body.pop(); // still streaming
      i++; // the closing fence
      parent.append(codeBlock(body.join('\n'), m[2]));
    } else if (RULE.test(line)) {
      parent.append(el('hr'));
      i++;
    } else if ((m = HEADING.exec(line))) {
      const h = el(`h${m[1].length}`);
      inline(m[2] || '', h);
      parent.append(h);
      i++;
    } else if (QUOTE.test(line)) {
      const inner = [];
      while (i < lines.length && lines[i].trim() && (QUOTE.test(lines[i]) || !startsBlock(lines, i))) {
        inner.push(lines[i++].replace(/^ {0,3}> ?/, ''));
      }
      const q = el('blockquote');
      blocks(inner, q);
      parent.append(q);
    } else if (isTable(lines, i)) {
      i = table(lines, i, parent);
    } else if (ITEM.test(line)) {
      i = list(lines, i, parent);
    } else {
      const para = [lines[i++]];
      while (i < lines.length && lines[i].trim() && !startsBlock(lines, i)) para.push(lines[i++]);
      const p = el('p');
      inline(para.join('\n').trim(), p);
      parent.append(p);
    }
  }
}

function codeBlock(code, lang) {
  const wrap = el('div', 'code-block');
  const bar = el('div', 'code-bar');
  bar.append(el('span', 'code-lang', lang || 'code'));
  const copy = el('button', 'copy-code', 'Copy');
  copy.type = 'button';
  copy.dataset.testid = 'copy-code';
  bar.append(copy);
  const pre = el('pre');
  pre.append(el('code', null, code));
  wrap.append(bar, pre);
  return wrap;
}

function list(lines, i, parent) {
  const first = ITEM.exec(lines[i]);
  const indent = first[1].length;
  const ordered = /\d/.test(first[2]);
  const node = el(ordered ? 'ol' : 'ul');
  if (ordered && parseInt(first[2], 10) !== 1) node.start = parseInt(first[2], 10);
  let loose = false;
  const items = [];
  while (i < lines.length) {
    const m = ITEM.exec(lines[i]);
    if (!m || m[1].length > indent + 1 || indentOf(lines[i]) < indent || /\d/.test(m[2]) !== ordered) break;
    const body = [m[3] || ''];
    const inner = m[1].length + m[2].length + 1;
    for (i++; i < lines.length; i++) {
      const l = lines[i];
      if (!l.trim()) {
        // a blank line continues the item when indented content follows
        const next = lines[i + 1];
        if (next !== undefined && next.trim() && indentOf(next) > indent && !(ITEM.test(next) && indentOf(next) <= indent + 1)) {
          body.push('');
          loose = true;
          continue;
        }
        break;
      }
      if (indentOf(l) > indent + 1 || (indentOf(l) > indent && !ITEM.test(l))) body.push(l.slice(Math.min(indentOf(l), inner)));
      else if (ITEM.test(l) || startsBlock(lines, i)) break;
      else body.push(l); // lazy continuation of the item's paragraph
    }
    items.push(body);
    // blank lines between items of the same list
    let j = i;
    while (j < lines.length && !lines[j].trim()) j++;
    if (j > i && j < lines.length) {
      const n = ITEM.exec(lines[j]);
      if (n && n[1].length === indent && /\d/.test(n[2]) === ordered) {
        loose = true;
        i = j;
      }
    }
  }
  for (const body of items) {
    const li = el('li');
    const frag = document.createDocumentFragment();
    blocks(body, frag);
    for (const child of [...frag.childNodes]) {
      if (!loose && child.nodeName === 'P') li.append(...child.childNodes);
      else li.append(child);
    }
    node.append(li);
  }
  parent.append(node);
  return i;
}

function splitRow(line) {
  let s = line.trim();
  if (s.startsWith('|')) s = s.slice(1);
  if (s.endsWith('|') && !s.endsWith('\\|')) s = s.slice(0, -1);
  const cells = [];
  let cur = '';
  let code = false;
  for (let k = 0; k < s.length; k++) {
    const c = s[k];
    if (c === '\\' && s[k + 1] === '|') { cur += '|'; k++; continue; }
    if (c === '`') code = !code;
    if (c === '|' && !code) { cells.push(cur.trim()); cur = ''; continue; }
    cur += c;
  }
  cells.push(cur.trim());
  return cells;
}

function table(lines, i, parent) {
  const head = splitRow(lines[i]);
  const align = splitRow(lines[i + 1]).map((c) => (c.endsWith(':') ? (c.startsWith(':') ? 'center' : 'right') : ''));
  const t = el('table');
  const row = (cells, tag) => {
    const tr = el('tr');
    for (let k = 0; k < head.length; k++) {
      const cell = el(tag, align[k] ? `al-${align[k]}` : null);
      inline(cells[k] || '', cell);
      tr.append(cell);
    }
    return tr;
  };
  const thead = el('thead');
  thead.append(row(head, 'th'));
  const tbody = el('tbody');
  for (i += 2; i < lines.length && lines[i].trim() && lines[i].includes('|'); i++) tbody.append(row(splitRow(lines[i]), 'td'));
  t.append(thead, tbody);
  const wrap = el('div', 'table-wrap');
  wrap.append(t);
  parent.append(wrap);
  return i;
}

function safeUrl(raw) {
  try {
    const u = new URL(raw);
    return u.protocol === 'http:' || u.protocol === 'https:' ? u.href : null;
  } catch {
    return null;
  }
}

function anchor(href) {
  const a = el('a');
  a.href = href;
  a.target = '_blank';
  a.rel = 'noopener noreferrer nofollow';
  return a;
}

const ESCAPABLE = '\\`*_{}[]()#+-.!|~<>';
const isSpace = (c) => c === undefined || /\s/.test(c);
const isWord = (c) => c !== undefined && /[\p{L}\p{N}]/u.test(c);
const runAt = (s, k, ch) => { let n = 0; while (s[k + n] === ch) n++; return n; };

// Where the closing delimiter run of exactly `n` `ch`s is, skipping code spans; -1 if none.
function closing(s, from, ch, n) {
  for (let k = from; k < s.length;) {
    if (s[k] === '`') {
      const r = runAt(s, k, '`');
      const end = s.indexOf('`'.repeat(r), k + r);
      k = end < 0 ? k + r : end + r;
      continue;
    }
    if (s[k] === '\\') { k += 2; continue; }
    if (s[k] === ch) {
      const r = runAt(s, k, ch);
      if (r === n && !isSpace(s[k - 1]) && k > from && !(ch === '_' && isWord(s[k + r]))) return k;
      k += r;
      continue;
    }
    k++;
  }
  return -1;
}

// Inline markdown of `s` appended to `parent` as elements and text nodes.
function inline(s, parent) {
  let buf = '';
  const flush = () => {
    if (buf) parent.append(document.createTextNode(buf));
    buf = '';
  };
  for (let i = 0; i < s.length;) {
    const c = s[i];
    if (c === '\\' && ESCAPABLE.includes(s[i + 1] || '\0')) {
      buf += s[i + 1];
      i += 2;
      continue;
    }
    if (c === '\n') {
      flush();
      parent.append(el('br'));
      i++;
      continue;
    }
    if (c === '`') {
      const n = runAt(s, i, '`');
      const end = s.indexOf('`'.repeat(n), i + n);
      if (end > 0 && runAt(s, end, '`') === n) {
        let code = s.slice(i + n, end).replace(/\n/g, ' ');
        if (code.length > 2 && code[0] === ' ' && code[code.length - 1] === ' ') code = code.slice(1, -1);
        flush();
        parent.append(el('code', null, code));
        i = end + n;
      } else {
        buf += s.slice(i, i + n);
        i += n;
      }
      continue;
    }
    if (c === '*' || c === '_' || (c === '~' && s[i + 1] === '~')) {
      const n = Math.min(runAt(s, i, c), c === '~' ? 2 : 3);
      const opens = !isSpace(s[i + n]) && !(c === '_' && isWord(s[i - 1]));
      const end = opens ? closing(s, i + n, c, n) : -1;
      if (end > i + n) {
        flush();
        const inner = s.slice(i + n, end);
        let node;
        if (c === '~') node = el('del');
        else if (n === 3) { node = el('strong'); const em = el('em'); node.append(em); inline(inner, em); }
        else node = el(n === 2 ? 'strong' : 'em');
        if (n !== 3 || c === '~') inline(inner, node);
        parent.append(node);
        i = end + n;
      } else {
        buf += s.slice(i, i + n);
        i += n;
      }
      continue;
    }
    if (c === '[' || (c === '!' && s[i + 1] === '[')) {
      // a link; an image becomes a link to it (images are never loaded from elsewhere)
      const m = /^!?\[((?:[^\[\]\\]|\\.|\[[^\]]*\])*)\]\(\s*<?([^\s()<>]*(?:\([^\s()]*\)[^\s()<>]*)*)>?(?:\s+"[^"]*")?\s*\)/.exec(s.slice(i));
      if (m) {
        flush();
        const url = safeUrl(m[2]);
        const a = url ? anchor(url) : parent; // other schemes (javascript:, data:, …) lose the link
        inline(m[1], a);
        if (a !== parent) parent.append(a);
        i += m[0].length;
        continue;
      }
    }
    if ((c === 'h' || c === 'H') && !isWord(s[i - 1])) {
      const m = /^https?:\/\/[^\s<>"'`]+/i.exec(s.slice(i));
      if (m) {
        let url = m[0].replace(/[.,;:!?*_~]+$/, '');
        while (url.endsWith(')') && (url.match(/\(/g) || []).length < (url.match(/\)/g) || []).length) url = url.slice(0, -1);
        const safe = safeUrl(url);
        if (safe) {
          flush();
          const a = anchor(safe);
          a.textContent = url;
          parent.append(a);
          i += url.length;
          continue;
        }
      }
    }
    buf += c;
    i++;
  }
  flush();
}
