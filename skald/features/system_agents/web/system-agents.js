// #/system-agents — work Skald does on the household's behalf without being asked
// (the nightly conversation review). Everyone sees their own runs (status, time,
// duration, counters); admins also see run health across members (counts, never
// content) and change the settings. Below, the review's plain lines: whom your
// conversations are reviewed for and when they were read, whose reviews you receive.
import { html, useEffect, useState } from '../../js/lib.js';
import { t } from '../../js/i18n.js';
import { get, request } from '../../js/api.js';
import { getState } from '../../js/store.js';
import { ErrorNotice, PageHead, useAction } from '../../js/components/form.js';
import { ReviewLines, when } from './review-lines.js';

const slug = (id) => id.replace(/[^a-z0-9]/g, '_');
const agentName = (id) => t(`sysagents.agent.${slug(id)}`);

function Settings({ agent, onSaved }) {
  const [run, busy, error] = useAction();
  const [enabled, setEnabled] = useState(agent.enabled);
  const [hours, setHours] = useState(String(Math.round(agent.interval_s / 36) / 100));
  const save = () => run(async () => {
    await request('PUT', `/api/system-agents/${agent.id}`, { enabled, interval_s: Math.round(Number(hours) * 3600) });
    await onSaved();
  });
  const now = () => run(() => request('POST', `/api/system-agents/${agent.id}/run`));
  return html`<div class="stack" data-testid="sysagent-settings">
    <label class="check"><input type="checkbox" checked=${enabled} onChange=${(e) => setEnabled(e.target.checked)}
      data-testid="sysagent-enabled" /> ${t('sysagents.enabled')}</label>
    <label class="field"><span>${t('sysagents.every_hours')}</span>
      <input class="input" type="number" min="0.02" step="any" value=${hours} onInput=${(e) => setHours(e.target.value)}
        data-testid="sysagent-interval" /></label>
    <div class="actions actions--start">
      <button type="button" class="btn" disabled=${busy} onClick=${save} data-testid="sysagent-save">${t('common.save')}</button>
      <button type="button" class="btn btn--quiet" disabled=${busy} onClick=${now} data-testid="sysagent-run">${t('sysagents.run_now')}</button>
    </div>
    <${ErrorNotice} error=${error} testid="sysagent-error" />
  </div>`;
}

function Runs({ runs }) {
  if (runs.length === 0) return html`<p class="muted" data-testid="sysagent-no-runs">${t('sysagents.no_runs')}</p>`;
  return html`<ul class="stack" data-testid="sysagent-runs">${runs.map((r) => html`<li class="card" data-testid="sysagent-run"
      data-status=${r.status}>
    <strong>${agentName(r.agent_id)}</strong> · ${t(`sysagents.status_${r.status}`)} · ${when(r.started_at)}
    ${r.duration_ms != null && html` · ${t('sysagents.took', { s: (r.duration_ms / 1000).toFixed(1) })}`}
    <div class="muted small">${Object.entries(r.stats).map(([k, v]) => `${t(`sysagents.count_${k}`)}: ${v}`).join(' · ')}</div>
    ${r.error && html`<div class="muted small" data-testid="sysagent-run-error">${r.error}</div>`}
  </li>`)}</ul>`;
}

export function SystemAgentsPage() {
  const { me } = getState();
  const admin = (me.capabilities || []).includes('admin.users');
  const [data, setData] = useState(null);
  const [error, setError] = useState(null);
  const load = async () => {
    try {
      const [agents, runs, lines, health] = await Promise.all([
        get('/api/system-agents'), get('/api/system-agents/runs'), get('/api/review/lines'),
        admin ? get('/api/system-agents/health') : Promise.resolve(null),
      ]);
      setData({ agents, runs, lines, health });
    } catch (e) {
      setError(e);
    }
  };
  useEffect(() => {
    load();
  }, []);
  let body;
  if (error) body = html`<${ErrorNotice} error=${error} testid="sysagents-error" />`;
  else if (!data) body = html`<p class="muted">${t('common.loading')}</p>`;
  else {
    body = html`<div class="stack stack--lg">
      ${data.agents.map((a) => html`<section class="card stack" data-testid="sysagent" data-agent=${a.id}>
        <h2 class="card__title">${agentName(a.id)}</h2>
        <p class="muted">${t(`sysagents.about.${slug(a.id)}`)}</p>
        <p class="small">${a.enabled ? t('sysagents.every', { hours: Math.round(a.interval_s / 36) / 100 }) : t('sysagents.off')}</p>
        ${admin && html`<${Settings} agent=${a} onSaved=${load} />`}
      </section>`)}
      <section class="stack"><h2 class="card__title">${t('sysagents.your_runs')}</h2><${Runs} runs=${data.runs} /></section>
      ${data.health && html`<section class="stack" data-testid="sysagent-health"><h2 class="card__title">${t('sysagents.health')}</h2>
        <ul class="stack">${data.health.map((h) => html`<li class="small" data-testid="sysagent-health-row">${t('sysagents.health_line', {
          name: h.username, agent: agentName(h.agent_id), runs: h.runs, failures: h.failures, at: when(h.last_run_at) })}</li>`)}</ul>
      </section>`}
      <${ReviewLines} lines=${data.lines} />
    </div>`;
  }
  return html`<div class="page" data-testid="sysagents-page">
    <${PageHead} title=${t('sysagents.title')} lead=${t('sysagents.lead')} />
    ${body}
  </div>`;
}
