// The conversation itself: messages, tool-call cards, approval cards, notes,
// and the scrolling area that holds them. Pure rendering of the chat model
// (js/chat.js); actions go back through the callbacks.
import { html, useEffect, useLayoutEffect, useRef, useState } from '../lib.js';
import { t, formatDate } from '../i18n.js';
import { Icon, Logo } from './icons.js';
import { errorText } from './form.js';
import { Markdown } from './markdown.js';
import { ApprovalSummary, ApprovalButtons, reasonText } from './approval.js';
import { useInboxList, itemForCall } from '../inbox.js';
import { copyText } from './recovery.js';
import { ReadAloudButton } from './voice.js';
import { toolTitle, resultSaid } from './tool-text.js';

export function formatSize(bytes) {
  const n = Number(bytes) || 0;
  if (n < 1024) return t('chat.size_b', { n });
  if (n < 1024 * 1024) return t('chat.size_kb', { n: (n / 1024).toFixed(n < 10240 ? 1 : 0) });
  return t('chat.size_mb', { n: (n / (1024 * 1024)).toFixed(1) });
}

const STATUS_KEYS = {
  pending: 'chat.call_pending',
  awaiting_approval: 'chat.call_awaiting',
  running: 'chat.call_running',
  done: 'chat.call_done',
  error: 'chat.call_error',
  denied: 'chat.call_denied',
  interrupted: 'chat.call_interrupted',
};

function prettyJson(value) {
  try {
    return JSON.stringify(value, null, 2);
  } catch (e) {
    return String(value);
  }
}

function StatusChip({ status }) {
  return html`<span class=${`chip chip--${status || 'pending'}`} data-testid="tool-status" data-status=${status}>
    ${(status === 'running' || status === 'pending') && html`<span class="chip__spin" aria-hidden="true"></span>`}
    ${t(STATUS_KEYS[status] || 'chat.call_pending')}
  </span>`;
}

function ApprovalBox({ call, approval, decision, error, onDecide, conversationId, helper }) {
  const sent = !!decision;
  // The inbox item of this call carries the preview (a diff for writes).
  useInboxList();
  const item = conversationId ? itemForCall(conversationId, call) : null;
  const reason = (approval && approval.reason) || (item && item.reason);
  const args = call.arguments || (item && item.arguments) || {};
  return html`<div class="approval" data-testid="approval-card" data-call-id=${call.id}>
    <p class="approval__title">${Icon.shield()}<span>${t(helper ? 'approval.ask_helper' : 'approval.ask')}</span></p>
    <${ApprovalSummary} tool=${call.name} args=${args} preview=${item && item.preview} />
    ${reason &&
    html`<p class="approval__reason" data-testid="approval-reason">
      ${reasonText(reason)}</p>`}
    ${error && html`<p class="approval__error" role="alert" data-testid="approval-error">${errorText(error)}</p>`}
    <${ApprovalButtons} disabled=${sent} prefix="approval" onDecide=${(d, bypass) => onDecide(call.id, d, bypass)} />
    ${sent &&
    html`<p class="muted small" role="status" data-testid="approval-sent">
      ${decision === 'approve' ? t('chat.approval_sent_yes') : t('chat.approval_sent_no')}
    </p>`}
  </div>`;
}

// Approvals that a helper (sub-agent) started by this call waits for. Its own calls are
// not in the history; the Inbox keeps them under this call (parent_call_id), so a tab
// opened after they were asked shows them too.
function HelperApprovals({ call, thread, onDecide, conversationId }) {
  const inbox = useInboxList();
  const items = (inbox.items || []).filter(
    (i) => i.kind === 'approval' && i.conversation_id === conversationId && i.parent_call_id === call.id,
  );
  return items.map(
    (i) => html`<${ApprovalBox} key=${i.id} call=${{ id: i.id, name: i.tool }} helper=${true}
      decision=${thread.decisions[i.id]} error=${thread.decisionErrors[i.id]} onDecide=${onDecide}
      conversationId=${conversationId} />`,
  );
}

