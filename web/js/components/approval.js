// Pieces shared by the chat's approval card and the Inbox page: what a call
// would do in plain words with its substance in view (the command, the
// readable change of a file, the household note), the readable diff of a
// write (each line a text node with an added/removed class, never innerHTML;
// no @@ or ---/+++ markers), and the four approval buttons. The tool's name
// and raw arguments stay behind "Technical details".
import { html } from '../lib.js';
import { t } from '../i18n.js';
import { Icon } from './icons.js';

function lineKind(line) {
  if (line.startsWith('+++') || line.startsWith('---')) return 'file';
  if (line.startsWith('@@')) return 'hunk';
  if (line.startsWith('+')) return 'add';
  if (line.startsWith('-')) return 'del';
  if (line.startsWith('\\')) return 'meta';
  return 'ctx';
}

// A unified diff (or any preview text) as lines. Very long previews are cut
// so a phone stays usable; the full text is in the arguments anyway.
const MAX_LINES = 400;

const SIGNS = { add: '+', del: '−', ctx: ' ' };

// Why a call waits, in the reader's language. The reason is the matching rule's
// description: the seeded rules' descriptions are English constants (SEED_RULES in
// skald/approvals/rules.py), so those are translated here; a rule a household wrote
// keeps its own words.
const SEEDED_REASONS = {
  "writing to the household's shared memory": 'approval.reason_shared_write',
  'applying a change a report suggested': 'approval.reason_suggested',
  'running a command in your sandbox': 'approval.reason_command',
  'a request the model provider may bill, such as drawing a picture': 'approval.reason_paid',
};
const TOOL_REASON = /^using the tool (.+)$/;

export function reasonText(reason) {
  if (!reason) return '';
  if (SEEDED_REASONS[reason]) return t(SEEDED_REASONS[reason]);
  const tool = TOOL_REASON.exec(reason);
  if (tool) return t('approval.reason_tool', { tool: tool[1] });
  return reason.charAt(0).toUpperCase() + reason.slice(1);
}

export function DiffView({ text, testid = 'diff-preview' }) {
  if (typeof text !== 'string' || !text) return null;
  const all = text.replace(/\n$/, '').split('\n');
  const lines = all.slice(0, MAX_LINES);
  const isDiff = all.some((l) => l.startsWith('@@') || l.startsWith('+++'));
  // Readable: the markers a person does not need go; a gap shows where a hunk starts
  // after the first one; each line keeps a sign and an accessible word.
  let hunks = 0;
  const rows = [];
  lines.forEach((line, i) => {
    const kind = isDiff ? lineKind(line) : 'ctx';
    if (kind === 'file' || kind === 'meta') return;
    if (kind === 'hunk') {
      hunks += 1;
      if (hunks > 1) rows.push(html`<span key=${i} class="diff__line diff__line--gap" aria-hidden="true">⋯</span>`);
      return;
    }
    const body = isDiff ? line.slice(1) : line;
    rows.push(html`<span key=${i} class=${`diff__line diff__line--${kind}`} data-testid="diff-line" data-kind=${kind}>
      <span class="diff__sign" aria-hidden="true">${SIGNS[kind]}</span>${kind !== 'ctx' &&
      html`<span class="visually-hidden">${kind === 'add' ? t('approval.line_added') : t('approval.line_removed')} </span>`}${body || ' '}</span>`);
  });
  return html`<div class="diff" data-testid=${testid} data-kind=${isDiff ? 'diff' : 'text'}>
    ${isDiff && html`<p class="diff__legend small muted">
      <span class="diff__key diff__key--add">${t('approval.legend_added')}</span>
      <span class="diff__key diff__key--del">${t('approval.legend_removed')}</span></p>`}
    <pre class="diff__pre">${rows}</pre>
    ${all.length > MAX_LINES &&
    html`<p class="muted small">${t('inbox.diff_cut', { n: all.length - MAX_LINES })}</p>`}
  </div>`;
}

