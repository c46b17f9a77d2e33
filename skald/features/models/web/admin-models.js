// #/admin/models — the language models the household's assistant may use
// (capability admin.models). Two lists: providers (the services or local
// programs that run models, with their API key) and models (one entry per
// model of a provider, in priority order for AUTO).
// The API key is sealed on the server and never comes back: the page only
// knows whether one is stored, and says so.
import { html, useState, useEffect, useCallback } from '../../js/lib.js';
import { t } from '../../js/i18n.js';
import { api } from '../../js/api.js';
import { Icon } from '../../js/components/icons.js';
import { AdminTop, Field, FormActions, SectionHead, useAction, useDeleting, useFlash, useId, errorText } from '../../js/components/form.js';
import { Dialog, ConfirmDialog } from '../../js/components/dialog.js';
import { ProviderSetup, kindName } from '../../js/components/provider-setup.js';

// Friendly kind names from GET /api/llm/kinds (details), kept by the page.
let kindNames = {};

const STRENGTHS = ['low', 'average', 'high'];
// What a model is for; AUTO picks among models of one kind (docs/models.md).
const MODEL_KINDS = ['chat', 'transcription', 'speech', 'image'];
const CAPABILITIES = ['tools', 'vision', 'reasoning', 'video'];
// What a chat turn offers the model (skald/core/model_profile.py): auto is compact for a
// context window of at most 8192 tokens.
const PROFILES = ['auto', 'full', 'compact'];
const MAX_PRIORITY = 100000;
// http(s):// or no scheme (the server adds one: http:// on the home network); no other.
const URL_RE = /^(?:https?:\/\/)?(?![a-z][a-z0-9+.-]*:\/\/)\S+$/i;

const byPriority = (a, b) => a.priority - b.priority || a.name.localeCompare(b.name);

// ------------------------------------------------------------ providers

