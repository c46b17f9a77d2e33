// Adding a model the way a household expects: pick the kind of service by its
// friendly name (the address is filled in where the kind has one, and required
// where it has none), give a key if it needs one, Test connection (the server
// asks the provider's own models list), pick a model from that list (its
// capabilities guessed from its family, editable), add it. Used by the setup
// wizard (#/welcome) and the Models page. The server does the talking
// (POST /api/llm/check); the key goes to the server only.
import { html, useEffect, useState } from '../lib.js';
import { hasText, t } from '../i18n.js';
import { api } from '../api.js';
import { Field, ErrorNotice, useAction, useId } from './form.js';

const CAPABILITIES = ['tools', 'vision', 'reasoning'];

// The server's provider list speaks English (it is also the CLI's); the names of
// services stay as they are, the words around them come in the reader's language.
export function kindName(kind) {
  const key = `providers.name_${kind.id}`;
  return hasText(key) ? t(key) : kind.name;
}

function kindDocs(kind) {
  const key = `providers.docs_${kind.id}`;
  return hasText(key) ? t(key) : kind.docs;
}

export function ProviderSetup({ onAdded }) {
  const [kinds, setKinds] = useState(null);
  const [form, setForm] = useState({ kind: '', base_url: '', api_key: '' });
  const [check, setCheck] = useState(null); // the server's ProviderCheck
  const [picked, setPicked] = useState('');
  const [caps, setCaps] = useState(new Set(['tools']));
  const [run, busy, error, setError] = useAction();
  const [runAdd, adding, addError] = useAction();
  const ids = { kind: useId('ps-kind'), url: useId('ps-url'), key: useId('ps-key'), model: useId('ps-model') };

  useEffect(() => {
    api.llmKinds().then(
      (k) => {
        const list = k.details || [];
        setKinds(list);
        if (list.length) setForm((f) => ({ ...f, kind: list[0].id, base_url: list[0].base_url || '' }));
      },
      (e) => setError(e),
    );
  }, []);

  const kind = (kinds || []).find((k) => k.id === form.kind);
  const addressRequired = kind && !kind.base_url;
  const chooseKind = (id) => {
    const k = kinds.find((x) => x.id === id);
    setForm({ ...form, kind: id, base_url: (k && k.base_url) || '' });
    setCheck(null);
    setPicked('');
  };
  const pick = (id) => {
    setPicked(id);
    const m = check && check.models.find((x) => x.id === id);
    setCaps(new Set(m ? m.guess.capabilities : ['tools']));
  };
  const body = () => {
    const b = { kind: form.kind };
    if (form.base_url.trim()) b.base_url = form.base_url.trim();
    if (form.api_key.trim()) b.api_key = form.api_key.trim();
    return b;
  };
  const onTest = () =>
    run(async () => {
      setCheck(null);
      const out = await api.checkConnection(body());
      setCheck(out);
      if (out.ok && out.models.length) pick(out.models[0].id);
    });
  const onAdd = () =>
    runAdd(async () => {
      const provider = await api.createProvider({ name: kind ? kindName(kind) : form.kind, ...body() });
      const offered = check.models.find((m) => m.id === picked);
      const modelBody = {
        provider_id: provider.id,
        model: picked,
        name: picked.slice(0, 80),
        capabilities: CAPABILITIES.filter((c) => caps.has(c)),
      };
      // The limits the provider's list reported (or the family's window), kept per model.
      if (offered && offered.guess.context_window) modelBody.context_window = offered.guess.context_window;
      if (offered && offered.guess.max_output_tokens) modelBody.max_output_tokens = offered.guess.max_output_tokens;
      const model = await api.createModel(modelBody);
      onAdded(provider, model);
    });

  if (!kinds) return html`<p class="muted">${t('common.loading')}</p>`;
  return html`<div class="stack" data-testid="provider-setup">
    <div class="grid-2">
      <${Field} label=${t('setup.kind')} id=${ids.kind}>
        <select id=${ids.kind} class="select" value=${form.kind} onChange=${(e) => chooseKind(e.target.value)}
          data-testid="setup-provider-kind">
          ${kinds.map((k) => html`<option value=${k.id}>${kindName(k)}</option>`)}
        </select>
      <//>
      <${Field} label=${t('setup.address')} id=${ids.url}
        hint=${addressRequired ? t('setup.address_required') : t('setup.address_prefilled')}>
        <input id=${ids.url} class="input mono" value=${form.base_url} required=${addressRequired}
          placeholder=${addressRequired ? 'http://192.168.1.10:8000/v1' : ''} autocomplete="off" spellcheck="false"
          onInput=${(e) => setForm({ ...form, base_url: e.target.value })} data-testid="setup-provider-url" />
      <//>
    </div>
    <${Field} label=${t('setup.api_key')} id=${ids.key}
      hint=${kind && kind.requires_key ? t('setup.api_key_needed') : t('setup.api_key_optional')}>
      <input id=${ids.key} class="input mono" type="password" value=${form.api_key} autocomplete="off"
        onInput=${(e) => setForm({ ...form, api_key: e.target.value })} data-testid="setup-provider-key" />
    <//>
    ${kind && kind.docs && html`<p class="muted small" data-testid="setup-provider-docs">${kindDocs(kind)}</p>`}
    <div class="actions actions--start">
      <button type="button" class="btn btn--secondary" onClick=${onTest}
        disabled=${busy || (addressRequired && !form.base_url.trim()) || (kind && kind.requires_key && !form.api_key.trim())}
        data-testid="setup-test-connection">${busy ? t('setup.testing') : t('setup.test_connection')}</button>
    </div>
    <${ErrorNotice} error=${error} testid="setup-test-error" />
    ${check &&
    html`<p class=${`test-result test-result--${check.ok ? 'allow' : 'deny'}`} role="status" data-testid="setup-test-result"
        data-ok=${check.ok ? 'true' : 'false'}>${check.ok ? t('setup.connected', { n: check.models.length }) : check.message}</p>`}
    ${check && check.ok && check.models.length > 0 &&
    html`<div class="stack">
      <${Field} label=${t('setup.pick_model')} id=${ids.model}>
        <select id=${ids.model} class="select mono" value=${picked} onChange=${(e) => pick(e.target.value)}
          data-testid="setup-model-pick">
          ${check.models.map((m) => html`<option value=${m.id}>${m.name}</option>`)}
        </select>
      <//>
      <fieldset class="fieldset">
        <legend>${t('setup.capabilities')}</legend>
        <p class="muted small">${t('setup.capabilities_hint')}</p>
        ${CAPABILITIES.map(
          (c) => html`<label class="check"><input type="checkbox" checked=${caps.has(c)} data-testid=${`setup-cap-${c}`}
            onChange=${(e) => {
              const next = new Set(caps);
              if (e.target.checked) next.add(c);
              else next.delete(c);
              setCaps(next);
            }} /><span>${t(`models.cap_${c}`)}</span></label>`,
        )}
      </fieldset>
      <${ErrorNotice} error=${addError} testid="setup-add-error" />
      <div class="actions actions--start">
        <button type="button" class="btn btn--primary" onClick=${onAdd} disabled=${adding || !picked}
          data-testid="setup-add-model">${adding ? t('common.saving') : t('setup.add_model')}</button>
      </div>
    </div>`}
  </div>`;
}
