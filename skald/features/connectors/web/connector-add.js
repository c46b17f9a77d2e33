// "Add a server" (administrators, issue 23 item 6): a connector by npm package,
// PyPI package, command line or URL, with environment variables, headers and
// {SECRET:name} templates, household or personal. Test starts it on the server
// (a throwaway instance) and lists its tools; Save stores it in the household's
// own feed and installs it. Secret values typed for a test are sent once and
// never shown back.
import { html, useState } from '../../js/lib.js';
import { t } from '../../js/i18n.js';
import { request } from '../../js/api.js';
import { errorText, useAction } from '../../js/components/form.js';
import { Dialog } from '../../js/components/dialog.js';

const KINDS = ['npm', 'pip', 'command', 'url'];
const SECRET = /\{SECRET:([A-Za-z_][A-Za-z0-9_]{0,63})\}/g;

// "NAME=value" lines (env) or "Name: value" lines (headers) into an object.
function pairs(text, sep) {
  const out = {};
  for (const line of text.split('\n')) {
    const at = line.indexOf(sep);
    if (at > 0) out[line.slice(0, at).trim()] = line.slice(at + 1).trim();
  }
  return out;
}

function itemOf(f) {
  const item = { name: f.name.trim(), kind: f.kind, scope: f.scope, env: pairs(f.env, '=') };
  if (f.display_name.trim()) item.display_name = f.display_name.trim();
  if (f.kind === 'npm' || f.kind === 'pip') { item.package = f.package.trim(); item.args = f.args; }
  if (f.kind === 'pip' && f.module.trim()) item.module = f.module.trim();
  if (f.kind === 'command') item.command = f.command;
  if (f.kind === 'url') { item.url = f.url.trim(); item.headers = pairs(f.headers, ':'); }
  return item;
}

function secretsIn(f) {
  const text = [f.args, f.command, f.url, f.env, f.headers].join('\n');
  return [...new Set([...text.matchAll(SECRET)].map((m) => m[1]))];
}

function Field({ label, children }) {
  return html`<label class="field"><span class="field__label">${label}</span>${children}</label>`;
}

function TrialResult({ result }) {
  if (!result) return null;
  if (!result.ok) {
    return html`<div class="approval__error" role="alert" data-testid="connector-add-failed">
      <p>${t('connector_add.test_failed')}: ${result.error}</p>
      ${result.stderr.length > 0 && html`<pre class="tool__pre">${result.stderr.join('\n')}</pre>`}
    </div>`;
  }
  return html`<div data-testid="connector-add-tools">
    <p class="small">${t('connector_add.test_ok', { count: result.tools.length })}</p>
    <ul class="plain-list">${result.tools.map((tool) => html`<li data-testid="connector-add-tool" data-tool=${tool.name}>
      <code>${tool.name}</code><br /><span class="small muted">${tool.description}</span></li>`)}</ul>
  </div>`;
}

