// #/admin/plugins (capability plugin.manage): the household's plugins.
// Each card: a health dot (ok, off, failed to load, a hook failing, waiting for a
// restart), the switch (in force at once), Configure (a form made from the plugin's
// settings struct), Access (who may use it) and, for one installed here, Remove.
// Above the list: install from a wheel (and the wheels of its dependencies).
import { html, useState, useEffect } from '../../js/lib.js';
import { t } from '../../js/i18n.js';
import { request } from '../../js/api.js';
import { ErrorNotice, Notice, useAction, PageHead } from '../../js/components/form.js';
import { Dialog } from '../../js/components/dialog.js';

const enc = encodeURIComponent;
const base = (id) => `api/plugins/${enc(id)}`;

function Dot({ status }) {
  const bad = status !== 'ok';
  return html`<span class=${`health ${bad ? 'health--bad' : 'health--ok'}`} data-testid="plugin-status"
    data-status=${status} title=${t(`plugins.status_${status}`)}>
    <span class="health__status"><span class="dot"></span>${t(`plugins.status_${status}`)}</span></span>`;
}

function input(field, value, set) {
  const id = `plugin-${field.section}-${field.name}`;
  const common = { id, 'data-testid': `plugin-setting-${field.name}` };
  if (field.kind === 'boolean') {
    return html`<input type="checkbox" ...${common} checked=${!!value} onChange=${(e) => set(e.target.checked)} />`;
  }
  if (field.kind === 'choice') {
    return html`<select class="input" ...${common} value=${value} onChange=${(e) => set(field.choices[e.target.selectedIndex])}>
      ${field.choices.map((c) => html`<option value=${c}>${String(c)}</option>`)}</select>`;
  }
  if (field.kind === 'integer' || field.kind === 'number') {
    return html`<input class="input" type="number" step=${field.kind === 'integer' ? 1 : 'any'} ...${common}
      value=${value} onInput=${(e) => set(e.target.value === '' ? null : Number(e.target.value))} />`;
  }
  if (field.kind === 'text') {
    return html`<input class="input" type="text" ...${common} value=${value ?? ''} onInput=${(e) => set(e.target.value)} />`;
  }
  return html`<code ...${common}>${JSON.stringify(value)}</code>`;
}

function Configure({ plugin, onClose }) {
  const [view, setView] = useState(null);
  const [values, setValues] = useState({});
  const [run, busy, error] = useAction();
  const [saved, setSaved] = useState(false);
  useEffect(() => {
    request('GET', `${base(plugin.id)}/settings`).then((v) => { setView(v); setValues(v.values); });
  }, [plugin.id]);
  const set = (section, name) => (v) => setValues({ ...values, [section]: { ...values[section], [name]: v } });
  const save = (e) => {
    e.preventDefault();
    run(async () => {
      const v = await request('PUT', `${base(plugin.id)}/settings`, { values });
      setView(v); setValues(v.values); setSaved(true);
    });
  };
  return html`<${Dialog} title=${t('plugins.configure_title', { id: plugin.id })} onClose=${onClose} testid="plugin-settings">
    ${!view ? html`<p class="muted">${t('common.loading')}</p>` : html`<form class="stack" onSubmit=${save}>
      ${view.fields.length === 0 && html`<p class="muted">${t('plugins.no_settings')}</p>`}
      ${view.fields.map((f) => html`<div class="field">
        <label class="field__label" for=${`plugin-${f.section}-${f.name}`}>${f.label}</label>
        ${input(f, (values[f.section] || {})[f.name], set(f.section, f.name))}
      </div>`)}
      <${ErrorNotice} error=${error} testid="plugin-settings-error" />
      ${saved && html`<${Notice} kind="success" testid="plugin-settings-saved">${t('common.saved')}<//>`}
      <div class="actions">
        <button type="submit" class="btn btn--primary" disabled=${busy} data-testid="plugin-settings-save">${t('common.save')}</button>
      </div>
    </form>`}
  <//>`;
}

function Access({ plugin, onClose }) {
  const [rows, setRows] = useState(null);
  const [run, , error] = useAction();
  const load = () => request('GET', `${base(plugin.id)}/access`).then(setRows);
  useEffect(() => { load(); }, [plugin.id]);
  const flip = (row) => run(async () => {
    await request('PUT', `${base(plugin.id)}/access/${enc(row.user_id)}`, { granted: !row.granted });
    await load();
  });
  return html`<${Dialog} title=${t('plugins.access_title', { id: plugin.id })} onClose=${onClose} testid="plugin-access">
    <p class="muted small">${t('plugins.access_hint')}</p>
    <${ErrorNotice} error=${error} testid="plugin-access-error" />
    ${!rows ? html`<p class="muted">${t('common.loading')}</p>` : html`<ul class="plain-list">
      ${rows.map((r) => html`<li class="check" data-testid="plugin-access-row" data-user=${r.username}>
        <input type="checkbox" id=${`grant-${r.user_id}`} checked=${r.granted || r.implicit} disabled=${r.implicit}
          onChange=${() => flip(r)} data-testid="plugin-access-toggle" />
        <label for=${`grant-${r.user_id}`}>${r.display_name || r.username}
          <span class="muted small"> ${r.implicit ? t('plugins.access_implicit') : r.role}</span></label>
      </li>`)}
    </ul>`}
  <//>`;
}

