// #/requests — the member's own requests to models (time, model, provider, tokens,
// cost, duration, outcome, which conversation), newest first; #/requests/<id> one of
// them. Metadata only: what was said is never here (GET /api/requests...).
import { html, useEffect, useState } from '../../js/lib.js';
import { t } from '../../js/i18n.js';
import { request } from '../../js/api.js';
import { useViewDescription } from '../../js/store.js';
import { ErrorNotice, PageHead } from '../../js/components/form.js';

function when(at) {
  return new Date(at * 1000).toLocaleString([], { dateStyle: 'short', timeStyle: 'medium' });
}

function cost(c) {
  return c === null || c === undefined ? t('requests.no_cost') : `$${c.toFixed(4)}`;
}

function Detail({ id }) {
  const [item, setItem] = useState(null);
  const [payload, setPayload] = useState(null);
  const [error, setError] = useState(null);
  useEffect(() => {
    request('GET', `api/requests/${encodeURIComponent(id)}`).then(setItem, setError);
    request('GET', `api/requests/${encodeURIComponent(id)}/payload`).then(setPayload, () => setPayload(false));
  }, [id]);
  // The eye names the request open here: metadata only, never what was sent or received.
  useViewDescription(
    item && [
      { label: 'request', value: item.id },
      { label: 'request time', value: new Date(item.at * 1000).toISOString() },
      { label: 'request model', value: `${item.model} (${item.provider})` },
      { label: 'request outcome', value: item.outcome },
    ],
  );
  return html`<div class="page" data-testid="request-detail">
    <${PageHead} title=${t('requests.detail_title')} lead=${t('requests.detail_lead')} />
    <${ErrorNotice} error=${error} testid="request-detail-error" />
    ${item && html`<section class="card"><dl class="request-fields">
      <dt>${t('requests.time')}</dt><dd>${when(item.at)}</dd>
      <dt>${t('requests.model')}</dt><dd data-testid="request-model">${item.model}</dd>
      <dt>${t('requests.provider')}</dt><dd data-testid="request-provider">${item.provider}</dd>
      <dt>${t('requests.tokens')}</dt><dd>${t('requests.tokens_in_out', { input: item.input_tokens, output: item.output_tokens })}${item.estimated ? ` ${t('requests.estimated')}` : ''}</dd>
      <dt>${t('requests.cost')}</dt><dd>${cost(item.cost_usd)}</dd>
      <dt>${t('requests.duration')}</dt><dd>${(item.duration_ms / 1000).toFixed(1)} s</dd>
      <dt>${t('requests.outcome')}</dt><dd data-testid="request-outcome">${t(`requests.outcome_${item.outcome}`)}</dd>
      <dt>${t('requests.origin')}</dt><dd>${item.origin ? html`<a href=${`#/?c=${encodeURIComponent(item.origin)}`}>${t('requests.open_conversation')}</a>` : '—'}</dd>
    </dl></section>`}
    ${payload === false && html`<p class="muted small" data-testid="request-no-payload">${t('requests.no_payload')}</p>`}
    ${payload && html`<section class="card" data-testid="request-payload">
      <details><summary>${t('requests.sent')}</summary><pre class="tool__pre">${JSON.stringify({ headers: payload.headers, body: payload.request }, null, 2)}</pre></details>
      <details><summary>${t('requests.received')}</summary><pre class="tool__pre">${JSON.stringify(payload.response, null, 2)}</pre></details>
    </section>`}
    <a href="#/requests">${t('requests.back')}</a>
  </div>`;
}

// Keep the full requests and answers: off by default; in the member's own encrypted
// database only; turning it off deletes what was kept.
function KeepPayloads() {
  const [settings, setSettings] = useState(null);
  const [error, setError] = useState(null);
  useEffect(() => {
    request('GET', 'api/requests/settings').then(setSettings, setError);
  }, []);
  if (!settings) return html`<${ErrorNotice} error=${error} />`;
  const flip = (e) =>
    request('PUT', 'api/requests/settings', { ...settings, keep_payloads: e.target.checked }).then(setSettings, setError);
  return html`<section class="card" data-testid="requests-keep">
    <label><input type="checkbox" checked=${settings.keep_payloads} onChange=${flip} data-testid="requests-keep-toggle" />
      ${' '}${t('requests.keep')}</label>
    <p class="muted small">${t('requests.keep_hint', { days: settings.max_days })}</p>
    <${ErrorNotice} error=${error} />
  </section>`;
}

export function RequestsPage({ requestId }) {
  const [items, setItems] = useState(null);
  const [error, setError] = useState(null);
  const [more, setMore] = useState(false);
  const load = (before) =>
    request('GET', `api/requests?limit=50${before ? `&before=${before}` : ''}`).then((page) => {
      setItems((old) => (before ? [...(old || []), ...page] : page));
      setMore(page.length === 50);
    }, setError);
  useEffect(() => {
    if (!requestId) load(null);
  }, [requestId]);
  if (requestId) return html`<${Detail} id=${requestId} />`;
  return html`<div class="page" data-testid="requests-page">
    <${PageHead} title=${t('nav.requests')} lead=${t('requests.lead')} />
    <${KeepPayloads} />
    <${ErrorNotice} error=${error} />
    ${items && items.length === 0 && html`<p class="muted">${t('requests.none')}</p>`}
    ${items && items.length > 0 && html`<ul class="inbox-list">
      ${items.map((r) => html`<li class="inbox-item" data-testid="request-row" data-id=${r.id} data-outcome=${r.outcome}>
        <a href=${`#/requests/${r.id}`}><strong>${r.model}</strong> · ${r.provider}</a>
        <span class="muted small">${when(r.at)} · ${t('requests.tokens_in_out', { input: r.input_tokens, output: r.output_tokens })} · ${cost(r.cost_usd)} · ${(r.duration_ms / 1000).toFixed(1)} s · ${t(`requests.outcome_${r.outcome}`)}</span>
      </li>`)}
    </ul>`}
    ${more && html`<button type="button" class="btn btn--secondary" onClick=${() => load(items[items.length - 1].id)}>${t('requests.more')}</button>`}
  </div>`;
}
