// Pieces shared by the chat's approval card and the Inbox page: the unified
// diff of a write (each line a text node with an added/removed/hunk class,
// never innerHTML) and the four approval buttons.
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

export function DiffView({ text, testid = 'diff-preview' }) {
  if (typeof text !== 'string' || !text) return null;
  const all = text.replace(/\n$/, '').split('\n');
  const lines = all.slice(0, MAX_LINES);
  const isDiff = all.some((l) => l.startsWith('@@') || l.startsWith('+++'));
  return html`<div class="diff" data-testid=${testid} data-kind=${isDiff ? 'diff' : 'text'}>
    <pre class="diff__pre">${lines.map((line) => {
      const kind = isDiff ? lineKind(line) : 'ctx';
      return html`<span class=${`diff__line diff__line--${kind}`} data-testid="diff-line" data-kind=${kind}>${line || ' '}</span>`;
    })}</pre>
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