function ProviderDialog({ provider, kinds, onClose, onSaved }) {
  const editing = !!provider;
  const [form, setForm] = useState({
    name: provider ? provider.name : '',
    kind: provider ? provider.kind : kinds[0] || '',
    base_url: provider ? provider.base_url || '' : '',
    api_key: '',
    clear_api_key: false,
    silence: provider && provider.silence_timeout_s ? String(provider.silence_timeout_s) : '',
  });
  const [localError, setLocalError] = useState(null);
  const [run, busy, error] = useAction();
  const ids = { name: useId('p-name'), kind: useId('p-kind'), url: useId('p-url'), key: useId('p-key'), clear: useId('p-clear'), silence: useId('p-silence') };
  const set = (key) => (e) => setForm({ ...form, [key]: e.target.type === 'checkbox' ? e.target.checked : e.target.value });
  const kindList = kinds.includes(form.kind) || !form.kind ? kinds : [...kinds, form.kind];

  const onSubmit = (e) => {
    e.preventDefault();
    const url = form.base_url.trim();
    if (url && !URL_RE.test(url)) {
      setLocalError(t('models.base_url_invalid'));
      return;
    }
    if (editing && provider.base_url && !url) {
      setLocalError(t('models.base_url_cannot_clear'));
      return;
    }
    // A stored key was given for the old address; the server refuses to keep it for
    // a new one (the key would be sent there), so ask for it here already.
    const moved = editing && (url ? url !== (provider.base_url || '') : form.kind !== provider.kind);
    if (moved && provider.has_api_key && !form.api_key && !form.clear_api_key) {
      setLocalError(t('models.address_needs_key'));
      return;
    }
    // Empty: the kind's default (sent as 0 when a stored value is cleared).
    const silence = form.silence.trim() === '' ? 0 : Math.floor(Number(form.silence));
    if (!Number.isFinite(silence) || silence < 0 || silence > 3600) {
      setLocalError(t('models.silence_invalid'));
      return;
    }
    setLocalError(null);
    run(async () => {
      let saved;
      if (editing) {
        const body = {};
        if (form.name.trim() !== provider.name) body.name = form.name.trim();
        if (form.kind !== provider.kind) body.kind = form.kind;
        if (url && url !== (provider.base_url || '')) body.base_url = url;
        if (form.api_key) body.api_key = form.api_key;
        else if (form.clear_api_key) body.clear_api_key = true;
        if (silence !== (provider.silence_timeout_s || 0)) body.silence_timeout_s = silence;
        saved = Object.keys(body).length ? await api.updateProvider(provider.id, body) : provider;
      } else {
        const body = { name: form.name.trim(), kind: form.kind };
        if (url) body.base_url = url;
        if (form.api_key) body.api_key = form.api_key;
        if (silence) body.silence_timeout_s = silence;
        saved = await api.createProvider(body);
      }
      onSaved(saved, editing);
    });
  };

  return html`<${Dialog} title=${editing ? t('models.provider_edit_title', { name: provider.name }) : t('models.provider_add_title')}
      onClose=${onClose} testid="provider-dialog">
    <form class="stack" onSubmit=${onSubmit} novalidate>
      <${Field} label=${t('models.provider_name')} id=${ids.name} hint=${t('models.provider_name_hint')}>
        <input id=${ids.name} class="input" required maxlength="80" autocomplete="off" value=${form.name}
          onInput=${set('name')} data-testid="provider-name" />
      <//>
      <${Field} label=${t('models.provider_kind')} id=${ids.kind} hint=${t('models.provider_kind_hint')}>
        <select id=${ids.kind} class="select" value=${form.kind} onChange=${set('kind')} data-testid="provider-kind" required>
          ${kindList.map((k) => html`<option value=${k}>${kindNames[k] || k}</option>`)}
        </select>
      <//>
      <${Field} label=${t('models.base_url')} id=${ids.url}
        hint=${editing ? t('models.base_url_hint_edit') : t('models.base_url_hint')}>
        <input id=${ids.url} class="input mono" type="url" inputmode="url" autocomplete="off" spellcheck="false"
          placeholder="https://…" value=${form.base_url} onInput=${set('base_url')} data-testid="provider-base-url" />
      <//>
      <${Field} label=${t('models.api_key')} id=${ids.key}
        hint=${editing && provider.has_api_key ? t('models.api_key_hint_stored') : t('models.api_key_hint')}>
        <input id=${ids.key} class="input mono" type="password" autocomplete="new-password" spellcheck="false"
          placeholder=${editing && provider.has_api_key ? t('models.api_key_placeholder_stored') : ''}
          value=${form.api_key} onInput=${set('api_key')} data-testid="provider-api-key" />
      <//>
      ${editing && provider.has_api_key &&
      html`<div class="check">
        <input id=${ids.clear} type="checkbox" checked=${form.clear_api_key} disabled=${!!form.api_key}
          onChange=${set('clear_api_key')} data-testid="provider-clear-key" />
        <label for=${ids.clear}><span>${t('models.clear_key')}</span>
          <span class="field__hint">${t('models.clear_key_hint')}</span></label>
      </div>`}
      <${Field} label=${t('models.silence')} id=${ids.silence} hint=${t('models.silence_hint')}>
        <input id=${ids.silence} class="input" type="number" min="1" max="3600" step="1" inputmode="numeric"
          value=${form.silence} onInput=${set('silence')} data-testid="provider-silence" />
      <//>
      <p class="notice notice--info small">${Icon.lock()}<span>${t('models.key_sealed')}</span></p>
      <${FormActions} error=${localError || error} errorTestid="provider-error" onCancel=${onClose} busy=${busy}
        disabled=${busy || !form.name.trim() || !form.kind} testid="provider-save"
        label=${editing ? t('common.save') : t('models.provider_add')} />
    </form>
  <//>`;
}

// "Test this provider": its models list and a tiny real request (the server's
// POST /api/llm/providers/{id}/test); the answer is shown in the row.
function ProviderTest({ provider }) {
  const [result, setResult] = useState(null);
  const [run, busy, error] = useAction();
  return html`<span class="provider-test">
    <button type="button" class="btn btn--small btn--secondary" disabled=${busy} data-testid="provider-test"
      onClick=${() => run(async () => setResult(await api.testProvider(provider.id)))}>
      ${busy ? t('models.testing') : t('models.test')}</button>
    ${result &&
    html`<span class=${`small provider-test__result ${result.ok ? 'is-ok' : 'is-bad'}`} role="status"
        data-testid="provider-test-result" data-ok=${result.ok ? 'true' : 'false'}>${result.message}</span>`}
    ${error && html`<span class="small provider-test__result is-bad" role="alert">${errorText(error)}</span>`}
  </span>`;
}

