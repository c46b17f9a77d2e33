// #/admin/settings (capability admin.system) — the household's settings: its
// name, the time zone the assistant tells time in (the prompt's DATETIME), and
// the language new members start with. The setup wizard's first step is the
// same form (welcome.js).
import { html, useEffect, useState } from '../../js/lib.js';
import { t } from '../../js/i18n.js';
import { api } from '../../js/api.js';
import { ErrorNotice, Notice, useFlash, PageHead } from '../../js/components/form.js';
import { HouseholdForm } from './welcome.js';

export function AdminSettingsPage() {
  const [instance, setInstance] = useState(null);
  const [error, setError] = useState(null);
  const [flash, setFlash] = useFlash();
  useEffect(() => {
    api.instance().then(setInstance, setError);
  }, []);
  return html`<div class="page" data-testid="settings-page">
    <${PageHead} title=${t('settings.title')} lead=${t('settings.lead')} />
    ${flash && html`<${Notice} kind="success" testid="settings-flash">${flash}<//>`}
    <${ErrorNotice} error=${error} testid="settings-error" />
    ${instance &&
    html`<section class="card">
      <${HouseholdForm} instance=${instance} submitLabel=${t('common.save')} testid="settings-form"
        onSaved=${(saved) => {
          setInstance(saved);
          setFlash(t('common.saved'));
        }} />
    </section>`}
    ${instance && instance.setup_step !== 'done' &&
    html`<p><a href="#/welcome" data-testid="settings-resume-setup">${t('setup.resume')}</a></p>`}
  </div>`;
}