// The Files page shows a file from its address: #/files?path=<folder>&file=<file>.
// The file generate_image saved for this call (skald/features/models/pictures.py picture_path).
function picturePath(callId) {
  const safe = String(callId).replace(/[^A-Za-z0-9_-]/g, '').slice(0, 64) || 'picture';
  return `picture-${safe}.png`;
}

function filesHref(path) {
  const cut = path.lastIndexOf('/');
  const dir = cut > 0 ? path.slice(0, cut) : '~';
  return `#/files?path=${encodeURIComponent(dir)}&file=${encodeURIComponent(path)}`;
}

// get_outline's result (skald/files/text_tools.py): a heading line, then one entry a
// line, indented two spaces a level, "<start>-<end> <kind> <name>". Shown as a list with
// the line ranges; anything else in the text is left to the result section.
const OUTLINE_ROW = /^((?:  )*)(\d+)-(\d+) (.+)$/;

function OutlineView({ text }) {
  const rows = String(text || '')
    .split('\n')
    .slice(1)
    .map((line) => OUTLINE_ROW.exec(line))
    .filter(Boolean);
  if (!rows.length) return null;
  return html`<div class="tool__outline" data-testid="tool-outline">
    <p class="tool__outline-title">${t('chat.outline')}</p>
    <ul>
      ${rows.map(
        ([, indent, start, end, name]) => html`<li class=${`tool__outline-d${Math.min(indent.length / 2, 5)}`}
            data-testid="tool-outline-entry">
          <code>${name}</code> <span class="muted small">${t('chat.outline_lines', { start, end })}</span>
        </li>`,
      )}
    </ul>
  </div>`;
}

export function ToolCard({ call, result, output, approval, decision, decisionError, subtask, onDecide, conversationId, thread }) {
  const status = call.status || (result ? (result.is_error ? 'error' : 'done') : 'pending');
  const waiting = status === 'awaiting_approval';
  const hasArgs = call.arguments && Object.keys(call.arguments).length > 0;
  const running = status === 'running' || status === 'pending';
  // A failure is told in words; the text the model got stays under Technical details.
  const said = resultSaid(result);
  return html`<div class=${`tool tool--${status}${waiting ? ' tool--approval' : ''}`} data-testid="tool-card"
      data-call-id=${call.id} data-status=${status} data-tool=${call.name}>
    <div class="tool__head">
      <span class="tool__icon">${Icon.tool()}</span>
      <span class="tool__name" data-testid="tool-name">${toolTitle(call.name)}</span>
      <${StatusChip} status=${status} />
      ${subtask && html`<span class="chip chip--subtask" data-testid="tool-subtask">
        <span class="chip__spin" aria-hidden="true"></span>${t('chat.subtask_running')}</span>`}
    </div>
    ${said && html`<p class="tool__said" data-testid="tool-said">${said}</p>`}
    ${!waiting &&
    html`<details class="tool__section" data-testid="tool-arguments">
      <summary>${t('chat.arguments')}</summary>
      <p class="small muted">${t('approval.tool')} <code data-testid="tool-id">${call.name}</code></p>
      ${hasArgs && html`<pre class="tool__pre">${prettyJson(call.arguments)}</pre>`}
    </details>`}
    ${output &&
    (running
      ? html`<pre class="tool__pre tool__output" data-testid="tool-output" aria-live="off">${output}</pre>`
      : !result || result.text !== output
        ? html`<details class="tool__section"><summary>${t('chat.output')}</summary>
            <pre class="tool__pre tool__output" data-testid="tool-output">${output}</pre></details>`
        : null)}
    ${result &&
    html`<details class=${`tool__section${result.is_error ? ' tool__section--error' : ''}`} data-testid="tool-result">
      <summary>${result.is_error ? t('approval.technical') : t('chat.result')}</summary>
      <pre class="tool__pre">${result.text || t('chat.result_empty')}</pre>
    </details>`}
    ${call.name === 'generate_image' && status === 'done' && conversationId &&
    html`<img class="tool__picture" data-testid="tool-picture" alt=${String(call.arguments?.prompt || '')}
      src=${`api/pictures/${encodeURIComponent(conversationId)}/${encodeURIComponent(picturePath(call.id))}`} />`}
    ${call.name === 'get_outline' && status === 'done' && result && html`<${OutlineView} text=${result.text} />`}
    ${call.name === 'show_file' && status === 'done' && typeof call.arguments?.path === 'string' &&
    html`<a class="btn btn--small" data-testid="tool-open-file" href=${filesHref(call.arguments.path)}>
      ${t('chat.open_in_files')}</a>`}
    ${running && call.name === 'execute_task' && thread && conversationId &&
    html`<${HelperApprovals} call=${call} thread=${thread} onDecide=${onDecide} conversationId=${conversationId} />`}
    ${waiting &&
    html`<${ApprovalBox} call=${call} approval=${approval} decision=${decision} error=${decisionError} onDecide=${onDecide}
      conversationId=${conversationId} />`}
  </div>`;
}

