// #/connectors — the connectors (MCP servers) the member may use: switch them
// on or off, sign in (secret fields are masked and never come back from the
// server: the page only learns which are set), see their tools and, for
// administrators, the last error and who is granted each one.
// #/admin/marketplace — administrators browse the feed, install and update.
// Built for a phone: one column of cards, folded details.
import { html, useState, useEffect, useCallback } from '../../js/lib.js';
import { t, formatDate } from '../../js/i18n.js';
import { request } from '../../js/api.js';
import { Icon } from '../../js/components/icons.js';
import { ErrorNotice, errorText, useAction, useRead, PageHead } from '../../js/components/form.js';
import { getState } from '../../js/store.js';
import { Dialog } from '../../js/components/dialog.js';
import { parseHash, navigate } from '../../js/router.js';
import { drafts, getChat } from '../../js/chat.js';
import { AddServer } from './connector-add.js';

const enc = encodeURIComponent;

function isAdmin() {
  const me = getState().me;
  return !!(me && (me.capabilities || []).includes('admin.connectors'));
}

function StateBadge({ state }) {
  return html`<span class=${`badge badge--${state === 'running' ? 'ok' : state === 'failed' ? 'error' : 'muted'}`}
    data-testid="connector-state">${t(`connectors.state_${state}`)}</span>`;
}

// The service's sign-in opens in a popup, so the page keeps its place (it reads the
// cards again every few seconds). The service sends the popup to the callback, which
// sends it to `#/connectors?signed_in=<name>&popup=1`, where it closes itself: its
// opener cannot (our cross-origin-opener-policy cut the link when it left for the
// service). A blocked popup: the whole page goes to the service and comes back.
function OAuthSignIn({ connector, onChanged }) {
  const [run, busy, error] = useAction();
  const start = () => run(async () => {
    // Opened in the click itself: one opened after an await may be blocked.
    const popup = window.open('', 'skald-sign-in', 'popup,width=520,height=720');
    try {
      const flow = await request('POST', `api/connectors/${enc(connector.name)}/oauth/start?popup=${popup ? 'true' : 'false'}`);
      if (popup) popup.location.href = flow.url;
      else window.location.assign(flow.url);
    } catch (e) {
      if (popup) popup.close();
      throw e;
    }
  });
  const signOut = () => run(async () => {
    await request('DELETE', `api/connectors/${enc(connector.name)}/secrets`);
    onChanged(await request('GET', `api/connectors/${enc(connector.name)}`));
  });
  return html`<div class="connector__signin" data-testid="connector-oauth">
    <p class="small muted">${connector.signed_in ? t('connectors.oauth_signed_in') : t('connectors.oauth_lead')}</p>
    <div class="row">
      <button type="button" class="btn btn--primary" disabled=${busy} onClick=${start}
        data-testid="connector-oauth-start">${t('connectors.oauth_start')}</button>
      ${connector.signed_in && html`<button type="button" class="btn btn--secondary" disabled=${busy}
        onClick=${signOut} data-testid="connector-sign-out">${t('connectors.sign_out')}</button>`}
    </div>
    ${error && html`<p class="approval__error" role="alert">${errorText(error)}</p>`}
  </div>`;
}

// QR/device sign-in: the connector's own `login_status` tool (called by the server on
// the member's instance) answers a QR image, a code or a URL, or "signed in as ...".
// The dialog asks again every few seconds until the connector reports signed in.
const DEVICE_POLL_MS = 3000;

function DeviceStatus({ status }) {
  if (!status) return html`<p class="small muted">${t('connectors.device_waiting')}</p>`;
  return html`<div data-testid="connector-device-status" data-signed-in=${String(status.signed_in)}>
    ${status.images.map((img) => html`<img class="connector__qr" alt=${t('connectors.device_qr_alt')}
      data-testid="connector-device-qr" src=${`data:${img.mime_type};base64,${img.data}`} />`)}
    ${status.text && html`<p class="small connector__device-text" data-testid="connector-device-text">${status.text}</p>`}
  </div>`;
}