// Approve (once), approve for 15 minutes, approve for this conversation, reject.
// onDecide(decision, bypass) with decision 'approve' | 'reject' and bypass
// undefined | '15m' | 'conversation'.
export function ApprovalButtons({ disabled, onDecide, prefix }) {
  return html`<div class="approval__actions">
    <button type="button" class="btn btn--primary btn--small" disabled=${disabled} data-testid=${`${prefix}-approve`}
      onClick=${() => onDecide('approve')}>${Icon.check()}<span>${t('chat.approve')}</span></button>
    <button type="button" class="btn btn--secondary btn--small" disabled=${disabled} data-testid=${`${prefix}-approve-15m`}
      onClick=${() => onDecide('approve', '15m')}>${Icon.clock()}<span>${t('inbox.approve_15m')}</span></button>
    <button type="button" class="btn btn--secondary btn--small" disabled=${disabled}
      data-testid=${`${prefix}-approve-conversation`}
      onClick=${() => onDecide('approve', 'conversation')}>${Icon.chat()}<span>${t('inbox.approve_conversation')}</span></button>
    <button type="button" class="btn btn--secondary btn--small" disabled=${disabled} data-testid=${`${prefix}-reject`}
      onClick=${() => onDecide('reject')}>${Icon.close()}<span>${t('chat.reject')}</span></button>
  </div>`;
}

const NOTE_PREFIXES = ['shared-memory/', 'user-memory/'];

// The file tools that change a file or note (skald/files/tools.py, text_tools.py): each
// sends a diff preview; the sentence that names the change.
const FILE_WRITES = new Map([
  ['write_file', 'approval.write_file'],
  ['edit_file', 'approval.edit_file'],
  ['append_file', 'approval.append_file'],
  ['insert_at_line', 'approval.edit_file'],
  ['replace_lines', 'approval.edit_file'],
]);

function noteOf(path) {
  const p = String(path || '').replace(/^~\//, '');
  const prefix = NOTE_PREFIXES.find((x) => p.startsWith(x));
  return prefix ? { shared: prefix === 'shared-memory/', name: p.slice(prefix.length) } : null;
}

function prettyJson(value) {
  try {
    return JSON.stringify(value, null, 2);
  } catch (e) {
    return String(value);
  }
}

// What a call would do, in words and with its substance (see the module note).
// `testid` prefixes the parts: approval-what, approval-command, approval-change,
// approval-note, approval-details.
export function ApprovalSummary({ tool, args, preview, prefix = 'approval' }) {
  const a = args || {};
  const path = typeof a.path === 'string' ? a.path : '';
  const note = FILE_WRITES.has(tool) && noteOf(path);
  let what;
  let substance = null;
  if (tool === 'execute_cmd' && typeof a.command === 'string') {
    what = a.workdir ? t('approval.run_command_in', { dir: a.workdir }) : t('approval.run_command');
    substance = html`<pre class="approval__command" data-testid=${`${prefix}-command`}>${a.command}</pre>`;
  } else if (tool === 'install_packages' && Array.isArray(a.packages)) {
    what = t('approval.install_packages');
    substance = html`<pre class="approval__command" data-testid=${`${prefix}-command`}>${a.packages.join(' ')}</pre>`;
  } else if (note) {
    what = t(note.shared ? 'approval.household_note' : 'approval.private_note', { name: note.name });
    if (preview) substance = html`<${DiffView} text=${preview} testid=${`${prefix}-diff`} />`;
    else if (typeof a.content === 'string')
      substance = html`<pre class="approval__note" data-testid=${`${prefix}-note`}>${a.content}</pre>`;
  } else if (FILE_WRITES.has(tool)) {
    what = t(FILE_WRITES.get(tool), { path });
    if (preview) substance = html`<${DiffView} text=${preview} testid=${`${prefix}-diff`} />`;
    else if (typeof a.content === 'string')
      substance = html`<pre class="approval__note" data-testid=${`${prefix}-note`}>${a.content}</pre>`;
  } else {
    what = t('approval.use_tool');
  }
  return html`<div class="approval__summary">
    <p class="approval__what" data-testid=${`${prefix}-what`}>${what}</p>
    ${substance}
    <details class="approval__details" data-testid=${`${prefix}-details`}>
      <summary>${t('approval.technical')}</summary>
      <p class="small">${t('approval.tool')} <code data-testid=${`${prefix}-tool`}>${tool}</code></p>
      <pre class="tool__pre">${prettyJson(a)}</pre>
    </details>
  </div>`;
}
