// #/privacy — what protects my data, each line checked on the real files when the page
// opens (GET /api/privacy): a plain sentence, and "how we checked" under it. Each comes
// as a key of this feature's translations and its values (`say`): the reader's language.
import { html, useEffect, useState } from '../../js/lib.js';
import { t } from '../../js/i18n.js';
import { request } from '../../js/api.js';
import { ErrorNotice, PageHead } from '../../js/components/form.js';
import { Icon } from '../../js/components/icons.js';

// A line {key, vars} in the reader's language; a list value is a list of lines, joined
// "A, B and C" (the server's `render` in check.py follows the same rule for the CLI).
function say(line) {
  const vars = {};
  for (const [name, value] of Object.entries(line.vars || {})) {
    vars[name] = Array.isArray(value) ? joined(value.map(say)) : value;
  }
  return t(line.key, vars);
}

function joined(items) {
  if (items.length < 2) return items.join('');
  return t('privacy.list_and', { rest: items.slice(0, -1).join(', '), last: items[items.length - 1] });
}

export function PrivacyPage() {
  const [facts, setFacts] = useState(null);
  const [error, setError] = useState(null);
  const load = () => request('GET', 'api/privacy').then(setFacts, setError);
  useEffect(() => {
    load();
  }, []);
  return html`<div class="page" data-testid="privacy-page">
    <${PageHead} title=${t('nav.privacy')} lead=${t('privacy.lead')} />
    <${ErrorNotice} error=${error} />
    ${facts && html`<ul class="checklist__items">
      ${facts.map(
        (f) => html`<li class=${`checklist__item checklist__item--${f.status === 'warn' ? 'warn' : 'ok'}`}
            data-testid="privacy-fact" data-key=${f.key} data-status=${f.status}>
          <strong>${f.status === 'good' ? Icon.check() : f.status === 'warn' ? Icon.alert() : Icon.info()} ${say(f.sentence)}</strong>
          <details><summary class="small">${t('privacy.how')}</summary><span class="muted small">${say(f.how)}</span></details>
        </li>`,
      )}
    </ul>
    <button type="button" class="btn btn--secondary btn--small" onClick=${load} data-testid="privacy-again">${t('privacy.again')}</button>`}
  </div>`;
}
