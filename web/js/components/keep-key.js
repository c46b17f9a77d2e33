// "Let my assistant work while I'm signed out": the member's opt-in to keep
// their data key on the server (sealed with the instance key), so scheduled
// jobs run on time while nobody is signed in. Revocable at any time; hidden
// when the member's role cannot schedule (the API answers 403).
import { html, useEffect, useState } from '../lib.js';
import { t } from '../i18n.js';
import { api } from '../api.js';
import { ErrorNotice } from './form.js';

export function KeepKeyCard() {
  const [enabled, setEnabled] = useState(null);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);
  useEffect(() => {
    api.keepKey().then((r) => setEnabled(r.enabled), () => setEnabled(undefined));
  }, []);
  if (enabled === null || enabled === undefined) return null;
  const toggle = async (value) => {
    setBusy(true);
    setError(null);
    try {
      setEnabled((await api.setKeepKey(value)).enabled);
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  return html`<section class="card" aria-labelledby="keep-key-title" data-testid="keep-key">
    <h2 class="card__title" id="keep-key-title">${t('keepkey.title')}</h2>
    <p class="muted">${t('keepkey.explain')}</p>
    <p class="muted small">${t('keepkey.tradeoff')}</p>
    <label class="check">
      <input type="checkbox" checked=${enabled} disabled=${busy} data-testid="keep-key-toggle"
        onChange=${(e) => toggle(e.target.checked)} />
      <span>${t('keepkey.label')}</span>
    </label>
    ${error && html`<${ErrorNotice} error=${error} testid="keep-key-error" />`}
  </section>`;
}