function AttachmentList({ attachments }) {
  if (!attachments || !attachments.length) return null;
  return html`<ul class="msg__files">
    ${attachments.map(
      (a) => html`<li class="file-chip" data-testid="message-attachment" title=${a.path || a.name}>
        ${String(a.mime || '').startsWith('image/') ? Icon.image() : Icon.file()}
        <span class="file-chip__name">${a.name}</span>
        ${a.size !== undefined && html`<span class="muted">${formatSize(a.size)}</span>`}
      </li>`,
    )}
  </ul>`;
}

// Copy a message's text (falls back to a selection on plain-http addresses).
function CopyButton({ text }) {
  const [state, setState] = useState(null);
  const onCopy = async (e) => {
    const ok = await copyText(text, e.currentTarget);
    setState(ok === false ? 'failed' : 'ok');
    setTimeout(() => setState(null), 2000);
  };
  return html`<button type="button" class="msg-action" onClick=${onCopy} data-testid="message-copy"
      data-copied=${state || undefined} aria-label=${t('chat.copy')} title=${t('chat.copy')}>
    ${state === 'ok' ? Icon.check() : Icon.copy()}<span class="msg-action__label">${state === 'ok' ? t('chat.copied') : t('chat.copy')}</span>
  </button>`;
}

// What the member shared of their view with the message: chips, never text.
// A passage can be long: the chip shows its start, a hover (title) the whole of it.
function chipText(value) {
  const first = String(value).split('\n')[0].trim();
  const short = first.length > 60 ? `${first.slice(0, 59)}…` : first;
  return String(value).includes('\n') ? `${short} …` : short;
}

function ViewChips({ view }) {
  if (!view || !view.length) return null;
  return html`<ul class="view-chips" data-testid="message-view" aria-label=${t('chat.view_shared')}>
    ${view.map((v) => html`<li class="view-chip" data-testid="message-view-chip" title=${v.value}>
      <span class="view-chip__label">${t(`chat.view_${v.label}`) === `chat.view_${v.label}` ? v.label : t(`chat.view_${v.label}`)}</span>
      <span class="view-chip__value">${chipText(v.value)}</span></li>`)}
  </ul>`;
}

