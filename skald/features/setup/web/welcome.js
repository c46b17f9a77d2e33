// #/welcome (capability admin.system) — the first-run wizard after the first
// administrator: the household (name, time zone, language; proposed from the
// browser), a model (components/provider-setup.js), the family members (each
// with their recovery code), done. Every step can be skipped; the step reached
// is kept on the server (PATCH /api/instance setup_step), so the wizard
// resumes where it was left, on any device. The same settings are on
// #/admin/settings; what is still missing is on the Overview's checklist.
import { html, useEffect, useState } from '../../js/lib.js';
import { t, setLocale, LOCALES, LOCALE_NAMES } from '../../js/i18n.js';
import { api } from '../../js/api.js';
import { getState } from '../../js/store.js';
import { redirect } from '../../js/router.js';
import { Field, ErrorNotice, useAction, useId, PageHead } from '../../js/components/form.js';
import { RecoveryCode } from '../../js/components/recovery.js';
import { ProviderSetup } from '../../js/components/provider-setup.js';
import { CreateUser } from '../accounts/admin-users.js';

const STEPS = ['household', 'model', 'members', 'done'];

export function browserTimeZone() {
  try {
    return Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC';
  } catch (e) {
    return 'UTC';
  }
}

export function timeZones(current) {
  let zones = [];
  try {
    zones = Intl.supportedValuesOf('timeZone');
  } catch (e) {
    zones = [];
  }
  return [...new Set([current, 'UTC', ...zones])].filter(Boolean);
}

// What was typed into the time-zone field, as a name from the list: "rome",
// "europe/rome" or "New York" find "Europe/Rome" and "America/New_York" (a city
// that names one zone only); anything else goes to the server as typed, which
// answers with a sentence.
export function resolveZone(typed, zones) {
  const value = typed.trim();
  if (zones.includes(value)) return value;
  const norm = (z) => z.toLowerCase().replace(/[\s_]+/g, '_');
  const want = norm(value);
  const full = zones.filter((z) => norm(z) === want);
  if (full.length === 1) return full[0];
  const city = zones.filter((z) => norm(z.split('/').pop()) === want);
  return city.length === 1 ? city[0] : value;
}

// The household's name, time zone and language: the wizard's first step and
// the Settings page share it. `onSaved(instance)` after the server took it.
export function HouseholdForm({ instance, extra = {}, submitLabel, onSaved, testid = 'household-form' }) {
  const [form, setForm] = useState({
    household_name: instance.household_name || '',
    timezone: instance.timezone_chosen ? instance.timezone : browserTimeZone(),
    language: instance.language || getState().locale || 'en',
  });
  const [run, busy, error] = useAction();
  // The server's list (old names too); the browser's until it arrives.
  const [zones, setZones] = useState(() => timeZones(form.timezone));
  useEffect(() => {
    api.timeZones().then(setZones, () => {});
  }, []);
  const ids = { name: useId('hh-name'), tz: useId('hh-tz'), lang: useId('hh-lang'), zones: useId('hh-zones') };
  const onSubmit = (e) => {
    e.preventDefault();
    run(async () => {
      const timezone = resolveZone(form.timezone, zones);
      setForm((f) => ({ ...f, timezone }));
      const body = { ...form, timezone, household_name: form.household_name.trim(), ...extra };
      const saved = await api.updateInstance(body);
      if (form.language !== getState().locale) await setLocale(form.language);
      onSaved(saved);
    });
  };
  return html`<form class="stack" onSubmit=${onSubmit} novalidate data-testid=${testid}>
    <${Field} label=${t('setup.household_name')} id=${ids.name} hint=${t('setup.household_name_hint')}>
      <input id=${ids.name} class="input" value=${form.household_name} maxlength="80"
        onInput=${(e) => setForm({ ...form, household_name: e.target.value })} data-testid="household-name" />
    <//>
    <div class="grid-2">
      <${Field} label=${t('setup.timezone')} id=${ids.tz} hint=${t('setup.timezone_hint')}>
        <input id=${ids.tz} class="input" list=${ids.zones} value=${form.timezone} autocomplete="off" spellcheck="false"
          autocapitalize="none" onInput=${(e) => setForm({ ...form, timezone: e.target.value })}
          data-testid="household-timezone" />
        <datalist id=${ids.zones} data-testid="household-timezones">
          ${zones.map((z) => html`<option value=${z}></option>`)}
        </datalist>
      <//>
      <${Field} label=${t('setup.language')} id=${ids.lang} hint=${t('setup.language_hint')}>
        <select id=${ids.lang} class="select" value=${form.language} onChange=${(e) => setForm({ ...form, language: e.target.value })}
          data-testid="household-language">
          ${LOCALES.map((l) => html`<option value=${l} lang=${l}>${LOCALE_NAMES[l]}</option>`)}
        </select>
      <//>
    </div>
    <${ErrorNotice} error=${error} testid="household-error" />
    <div class="actions actions--start">
      <button type="submit" class="btn btn--primary" disabled=${busy} data-testid="household-save">
        ${busy ? t('common.saving') : submitLabel}</button>
    </div>
  </form>`;
}

// The steps along the top; a step already passed is a button back to it.
function Steps({ current, onGo }) {
  const at = STEPS.indexOf(current);
  return html`<ol class="wizard__steps" data-testid="welcome-steps">
    ${STEPS.map((s, i) => {
      const cls = `wizard__step${s === current ? ' is-current' : ''}${at > i ? ' is-done' : ''}`;
      return html`<li class=${cls} aria-current=${s === current ? 'step' : undefined} data-step=${s}>
        ${at > i
          ? html`<button type="button" class="wizard__back" data-testid="welcome-step-back" data-step=${s}
              onClick=${() => onGo(s)}>${t(`setup.step_${s}`)}</button>`
          : t(`setup.step_${s}`)}
      </li>`;
    })}
  </ol>`;
}