function ProviderRow({ provider, modelCount, onEdit, onDelete }) {
  return html`<li class="list-row" data-testid="provider-row" data-provider-id=${provider.id}
      data-provider-name=${provider.name}>
    <div class="list-row__main">
      <div class="list-row__title">
        <strong>${provider.name}</strong>
        <span class="badge" data-testid="provider-kind-badge">${kindNames[provider.kind] || provider.kind}</span>
      </div>
      <div class="list-row__facts">
        <span class=${`muted small list-row__url${provider.base_url ? ' mono' : ''}`}>${provider.base_url || t('models.base_url_default')}</span>
        ${provider.has_api_key
          ? html`<span class="badge badge--locked" data-testid="provider-key-status" data-has-key="true">${Icon.key()}${t('models.key_stored')}</span>`
          : html`<span class="badge" data-testid="provider-key-status" data-has-key="false">${t('models.key_none')}</span>`}
        <span class="muted small">${modelCount === 1 ? t('models.provider_model_one') : t('models.provider_model_count', { count: modelCount })}</span>
      </div>
    </div>
    <div class="list-row__actions">
      <${ProviderTest} provider=${provider} />
      <button type="button" class="btn btn--small btn--ghost" onClick=${() => onEdit(provider)} data-testid="provider-edit"
        aria-label=${t('models.edit_aria', { name: provider.name })}>${Icon.edit()}<span>${t('common.edit')}</span></button>
      <button type="button" class="btn btn--small btn--danger-ghost" onClick=${() => onDelete(provider)}
        data-testid="provider-delete" aria-label=${t('models.delete_aria', { name: provider.name })}>${t('common.delete')}</button>
    </div>
  </li>`;
}

// ------------------------------------------------------------ models