function UserMessage({ item, pending, ctx }) {
  const [editing, setEditing] = useState(false);
  const [draft, setDraft] = useState('');
  const stored = item.seq !== null && item.seq !== undefined;
  const canAct = !pending && stored && ctx && ctx.idle && ctx.onResend;
  const save = () => {
    const text = draft.trim();
    if (!text) return;
    setEditing(false);
    ctx.onResend(item.seq, text);
  };
  return html`<div class=${`msg msg--user${pending ? ' is-pending' : ''}`} data-testid="message" data-role="user"
      data-seq=${stored ? item.seq : undefined} data-pending=${pending ? 'true' : undefined}
      title=${item.created_at ? formatDate(item.created_at) : undefined}>
    <div class="msg__bubble">
      ${editing
        ? html`<div class="msg__edit">
            <label class="visually-hidden" for=${`edit-${item.seq}`}>${t('chat.edit_label')}</label>
            <textarea id=${`edit-${item.seq}`} class="input" rows="3" value=${draft} data-testid="message-edit-input"
              onInput=${(e) => setDraft(e.target.value)}
              onKeyDown=${(e) => {
                if (e.key === 'Escape') setEditing(false);
                if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
                  e.preventDefault();
                  save();
                }
              }}></textarea>
            <div class="actions actions--start">
              <button type="button" class="btn btn--primary btn--small" onClick=${save} disabled=${!draft.trim()}
                data-testid="message-edit-send">${t('chat.edit_send')}</button>
              <button type="button" class="btn btn--ghost btn--small" onClick=${() => setEditing(false)}
                data-testid="message-edit-cancel">${t('common.cancel')}</button>
            </div>
          </div>`
        : item.text && html`<p class="msg__text">${item.text}</p>`}
      <${ViewChips} view=${item.view} />
      <${AttachmentList} attachments=${item.attachments} />
      ${item.images_not_seen && html`<p class="msg__note small" data-testid="message-image-not-seen">${t('chat.image_not_seen')}</p>`}
      ${item.videos_not_seen && html`<p class="msg__note small" data-testid="message-video-not-seen">${t('chat.video_not_seen')}</p>`}
    </div>
    ${!pending && !editing &&
    html`<div class="msg__actions">
      ${item.text && html`<${CopyButton} text=${item.text} />`}
      ${canAct &&
      html`<button type="button" class="msg-action" data-testid="message-edit" aria-label=${t('chat.edit')} title=${t('chat.edit')}
        onClick=${() => {
          setDraft(item.text || '');
          setEditing(true);
        }}>${Icon.edit()}<span class="msg-action__label">${t('chat.edit')}</span></button>`}
    </div>`}
  </div>`;
}

// "Answer again" keeps the answers it replaced (the member's message carries them as
// earlier_answers); the answer shown last gets ‹ n/N › to flip back to them.
function Versions({ index, count, onPick }) {
  return html`<div class="msg-versions" data-testid="message-versions" role="group" aria-label=${t('chat.versions_label')}>
    <button type="button" class="msg-action" data-testid="message-version-prev" disabled=${index === 0}
      aria-label=${t('chat.version_prev')} title=${t('chat.version_prev')} onClick=${() => onPick(index - 1)}>‹</button>
    <span class="small" data-testid="message-version-label">${t('chat.version_of', { n: index + 1, count })}</span>
    <button type="button" class="msg-action" data-testid="message-version-next" disabled=${index === count - 1}
      aria-label=${t('chat.version_next')} title=${t('chat.version_next')} onClick=${() => onPick(index + 1)}>›</button>
  </div>`;
}

function AssistantMessage({ item, ctx, streaming }) {
  const calls = item.tool_calls || [];
  const earlier = (ctx.earlier && item.seq !== null && item.seq !== undefined && ctx.earlier[item.seq]) || null;
  const [picked, setPicked] = useState(null);
  if (!item.text && !calls.length) return null;
  const versions = earlier ? [...earlier, item.text] : null;
  const index = versions ? (picked === null || picked >= versions.length ? versions.length - 1 : picked) : 0;
  const current = !versions || index === versions.length - 1;
  const text = versions ? versions[index] : item.text;
  const last = ctx.lastAssistantSeq !== undefined && item.seq === ctx.lastAssistantSeq;
  return html`<div class="msg msg--assistant" data-testid="message" data-role="assistant"
      data-seq=${item.seq === null || item.seq === undefined ? undefined : item.seq}>
    <span class="msg__avatar" aria-hidden="true"><${Logo} size=${28} /></span>
    <div class="msg__body">
      ${text && html`<${Markdown} text=${text} class=${streaming ? 'is-streaming' : ''} />`}
      ${current && item.text && item.interrupted &&
      html`<p class="msg__interrupted muted small" data-testid="message-interrupted" data-code=${item.interrupted}>
        ${t(item.interrupted === 'stopped' ? 'chat.answer_stopped' : 'chat.answer_interrupted')}</p>`}
      ${current && calls.map(
        (call) => html`<${ToolCard} key=${call.id} call=${call} result=${ctx.results[call.id]}
          output=${ctx.thread.outputs[call.id]} approval=${ctx.thread.approvals[call.id]}
          decision=${ctx.thread.decisions[call.id]} decisionError=${ctx.thread.decisionErrors[call.id]}
          subtask=${!!ctx.thread.subtasks[call.id]} onDecide=${ctx.onDecide}
          conversationId=${ctx.conversationId} thread=${ctx.thread} />`,
      )}
      ${!streaming && item.text && item.seq !== undefined && item.seq !== null &&
      html`<div class="msg__actions">
        ${versions && html`<${Versions} index=${index} count=${versions.length} onPick=${setPicked} />`}
        <${CopyButton} text=${text} />
        ${ctx.canSpeak && html`<${ReadAloudButton} text=${text} />`}
        ${last && ctx.idle && ctx.onResend && ctx.lastUserSeq !== undefined &&
        html`<button type="button" class="msg-action" data-testid="message-regenerate" aria-label=${t('chat.regenerate')}
          title=${t('chat.regenerate')} onClick=${() => ctx.onResend(ctx.lastUserSeq)}>
          ${Icon.sparkle()}<span class="msg-action__label">${t('chat.regenerate')}</span></button>`}
      </div>`}
    </div>
  </div>`;
}