function Members({ onNext }) {
  const [roles, setRoles] = useState(null);
  const [added, setAdded] = useState([]);
  const [recovery, setRecovery] = useState(null);
  useEffect(() => {
    api.roles().then(setRoles, () => setRoles([]));
  }, []);
  if (!roles) return html`<p class="muted">${t('common.loading')}</p>`;
  if (recovery) {
    const who = recovery.user.display_name || recovery.user.username;
    return html`<div class="stack" data-testid="welcome-recovery">
      <p>${t('setup.member_recovery', { name: who })}</p>
      <${RecoveryCode} code=${recovery.recovery_code} warning=${t('users.recovery_warning', { name: who })}
        confirmLabel=${t('recovery.saved')} onConfirm=${() => setRecovery(null)} />
    </div>`;
  }
  return html`<div class="stack">
    ${added.length > 0 &&
    html`<ul class="list" data-testid="welcome-members">
      ${added.map((u) => html`<li class="list-row" data-testid="welcome-member"><strong>${u.display_name || u.username}</strong>
        <span class="muted small">${u.role}</span></li>`)}
    </ul>`}
    <${CreateUser} roles=${roles} onCreated=${(result) => {
      setAdded((a) => [...a, result.user]);
      if (result.recovery_code) setRecovery(result);
    }} />
    <div class="actions actions--start">
      <button type="button" class="btn btn--primary" onClick=${onNext} data-testid="welcome-members-next">
        ${added.length ? t('setup.next') : t('setup.skip')}</button>
    </div>
  </div>`;
}

// The last step: "ready" only when the chat has a model to answer with; a skipped
// model step says what is missing and leads to the Models page instead.
function Done() {
  const [models, setModels] = useState(null);
  useEffect(() => {
    api.chatModels().then(setModels, () => setModels([]));
  }, []);
  if (models === null) return html`<section class="card" data-testid="welcome-done" data-ready=""><span class="spinner" aria-hidden="true"></span></section>`;
  // Either ending: its words and where its first button leads; both offer the Overview.
  const ending = (ready, title, body, first) => html`<section class="card card--accent" data-testid="welcome-done" data-ready=${ready}>
    <h2 class="card__title">${title}</h2>
    <p>${body}</p>
    <div class="actions actions--start">
      ${first}
      <a class="btn btn--secondary" href="#/overview" data-testid="welcome-overview">${t('setup.see_overview')}</a>
    </div>
  </section>`;
  if (models.length === 0) {
    return ending('no-model', t('setup.done_no_model_title'), t('setup.done_no_model_body'),
      html`<a class="btn btn--primary" href="#/admin/models" data-testid="welcome-add-model">${t('setup.go_to_models')}</a>`);
  }
  return ending('yes', t('setup.done_title'), t('setup.done_body'),
    html`<a class="btn btn--primary" href="#/" data-testid="welcome-start-chat">${t('setup.start_chat')}</a>`);
}

// A step's card: its title, a line about it, then what the step asks for.
function stepCard(testid, title, lead, content) {
  return html`<section class="card" data-testid=${testid}>
    <h2 class="card__title">${title}</h2>
    <p class="muted">${lead}</p>
    ${content}
  </section>`;
}

export function WelcomePage() {
  const [instance, setInstance] = useState(null);
  const [loadError, setLoadError] = useState(null);
  const [run, , error] = useAction();
  useEffect(() => {
    api.instance().then(setInstance, setLoadError);
  }, []);
  const go = (step) =>
    run(async () => {
      setInstance(await api.updateInstance({ setup_step: step }));
    });
  const step = instance ? instance.setup_step : null;
  let body = null;
  if (step === 'household') {
    body = stepCard('welcome-household', t('setup.household_title'), t('setup.household_body'),
      html`<${HouseholdForm} instance=${instance} extra=${{ setup_step: 'model' }} submitLabel=${t('setup.next')}
        onSaved=${setInstance} />`);
  } else if (step === 'model') {
    body = stepCard('welcome-model', t('setup.model_title'), t('setup.model_body'),
      html`<${ProviderSetup} onAdded=${() => go('members')} />`);
  } else if (step === 'members') {
    body = stepCard('welcome-members-step', t('setup.members_title'), t('setup.members_body'),
      html`<${Members} onNext=${() => go('done')} />`);
  } else if (step === 'done') {
    body = html`<${Done} />`;
  }
  const next = step && STEPS[Math.min(STEPS.indexOf(step) + 1, STEPS.length - 1)];
  return html`<div class="page wizard" data-testid="welcome-page" data-step=${step || ''}>
    <${PageHead} title=${t('setup.welcome_title')} lead=${t('setup.welcome_lead')} />
    <${ErrorNotice} error=${loadError || error} testid="welcome-error" />
    ${step && html`<${Steps} current=${step} onGo=${go} />`}
    ${body}
    ${step && step !== 'done' &&
    html`<div class="actions actions--start">
      ${step !== 'members' &&
      html`<button type="button" class="btn btn--ghost" onClick=${() => go(next)} data-testid="welcome-skip">${t('setup.skip')}</button>`}
      <button type="button" class="btn btn--ghost" onClick=${() => redirect('/')} data-testid="welcome-later">
        ${t('setup.later')}</button>
    </div>`}
  </div>`;
}
