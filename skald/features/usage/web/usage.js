// #/usage — turns, tokens and cost over a day, a week or a month, per member and per
// model (counts, never content: GET /api/usage/stats); the member's own limits
// (GET /api/usage/limits); for administrators, everyone's figures and the caps
// (GET/PUT/DELETE /api/usage/caps/...). The Overview shows `UsageCharts` too.
import { html, useEffect, useState } from '../../js/lib.js';
import { t } from '../../js/i18n.js';
import { request } from '../../js/api.js';
import { getState } from '../../js/store.js';
import { ErrorNotice, PageHead, useAction } from '../../js/components/form.js';
import { Chart } from './charts.js';

const PERIODS = ['day', 'week', 'month'];
const MEASURES = ['turns', 'tokens', 'cost'];
const CAP_FIELDS = ['turns_day', 'tokens_day', 'cost_day', 'turns_month', 'tokens_month', 'cost_month'];

function amount(measure, value) {
  return measure === 'cost' ? `$${Number(value).toFixed(2)}` : Number(value).toLocaleString();
}

function Toggle({ value, options, label, onChange, testid }) {
  return html`<div class="usage-toggle" role="group" aria-label=${label} data-testid=${testid}>
    ${options.map(
      (o) => html`<button type="button" class=${`btn btn--small ${o === value ? 'btn--primary' : 'btn--secondary'}`}
        aria-pressed=${o === value} data-value=${o} onClick=${() => onChange(o)}>${t(`usage.${o}`)}</button>`,
    )}
  </div>`;
}

export function isAdmin() {
  const { me } = getState();
  return (me.capabilities || []).includes('admin.users');
}

// The charts with their controls: a member's own figures, or (admins) everyone's.
export function UsageCharts({ compact = false }) {
  const admin = isAdmin();
  const [period, setPeriod] = useState('week');
  const [measure, setMeasure] = useState('tokens');
  const [everyone, setEveryone] = useState(admin);
  const [stats, setStats] = useState(null);
  const [error, setError] = useState(null);
  useEffect(() => {
    request('GET', `api/usage/stats?period=${period}&everyone=${everyone}`).then(setStats, setError);
  }, [period, everyone]);
  return html`<section class="card" data-testid="usage-charts" data-loaded=${stats ? 'yes' : 'no'}
      data-period=${stats ? stats.range : undefined}>
    <h2 class="card__title">${everyone ? t('usage.title_household') : t('usage.title_mine')}</h2>
    <p class="muted small">${t('usage.counts_only')}</p>
    <div class="usage-controls">
      <${Toggle} value=${period} options=${PERIODS} label=${t('usage.period')} onChange=${setPeriod} testid="usage-period" />
      <${Toggle} value=${measure} options=${MEASURES} label=${t('usage.measure')} onChange=${setMeasure} testid="usage-measure" />
      ${admin && html`<label class="small"><input type="checkbox" checked=${everyone} data-testid="usage-everyone"
        onChange=${(e) => setEveryone(e.target.checked)} /> ${t('usage.everyone')}</label>`}
    </div>
    <${ErrorNotice} error=${error} />
    ${stats && html`<div class="usage-totals" data-testid="usage-totals">
        ${MEASURES.map((m) => html`<div data-measure=${m}><span class="muted small">${t(`usage.${m}`)}</span><strong>${amount(m, stats[m])}</strong></div>`)}
      </div>
      <h3 class="small">${t('usage.per_member')}</h3>
      <${Chart} stats=${stats} of="members" measure=${measure} testid="usage-chart-members" />
      ${!compact && html`<h3 class="small">${t('usage.per_model')}</h3>
        <${Chart} stats=${stats} of="models" measure=${measure === 'turns' ? 'requests' : measure} testid="usage-chart-models" />`}`}
  </section>`;
}