function ModelDialog({ model, providers, nextPriority, onClose, onSaved }) {
  const editing = !!model;
  const [form, setForm] = useState({
    provider_id: model ? model.provider_id : (providers[0] || {}).id || '',
    model: model ? model.model : '',
    name: model ? model.name : '',
    kind: model ? model.kind || 'chat' : 'chat',
    strength: model ? model.strength : 'average',
    capabilities: new Set(model ? model.capabilities : ['tools']),
    enabled: model ? model.enabled : true,
    max_output_tokens: model && model.max_output_tokens ? String(model.max_output_tokens) : '',
    context_window: model && model.context_window ? String(model.context_window) : '',
    prompt_profile: model ? model.prompt_profile || 'auto' : 'auto',
  });
  const [listing, setListing] = useState(null); // null | 'reading' | 'none' | 'found'
  // Fill the limits (and capabilities) from what the provider's model list reports.
  const readLimits = async () => {
    setListing('reading');
    try {
      const listed = (await api.providerModels(form.provider_id)).find((m) => m.id === form.model.trim());
      if (!listed) {
        setListing('none');
        return;
      }
      setForm((f) => ({
        ...f,
        max_output_tokens: listed.max_output_tokens ? String(listed.max_output_tokens) : f.max_output_tokens,
        context_window: listed.context_window ? String(listed.context_window) : f.context_window,
        capabilities: listed.capabilities.length ? new Set(listed.capabilities) : f.capabilities,
      }));
      setListing('found');
    } catch (e) {
      setListing('none');
    }
  };
  const [run, busy, error] = useAction();
  const ids = { prov: useId('m-prov'), wire: useId('m-wire'), name: useId('m-name'), strength: useId('m-str'), kind: useId('m-kind'), enabled: useId('m-en'), out: useId('m-out'), ctx: useId('m-ctx'), profile: useId('m-prof') };
  const capIds = { tools: useId('m-cap'), vision: useId('m-cap'), reasoning: useId('m-cap'), video: useId('m-cap') };
  const set = (key) => (e) => setForm({ ...form, [key]: e.target.type === 'checkbox' ? e.target.checked : e.target.value });
  const toggleCap = (cap) => {
    const caps = new Set(form.capabilities);
    if (caps.has(cap)) caps.delete(cap);
    else caps.add(cap);
    setForm({ ...form, capabilities: caps });
  };

  const onSubmit = (e) => {
    e.preventDefault();
    run(async () => {
      const body = {
        provider_id: form.provider_id,
        model: form.model.trim(),
        name: form.name.trim(),
        kind: form.kind,
        strength: form.strength,
        capabilities: CAPABILITIES.filter((c) => form.capabilities.has(c)),
        enabled: form.enabled,
        // Empty: unknown (0 clears a stored value; null when nothing was stored).
        max_output_tokens: Math.max(0, Math.floor(Number(form.max_output_tokens) || 0)),
        context_window: Math.max(0, Math.floor(Number(form.context_window) || 0)),
        prompt_profile: form.prompt_profile,
      };
      let saved;
      if (editing) {
        const changes = {};
        for (const [k, v] of Object.entries(body)) {
          if (JSON.stringify(v) !== JSON.stringify(model[k] ?? (k === 'max_output_tokens' || k === 'context_window' ? 0 : model[k]))) changes[k] = v;
        }
        saved = Object.keys(changes).length ? await api.updateModel(model.id, changes) : model;
      } else {
        saved = await api.createModel({ ...body, priority: nextPriority });
      }
      onSaved(saved, editing);
    });
  };

  return html`<${Dialog} title=${editing ? t('models.model_edit_title', { name: model.name }) : t('models.model_add_title')}
      onClose=${onClose} testid="model-dialog">
    <form class="stack" onSubmit=${onSubmit} novalidate>
      <${Field} label=${t('models.provider')} id=${ids.prov}>
        <select id=${ids.prov} class="select" value=${form.provider_id} onChange=${set('provider_id')} data-testid="model-provider" required>
          ${providers.map((p) => html`<option value=${p.id}>${p.name}</option>`)}
        </select>
      <//>
      <div class="grid-2">
        <${Field} label=${t('models.wire_id')} id=${ids.wire} hint=${t('models.wire_id_hint')}>
          <input id=${ids.wire} class="input mono" required maxlength="200" autocomplete="off" autocapitalize="none"
            spellcheck="false" value=${form.model} onInput=${set('model')} data-testid="model-wire-id" />
        <//>
        <${Field} label=${t('models.model_name')} id=${ids.name} hint=${t('models.model_name_hint')}>
          <input id=${ids.name} class="input" required maxlength="80" autocomplete="off" value=${form.name}
            onInput=${set('name')} data-testid="model-name" />
        <//>
      </div>
      <${Field} label=${t('models.kind')} id=${ids.kind} hint=${t('models.kind_hint')}>
        <select id=${ids.kind} class="select" value=${form.kind} onChange=${set('kind')} data-testid="model-kind">
          ${MODEL_KINDS.map((k) => html`<option value=${k}>${t(`models.kind_${k}`)}</option>`)}
        </select>
      <//>
      <${Field} label=${t('models.strength')} id=${ids.strength} hint=${t('models.strength_hint')}>
        <select id=${ids.strength} class="select" value=${form.strength} onChange=${set('strength')} data-testid="model-strength">
          ${STRENGTHS.map((s) => html`<option value=${s}>${t(`models.strength_${s}`)}</option>`)}
        </select>
      <//>
      <fieldset class="fieldset">
        <legend>${t('models.capabilities')}</legend>
        ${CAPABILITIES.map(
          (cap) => html`<div class="check">
            <input id=${capIds[cap]} type="checkbox" checked=${form.capabilities.has(cap)} onChange=${() => toggleCap(cap)}
              data-testid="model-cap" data-capability=${cap} />
            <label for=${capIds[cap]}><span>${t(`models.cap_${cap}`)}</span>
              <span class="field__hint">${t(`models.cap_${cap}_hint`)}</span></label>
          </div>`,
        )}
      </fieldset>
      <div class="grid-2">
        <${Field} label=${t('models.max_output_tokens')} id=${ids.out} hint=${t('models.max_output_tokens_hint')}>
          <input id=${ids.out} class="input" type="number" min="1" step="1" inputmode="numeric"
            value=${form.max_output_tokens} onInput=${set('max_output_tokens')} data-testid="model-max-output" />
        <//>
        <${Field} label=${t('models.context_window')} id=${ids.ctx} hint=${t('models.context_window_hint')}>
          <input id=${ids.ctx} class="input" type="number" min="1" step="1" inputmode="numeric"
            value=${form.context_window} onInput=${set('context_window')} data-testid="model-context-window" />
        <//>
      </div>
      ${form.kind === 'chat' && html`<${Field} label=${t('models.profile')} id=${ids.profile} hint=${t('models.profile_hint')}>
        <select id=${ids.profile} class="select" value=${form.prompt_profile} onChange=${set('prompt_profile')} data-testid="model-profile">
          ${PROFILES.map((p) => html`<option value=${p}>${t(`models.profile_${p}`)}</option>`)}
        </select>
      <//>`}
      <p class="row small">
        <button type="button" class="btn btn--small" onClick=${readLimits}
          disabled=${!form.provider_id || !form.model.trim() || listing === 'reading'} data-testid="model-read-limits">
          ${t('models.read_limits')}</button>
        ${listing === 'none' && html`<span class="muted" role="status">${t('models.read_limits_none')}</span>`}
        ${listing === 'found' && html`<span class="muted" role="status">${t('models.read_limits_found')}</span>`}
      </p>
      <div class="check">
        <input id=${ids.enabled} type="checkbox" checked=${form.enabled} onChange=${set('enabled')} data-testid="model-enabled-input" />
        <label for=${ids.enabled}><span>${t('models.enabled')}</span>
          <span class="field__hint">${t('models.enabled_hint')}</span></label>
      </div>
      <${FormActions} error=${error} errorTestid="model-error" onCancel=${onClose} busy=${busy}
        disabled=${busy || !form.provider_id || !form.model.trim() || !form.name.trim()} testid="model-save"
        label=${editing ? t('common.save') : t('models.model_add')} />
    </form>
  <//>`;
}