function SummaryMessage({ item }) {
  return html`<details class="summary" data-testid="message" data-role="summary">
    <summary>${Icon.info()}<span>${t('chat.summary')}</span></summary>
    <${Markdown} text=${item.text} />
  </details>`;
}

// A tool result whose call is not in view (e.g. the call was compacted away).
function OrphanResult({ item, ctx }) {
  return html`<div class="msg msg--assistant" data-testid="message" data-role="tool">
    <span class="msg__avatar" aria-hidden="true"><${Logo} size=${28} /></span>
    <div class="msg__body">
      <${ToolCard} call=${{ id: item.tool_call_id, name: item.name || t('chat.tool'), arguments: {}, status: item.is_error ? 'error' : 'done' }}
        result=${item} output=${ctx.thread.outputs[item.tool_call_id]} onDecide=${ctx.onDecide} />
    </div>
  </div>`;
}

function renderItem(item, ctx, key, streaming = false) {
  switch (item.role) {
    case 'user':
      return html`<${UserMessage} key=${key} item=${item} ctx=${ctx} />`;
    case 'assistant':
      return html`<${AssistantMessage} key=${key} item=${item} ctx=${ctx} streaming=${streaming} />`;
    case 'summary':
      return html`<${SummaryMessage} key=${key} item=${item} />`;
    case 'tool':
      return ctx.callIds.has(item.tool_call_id) ? null : html`<${OrphanResult} key=${key} item=${item} ctx=${ctx} />`;
    default:
      return null; // system prompts and anything newer are not for display
  }
}

const NOTE_TESTIDS = { error: 'chat-turn-error', stopped: 'chat-turn-stopped' };

// A failure's sentence in the member's language, by its code (see
// skald/core/plain_errors.py); the server's sentence for a code this page lacks.
export function errorSentence(code, fallback) {
  const key = `chat.error.${code}`;
  const text = t(key);
  return text === key ? fallback || t('chat.turn_failed') : text;
}

function noteText(text) {
  if (typeof text === 'string') return text;
  if (text.key.startsWith('chat.error.')) return errorSentence(text.key.slice('chat.error.'.length), text.fallback);
  return t(text.key, text.vars);
}

function Reasoning({ text, done = true }) {
  return html`<details class="reasoning" data-testid="chat-reasoning">
    <summary>${Icon.sparkle()}<span>${done ? t('chat.reasoning_done') : t('chat.reasoning')}</span></summary>
    <pre class="reasoning__text">${text}</pre>
  </details>`;
}

