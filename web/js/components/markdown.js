// A small, safe Markdown renderer for the assistant's replies.
// Why our own: the text comes from a language model (which may repeat things a
// web page or a document said), so it is untrusted. This module never builds
// HTML strings and never touches innerHTML: it parses the text into blocks and
// inline runs and returns Preact VNodes, so every character ends up as a text
// node. Links are kept only for http(s) addresses and open in a new tab with
// rel="noopener noreferrer".
//
// Supported: paragraphs (a single newline is a line break, as in chat apps),
// headings, emphasis (*em*, **strong**, ~~strike~~), inline code, links and
// bare URLs, bullet and numbered lists (nested by indentation), block quotes,
// horizontal rules, simple tables, fenced code blocks (``` or ~~~, also
// unclosed while a reply is still streaming) with a copy button and a light
// keyword highlighter.
import { html, h, useMemo, useRef, useState } from '../lib.js';
import { t } from '../i18n.js';
import { Icon } from './icons.js';
import { copyText } from './recovery.js';

// ---------------------------------------------------------------- blocks

const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([^\s`]*)[^`]*$/;
const HEADING = /^ {0,3}(#{1,6})(?:\s+(.*?))?(?:\s+#+)?\s*$/;
const HR = /^ {0,3}([-*_])(?:\s*\1){2,}\s*$/;
const QUOTE = /^ {0,3}> ?(.*)$/;
const LIST = /^( *)([-*+]|\d{1,9}[.)])(\s+|$)(.*)$/;
const TABLE_RULE = /^\s*\|?\s*:?-{1,}:?\s*(\|\s*:?-{1,}:?\s*)*\|?\s*$/;

const isBlank = (line) => /^\s*$/.test(line);
const indentOf = (line) => line.match(/^ */)[0].length;

function listMarker(line) {
  const m = line.replace(/\t/g, '    ').match(LIST);
  if (!m) return null;
  // "-" followed by nothing is a list item only when something follows later;
  // an empty marker line would otherwise turn a lone dash into a list.
  if (!m[3] && !m[4]) return null;
  const ordered = /\d/.test(m[2]);
  return {
    indent: m[1].length,
    ordered,
    start: ordered ? parseInt(m[2], 10) : 1,
    content: m[4],
    width: m[1].length + m[2].length + Math.max(1, Math.min(m[3].length, 4)),
  };
}

function isTableStart(lines, i) {
  return i + 1 < lines.length && lines[i].includes('|') && TABLE_RULE.test(lines[i + 1]) && lines[i + 1].includes('-');
}

// Does this line start a block that interrupts a paragraph?
function startsBlock(lines, i) {
  const line = lines[i];
  if (FENCE.test(line) || HEADING.test(line) || HR.test(line) || QUOTE.test(line)) return true;
  const m = listMarker(line);
  if (m && m.content.trim() && (!m.ordered || m.start === 1)) return true;
  return isTableStart(lines, i);
}

function splitRow(line) {
  let s = line.trim();
  if (s.startsWith('|')) s = s.slice(1);
  if (s.endsWith('|') && !s.endsWith('\\|')) s = s.slice(0, -1);
  const cells = [];
  let cur = '';
  for (let i = 0; i < s.length; i += 1) {
    if (s[i] === '\\' && s[i + 1] === '|') {
      cur += '|';
      i += 1;
    } else if (s[i] === '|') {
      cells.push(cur.trim());
      cur = '';
    } else {
      cur += s[i];
    }
  }
  cells.push(cur.trim());
  return cells;
}

function parseList(lines, start) {
  const first = listMarker(lines[start]);
  const items = [];
  let current = null;
  let loose = false;
  let i = start;
  let pendingBlank = false;
  while (i < lines.length) {
    const line = lines[i].replace(/\t/g, '    ');
    const m = listMarker(line);
    if (m && m.indent < first.indent + 2 && m.ordered === first.ordered) {
      if (pendingBlank) loose = true;
      current = { lines: [m.content], width: m.width };
      items.push(current);
      pendingBlank = false;
      i += 1;
      continue;
    }
    if (isBlank(line)) {
      pendingBlank = true;
      current.lines.push('');
      i += 1;
      continue;
    }
    const ind = indentOf(line);
    if (ind >= Math.min(current.width, first.indent + 2)) {
      // Belongs to the current item (a nested list or a second paragraph).
      if (pendingBlank && ind >= current.width) loose = true;
      current.lines.push(line.slice(Math.min(ind, current.width)));
      pendingBlank = false;
      i += 1;
      continue;
    }
    if (!pendingBlank && !startsBlock(lines, i) && !m) {
      current.lines.push(line.trim()); // lazy continuation of the item's text
      i += 1;
      continue;
    }
    break;
  }
  for (const item of items) {
    while (item.lines.length && isBlank(item.lines[item.lines.length - 1])) item.lines.pop();
  }
  return {
    block: {
      type: 'list',
      ordered: first.ordered,
      start: first.start,
      loose,
      items: items.map((it) => parseBlocks(it.lines)),
    },
    next: i,
  };
}

export function parseBlocks(lines) {
  const blocks = [];
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (isBlank(line)) {
      i += 1;
      continue;
    }
    const fence = line.match(FENCE);
    if (fence) {
      const marker = fence[1];
      const body = [];
      let closed = false;
      i += 1;
      while (i < lines.length) {
        const l = lines[i];
        const end = l.match(/^ {0,3}(`{3,}|~{3,})\s*$/);
        if (end && end[1][0] === marker[0] && end[1].length >= marker.length) {
          closed = true;
          i += 1;
          break;
        }
        body.push(l);
        i += 1;
      }
      blocks.push({ type: 'code', lang: fence[2].toLowerCase(), text: body.join('\n'), closed });
      continue;
    }
    const heading = line.match(HEADING);
    if (heading) {
      blocks.push({ type: 'heading', level: heading[1].length, text: heading[2] || '' });
      i += 1;
      continue;
    }
    if (HR.test(line)) {
      blocks.push({ type: 'hr' });
      i += 1;
      continue;
    }
    if (QUOTE.test(line)) {
      const body = [];
      while (i < lines.length && !isBlank(lines[i])) {
        const q = lines[i].match(QUOTE);
        if (!q && startsBlock(lines, i)) break; // only plain text continues a quote lazily
        body.push(q ? q[1] : lines[i]);
        i += 1;
      }
      blocks.push({ type: 'quote', blocks: parseBlocks(body) });
      continue;
    }
    if (listMarker(line)) {
      const { block, next } = parseList(lines, i);
      blocks.push(block);
      i = next;
      continue;
    }
    if (isTableStart(lines, i)) {
      const head = splitRow(line);
      const align = splitRow(lines[i + 1]).map((c) =>
        c.startsWith(':') && c.endsWith(':') ? 'center' : c.endsWith(':') ? 'right' : c.startsWith(':') ? 'left' : '',
      );
      const rows = [];
      i += 2;
      while (i < lines.length && !isBlank(lines[i]) && lines[i].includes('|')) {
        rows.push(splitRow(lines[i]));
        i += 1;
      }
      blocks.push({ type: 'table', head, align, rows });
      continue;
    }
    const para = [line];
    i += 1;
    while (i < lines.length && !isBlank(lines[i]) && !startsBlock(lines, i)) {
      para.push(lines[i]);
      i += 1;
    }
    blocks.push({ type: 'para', text: para.map((l) => l.replace(/^\s+/, '')).join('\n') });
  }
  return blocks;
}

// ---------------------------------------------------------------- inline

const PUNCT = /[!-/:-@[-`{-~]/;
const WORD = /[\p{L}\p{N}]/u;

// Only web addresses become links; javascript:, data:, file: and friends
// stay plain text.
export function safeUrl(raw) {
  const s = String(raw || '').trim();
  if (!/^https?:\/\//i.test(s)) return null;
  try {
    const u = new URL(s);
    return u.protocol === 'http:' || u.protocol === 'https:' ? s : null;
  } catch (e) {
    return null;
  }
}

function link(href, children) {
  return h('a', { href, target: '_blank', rel: 'noopener noreferrer', class: 'md-link' }, children);
}

// Find the closing delimiter `delim` from `from`, not preceded by whitespace.
function findClose(text, delim, from) {
  let j = text.indexOf(delim, from);
  while (j !== -1) {
    const before = text[j - 1];
    const after = text[j + delim.length];
    const okBefore = before !== undefined && !/\s/.test(before);
    const okAfter = delim[0] !== '_' || after === undefined || !WORD.test(after);
    // A longer run (e.g. "**" while looking for "*") is not our closer.
    const longer = delim.length === 1 && (text[j + 1] === delim || before === delim);
    if (okBefore && okAfter && !longer && j > from) return j;
    j = text.indexOf(delim, j + 1);
  }
  return -1;
}

// "[text](url)": returns {label, url, end} or null.
function matchLink(text, i) {
  let depth = 0;
  let j = i;
  for (; j < text.length; j += 1) {
    const c = text[j];
    if (c === '\\') {
      j += 1;
    } else if (c === '[') {
      depth += 1;
    } else if (c === ']') {
      depth -= 1;
      if (depth === 0) break;
    } else if (c === '\n' && text[j + 1] === '\n') {
      return null;
    }
  }
  if (j >= text.length || text[j + 1] !== '(') return null;
  let k = j + 2;
  let parens = 1;
  for (; k < text.length; k += 1) {
    if (text[k] === '(') parens += 1;
    else if (text[k] === ')') {
      parens -= 1;
      if (parens === 0) break;
    } else if (text[k] === '\n') return null;
  }
  if (k >= text.length) return null;
  const target = text.slice(j + 2, k).trim();
  const url = target.replace(/^<(.*)>$/, '$1').split(/\s+/)[0];
  return { label: text.slice(i + 1, j), url, end: k + 1 };
}

function bareUrlEnd(text, i) {
  let j = i;
  while (j < text.length && !/[\s<>"]/.test(text[j])) j += 1;
  // Trailing punctuation belongs to the sentence, not the address; a closing
  // parenthesis stays when the address itself opened one.
  while (j > i) {
    const c = text[j - 1];
    if (/[.,;:!?'*_~]/.test(c)) {
      j -= 1;
    } else if (c === ')') {
      const s = text.slice(i, j);
      if ((s.match(/\(/g) || []).length < (s.match(/\)/g) || []).length) j -= 1;
      else break;
    } else {
      break;
    }
  }
  return j;
}

export function parseInline(text) {
  const out = [];
  let buf = '';
  const flush = () => {
    if (buf) out.push(buf);
    buf = '';
  };
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    const prev = i > 0 ? text[i - 1] : '';

    if (c === '\\' && i + 1 < text.length) {
      const n = text[i + 1];
      if (n === '\n') {
        flush();
        out.push(h('br', null));
        i += 2;
        continue;
      }
      if (PUNCT.test(n)) {
        buf += n;
        i += 2;
        continue;
      }
    }

    if (c === '\n') {
      flush();
      out.push(h('br', null));
      i += 1;
      continue;
    }

    if (c === '`') {
      let n = 1;
      while (text[i + n] === '`') n += 1;
      const ticks = '`'.repeat(n);
      let j = text.indexOf(ticks, i + n);
      while (j !== -1 && text[j + n] === '`') j = text.indexOf(ticks, j + n + 1);
      if (j !== -1) {
        let code = text.slice(i + n, j).replace(/\n/g, ' ');
        if (code.length > 2 && code.startsWith(' ') && code.endsWith(' ')) code = code.slice(1, -1);
        flush();
        out.push(h('code', { class: 'md-code' }, code));
        i = j + n;
        continue;
      }
      buf += ticks;
      i += n;
      continue;
    }

    if ((c === '*' || c === '_') && text[i + 1] === c && text[i + 2] && !/\s/.test(text[i + 2])) {
      const delim = c + c;
      if (c === '*' || !WORD.test(prev)) {
        const j = findClose(text, delim, i + 2);
        if (j !== -1) {
          flush();
          out.push(h('strong', null, parseInline(text.slice(i + 2, j))));
          i = j + 2;
          continue;
        }
      }
    }

    if (c === '~' && text[i + 1] === '~' && text[i + 2] && !/\s/.test(text[i + 2])) {
      const j = findClose(text, '~~', i + 2);
      if (j !== -1) {
        flush();
        out.push(h('del', null, parseInline(text.slice(i + 2, j))));
        i = j + 2;
        continue;
      }
    }

    if ((c === '*' || c === '_') && text[i + 1] && !/\s/.test(text[i + 1]) && text[i + 1] !== c) {
      if (c === '*' || !WORD.test(prev)) {
        const j = findClose(text, c, i + 1);
        if (j !== -1) {
          flush();
          out.push(h('em', null, parseInline(text.slice(i + 1, j))));
          i = j + 1;
          continue;
        }
      }
    }

    if (c === '[' || (c === '!' && text[i + 1] === '[')) {
      const img = c === '!';
      const m = matchLink(text, img ? i + 1 : i);
      if (m) {
        const href = safeUrl(m.url);
        const label = m.label || m.url;
        flush();
        // Images are shown as links: loading them would reach other sites.
        const children = img ? [label] : parseInline(label);
        out.push(href ? link(href, children) : h('span', null, children));
        i = m.end;
        continue;
      }
    }

    if (c === '<') {
      const m = text.slice(i).match(/^<(https?:\/\/[^\s<>]+)>/i);
      if (m && safeUrl(m[1])) {
        flush();
        out.push(link(m[1], [m[1]]));
        i += m[0].length;
        continue;
      }
    }

    if ((c === 'h' || c === 'H') && !WORD.test(prev) && /^https?:\/\//i.test(text.slice(i, i + 8))) {
      const end = bareUrlEnd(text, i);
      const url = text.slice(i, end);
      if (safeUrl(url) && url.length > 8) {
        flush();
        out.push(link(url, [url]));
        i = end;
        continue;
      }
    }

    buf += c;
    i += 1;
  }
  flush();
  return out;
}

// ---------------------------------------------------------------- code

const C_LIKE = ['js', 'javascript', 'mjs', 'ts', 'typescript', 'jsx', 'tsx', 'java', 'c', 'h', 'cpp', 'c++', 'cc',
  'cs', 'csharp', 'go', 'rust', 'rs', 'kotlin', 'kt', 'swift', 'php', 'scala', 'dart', 'css', 'scss', 'json', 'jsonc'];
const HASH = ['py', 'python', 'sh', 'bash', 'shell', 'zsh', 'console', 'yaml', 'yml', 'toml', 'ruby', 'rb', 'r',
  'perl', 'pl', 'dockerfile', 'docker', 'makefile', 'make', 'conf', 'ini', 'nix', 'ps1', 'powershell'];
const DASH = ['sql', 'lua', 'haskell', 'hs', 'elm'];

const KEYWORDS = {
  js: 'async await break case catch class const continue debugger default delete do else export extends false finally for from function if import in instanceof let new null of return static super switch this throw true try typeof undefined var void while with yield interface type enum implements private public protected readonly',
  py: 'and as assert async await break class continue def del elif else except False finally for from global if import in is lambda None nonlocal not or pass raise return True try while with yield match case self',
  sh: 'if then else elif fi for in do done while until case esac function return local export echo exit set unset readonly source sudo cd true false',
  go: 'break case chan const continue default defer else fallthrough for func go goto if import interface map package range return select struct switch type var nil true false',
  rust: 'as async await break const continue crate dyn else enum extern false fn for if impl in let loop match mod move mut pub ref return self Self static struct super trait true type unsafe use where while None Some Ok Err',
  c: 'auto break case char const continue default do double else enum extern float for goto if int long register return short signed sizeof static struct switch typedef union unsigned void volatile while class public private protected new delete this true false null nullptr namespace using template typename virtual override final import package extends implements interface throws throw try catch finally boolean var val fun',
  sql: 'select from where and or not insert into values update set delete create table drop alter index join left right inner outer on group by order having limit offset as distinct union all null is in like between case when then else end primary key foreign references default begin commit rollback',
  yaml: 'true false null yes no on off',
  css: 'important inherit initial unset none auto',
  lua: 'and break do else elseif end false for function goto if in local nil not or repeat return then true until while',
};

function keywordSet(lang) {
  const fam =
    ['js', 'javascript', 'mjs', 'ts', 'typescript', 'jsx', 'tsx', 'json', 'jsonc', 'dart', 'php'].includes(lang) ? 'js'
      : ['py', 'python'].includes(lang) ? 'py'
        : ['sh', 'bash', 'shell', 'zsh', 'console', 'dockerfile', 'docker', 'makefile', 'make', 'ps1', 'powershell'].includes(lang) ? 'sh'
          : ['go'].includes(lang) ? 'go'
            : ['rust', 'rs'].includes(lang) ? 'rust'
              : ['sql'].includes(lang) ? 'sql'
                : ['yaml', 'yml', 'toml', 'ini', 'conf'].includes(lang) ? 'yaml'
                  : ['css', 'scss'].includes(lang) ? 'css'
                    : ['lua'].includes(lang) ? 'lua'
                      : C_LIKE.includes(lang) ? 'c'
                        : null;
  if (!fam) return null;
  const words = KEYWORDS[fam].split(' ');
  return { words: new Set(fam === 'sql' ? words.concat(words.map((w) => w.toUpperCase())) : words), fam };
}

// Split code into [class, text] tokens: comments, strings, numbers, keywords.
// Deliberately simple; wrong colours are harmless, wrong text is not, so the
// tokens always join back to exactly the input.
export function highlight(code, lang) {
  const kw = keywordSet(lang);
  const hash = HASH.includes(lang);
  const cLike = C_LIKE.includes(lang) && lang !== 'json';
  const dash = DASH.includes(lang);
  if (!kw && !hash && !cLike && !dash) return [['', code]];
  const tokens = [];
  let plain = '';
  const push = (cls, s) => {
    if (plain) tokens.push(['', plain]);
    plain = '';
    tokens.push([cls, s]);
  };
  let i = 0;
  while (i < code.length) {
    const rest = code.slice(i, i + 3);
    const c = code[i];
    const prev = i > 0 ? code[i - 1] : '';
    if ((cLike && rest.startsWith('//') && lang !== 'css') || (hash && c === '#' && !/[\w$]/.test(prev)) || (dash && rest.startsWith('--'))) {
      let j = code.indexOf('\n', i);
      if (j === -1) j = code.length;
      push('tok-com', code.slice(i, j));
      i = j;
      continue;
    }
    if ((cLike || lang === 'sql') && rest.startsWith('/*')) {
      let j = code.indexOf('*/', i + 2);
      j = j === -1 ? code.length : j + 2;
      push('tok-com', code.slice(i, j));
      i = j;
      continue;
    }
    if (c === '"' || c === "'" || (c === '`' && kw && kw.fam === 'js')) {
      const triple = (lang === 'py' || lang === 'python') && code.slice(i, i + 3) === c.repeat(3);
      const close = triple ? c.repeat(3) : c;
      let j = i + close.length;
      while (j < code.length) {
        if (code[j] === '\\') {
          j += 2;
          continue;
        }
        if (code.startsWith(close, j)) {
          j += close.length;
          break;
        }
        if (!triple && c !== '`' && code[j] === '\n') break;
        j += 1;
      }
      // An apostrophe inside shell or prose-like text should not swallow the rest.
      if (c === "'" && hash && !triple && j - i > 200) {
        plain += c;
        i += 1;
        continue;
      }
      push('tok-str', code.slice(i, Math.min(j, code.length)));
      i = Math.min(j, code.length);
      continue;
    }
    if (/\d/.test(c) && !/[\w$]/.test(prev)) {
      const m = code.slice(i).match(/^(0x[\da-fA-F_]+|\d[\d_]*(\.\d+)?([eE][+-]?\d+)?)/);
      push('tok-num', m[0]);
      i += m[0].length;
      continue;
    }
    if (/[A-Za-z_$]/.test(c) && !/[\w$]/.test(prev)) {
      const m = code.slice(i).match(/^[A-Za-z_$][\w$]*/);
      if (kw && kw.words.has(m[0])) push('tok-kw', m[0]);
      else plain += m[0];
      i += m[0].length;
      continue;
    }
    plain += c;
    i += 1;
  }
  if (plain) tokens.push(['', plain]);
  return tokens;
}

function CodeBlock({ text, lang, closed }) {
  const ref = useRef(null);
  const [copied, setCopied] = useState(null);
  const tokens = useMemo(() => highlight(text, lang), [text, lang]);
  const onCopy = async () => {
    let ok = false;
    try {
      ok = await copyText(text, ref.current);
    } catch (e) {
      ok = false;
    }
    setCopied(ok ? 'ok' : 'failed');
    setTimeout(() => setCopied(null), 2000);
  };
  return html`<div class="md-pre" data-testid="md-code-block" data-lang=${lang || undefined}>
    <div class="md-pre__bar">
      <span class="md-pre__lang">${lang || t('chat.code')}</span>
      <button type="button" class="md-pre__copy" onClick=${onCopy} disabled=${!closed} data-testid="md-code-copy"
        aria-label=${t('chat.copy_code')}>
        ${copied === 'ok' ? Icon.check() : Icon.copy()}
        <span>${copied === 'ok' ? t('recovery.copied') : copied === 'failed' ? t('chat.copy_failed') : t('recovery.copy')}</span>
      </button>
    </div>
    <pre><code ref=${ref}>${tokens.map(([cls, s]) => (cls ? h('span', { class: cls }, s) : s))}</code></pre>
  </div>`;
}

// ---------------------------------------------------------------- render

function renderBlocks(blocks, tight = false) {
  return blocks.map((b) => {
    switch (b.type) {
      case 'code':
        return h(CodeBlock, { text: b.text, lang: b.lang, closed: b.closed });
      case 'heading':
        return h(`h${Math.min(b.level + 2, 6)}`, { class: `md-h md-h${b.level}` }, parseInline(b.text));
      case 'hr':
        return h('hr', { class: 'md-hr' });
      case 'quote':
        return h('blockquote', { class: 'md-quote' }, renderBlocks(b.blocks));
      case 'list':
        return h(
          b.ordered ? 'ol' : 'ul',
          { class: 'md-list', start: b.ordered && b.start !== 1 ? b.start : undefined },
          b.items.map((item) => h('li', null, renderBlocks(item, !b.loose))),
        );
      case 'table':
        return h('div', { class: 'md-table-wrap' }, [
          h('table', { class: 'md-table' }, [
            h('thead', null, h('tr', null, b.head.map((c, i) => h('th', { class: b.align[i] ? `md-al-${b.align[i]}` : undefined }, parseInline(c))))),
            h('tbody', null, b.rows.map((r) => h('tr', null, b.head.map((_, i) => h('td', { class: b.align[i] ? `md-al-${b.align[i]}` : undefined }, parseInline(r[i] || '')))))),
          ]),
        ]);
      default:
        // In a tight list item the text sits in the <li> directly.
        return tight ? h('span', { class: 'md-tight' }, parseInline(b.text)) : h('p', null, parseInline(b.text));
    }
  });
}

export function renderMarkdown(text) {
  const lines = String(text || '').replace(/\r\n?/g, '\n').split('\n');
  return renderBlocks(parseBlocks(lines));
}

export function Markdown({ text, class: cls }) {
  const nodes = useMemo(() => renderMarkdown(text), [text]);
  return html`<div class=${`md${cls ? ` ${cls}` : ''}`}>${nodes}</div>`;
}
