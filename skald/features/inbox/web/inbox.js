// #/inbox — what the assistant is waiting for: tool calls to approve and
// questions to answer, across all of the member's conversations. Built for a
// phone: one column of cards, big buttons, arguments folded away.
import { html, useState } from '../../js/lib.js';
import { t, formatDate } from '../../js/i18n.js';
import { api } from '../../js/api.js';
import { Icon } from '../../js/components/icons.js';
import { ErrorNotice, errorText, PageHead } from '../../js/components/form.js';
import { ApprovalSummary, ApprovalButtons, reasonText } from '../../js/components/approval.js';
import { useInboxList, loadInbox, dropItem } from '../../js/inbox.js';

function chatHref(item) {
  return `#/?c=${encodeURIComponent(item.conversation_id)}`;
}

function ItemHead({ item }) {
  return html`<div class="inbox-item__head">
    <span class="inbox-item__icon">${item.kind === 'question' ? Icon.info() : Icon.shield()}</span>
    <div class="inbox-item__title">
      ${item.kind === 'question'
        ? html`<strong>${t('inbox.question_title')}</strong>`
        : html`<strong>${t('inbox.approval_title')}</strong>`}
      <a class="inbox-item__conv small" href=${chatHref(item)} data-testid="inbox-open-chat">
        ${Icon.chat()}<span>${item.conversation_title || t('chat.untitled')}</span></a>
    </div>
    ${item.created_at && html`<time class="muted small" datetime=${item.created_at}>${formatDate(item.created_at)}</time>`}
  </div>
  ${item.origin && html`<p class="small muted" data-testid="inbox-item-origin" data-origin=${item.origin}>
    ${t(`inbox.origin_${item.origin}`, { title: item.origin_title || '' })}${item.expires_at
      ? html` · <span data-testid="inbox-item-expires">${t('inbox.expires', { when: formatDate(item.expires_at) })}</span>`
      : ''}</p>`}`;
}

function ApprovalItem({ item, onDone }) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);
  const decide = async (decision, bypass) => {
    setBusy(true);
    setError(null);
    try {
      if (decision === 'approve') await api.inboxApprove(item.id, bypass);
      else await api.inboxReject(item.id);
      onDone(item.id);
    } catch (e) {
      setError(e);
      setBusy(false);
    }
  };
  return html`<li class="inbox-item" data-testid="inbox-item" data-item-id=${item.id} data-kind="approval"
      data-conversation-id=${item.conversation_id} data-tool=${item.tool}>
    <${ItemHead} item=${item} />
    ${item.reason && html`<p class="inbox-item__reason" data-testid="inbox-item-reason">${reasonText(item.reason)}</p>`}
    <${ApprovalSummary} tool=${item.tool} args=${item.arguments} preview=${item.preview} prefix="inbox-item" />
    ${error && html`<p class="approval__error" role="alert" data-testid="inbox-item-error">${errorText(error)}</p>`}
    <${ApprovalButtons} disabled=${busy} onDecide=${decide} prefix="inbox" />
  </li>`;
}

function QuestionItem({ item, onDone }) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);
  const [text, setText] = useState('');
  const answer = async (value) => {
    if (!value || !value.trim()) return;
    setBusy(true);
    setError(null);
    try {
      await api.inboxAnswer(item.id, value.trim());
      onDone(item.id);
    } catch (e) {
      setError(e);
      setBusy(false);
    }
  };
  const inputId = `inbox-answer-${item.id}`;
  return html`<li class="inbox-item inbox-item--question" data-testid="inbox-item" data-item-id=${item.id}
      data-kind="question" data-conversation-id=${item.conversation_id}>
    <${ItemHead} item=${item} />
    ${item.tool && item.tool.startsWith('mcp__') && html`<p class="small muted" data-testid="inbox-item-connector">
      ${t('inbox.from_connector', { name: item.tool.slice(5) })}</p>`}
    ${item.reason && html`<p class="inbox-item__question" data-testid="inbox-item-question">${item.reason}</p>`}
    ${item.choices && item.choices.length > 0 &&
    html`<div class="inbox-item__choices" data-testid="inbox-item-choices">
      ${item.choices.map(
        (c) => html`<button type="button" class="btn btn--secondary" disabled=${busy} data-testid="inbox-choice"
          data-choice=${c} onClick=${() => answer(c)}>${c}</button>`,
      )}
    </div>`}
    <form class="inbox-item__answer" onSubmit=${(e) => {
      e.preventDefault();
      answer(text);
    }}>
      <label class="visually-hidden" for=${inputId}>${t('inbox.answer_label')}</label>
      <input id=${inputId} class="input" value=${text} placeholder=${t('inbox.answer_placeholder')}
        onInput=${(e) => setText(e.target.value)} disabled=${busy} data-testid="inbox-answer-input" />
      <button type="submit" class="btn btn--primary" disabled=${busy || !text.trim()} data-testid="inbox-answer-send">
        ${Icon.send()}<span>${t('inbox.answer_send')}</span></button>
    </form>
    ${error && html`<p class="approval__error" role="alert" data-testid="inbox-item-error">${errorText(error)}</p>`}
  </li>`;
}

export function InboxPage() {
  const inbox = useInboxList();
  const items = inbox.items;
  const onDone = (id) => {
    dropItem(id);
    loadInbox();
  };
  let body;
  if (items === null && !inbox.error) {
    body = html`<div class="inbox-empty" data-testid="inbox-loading"><span class="spinner" aria-hidden="true"></span>
      <span class="visually-hidden">${t('common.loading')}</span></div>`;
  } else if (items === null) {
    body = html`<${ErrorNotice} error=${inbox.error} testid="inbox-error" />
      <button type="button" class="btn btn--secondary" onClick=${() => loadInbox()}>${t('chat.retry')}</button>`;
  } else if (items.length === 0) {
    body = html`<div class="inbox-empty" data-testid="inbox-empty">
      <span class="inbox-empty__icon">${Icon.check()}</span><p>${t('inbox.empty')}</p></div>`;
  } else {
    body = html`<ul class="inbox-list" data-testid="inbox-list">
      ${items.map((item) =>
        item.kind === 'question'
          ? html`<${QuestionItem} key=${item.id} item=${item} onDone=${onDone} />`
          : html`<${ApprovalItem} key=${item.id} item=${item} onDone=${onDone} />`,
      )}
    </ul>`;
  }
  return html`<section class="page page--narrow inbox-page" data-testid="inbox-page" data-count=${items ? items.length : undefined}>
    <${PageHead} title=${t('nav.inbox')} lead=${t('inbox.lead')} />
    ${items !== null && inbox.error && html`<${ErrorNotice} error=${inbox.error} testid="inbox-error" />`}
    ${body}
  </section>`;
}