function Note({ entry, ctx }) {
  const text = noteText(entry.text);
  const retry = entry.tone === 'error' && ctx && ctx.idle && ctx.onResend && ctx.lastUserSeq !== undefined;
  const icon = entry.tone === 'command' ? Icon.sparkle() : entry.tone === 'error' ? Icon.alert() : entry.tone === 'stopped' ? Icon.stop() : Icon.info();
  return html`<div class=${`chat-note chat-note--${entry.tone}`} data-testid=${NOTE_TESTIDS[entry.tone] || 'chat-note'}
      data-code=${entry.code || undefined} role=${entry.tone === 'error' ? 'alert' : 'status'}>
    ${icon}<span>${text}</span>
    ${entry.detail &&
    html`<details class="chat-note__detail" data-testid="chat-error-detail">
      <summary>${t('chat.error_details')}</summary><pre class="tool__pre">${entry.detail}</pre>
    </details>`}
    ${retry &&
    html`<button type="button" class="btn btn--secondary btn--small" data-testid="chat-retry"
      onClick=${() => ctx.onResend(ctx.lastUserSeq)}>${t('chat.retry_turn')}</button>`}
  </div>`;
}

// A failure recorded in the history (an answer of nothing, marked interrupted): shown
// as the error note, unless the live note of that turn already follows it.
function FailureRecord({ item, ctx }) {
  return html`<${Note} entry=${{ text: { key: `chat.error.${item.interrupted}` }, tone: 'error', code: item.interrupted }} ctx=${ctx} />`;
}

export function Typing({ simple }) {
  return html`<div class="msg msg--assistant" data-testid="chat-typing">
    <span class="msg__avatar" aria-hidden="true"><${Logo} size=${28} /></span>
    <div class="typing" role="status">
      <span class="typing__dot"></span><span class="typing__dot"></span><span class="typing__dot"></span>
      <span class="visually-hidden">${simple ? t('chat.thinking_simple') : t('chat.thinking')}</span>
    </div>
  </div>`;
}

// Everything shown for one conversation, in order: history, then the tail.
export function Conversation({ thread, running, simple, onDecide, conversationId, onResend, idle, canSpeak }) {
  const items = thread.items || [];
  const turnItems = thread.tail.filter((e) => e.kind === 'turn').flatMap((e) => e.items);
  const results = {};
  const callIds = new Set();
  for (const it of [...items, ...turnItems]) {
    if (it.role === 'tool' && it.tool_call_id) results[it.tool_call_id] = it;
    for (const c of it.tool_calls || []) callIds.add(c.id);
  }
  const stored = items.filter((it) => it.role === 'user' || it.role === 'assistant');
  const lastUser = [...stored].reverse().find((it) => it.role === 'user');
  const lastAssistant = [...stored].reverse().find((it) => it.role === 'assistant' && it.text);
  // Earlier answers go with the last answer with text before the member's next message.
  const earlier = {};
  stored.forEach((it, i) => {
    if (it.role !== 'user' || !(it.earlier_answers || []).length) return;
    let answer = null;
    for (let j = i + 1; j < stored.length && stored[j].role !== 'user'; j += 1) {
      if (stored[j].text) answer = stored[j];
    }
    if (answer) earlier[answer.seq] = it.earlier_answers;
  });
  const ctx = {
    earlier,
    results,
    callIds,
    thread,
    onDecide,
    conversationId,
    onResend,
    canSpeak: !!canSpeak,
    idle: !!idle && !thread.tail.some((e) => e.kind === 'user' || (e.kind === 'turn' && !e.done)),
    lastUserSeq: lastUser ? lastUser.seq : undefined,
    lastAssistantSeq: lastAssistant && (!lastUser || lastAssistant.seq > lastUser.seq) ? lastAssistant.seq : undefined,
  };

  // The typing dots show while the assistant works and no text is streaming.
  const openTurn = [...thread.tail].reverse().find((e) => e.kind === 'turn' && !e.done);
  const last = openTurn && openTurn.items[openTurn.items.length - 1];
  const streamingText = !!(last && last.role === 'assistant' && last.text && !(last.tool_calls || []).length);
  const anyWaiting = Object.values(thread.approvals).length > 0;

  // Notes pinned to a history item (see loadMessages) follow that item.
  // Notes pinned to a history item (see addNote) follow that item; the
  // others stay where they are in the tail.
  const pinned = {};
  const seqs = new Set(items.map((it) => it.seq));
  const isPinned = (e) => e.anchor !== undefined && seqs.has(e.anchor);
  for (const e of thread.tail) {
    if ((e.kind === 'note' || e.kind === 'reasoning') && isPinned(e)) (pinned[e.anchor] = pinned[e.anchor] || []).push(e);
  }

  const isFailure = (it) => it.role === 'assistant' && it.interrupted && it.interrupted !== 'stopped' && !it.text && !(it.tool_calls || []).length;
  const liveNote = (it) => (pinned[it.seq] || []).some((e) => e.tone === 'error');

  return html`<div class="conversation" data-testid="chat-messages">
    ${items.map((it) => [
      isFailure(it) ? (liveNote(it) ? null : html`<${FailureRecord} key=${`f${it.seq}`} item=${it} ctx=${ctx} />`) : renderItem(it, ctx, `s${it.seq}`),
      ...(pinned[it.seq] || []).map((e) =>
        e.kind === 'reasoning' ? html`<${Reasoning} key=${e.key} text=${e.text} />` : html`<${Note} key=${e.key} entry=${e} ctx=${ctx} />`,
      ),
    ])}
    ${thread.tail.map((e) => {
      if (e.kind === 'user') return html`<${UserMessage} key=${e.key} item=${e.item} pending=${e.pending} ctx=${ctx} />`;
      if (e.kind === 'note') return isPinned(e) ? null : html`<${Note} key=${e.key} entry=${e} ctx=${ctx} />`;
      if (e.kind === 'reasoning') return isPinned(e) ? null : html`<${Reasoning} key=${e.key} text=${e.text} />`;
      return html`<div class="turn" key=${e.key} data-testid="chat-turn" data-done=${e.done ? 'true' : 'false'}>
        ${e.reasoning && html`<${Reasoning} text=${e.reasoning} done=${e.done} />`}
        ${e.items.map((it, i) =>
          renderItem(it, ctx, it.key, !e.done && i === e.items.length - 1 && !(it.tool_calls || []).length),
        )}
      </div>`;
    })}
    ${running && !streamingText && !anyWaiting && html`<${Typing} simple=${simple} />`}
  </div>`;
}