function ModelRow({ model, index, count, providerName, busy, onMove, onToggle, onEdit, onDelete }) {
  const enabledId = useId('m-row-en');
  return html`<li class=${`list-row model-row${model.enabled ? '' : ' is-disabled'}`} data-testid="model-row"
      data-model-id=${model.id} data-model-name=${model.name} data-priority=${model.priority}
      data-enabled=${model.enabled ? 'true' : 'false'}>
    <span class="model-row__rank" aria-hidden="true">${index + 1}</span>
    <div class="list-row__main">
      <div class="list-row__title">
        <strong>${model.name}</strong>
        <code class="muted small">${model.model}</code>
      </div>
      <div class="list-row__facts">
        <span class="muted small">${providerName}</span>
        ${model.kind && model.kind !== 'chat' && html`<span class="badge" data-testid="model-kind-badge" data-kind=${model.kind}>
          ${t(`models.kind_${model.kind}`)}</span>`}
        <span class=${`badge badge--strength-${model.strength}`} data-testid="model-strength-badge" data-strength=${model.strength}>
          ${t(`models.strength_${model.strength}`)}</span>
        ${model.capabilities.map(
          (c) => html`<span class="badge" data-testid="model-capability" data-capability=${c}>${t(`models.cap_${c}`)}</span>`,
        )}
      </div>
    </div>
    <div class="list-row__actions">
      <label class="switch" for=${enabledId} title=${t('models.enabled')}>
        <input id=${enabledId} type="checkbox" role="switch" checked=${model.enabled} disabled=${busy}
          onChange=${() => onToggle(model)} data-testid="model-enabled" />
        <span class="switch__track" aria-hidden="true"><span class="switch__thumb"></span></span>
        <span class="switch__label">${model.enabled ? t('models.on') : t('models.off')}</span>
      </label>
      <span class="model-row__move">
        <button type="button" class="icon-btn" disabled=${busy || index === 0} onClick=${() => onMove(index, -1)}
          aria-label=${t('models.move_up', { name: model.name })} title=${t('models.move_up', { name: model.name })}
          data-testid="model-up">${Icon.up()}</button>
        <button type="button" class="icon-btn" disabled=${busy || index === count - 1} onClick=${() => onMove(index, 1)}
          aria-label=${t('models.move_down', { name: model.name })} title=${t('models.move_down', { name: model.name })}
          data-testid="model-down">${Icon.down()}</button>
      </span>
      <button type="button" class="btn btn--small btn--ghost" onClick=${() => onEdit(model)} data-testid="model-edit"
        aria-label=${t('models.edit_aria', { name: model.name })}>${Icon.edit()}<span class="btn__label">${t('common.edit')}</span></button>
      <button type="button" class="btn btn--small btn--danger-ghost" onClick=${() => onDelete(model)}
        data-testid="model-delete" aria-label=${t('models.delete_aria', { name: model.name })}>
        ${Icon.trash()}<span class="btn__label">${t('common.delete')}</span></button>
    </div>
  </li>`;
}