function Limits() {
  const [limits, setLimits] = useState(null);
  useEffect(() => {
    request('GET', 'api/usage/limits').then(setLimits, () => setLimits(null));
  }, []);
  if (!limits) return null;
  const rows = [];
  for (const period of ['day', 'month']) {
    for (const m of MEASURES) {
      const cap = limits.caps ? limits.caps[`${m}_${period}`] : 0;
      if (cap > 0) rows.push({ period, m, cap, used: limits[period][m], resets: limits[period].resets_at });
    }
  }
  return html`<section class="card" data-testid="usage-limits">
    <h2 class="card__title">${t('usage.limits_title')}</h2>
    ${rows.length === 0
      ? html`<p class="muted">${t('usage.no_limits')}</p>`
      : html`<ul>${rows.map(
          (r) => html`<li data-testid="usage-limit">${t(`usage.limit_${r.period}`, {
            used: amount(r.m, r.used), cap: amount(r.m, r.cap), what: t(`usage.${r.m}`),
            resets: new Date(r.resets).toLocaleString([], { dateStyle: 'medium', timeStyle: 'short' }),
          })}</li>`,
        )}</ul>`}
  </section>`;
}

function CapsRow({ row, onSaved }) {
  const [values, setValues] = useState({ ...row.caps });
  const [run, busy, error] = useAction();
  const save = () => run(async () => {
    const body = Object.fromEntries(CAP_FIELDS.map((f) => [f, Number(values[f]) || 0]));
    await request('PUT', `api/usage/caps/${row.scope}/${encodeURIComponent(row.target)}`, body);
    await onSaved();
  });
  const remove = () => run(async () => {
    await request('DELETE', `api/usage/caps/${row.scope}/${encodeURIComponent(row.target)}`);
    await onSaved();
  });
  return html`<tr data-testid="usage-caps-row" data-target=${row.target}>
    <td>${row.label}</td>
    ${CAP_FIELDS.map((f) => html`<td><input type="number" min="0" step=${f.startsWith('cost') ? '0.01' : '1'}
      aria-label=${`${row.label}: ${t(`usage.cap_${f}`)}`} data-field=${f} value=${values[f]}
      onInput=${(e) => setValues({ ...values, [f]: e.target.value })} /></td>`)}
    <td><button type="button" class="btn btn--small btn--primary" disabled=${busy} onClick=${save} data-testid="usage-caps-save">${t('usage.save')}</button>
      ${row.saved && html`<button type="button" class="btn btn--small btn--secondary" disabled=${busy} onClick=${remove}>${t('usage.remove')}</button>`}
      <${ErrorNotice} error=${error} /></td>
  </tr>`;
}

// Administrators: caps per role and per member (a member's own replace their role's).
function CapsEditor() {
  const [rows, setRows] = useState(null);
  const load = async () => {
    const [caps, roles, users] = await Promise.all([
      request('GET', 'api/usage/caps'), request('GET', 'api/roles').catch(() => []), request('GET', 'api/users'),
    ]);
    const zero = Object.fromEntries(CAP_FIELDS.map((f) => [f, 0]));
    const find = (scope, target) => caps.find((c) => c.scope === scope && c.target === target);
    setRows([
      ...roles.map((r) => ({ scope: 'role', target: r.name, label: `${t('usage.role')}: ${r.display_name}` })),
      ...users.map((u) => ({ scope: 'user', target: u.id, label: u.display_name || u.username })),
    ].map((r) => {
      const found = find(r.scope, r.target);
      return { ...r, caps: found ? found.caps : zero, saved: Boolean(found) };
    }));
  };
  useEffect(() => { load().catch(() => setRows([])); }, []);
  if (!rows) return null;
  return html`<section class="card" data-testid="usage-caps">
    <h2 class="card__title">${t('usage.caps_title')}</h2>
    <p class="muted small">${t('usage.caps_lead')}</p>
    <div class="usage-table-wrap"><table class="usage-caps">
      <thead><tr><th></th>${CAP_FIELDS.map((f) => html`<th>${t(`usage.cap_${f}`)}</th>`)}<th></th></tr></thead>
      <tbody>${rows.map((r) => html`<${CapsRow} key=${`${r.scope}:${r.target}:${r.saved}`} row=${r} onSaved=${load} />`)}</tbody>
    </table></div>
  </section>`;
}

export function UsagePage() {
  return html`<div class="page" data-testid="usage-page">
    <${PageHead} title=${t('nav.usage')} lead=${t('usage.lead')} />
    <${Limits} />
    <${UsageCharts} />
    ${isAdmin() && html`<${CapsEditor} />`}
  </div>`;
}
