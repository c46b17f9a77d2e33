// The profile's "API tokens" card: create (shown once), list (never the secret), revoke.
import { html, useState, useEffect, useRef } from '../../js/lib.js';
import { t } from '../../js/i18n.js';
import { get, post, del } from '../../js/api.js';
import { copyText } from '../../js/components/recovery.js';
import { Field, ErrorNotice, Notice, useAction, useId } from '../../js/components/form.js';

const SCOPES = ['chat', 'openai', 'files:read', 'files:write'];
const when = (s) => (s ? new Date(s * 1000).toLocaleString() : t('tokens.never'));

function NewToken({ onCreated }) {
  const [name, setName] = useState('');
  const [scopes, setScopes] = useState(['chat', 'openai']);
  const [days, setDays] = useState('');
  const [run, busy, error] = useAction();
  const nameId = useId('tok-name');
  const toggle = (s) => setScopes(scopes.includes(s) ? scopes.filter((x) => x !== s) : [...scopes, s]);
  const onSubmit = (e) => {
    e.preventDefault();
    run(async () => {
      const body = { name: name.trim(), scopes };
      if (days) body.expires_at = Date.now() / 1000 + Number(days) * 86400;
      onCreated(await post('api/tokens', body));
      setName('');
    });
  };
  return html`<form class="stack" onSubmit=${onSubmit} data-testid="token-form">
    <${Field} label=${t('tokens.name')} id=${nameId} hint=${t('tokens.name_hint')}>
      <input id=${nameId} class="input" value=${name} maxlength="60" required
        onInput=${(e) => setName(e.target.value)} data-testid="token-name" />
    <//>
    <fieldset class="field"><legend class="field__label">${t('tokens.scopes')}</legend>
      ${SCOPES.map((s) => html`<label class="row"><input type="checkbox" checked=${scopes.includes(s)}
        onChange=${() => toggle(s)} data-testid=${`token-scope-${s}`} /> ${t(`tokens.scope.${s.replace(':', '_')}`)}</label>`)}
    </fieldset>
    <label class="field"><span class="field__label">${t('tokens.expires')}</span>
      <select class="select" value=${days} onChange=${(e) => setDays(e.target.value)} data-testid="token-expiry">
        <option value="">${t('tokens.never')}</option>
        <option value="30">30</option><option value="90">90</option><option value="365">365</option>
      </select></label>
    <${ErrorNotice} error=${error} testid="token-error" />
    <div class="actions actions--start">
      <button type="submit" class="btn btn--primary" disabled=${busy || !name.trim() || !scopes.length}
        data-testid="token-create">${t('tokens.create')}</button>
    </div>
  </form>`;
}

// The new token, with a copy button (http on the LAN has no clipboard API: the
// fallback selects the text and copies it the old way).
function Secret({ token }) {
  const [copied, setCopied] = useState(null); // null | 'ok' | 'failed'
  const ref = useRef(null);
  const onCopy = async () => {
    try {
      setCopied((await copyText(token, ref.current)) ? 'ok' : 'failed');
    } catch (e) {
      setCopied('failed');
    }
  };
  return html`<div class="row token-secret-row">
      <code ref=${ref} class="token-secret" data-testid="token-secret">${token}</code>
      <button type="button" class="btn btn--secondary" onClick=${onCopy} data-testid="token-copy"
        data-copied=${copied || ''}>${copied === 'ok' ? t('recovery.copied') : t('recovery.copy')}</button>
    </div>
    ${copied === 'failed' && html`<p class="muted small" aria-live="polite">${t('recovery.copy_failed')}</p>`}`;
}

export function ApiTokensCard() {
  const [tokens, setTokens] = useState([]);
  const [shown, setShown] = useState(null);
  const [run, , error] = useAction();
  const load = () => run(async () => setTokens(await get('api/tokens')));
  useEffect(() => { load(); }, []);
  const revoke = (id) => run(async () => { await del(`api/tokens/${id}`); setShown(null); await load(); });
  return html`<section class="card" aria-labelledby="tokens-title" data-testid="tokens-card">
    <h2 class="card__title" id="tokens-title">${t('tokens.title')}</h2>
    <p class="muted">${t('tokens.body')}</p>
    ${shown && html`<${Notice} kind="success" testid="token-shown">
      <p>${t('tokens.shown_once')}</p><${Secret} token=${shown.token} /><//>`}
    <ul class="stack" data-testid="token-list">
      ${tokens.map((k) => html`<li class="row" data-testid="token-item">
        <span><strong>${k.name}</strong> · ${k.scopes.join(', ')} · ${t('tokens.last_used')} ${when(k.last_used_at)}
          ${' · '}${t('tokens.expires')} ${when(k.expires_at)}</span>
        <button type="button" class="btn btn--secondary" onClick=${() => revoke(k.id)}
          data-testid="token-revoke">${t('tokens.revoke')}</button></li>`)}
    </ul>
    <${ErrorNotice} error=${error} testid="tokens-error" />
    <${NewToken} onCreated=${(made) => { setShown(made); load(); }} />
  </section>`;
}