function DeviceSignIn({ connector }) {
  const [open, setOpen] = useState(false);
  const [status, setStatus] = useState(null);
  const [pollError, setPollError] = useState(null);
  const [run, busy, error] = useAction();
  const url = (what) => `api/connectors/${enc(connector.name)}/${what}`;
  useEffect(() => {
    if (!open) return undefined;
    let stopped = false;
    let timer = null;
    const poll = async () => {
      try {
        const got = await request('POST', url('login-status'));
        if (stopped) return;
        setStatus(got);
        setPollError(null);
        if (got.signed_in) return; // done: stop asking
      } catch (e) {
        if (stopped) return;
        setPollError(e);
      }
      timer = setTimeout(poll, DEVICE_POLL_MS);
    };
    poll();
    return () => { stopped = true; if (timer) clearTimeout(timer); };
  }, [open, connector.name]);
  const signOut = () => run(async () => { setStatus(await request('POST', url('logout'))); });
  const close = () => { setOpen(false); setStatus(null); setPollError(null); };
  return html`<div class="connector__signin" data-testid="connector-device">
    <p class="small muted">${connector.active ? t('connectors.device_lead') : t('connectors.device_needs_on')}</p>
    <div class="row">
      <button type="button" class="btn btn--primary" disabled=${busy || !connector.active}
        onClick=${() => setOpen(true)} data-testid="connector-device-start">${t('connectors.device_start')}</button>
      <button type="button" class="btn btn--secondary" disabled=${busy || !connector.active}
        onClick=${signOut} data-testid="connector-device-sign-out">${t('connectors.sign_out')}</button>
    </div>
    ${status && !open && html`<p class="small" data-testid="connector-device-result">${status.text}</p>`}
    ${error && html`<p class="approval__error" role="alert">${errorText(error)}</p>`}
    ${open && html`<${Dialog} title=${t('connectors.device_title', { name: connector.display_name })}
        onClose=${close} testid="connector-device-dialog">
      <${DeviceStatus} status=${status} />
      ${pollError && html`<p class="approval__error" role="alert">${errorText(pollError)}</p>`}
      <div class="row">
        <button type="button" class="btn btn--secondary" onClick=${close}
          data-testid="connector-device-done">${status && status.signed_in ? t('common.close') : t('common.cancel')}</button>
      </div>
    <//>`}
  </div>`;
}

function SignIn({ connector, onChanged }) {
  const [values, setValues] = useState({});
  const [checked, setChecked] = useState(null);
  const [run, busy, error] = useAction();
  if (connector.auth === 'oauth2') return html`<${OAuthSignIn} connector=${connector} onChanged=${onChanged} />`;
  if (connector.auth === 'qr') return html`<${DeviceSignIn} connector=${connector} />`;
  if (!connector.secret_fields.length) return null;
  const save = (e) => {
    e.preventDefault();
    const filled = Object.fromEntries(Object.entries(values).filter(([, v]) => v));
    if (!Object.keys(filled).length) return;
    run(async () => {
      onChanged(await request('PUT', `api/connectors/${enc(connector.name)}/secrets`, { values: filled }));
      setValues({});
      setChecked(null);
    });
  };
  // The connector's own check (`verify`), run with what is typed, nothing saved.
  const test = () => {
    const filled = Object.fromEntries(Object.entries(values).filter(([, v]) => v));
    run(async () => {
      setChecked(null);
      setChecked(await request('POST', `api/connectors/${enc(connector.name)}/verify`, { values: filled }));
    });
  };
  const signOut = () => run(async () => {
    await request('DELETE', `api/connectors/${enc(connector.name)}/secrets`);
    onChanged(await request('GET', `api/connectors/${enc(connector.name)}`));
  });
  return html`<form class="connector__signin" onSubmit=${save} data-testid="connector-signin">
    <p class="small muted">${connector.signed_in ? t('connectors.signed_in') : t('connectors.needs_sign_in')}</p>
    ${connector.secret_fields.map((f) => html`<label class="field">
      <span class="field__label">${f.label}${connector.secrets_set.includes(f.name) ? ` (${t('connectors.secret_set')})` : ''}</span>
      <input class="input" type="password" autocomplete="off" value=${values[f.name] || ''}
        data-testid="connector-secret" data-field=${f.name}
        onInput=${(e) => setValues({ ...values, [f.name]: e.target.value })} />
    </label>`)}
    <div class="row">
      ${connector.verifies && html`<button type="button" class="btn btn--secondary" disabled=${busy}
        onClick=${test} data-testid="connector-secret-test">${t('connectors.verify_test')}</button>`}
      <button type="submit" class="btn btn--primary" disabled=${busy} data-testid="connector-secret-save">${t('common.save')}</button>
      ${connector.secrets_set.length > 0 && html`<button type="button" class="btn btn--secondary" disabled=${busy}
        onClick=${signOut} data-testid="connector-sign-out">${t('connectors.sign_out')}</button>`}
    </div>
    ${checked && html`<p class=${checked.ok ? 'small' : 'approval__error'} role="status" data-testid="connector-secret-checked"
      data-ok=${String(checked.ok)}>${checked.ok ? t('connectors.verify_ok') : t('connectors.verify_failed')}${checked.message ? `: ${checked.message}` : ''}</p>`}
    ${connector.verifies && html`<p class="small muted">${t('connectors.verify_lead')}</p>`}
    ${error && html`<p class="approval__error" role="alert">${errorText(error)}</p>`}
  </form>`;
}

function Grants({ connector }) {
  const [users, setUsers] = useState(null);
  const [granted, setGranted] = useState([]);
  const [run, busy, error] = useAction();
  const load = useCallback(() => run(async () => {
    setUsers(await request('GET', 'api/users'));
    setGranted((await request('GET', `api/connectors/${enc(connector.name)}/grants`)).users);
  }), [connector.name]);
  useEffect(() => { load(); }, [load]);
  const toggle = (user) => run(async () => {
    const on = granted.includes(user.id);
    await request(on ? 'DELETE' : 'PUT', `api/connectors/${enc(connector.name)}/grants/${enc(user.id)}`);
    setGranted(on ? granted.filter((id) => id !== user.id) : [...granted, user.id]);
  });
  const [byDefault, setByDefault] = useState(connector.grant_by_default !== false);
  const toggleDefault = (e) => {
    const value = e.target.checked;
    run(async () => {
      await request('PUT', `api/connectors/${enc(connector.name)}/grant-by-default`, { grant_by_default: value });
      setByDefault(value);
    });
  };
  return html`<details class="tool__section" data-testid="connector-grants">
    <summary>${t('connectors.grants')}</summary>
    <p class="small muted">${t('connectors.grants_lead')}</p>
    <label class="check small"><input type="checkbox" checked=${byDefault} disabled=${busy}
      onChange=${toggleDefault} data-testid="connector-grant-by-default" />
      <span>${t('connectors.grant_by_default')}</span></label>
    ${users && html`<ul class="plain-list">${users.map((u) => html`<li><label>
      <input type="checkbox" checked=${granted.includes(u.id)} disabled=${busy} onChange=${() => toggle(u)}
        data-testid="connector-grant" data-user=${u.username} />
      ${' '}${u.display_name || u.username}</label></li>`)}</ul>`}
    ${error && html`<p class="approval__error" role="alert">${errorText(error)}</p>`}
  </details>`;
}

// On the People page (a member's edit dialog, administrators with admin.connectors):
// the installed connectors, ticked where that member is granted. Unticking stops the
// member's copy at once (the server does it before answering).
export function UserConnectorGrants({ user }) {
  const [rows, setRows] = useState(null);
  const [run, busy, error] = useAction();
  useEffect(() => {
    if (!isAdmin()) return;
    run(async () => {
      const list = await request('GET', 'api/connectors');
      const out = [];
      for (const c of list) {
        const grants = await request('GET', `api/connectors/${enc(c.name)}/grants`);
        out.push({ name: c.name, label: c.display_name, on: grants.users.includes(user.id) });
      }
      setRows(out);
    });
  }, [user.id]);
  if (!isAdmin() || !rows || rows.length === 0) return null;
  const toggle = (row) => run(async () => {
    await request(row.on ? 'DELETE' : 'PUT', `api/connectors/${enc(row.name)}/grants/${enc(user.id)}`);
    setRows(rows.map((r) => (r.name === row.name ? { ...r, on: !r.on } : r)));
  });
  return html`<fieldset class="stack" data-testid="user-connector-grants">
    <legend>${t('connectors.grants_for_user')}</legend>
    ${rows.map((r) => html`<label><input type="checkbox" checked=${r.on} disabled=${busy}
      onChange=${() => toggle(r)} data-testid="user-connector-grant" data-connector=${r.name} /> ${r.label}</label>`)}
    ${error && html`<p class="approval__error" role="alert">${errorText(error)}</p>`}
  </fieldset>`;
}

// What the server offers to read (the assistant reads them with
// connector_read_resource): resources and URI templates.
function Resources({ connector }) {
  const [run, busy, error] = useAction();
  const [shown, setShown] = useState(null);
  const listed = connector.resources || [];
  const all = [...listed, ...(connector.templates || [])];
  if (all.length === 0) return null;
  const open = (uri) => run(async () => {
    setShown(await request('GET', `api/connectors/${enc(connector.name)}/resource?uri=${enc(uri)}`));
  });
  return html`<details class="tool__section" data-testid="connector-resources">
    <summary>${t('connectors.resources', { count: all.length })}</summary>
    <ul class="plain-list">${all.map((r) => html`<li data-testid="connector-resource" data-uri=${r.uri}>
      ${listed.includes(r)
        ? html`<button type="button" class="btn btn--ghost btn--small" disabled=${busy} onClick=${() => open(r.uri)}
            data-testid="connector-resource-open"><strong>${r.title || r.name}</strong></button>`
        : html`<strong>${r.title || r.name}</strong>`} <code class="small">${r.uri}</code>
      ${(r.description || r.mime_type) && html`<br /><span class="small muted">${[r.description, r.mime_type].filter(Boolean).join(' · ')}</span>`}
      ${shown && shown.uri === r.uri && html`<div data-testid="connector-resource-content">
        ${shown.text !== null && html`<pre class="tool__pre">${shown.text}</pre>`}
        ${shown.image && html`<img alt=${r.title || r.name} src=${`data:${shown.mime_type};base64,${shown.image}`} />`}
        ${shown.text === null && !shown.image && html`<p class="small muted">${shown.mime_type}, ${shown.size} B</p>`}
      </div>`}</li>`)}</ul>
    ${error && html`<p class="approval__error" role="alert">${errorText(error)}</p>`}
  </details>`;
}

// A prompt of the server: filled in, it goes into the chat composer (the
// member reads it and sends it, or not).
function PromptItem({ connector, prompt }) {
  const [run, busy, error] = useAction();
  const [values, setValues] = useState({});
  const use = (e) => {
    e.preventDefault();
    run(async () => {
      const url = `api/connectors/${enc(connector.name)}/prompts/${enc(prompt.name)}`;
      const filled = Object.fromEntries(Object.entries(values).filter(([, v]) => v !== ''));
      const got = await request('POST', url, { arguments: filled });
      drafts.set(getChat().activeId || '', got.text);
      navigate('/');
    });
  };
  return html`<li data-testid="connector-prompt" data-prompt=${prompt.name}>
    <form onSubmit=${use}>
      <strong>${prompt.title || prompt.name}</strong>
      ${prompt.description && html`<br /><span class="small muted">${prompt.description}</span>`}
      ${prompt.arguments.map((a) => html`<label class="field">
        <span class="field__label">${a.name}${a.required ? ' *' : ''}</span>
        <input class="input" name=${a.name} required=${a.required} placeholder=${a.description}
          data-testid="connector-prompt-arg" data-arg=${a.name}
          value=${values[a.name] || ''} onInput=${(e) => setValues({ ...values, [a.name]: e.target.value })} />
      </label>`)}
      <button type="submit" class="btn btn--secondary" disabled=${busy} data-testid="connector-prompt-use">
        ${t('connectors.prompt_use')}</button>
      ${error && html`<p class="approval__error" role="alert">${errorText(error)}</p>`}
    </form>
  </li>`;
}

function Prompts({ connector }) {
  const prompts = connector.prompts || [];
  if (prompts.length === 0) return null;
  return html`<details class="tool__section" data-testid="connector-prompts">
    <summary>${t('connectors.prompts', { count: prompts.length })}</summary>
    <ul class="plain-list">${prompts.map((p) => html`<${PromptItem} key=${p.name} connector=${connector} prompt=${p} />`)}</ul>
  </details>`;
}

function ConnectorCard({ connector, onChanged }) {
  const [run, busy, error] = useAction();
  const toggle = () => run(async () => {
    const action = connector.active ? 'deactivate' : 'activate';
    onChanged(await request('POST', `api/connectors/${enc(connector.name)}/${action}`));
  });
  const retry = () => run(async () => {
    onChanged(await request('POST', `api/connectors/${enc(connector.name)}/retry`));
  });
  return html`<li class="inbox-item connector" data-testid="connector" data-name=${connector.name}>
    <div class="inbox-item__head">
      <span class="inbox-item__icon" aria-hidden="true">${connector.icon || Icon.tool()}</span>
      <div class="inbox-item__title"><strong>${connector.display_name}</strong>
        <span class="small muted"> v${connector.version}</span></div>
      ${connector.active && html`<${StateBadge} state=${connector.state} />`}
    </div>
    <p class="small">${connector.description}</p>
    ${connector.reach && html`<p class="small muted" data-testid="connector-reach">${t(`marketplace.reach_${connector.reach}`)}</p>`}
    <div class="row">
      <button type="button" class=${`btn ${connector.active ? 'btn--secondary' : 'btn--primary'}`} disabled=${busy}
        onClick=${toggle} data-testid="connector-toggle">
        ${connector.active ? t('connectors.deactivate') : t('connectors.activate')}</button>
      ${connector.active && connector.state === 'failed' && html`<button type="button" class="btn btn--primary"
        disabled=${busy} onClick=${retry} data-testid="connector-retry">${t('connectors.retry')}</button>`}
    </div>
    <${SignIn} connector=${connector} onChanged=${onChanged} />
    ${connector.tools.length > 0 && html`<details class="tool__section" data-testid="connector-tools">
      <summary>${t('connectors.tools', { count: connector.tools.length })}</summary>
      <ul class="plain-list">${connector.tools.map((tool) => html`<li data-testid="connector-tool" data-tool=${tool.name}>
        <code>${tool.name}</code><br /><span class="small muted">${tool.description}</span></li>`)}</ul>
    </details>`}
    <${Resources} connector=${connector} />
    <${Prompts} connector=${connector} />
    ${connector.events && connector.events.length > 0 && html`<details class="tool__section" data-testid="connector-events">
      <summary>${t('connectors.events', { count: connector.events.length })}</summary>
      <ul class="plain-list small">${connector.events.slice().reverse().map((e) => html`<li data-kind=${e.kind}>
        <time class="muted">${formatDate(new Date(e.at * 1000).toISOString())}</time> ${e.text}</li>`)}</ul>
    </details>`}
    ${(connector.last_error || connector.last_stderr) && html`<details class="tool__section" data-testid="connector-error">
      <summary>${t('connectors.last_error')}</summary>
      <p class="small">${connector.last_error}</p>
      ${connector.last_stderr && html`<pre class="tool__pre">${connector.last_stderr}</pre>`}
    </details>`}
    ${isAdmin() && html`<${Grants} connector=${connector} />`}
    ${error && html`<p class="approval__error" role="alert">${errorText(error)}</p>`}
  </li>`;
}

// The end of a sign-in in a popup (see OAuthSignIn): nothing more to show there.
function closeSignInPopup() {
  const query = parseHash(location.hash).query;
  if (query.get('popup') === '1' && query.get('signed_in')) window.close();
}

export function ConnectorsPage() {
  useEffect(closeSignInPopup, []);
  const [items, error, load, setItems] = useRead('api/connectors');
  useEffect(() => {
    load();
    // Instances start in the background: look again while one is starting.
    const timer = setInterval(load, 3000);
    return () => clearInterval(timer);
  }, [load]);
  const replace = (c) => setItems((list) => (list || []).map((x) => (x.name === c.name ? c : x)));
  return html`<section class="page page--narrow" data-testid="connectors-page">
    <${PageHead} title=${t('nav.connectors')} lead=${t('connectors.lead')} />
    ${error && html`<${ErrorNotice} error=${error} testid="connectors-error" />`}
    ${isAdmin() && html`<${AddServer} onDone=${load} />`}
    ${items && items.length === 0 && html`<p class="muted" data-testid="connectors-empty">${t('connectors.empty')}</p>`}
    ${items && html`<ul class="inbox-list">${items.map((c) => html`<${ConnectorCard} key=${c.name} connector=${c} onChanged=${replace} />`)}</ul>`}
  </section>`;
}

// An item's name and description in the member's language (the feed's `i18n` map),
// English when the feed has no translation (docs/dev/connectors.md).
function localized(item) {
  const mine = (item.i18n || {})[getState().locale] || {};
  return { name: mine.display_name || item.display_name, description: mine.description || item.description };
}

function MarketItem({ item, onDone }) {
  const [run, busy, error] = useAction();
  const text = localized(item);
  const act = (what) => run(async () => {
    await request('POST', `api/marketplace/${enc(item.folder)}/${what}`);
    onDone();
  });
  const remove = () => run(async () => {
    await request('DELETE', `api/connector-items/${enc(item.folder)}`);
    onDone();
  });
  const own = item.source === 'household';
  return html`<li class="inbox-item" data-testid="market-item" data-folder=${item.folder}>
    <div class="inbox-item__head">
      <span class="inbox-item__icon" aria-hidden="true">${item.icon || Icon.tool()}</span>
      <div class="inbox-item__title"><strong data-testid="market-name">${text.name}</strong>
        <span class="small muted"> v${item.version}</span></div>
    </div>
    <p class="small" data-testid="market-description">${text.description}</p>
    <p class="small muted" data-testid="market-source" data-source=${item.source}>${own || item.source === 'shipped'
      ? t(`marketplace.source_${item.source}`) : t('marketplace.source_feed', { feed: item.source })}</p>
    ${item.refused
      ? html`<p class="approval__error" data-testid="market-refused">${t('marketplace.refused')}: ${item.refused}</p>`
      : html`<p class="small muted">${item.scope === 'household' ? t('marketplace.scope_household') : t('marketplace.scope_personal')}
          ${' · '}${t(`marketplace.auth_${item.auth}`)}</p>
        ${item.reach && html`<p class="small" data-testid="market-reach">${t(`marketplace.reach_${item.reach}`)}</p>`}
        <div class="row">
          ${item.installed_version === null
            ? html`<button type="button" class="btn btn--primary" disabled=${busy} onClick=${() => act('install')}
                data-testid="market-install">${t('marketplace.install')}</button>`
            : item.update
              ? html`<button type="button" class="btn btn--primary" disabled=${busy} onClick=${() => act('update')}
                  data-testid="market-update">${t('marketplace.update', { version: item.version })}</button>`
              : html`<span class="small" data-testid="market-installed">${t('marketplace.installed')}</span>`}
          ${own && html`<button type="button" class="btn btn--ghost" disabled=${busy} onClick=${remove}
            data-testid="market-remove">${t('marketplace.remove')}</button>`}
        </div>`}
    ${busy && html`<p class="small muted">${t('marketplace.installing')}</p>`}
    ${error && html`<p class="approval__error" role="alert" data-testid="market-error">${errorText(error)}</p>`}
  </li>`;
}

export function MarketplacePage() {
  const [items, error, load] = useRead('api/marketplace');
  useEffect(() => { load(); }, [load]);
  // Tools for developers (the MCP test server) stay out of a household's list until
  // asked for; an installed one is always listed, so it can be updated.
  const [dev, setDev] = useState(false);
  const forDev = (i) => i.audience === 'developers' && i.installed_version === null;
  const hidden = items ? items.filter(forDev).length : 0;
  const shown = items ? items.filter((i) => dev || !forDev(i)) : [];
  return html`<section class="page page--narrow" data-testid="marketplace-page">
    <${PageHead} title=${t('nav.marketplace')} lead=${t('marketplace.lead')} />
    ${error && html`<${ErrorNotice} error=${error} testid="marketplace-error" />`}
    <${AddServer} onDone=${load} />
    ${items === null && !error && html`<span class="spinner" aria-hidden="true"></span>`}
    ${items && html`<ul class="inbox-list">${shown.map((i) => html`<${MarketItem} key=${`${i.source}/${i.folder}`} item=${i} onDone=${load} />`)}</ul>`}
    ${hidden > 0 &&
    html`<label class="check small">
      <input type="checkbox" checked=${dev} onChange=${(e) => setDev(e.target.checked)} data-testid="market-developers" />
      <span>${t('marketplace.show_developers', { n: hidden })}</span></label>`}
  </section>`;
}
