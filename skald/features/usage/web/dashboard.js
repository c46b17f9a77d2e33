// The Overview's dashboard (shown by the chat feature's #/overview when this module
// loads): the box's health with what to do when a line is not green (admins), the
// usage charts (counts only), what waits in the Inbox, running tasks, unread reports, and, for a
// household that has not used the assistant yet, the getting-started guide.
import { html, useEffect, useState } from '../../js/lib.js';
import { t } from '../../js/i18n.js';
import { get, request } from '../../js/api.js';
import { getState } from '../../js/store.js';
import { DoctorWords } from '../../js/components/form.js';
import { UsageCharts } from './usage.js';

function caps() {
  return new Set(getState().me.capabilities || []);
}

// Disk, Docker, backups and the last drill, updates: the doctor's checks, each with its fix.
// The headline is in the member's language; the doctor's own words (English, as
// `skald doctor` prints them) wait under "Technical details", as on the setup checklist.
function Health() {
  const [lines, setLines] = useState(null);
  useEffect(() => {
    request('GET', 'api/dashboard/health').then(setLines, () => setLines([]));
  }, []);
  if (!lines) return null;
  return html`<section class="card" data-testid="dash-health">
    <h2 class="card__title">${t('dash.health_title')}</h2>
    <ul class="checklist__items">
      ${lines.map(
        (l) => html`<li class=${`checklist__item checklist__item--${l.status}`} data-testid="dash-health-line"
            data-name=${l.name} data-status=${l.status}>
          <strong>${t(`dash.health_${l.name}`)}: ${t(`dash.status_${l.status}`)}</strong>
          <${DoctorWords} text=${l.finding} />
          ${l.status !== 'ok' && l.status !== 'skip' && l.fix &&
          html`<span class="small">${t('dash.what_to_do')} <code>${l.fix}</code></span>`}
        </li>`,
      )}
    </ul>
  </section>`;
}

function Waiting() {
  const has = caps();
  const [inbox, setInbox] = useState(null);
  const [tasks, setTasks] = useState(null);
  const [reports, setReports] = useState(0);
  // Reports only where the navigation shows them (the server's list of pages for this
  // member), counted by the same API as the entry's badge.
  const reportsPage = (getState().pages || []).find((p) => p.path === '/reports' && p.count);
  useEffect(() => {
    if (reportsPage) get(reportsPage.count).then((r) => setReports(r.count || 0), () => setReports(0));
    if (has.has('inbox')) request('GET', 'api/inbox').then(setInbox, () => setInbox([]));
    if (has.has('schedule.use')) request('GET', 'api/schedule/tasks').then(setTasks, () => setTasks([]));
  }, []);
  const running = (tasks || []).filter((x) => x.state === 'running' || x.state === 'queued');
  return html`<section class="card" data-testid="dash-waiting">
    <h2 class="card__title">${t('dash.waiting_title')}</h2>
    <ul>
      ${inbox && html`<li data-testid="dash-inbox" data-count=${inbox.length}>
        <a href="#/inbox">${t('dash.inbox_count', { count: inbox.length })}</a></li>`}
      ${tasks && html`<li data-testid="dash-tasks" data-count=${running.length}>
        <a href="#/tasks">${t('dash.tasks_count', { count: running.length })}</a>
        ${running.length > 0 && html`<ul>${running.map((x) => html`<li>${x.title}</li>`)}</ul>`}</li>`}
      ${reports > 0 && html`<li data-testid="dash-reports" data-count=${reports}>
        <a href="#/reports">${t('dash.reports_count', { count: reports })}</a></li>`}
    </ul>
  </section>`;
}

// For a fresh household (no conversation yet): the first steps, each a link.
function Guide() {
  const [fresh, setFresh] = useState(false);
  useEffect(() => {
    if (!caps().has('chat')) return; // no chat, no conversations to count
    request('GET', 'api/conversations').then((c) => setFresh(c.length === 0), () => setFresh(false));
  }, []);
  if (!fresh) return null;
  const admin = caps().has('admin.system');
  const steps = [
    admin && { key: 'models', href: '#/admin/models' },
    admin && { key: 'users', href: '#/admin/users' },
    admin && { key: 'backups', href: '#/admin/backups' },
    { key: 'chat', href: '#/' },
    { key: 'privacy', href: '#/privacy' },
  ].filter(Boolean);
  return html`<section class="card card--accent" data-testid="dash-guide">
    <h2 class="card__title">${t('dash.guide_title')}</h2>
    <ol>${steps.map((s) => html`<li><a href=${s.href}>${t(`dash.guide_${s.key}`)}</a></li>`)}</ol>
  </section>`;
}

export function Dashboard() {
  return html`<div class="dashboard" data-testid="dashboard">
    <${Guide} />
    ${caps().has('admin.system') && html`<${Health} />`}
    <${UsageCharts} compact=${true} />
    <${Waiting} />
  </div>`;
}