function Install({ onDone }) {
  const [run, busy, error] = useAction();
  const [done, setDone] = useState(null);
  const submit = (e) => {
    e.preventDefault();
    const files = e.target.querySelector('input[type=file]').files;
    if (!files.length) return;
    const form = new FormData();
    for (const f of files) form.append('data', f);
    run(async () => {
      const out = await request('POST', 'api/plugins', form);
      setDone(out);
      e.target.reset();
      await onDone();
    });
  };
  return html`<form class="card stack" onSubmit=${submit} data-testid="plugin-install">
    <h2 class="card__title">${t('plugins.install')}</h2>
    <p class="muted small">${t('plugins.install_hint')}</p>
    <input type="file" accept=".whl" multiple data-testid="plugin-install-file" />
    <${ErrorNotice} error=${error} testid="plugin-install-error" />
    ${done && html`<${Notice} kind="success" testid="plugin-installed">${t('plugins.installed', { id: done.id, version: done.version })}<//>`}
    <div class="actions"><button type="submit" class="btn btn--primary" disabled=${busy}
      data-testid="plugin-install-submit">${t('plugins.install_button')}</button></div>
  </form>`;
}

function Card({ p, reload, open }) {
  const [run, busy, error] = useAction();
  const toggle = () => run(async () => {
    await request('PUT', `${base(p.id)}/enabled`, { enabled: !p.enabled });
    await reload();
  });
  const remove = () => run(async () => {
    if (!window.confirm(t('plugins.remove_confirm', { id: p.id }))) return;
    await request('DELETE', base(p.id));
    await reload();
  });
  return html`<li class="card stack" data-testid="plugin-card" data-plugin=${p.id}>
    <div class="row">
      <strong>${p.id}</strong>
      <span class="muted small">${p.version || ''} · ${t(`plugins.source_${p.source || 'gone'}`)}</span>
      <${Dot} status=${p.status} />
    </div>
    ${p.error && html`<p class="muted small" data-testid="plugin-error"><code>${p.error}</code></p>`}
    <div class="check">
      <input type="checkbox" id=${`plugin-on-${p.id}`} checked=${p.enabled} disabled=${busy}
        onChange=${toggle} data-testid="plugin-enabled" />
      <label for=${`plugin-on-${p.id}`}>${t('plugins.enabled')}</label>
    </div>
    <${ErrorNotice} error=${error} testid="plugin-action-error" />
    <div class="actions">
      ${p.settings && html`<button type="button" class="btn btn--secondary btn--small" data-testid="plugin-configure"
        onClick=${() => open({ kind: 'settings', p })}>${t('plugins.configure')}</button>`}
      <button type="button" class="btn btn--secondary btn--small" data-testid="plugin-access-open"
        onClick=${() => open({ kind: 'access', p })}>${t('plugins.access', { count: p.granted })}</button>
      ${p.installed && html`<button type="button" class="btn btn--secondary btn--small" data-testid="plugin-remove"
        onClick=${remove}>${t('plugins.remove')}</button>`}
    </div>
  </li>`;
}

export function PluginsPage() {
  const [list, setList] = useState(null);
  const [loadError, setLoadError] = useState(null);
  const [dialog, setDialog] = useState(null);
  const reload = () => request('GET', 'api/plugins').then(setList, setLoadError);
  useEffect(() => { reload(); }, []);
  let body;
  if (loadError && !list) body = html`<${ErrorNotice} error=${loadError} testid="plugins-error" />`;
  else if (!list) body = html`<p class="muted">${t('common.loading')}</p>`;
  else if (list.length === 0) body = html`<p class="muted" data-testid="plugins-empty">${t('plugins.none')}</p>`;
  else body = html`<ul class="plain-list stack" data-testid="plugins-list">
    ${list.map((p) => html`<${Card} key=${p.id} p=${p} reload=${reload} open=${setDialog} />`)}</ul>`;
  return html`<div class="page stack stack--lg" data-testid="plugins-page">
    <${PageHead} title=${t('plugins.title')} lead=${t('plugins.lead')} />
    <${Install} onDone=${reload} />
    ${body}
    ${dialog && dialog.kind === 'settings' && html`<${Configure} plugin=${dialog.p} onClose=${() => setDialog(null)} />`}
    ${dialog && dialog.kind === 'access' && html`<${Access} plugin=${dialog.p} onClose=${() => { setDialog(null); reload(); }} />`}
  </div>`;
}
