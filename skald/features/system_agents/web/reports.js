// #/reports — what the system agents wrote for this member (the nightly review of a
// child's conversations, for the people who look after them; memory upkeep's findings
// in the notes, with changes to accept). A list, newest first,
// the unread ones marked; opening one shows it whole and marks it read for this
// member only (the other parent still sees it unread). `?r=<id>` (a notification's
// link) opens that one. The server decides who may read what, at every request.
// Accepting a suggested change never changes a note: it puts an approval request in
// the reader's Inbox (in a conversation of their own), decided like any other.
import { html, useEffect, useState } from '../../js/lib.js';
import { t, formatDate } from '../../js/i18n.js';
import { get, post } from '../../js/api.js';
import { getState } from '../../js/store.js';
import { Icon } from '../../js/components/icons.js';
import { ErrorNotice, PageHead, useAction } from '../../js/components/form.js';
import { Markdown } from '../../js/components/markdown.js';

function when(iso) {
  if (!iso) return t('reports.beginning');
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  return `${formatDate(iso)} ${d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' })}`;
}

// The navigation's count follows at once (shell.js listens for this event).
function countsChanged() {
  window.dispatchEvent(new Event('skald:counts'));
}

const slug = (id) => id.replace(/[^a-z0-9]/g, '_');

// Who wrote it and about what: a person and a window (the review), or the agent alone.
function aboutLine(report) {
  if (!report.subject_name && !report.period_start && !report.period_end) {
    return t('reports.by', { agent: t(`sysagents.agent.${slug(report.producer)}`), at: when(report.created_at) });
  }
  return t('reports.about', {
    name: report.subject_name || '?',
    from: when(report.period_start),
    to: when(report.period_end),
  });
}

function SuggestionItem({ reportId, item }) {
  const [run, busy, error] = useAction();
  const [state, setState] = useState(item);
  const accept = () => run(async () => {
    const done = await post(`/api/reports/${encodeURIComponent(reportId)}/suggestions/${item.n}/accept`);
    setState({ ...state, accepted: true, conversation_id: done.conversation_id });
  });
  return html`<li class="stack" data-testid="suggestion" data-kind=${state.kind}>
    <div><strong>${t(`reports.kind_${state.kind}`)}</strong> <code>${state.note}</code></div>
    <p>${state.text}</p>
    ${state.accepted
      ? html`<p class="muted small" data-testid="suggestion-accepted">${state.conversation_id
        ? html`${t('reports.accepted_yours')} <a href=${`#/?c=${encodeURIComponent(state.conversation_id)}`}>${t('reports.open_conversation')}</a>`
        : t('reports.accepted')}</p>`
      : html`<div><button type="button" class="btn" disabled=${busy} onClick=${accept}
          data-testid="suggestion-accept">${t('reports.accept')}</button></div>`}
    ${error && html`<${ErrorNotice} error=${error} testid="suggestion-error" />`}
  </li>`;
}

function Suggestions({ report }) {
  if (!report.suggestions || report.suggestions.length === 0) return null;
  return html`<section class="stack" data-testid="suggestions">
    <h3>${t('reports.suggestions')}</h3>
    <p class="muted small">${t('reports.accept_hint')}</p>
    <ul class="stack">${report.suggestions.map((s) => html`<${SuggestionItem} reportId=${report.id} item=${s} />`)}</ul>
  </section>`;
}

function ReportView({ id, onBack }) {
  const [report, setReport] = useState(null);
  const [error, setError] = useState(null);
  useEffect(() => {
    get(`/api/reports/${encodeURIComponent(id)}`).then((r) => {
      setReport(r);
      countsChanged();
    }, setError);
  }, [id]);
  if (error) return html`<${ErrorNotice} error=${error} testid="report-error" />`;
  if (!report) return html`<p class="muted">${t('common.loading')}</p>`;
  return html`<article class="card stack" data-testid="report" data-severity=${report.severity}>
    <button type="button" class="btn btn--quiet" onClick=${onBack} data-testid="report-back">${t('reports.back')}</button>
    <h2 class="card__title" data-testid="report-title">${report.title}</h2>
    <p class="muted small" data-testid="report-meta">${aboutLine(report)}</p>
    <${Markdown} text=${report.body} class="report__body" />
    <${Suggestions} report=${report} />
  </article>`;
}

function ReportItem({ report, onOpen }) {
  return html`<li class="inbox-item" data-testid="report-item" data-read=${report.read ? 'true' : 'false'}
      data-severity=${report.severity}>
    <div class="inbox-item__head">
      <span class="inbox-item__icon">${report.severity === 'alert' ? Icon.alert() : Icon.info()}</span>
      <div class="inbox-item__title">
        <button type="button" class="link-button" onClick=${() => onOpen(report.id)} data-testid="report-open">
          ${!report.read && html`<span class="visually-hidden">${t('reports.unread')}</span>`}
          <strong>${report.title}</strong></button>
        <span class="muted small">${aboutLine(report)}</span>
      </div>
      ${!report.read && html`<span class="badge-count" data-testid="report-unread">${t('reports.new')}</span>`}
    </div>
    <p class="muted">${report.summary}</p>
  </li>`;
}

export function ReportsPage() {
  const [reports, setReports] = useState(null);
  const [error, setError] = useState(null);
  const [open, setOpen] = useState(getState().route.query.get('r'));
  const load = () => get('/api/reports').then(setReports, setError);
  useEffect(() => {
    load();
  }, [open]);
  let body;
  if (open) body = html`<${ReportView} id=${open} onBack=${() => setOpen(null)} />`;
  else if (error) body = html`<${ErrorNotice} error=${error} testid="reports-error" />`;
  else if (!reports) body = html`<p class="muted">${t('common.loading')}</p>`;
  else if (reports.length === 0) body = html`<p class="muted" data-testid="reports-empty">${t('reports.empty')}</p>`;
  else body = html`<ul class="inbox-list" data-testid="reports-list">${reports.map((r) => html`<${ReportItem} report=${r} onOpen=${setOpen} />`)}</ul>`;
  return html`<div class="page" data-testid="reports-page">
    <${PageHead} title=${t('reports.title')} lead=${t('reports.lead')} />
    ${body}
  </div>`;
}