// ------------------------------------------------------------ page

export function AdminModelsPage() {
  const [data, setData] = useState({ providers: null, models: null, kinds: [] });
  const [loadError, setLoadError] = useState(null);
  const [dialog, setDialog] = useState(null); // {type: 'provider'|'model', item}
  const { deleting, ask, close: closeDelete, run: runDel, busy: delBusy, error: delError } = useDeleting(); // deleting: {type, item}
  const [flash, setFlash] = useFlash();
  const [runRow, rowBusy, rowError] = useAction();

  const load = useCallback(async () => {
    try {
      const [providers, models, kinds] = await Promise.all([
        api.providers(),
        api.llmModels(),
        api.llmKinds().then(
          (k) => {
            kindNames = Object.fromEntries((k.details || []).map((d) => [d.id, kindName(d)]));
            return k.kinds || [];
          },
          () => [],
        ),
      ]);
      setData({ providers, models: [...models].sort(byPriority), kinds });
      setLoadError(null);
    } catch (e) {
      setLoadError(e);
    }
  }, []);
  useEffect(() => {
    load();
  }, [load]);

  const { providers, models, kinds } = data;
  const setModels = (list) => setData((d) => ({ ...d, models: [...list].sort(byPriority) }));
  const providerName = (id) => ((providers || []).find((p) => p.id === id) || {}).name || t('models.provider_missing');

  // Moving renumbers the whole list (10, 20, 30...) in the new order, so ties
  // and gaps left by earlier edits never make a move do nothing.
  const onMove = (index, delta) =>
    runRow(async () => {
      const order = [...models];
      const [m] = order.splice(index, 1);
      order.splice(index + delta, 0, m);
      const changed = order
        .map((x, i) => ({ model: x, priority: Math.min((i + 1) * 10, MAX_PRIORITY) }))
        .filter(({ model, priority }) => model.priority !== priority);
      setModels(order.map((x, i) => ({ ...x, priority: Math.min((i + 1) * 10, MAX_PRIORITY) })));
      try {
        const saved = await Promise.all(changed.map(({ model, priority }) => api.updateModel(model.id, { priority })));
        setData((d) => ({ ...d, models: d.models.map((x) => saved.find((s) => s.id === x.id) || x).sort(byPriority) }));
      } catch (e) {
        await load(); // show the order the server really has
        throw e;
      }
    });

  const onToggle = (model) =>
    runRow(async () => {
      const saved = await api.updateModel(model.id, { enabled: !model.enabled });
      setModels(models.map((x) => (x.id === saved.id ? saved : x)));
      setFlash(t(saved.enabled ? 'models.enabled_ok' : 'models.disabled_ok', { name: saved.name }));
    });

  const onSaved = (type) => (item, editing) => {
    if (type === 'provider') {
      setData((d) => ({
        ...d,
        providers: editing ? d.providers.map((p) => (p.id === item.id ? item : p)) : [...d.providers, item],
      }));
    } else {
      setModels(editing ? models.map((m) => (m.id === item.id ? item : m)) : [...models, item]);
    }
    setDialog(null);
    setFlash(t(editing ? 'models.saved_ok' : 'models.added_ok', { name: item.name }));
  };

  const askDelete = (type) => (item) => ask({ type, item });
  const onDeleteConfirm = () =>
    runDel(async () => {
      const { type, item } = deleting;
      if (type === 'provider') {
        await api.deleteProvider(item.id);
        setData((d) => ({ ...d, providers: d.providers.filter((p) => p.id !== item.id) }));
      } else {
        await api.deleteModel(item.id);
        setData((d) => ({ ...d, models: d.models.filter((m) => m.id !== item.id) }));
      }
      setFlash(t('models.deleted_ok', { name: item.name }));
      closeDelete();
    });

  const nextPriority = Math.min(((models || []).reduce((mx, m) => Math.max(mx, m.priority), 0) || 0) + 10, MAX_PRIORITY);
  const loaded = providers !== null && models !== null;

  return html`<div class="page" data-testid="models-page">
    <${AdminTop} name="models" title=${t('models.title')} lead=${t('models.lead')} flash=${flash} rowError=${rowError}
      loadError=${loadError} loaded=${loaded} />

    ${loaded &&
    html`<section class="card" aria-labelledby="providers-title">
      <${SectionHead} id="providers-title" title=${t('models.providers_title')} lead=${t('models.providers_body')}>
        <span class="actions">
          <button type="button" class="btn btn--primary" onClick=${() => setDialog({ type: 'wizard', item: null })}
            data-testid="provider-add-from-list">${Icon.plus()}<span>${t('models.add_from_list')}</span></button>
          <button type="button" class="btn btn--secondary" onClick=${() => setDialog({ type: 'provider', item: null })}
            data-testid="provider-add">${Icon.plus()}<span>${t('models.provider_add')}</span></button>
        </span>
      <//>
      ${providers.length === 0
        ? html`<p class="muted empty" data-testid="providers-empty">${t('models.providers_empty')}</p>`
        : html`<ul class="list" data-testid="providers-list">
            ${providers.map(
              (p) => html`<${ProviderRow} key=${p.id} provider=${p}
                modelCount=${models.filter((m) => m.provider_id === p.id).length}
                onEdit=${(x) => setDialog({ type: 'provider', item: x })} onDelete=${askDelete('provider')} />`,
            )}
          </ul>`}
      <p class="notice notice--info small">${Icon.lock()}<span>${t('models.key_sealed')}</span></p>
    </section>`}

    ${loaded &&
    html`<section class="card" aria-labelledby="models-title">
      <${SectionHead} id="models-title" title=${t('models.models_title')} lead=${t('models.models_body')}>
        <button type="button" class="btn btn--secondary" disabled=${providers.length === 0}
          title=${providers.length === 0 ? t('models.need_provider') : undefined}
          onClick=${() => setDialog({ type: 'model', item: null })} data-testid="model-add">
          ${Icon.plus()}<span>${t('models.model_add')}</span></button>
      <//>
      ${models.length === 0
        ? html`<p class="muted empty" data-testid="models-empty">
            ${providers.length === 0 ? t('models.need_provider') : t('models.models_empty')}</p>`
        : html`<ol class="list" data-testid="models-list">
            ${models.map(
              (m, i) => html`<${ModelRow} key=${m.id} model=${m} index=${i} count=${models.length} busy=${rowBusy}
                providerName=${providerName(m.provider_id)} onMove=${onMove} onToggle=${onToggle}
                onEdit=${(x) => setDialog({ type: 'model', item: x })} onDelete=${askDelete('model')} />`,
            )}
          </ol>`}
      <div class="notice notice--info small">${Icon.info()}<span>${t('models.auto_explained')}</span></div>
    </section>`}

    ${dialog && dialog.type === 'wizard' &&
    html`<${Dialog} title=${t('models.add_from_list')} onClose=${() => setDialog(null)} testid="provider-setup-dialog">
      <${ProviderSetup} onAdded=${() => {
        setDialog(null);
        load();
      }} />
    <//>`}
    ${dialog && dialog.type === 'provider' &&
    html`<${ProviderDialog} provider=${dialog.item} kinds=${kinds} onClose=${() => setDialog(null)} onSaved=${onSaved('provider')} />`}
    ${dialog && dialog.type === 'model' &&
    html`<${ModelDialog} model=${dialog.item} providers=${providers} nextPriority=${nextPriority}
      onClose=${() => setDialog(null)} onSaved=${onSaved('model')} />`}

    ${deleting &&
    html`<${ConfirmDialog} danger
      title=${deleting.type === 'provider'
        ? t('models.provider_delete_title', { name: deleting.item.name })
        : t('models.model_delete_title', { name: deleting.item.name })}
      message=${html`<p>${deleting.type === 'provider' ? t('models.provider_delete_body') : t('models.model_delete_body')}</p>`}
      confirmLabel=${t('common.delete')} busy=${delBusy} error=${delError && errorText(delError)}
      onConfirm=${onDeleteConfirm} onCancel=${closeDelete} />`}
  </div>`;
}