// The scrolling area: follows new content while the reader is at the bottom,
// and offers a "jump to latest" button when they scrolled up.
export function ScrollArea({ resetKey, children, label, busy }) {
  const ref = useRef(null);
  const stick = useRef(true);
  const [away, setAway] = useState(false);

  useEffect(() => {
    stick.current = true;
    setAway(false);
    const el = ref.current;
    if (el) el.scrollTop = el.scrollHeight;
  }, [resetKey]);

  useLayoutEffect(() => {
    const el = ref.current;
    if (el && stick.current) el.scrollTop = el.scrollHeight;
  });

  // Content can grow without a render of ours (images, fonts): keep up.
  useEffect(() => {
    const el = ref.current;
    if (!el || typeof ResizeObserver === 'undefined') return undefined;
    const inner = el.firstElementChild;
    const ro = new ResizeObserver(() => {
      if (stick.current) el.scrollTop = el.scrollHeight;
    });
    ro.observe(el); // the area shrinks when the composer grows
    if (inner) ro.observe(inner);
    return () => ro.disconnect();
  }, []);

  const onScroll = () => {
    const el = ref.current;
    if (!el) return;
    const atBottom = el.scrollHeight - el.scrollTop - el.clientHeight < 80;
    stick.current = atBottom;
    if (away === atBottom) setAway(!atBottom);
  };

  const toBottom = () => {
    const el = ref.current;
    if (!el) return;
    stick.current = true;
    setAway(false);
    el.scrollTo({ top: el.scrollHeight, behavior: 'smooth' });
  };

  return html`<div class="chat__thread">
    <div class="chat__scroll" ref=${ref} onScroll=${onScroll} tabindex="0" role="log" aria-label=${label}
        aria-busy=${busy ? 'true' : 'false'} data-testid="chat-scroll">
      <div class="chat__scroll-inner">${children}</div>
    </div>
    ${away &&
    html`<button type="button" class="chat__jump" onClick=${toBottom} data-testid="chat-scroll-bottom">
      ${Icon.down()}<span>${t('chat.jump_latest')}</span>
    </button>`}
  </div>`;
}
