// Sign-in providers (administrators): the household's own OAuth clients that connectors
// name by slug. The client secret is typed here and never shown again: the server answers
// only whether one is stored (`has_secret`); leaving the field empty keeps it.
import { html, useState, useEffect } from '../../js/lib.js';
import { t } from '../../js/i18n.js';
import { request } from '../../js/api.js';
import { ErrorNotice, errorText, useAction, useRead, PageHead } from '../../js/components/form.js';

const enc = encodeURIComponent;

// "key=value" lines <-> the extra authorization parameters.
function paramsText(params) {
  return Object.entries(params || {}).map(([k, v]) => `${k}=${v}`).join('\n');
}

function parseParams(text) {
  const out = {};
  for (const line of text.split('\n')) {
    const at = line.indexOf('=');
    if (at > 0) out[line.slice(0, at).trim()] = line.slice(at + 1).trim();
  }
  return out;
}

function ProviderForm({ provider, onDone }) {
  const isNew = !provider || !provider.updated_at;
  const [form, setForm] = useState({
    slug: provider ? provider.slug : '',
    display_name: provider ? provider.display_name : '',
    authorize_url: provider ? provider.authorize_url : '',
    token_url: provider ? provider.token_url : '',
    client_id: provider ? provider.client_id : '',
    client_secret: '',
    extra: provider ? paramsText(provider.extra_params) : '',
  });
  const [run, busy, error] = useAction();
  const set = (key) => (e) => setForm({ ...form, [key]: e.target.value });
  const save = (e) => {
    e.preventDefault();
    run(async () => {
      const body = {
        display_name: form.display_name,
        authorize_url: form.authorize_url,
        token_url: form.token_url,
        client_id: form.client_id,
        extra_params: parseParams(form.extra),
      };
      if (form.client_secret) body.client_secret = form.client_secret;
      await request('PUT', `api/sign-in-providers/${enc(form.slug)}`, body);
      setForm({ ...form, client_secret: '' });
      onDone();
    });
  };
  const remove = () => run(async () => {
    await request('DELETE', `api/sign-in-providers/${enc(form.slug)}`);
    onDone();
  });
  const field = (key, label, extra = {}) => html`<label class="field">
    <span class="field__label">${label}</span>
    <input class="input" value=${form[key]} onInput=${set(key)} data-testid=${`provider-${key}`} ...${extra} />
  </label>`;
  return html`<form class="inbox-item" onSubmit=${save} data-testid="provider" data-slug=${form.slug}>
    ${isNew && !provider
      ? field('slug', t('providers.slug'), { required: true, pattern: '[a-z0-9][a-z0-9\\-]{0,39}' })
      : html`<p><strong>${form.slug}</strong></p>`}
    ${provider && provider.used_by && provider.used_by.length > 0 &&
      html`<p class="small muted" data-testid="provider-used-by">${t('providers.used_by', { names: provider.used_by.join(', ') })}</p>`}
    ${provider && !provider.updated_at && html`<p class="small" data-testid="provider-missing">${t('providers.missing')}</p>`}
    ${field('display_name', t('providers.display_name'))}
    ${field('authorize_url', t('providers.authorize_url'), { type: 'url', required: true })}
    ${field('token_url', t('providers.token_url'), { type: 'url', required: true })}
    ${field('client_id', t('providers.client_id'), { required: true, autocomplete: 'off' })}
    <label class="field">
      <span class="field__label">${t('providers.client_secret')}${provider && provider.has_secret ? ` (${t('connectors.secret_set')})` : ''}</span>
      <input class="input" type="password" autocomplete="off" value=${form.client_secret}
        placeholder=${provider && provider.has_secret ? t('providers.secret_keep') : ''}
        onInput=${set('client_secret')} data-testid="provider-client_secret" />
    </label>
    <label class="field">
      <span class="field__label">${t('providers.extra_params')}</span>
      <textarea class="input" rows="2" value=${form.extra} onInput=${set('extra')}
        placeholder="access_type=offline" data-testid="provider-extra"></textarea>
    </label>
    <div class="row">
      <button type="submit" class="btn btn--primary" disabled=${busy} data-testid="provider-save">${t('common.save')}</button>
      ${provider && provider.updated_at && html`<button type="button" class="btn btn--ghost" disabled=${busy}
        onClick=${remove} data-testid="provider-remove">${t('providers.remove')}</button>`}
    </div>
    ${error && html`<p class="approval__error" role="alert" data-testid="provider-error">${errorText(error)}</p>`}
  </form>`;
}

export function SignInProvidersPage() {
  const [items, error, load] = useRead('api/sign-in-providers');
  const [adding, setAdding] = useState(0);
  useEffect(() => { load(); }, [load]);
  const added = () => { setAdding(adding + 1); load(); };
  return html`<section class="page page--narrow" data-testid="providers-page">
    <${PageHead} title=${t('nav.sign_in_providers')} lead=${t('providers.lead')} />
    ${error && html`<${ErrorNotice} error=${error} testid="providers-error" />`}
    ${items && items.length === 0 && html`<p class="muted" data-testid="providers-empty">${t('providers.empty')}</p>`}
    ${items && html`<ul class="inbox-list">${items.map((p) => html`<li key=${p.slug}><${ProviderForm} provider=${p} onDone=${load} /></li>`)}</ul>`}
    <details class="tool__section" data-testid="provider-add">
      <summary>${t('providers.add')}</summary>
      <${ProviderForm} key=${adding} provider=${null} onDone=${added} />
    </details>
  </section>`;
}