function AddForm({ onClose, onSaved }) {
  const [f, setF] = useState({
    name: '', display_name: '', kind: 'npm', package: '', module: '', args: '', command: '',
    url: '', env: '', headers: '', scope: 'personal',
  });
  const [secrets, setSecrets] = useState({});
  const [result, setResult] = useState(null);
  const [run, busy, error] = useAction();
  const set = (key) => (e) => { setF({ ...f, [key]: e.target.value }); setResult(null); };
  const names = secretsIn(f);
  const test = () => run(async () => {
    setResult(null);
    const given = Object.fromEntries(names.filter((n) => secrets[n]).map((n) => [n, secrets[n]]));
    setResult(await request('POST', 'api/connector-items/test', { item: itemOf(f), secrets: given }));
  });
  const save = (e) => {
    e.preventDefault();
    run(async () => {
      await request('POST', 'api/connector-items', itemOf(f));
      onSaved();
    });
  };
  return html`<form class="stack" onSubmit=${save} data-testid="connector-add-form">
    <p class="small muted">${t('connector_add.lead')}</p>
    <${Field} label=${t('connector_add.kind')}>
      <select class="input" value=${f.kind} onChange=${set('kind')} data-testid="connector-add-kind">
        ${KINDS.map((k) => html`<option value=${k}>${t(`connector_add.kind_${k}`)}</option>`)}
      </select><//>
    <${Field} label=${t('connector_add.name')}>
      <input class="input" required maxlength="40" pattern="[a-z0-9]+(-[a-z0-9]+)*" value=${f.name} onInput=${set('name')}
        placeholder="memory" data-testid="connector-add-name" /><//>
    <${Field} label=${t('connector_add.display_name')}>
      <input class="input" value=${f.display_name} onInput=${set('display_name')} data-testid="connector-add-display" /><//>
    ${(f.kind === 'npm' || f.kind === 'pip') && html`
      <${Field} label=${t(`connector_add.package_${f.kind}`)}>
        <input class="input" required value=${f.package} onInput=${set('package')} data-testid="connector-add-package"
          placeholder=${f.kind === 'npm' ? '@modelcontextprotocol/server-memory' : 'mcp-server-time'} /><//>
      ${f.kind === 'pip' && html`<${Field} label=${t('connector_add.module')}>
        <input class="input" value=${f.module} onInput=${set('module')} data-testid="connector-add-module" /><//>`}
      <${Field} label=${t('connector_add.args')}>
        <input class="input" value=${f.args} onInput=${set('args')} data-testid="connector-add-args" /><//>`}
    ${f.kind === 'command' && html`<${Field} label=${t('connector_add.command')}>
      <input class="input" required value=${f.command} onInput=${set('command')} data-testid="connector-add-command" /><//>`}
    ${f.kind === 'url' && html`
      <${Field} label=${t('connector_add.url')}>
        <input class="input" type="url" required value=${f.url} onInput=${set('url')} data-testid="connector-add-url" /><//>
      <${Field} label=${t('connector_add.headers')}>
        <textarea class="input" rows="2" value=${f.headers} onInput=${set('headers')}
          placeholder="Authorization: Bearer {SECRET:TOKEN}" data-testid="connector-add-headers"></textarea><//>`}
    <${Field} label=${t('connector_add.env')}>
      <textarea class="input" rows="2" value=${f.env} onInput=${set('env')} placeholder="NAME=value"
        data-testid="connector-add-env"></textarea><//>
    <p class="small muted">${t('connector_add.secrets_hint')}</p>
    <${Field} label=${t('connector_add.scope')}>
      <select class="input" value=${f.scope} onChange=${set('scope')} data-testid="connector-add-scope">
        <option value="personal">${t('marketplace.scope_personal')}</option>
        <option value="household">${t('marketplace.scope_household')}</option>
      </select><//>
    ${names.map((n) => html`<${Field} label=${t('connector_add.test_secret', { name: n })}>
      <input class="input" type="password" autocomplete="off" value=${secrets[n] || ''}
        onInput=${(e) => setSecrets({ ...secrets, [n]: e.target.value })} data-testid="connector-add-secret" data-field=${n} /><//>`)}
    <div class="row">
      <button type="button" class="btn btn--secondary" disabled=${busy} onClick=${test}
        data-testid="connector-add-test">${t('connector_add.test')}</button>
      <button type="submit" class="btn btn--primary" disabled=${busy} data-testid="connector-add-save">${t('common.save')}</button>
      <button type="button" class="btn btn--ghost" onClick=${onClose}>${t('common.cancel')}</button>
    </div>
    ${busy && html`<p class="small muted">${t('connector_add.working')}</p>`}
    <${TrialResult} result=${result} />
    ${error && html`<p class="approval__error" role="alert" data-testid="connector-add-error">${errorText(error)}</p>`}
  </form>`;
}

// The button and its dialog; `onDone` reloads the list the button sits above.
export function AddServer({ onDone }) {
  const [open, setOpen] = useState(false);
  const saved = () => { setOpen(false); onDone(); };
  return html`<div class="row">
    <button type="button" class="btn btn--primary" onClick=${() => setOpen(true)}
      data-testid="connector-add">${t('connector_add.open')}</button>
    ${open && html`<${Dialog} title=${t('connector_add.title')} onClose=${() => setOpen(false)}
        testid="connector-add-dialog" wide=${true}>
      <${AddForm} onClose=${() => setOpen(false)} onSaved=${saved} />
    <//>`}
  </div>`;
}
