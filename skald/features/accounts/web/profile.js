// #/profile — the user's own account: name, language, theme, password,
// what encryption means for them, and "log out everywhere".
// In simple mode (children) only name, language and password are shown.
import { html, useState, useEffect } from '../../js/lib.js';
import { t } from '../../js/i18n.js';
import { api } from '../../js/api.js';
import { getState } from '../../js/store.js';
import { setMe, signedOut } from '../../js/session.js';
import { storedTheme, setTheme, onThemeChange } from '../../js/theme.js';
import { Icon } from '../../js/components/icons.js';
import { Field, ErrorNotice, Notice, useAction, useFlash, useId, errorText, PageHead } from '../../js/components/form.js';
import { LocalePicker } from '../../js/components/controls.js';
import { ConfirmDialog } from '../../js/components/dialog.js';
import { NotificationSettings } from '../../js/components/notification-settings.js';
import { KeepKeyCard } from '../../js/components/keep-key.js';
import { MyPeople } from '../people/people.js';
import { MyReview } from '../system_agents/review-lines.js';
import { ApiTokensCard } from '../tokens/tokens-card.js';

function AboutYou({ me, simple }) {
  const [name, setName] = useState(me.display_name || '');
  const [run, busy, error] = useAction();
  const [saved, setSaved] = useFlash();
  const [theme, setThemeChoice] = useState(storedTheme());
  // The header's toggle changes the theme too: keep this select in step with it.
  useEffect(() => onThemeChange(() => setThemeChoice(storedTheme())), []);
  const nameId = useId('p-name');
  const themeId = useId('p-theme');

  const onSubmit = (e) => {
    e.preventDefault();
    run(async () => {
      const updated = await api.updateMe({ display_name: name.trim() });
      await setMe(updated);
      setSaved(true);
    });
  };

  return html`<section class="card" aria-labelledby="about-title">
    <h2 class="card__title" id="about-title">${t('profile.about')}</h2>
    <form class="stack" onSubmit=${onSubmit} data-testid="profile-form">
      <${Field} label=${t('profile.display_name')} id=${nameId} hint=${t('profile.display_name_hint')}>
        <div class="row">
          <input id=${nameId} class="input" value=${name} autocomplete="name" maxlength="80"
            onInput=${(e) => setName(e.target.value)} data-testid="profile-display-name" />
          <button type="submit" class="btn btn--primary" disabled=${busy || name.trim() === (me.display_name || '')}
            data-testid="profile-save">${t('common.save')}</button>
        </div>
      <//>
      <${ErrorNotice} error=${error} testid="profile-error" />
      ${saved && html`<${Notice} kind="success" testid="profile-saved">${t('common.saved')}<//>`}
    </form>
    <div class="grid-2 profile__prefs">
      <${LocalePicker} compact=${false} testid="profile-locale" />
      ${!simple &&
      html`<div class="field">
        <label class="field__label" for=${themeId}>${t('theme.label')}</label>
        <select id=${themeId} class="select" value=${theme} data-testid="profile-theme"
          onChange=${(e) => {
            setTheme(e.target.value);
            setThemeChoice(e.target.value);
          }}>
          <option value="system">${t('theme.system')}</option>
          <option value="light">${t('theme.light')}</option>
          <option value="dark">${t('theme.dark')}</option>
        </select>
      </div>`}
    </div>
  </section>`;
}

function Privacy({ me }) {
  return html`<section class=${`card privacy ${me.encrypted ? 'privacy--locked' : 'privacy--open'}`}
      aria-labelledby="privacy-title" data-testid="encryption-status" data-encrypted=${me.encrypted ? 'true' : 'false'}>
    <div class="privacy__head">
      <span class="privacy__icon">${me.encrypted ? Icon.lock() : Icon.unlock()}</span>
      <h2 class="card__title" id="privacy-title">
        ${me.encrypted ? t('profile.encrypted_title') : t('profile.plain_title')}
      </h2>
    </div>
    ${me.encrypted
      ? html`<ul class="bullets">
          <li>${t('profile.encrypted_1')}</li>
          <li>${t('profile.encrypted_2')}</li>
          <li>${t('profile.encrypted_3')}</li>
        </ul>`
      : html`<ul class="bullets">
          <li>${t('profile.plain_1')}</li>
          <li>${t('profile.plain_2')}</li>
        </ul>`}
  </section>`;
}

function PasswordForm({ me }) {
  const empty = { current: '', next: '', confirm: '' };
  const [form, setForm] = useState(empty);
  const [mismatch, setMismatch] = useState(false);
  const [run, busy, error] = useAction();
  const [done, setDone] = useFlash(8000);
  const ids = { cur: useId('pw-cur'), next: useId('pw-new'), conf: useId('pw-conf') };
  const set = (key) => (e) => {
    setForm({ ...form, [key]: e.target.value });
    setMismatch(false);
  };

  const onSubmit = (e) => {
    e.preventDefault();
    if (form.next !== form.confirm) {
      setMismatch(true);
      return;
    }
    run(async () => {
      await api.changePassword(form.current, form.next);
      setForm(empty);
      setDone(true);
    });
  };

  return html`<section class="card" aria-labelledby="pw-title">
    <h2 class="card__title" id="pw-title">${t('password.title')}</h2>
    ${me.encrypted && html`<p class="muted">${t('password.encrypted_note')}</p>`}
    <form class="stack" onSubmit=${onSubmit} data-testid="password-form" novalidate>
      <${Field} label=${t('password.current')} id=${ids.cur}>
        <input id=${ids.cur} class="input" type="password" autocomplete="current-password" required
          value=${form.current} onInput=${set('current')} data-testid="password-current" />
      <//>
      <div class="grid-2">
        <${Field} label=${t('password.new')} id=${ids.next}>
          <input id=${ids.next} class="input" type="password" autocomplete="new-password" required
            value=${form.next} onInput=${set('next')} data-testid="password-new" />
        <//>
        <${Field} label=${t('password.confirm')} id=${ids.conf}>
          <input id=${ids.conf} class="input" type="password" autocomplete="new-password" required
            value=${form.confirm} onInput=${set('confirm')} data-testid="password-confirm"
            aria-invalid=${mismatch ? 'true' : undefined} />
        <//>
      </div>
      <${ErrorNotice} error=${mismatch ? t('common.password_mismatch') : error} testid="password-error" />
      ${done && html`<${Notice} kind="success" testid="password-success">${t('password.changed')}<//>`}
      <div class="actions actions--start">
        <button type="submit" class="btn btn--primary" disabled=${busy || !form.current || !form.next || !form.confirm}
          data-testid="password-submit">${busy ? t('common.saving') : t('password.submit')}</button>
      </div>
    </form>
  </section>`;
}

function Sessions() {
  const [confirming, setConfirming] = useState(false);
  const [run, busy, error] = useAction();
  const onConfirm = () =>
    run(async () => {
      await api.logoutAll();
      signedOut({ key: 'auth.logged_out_all', kind: 'success' });
    });
  return html`<section class="card" aria-labelledby="sessions-title">
    <h2 class="card__title" id="sessions-title">${t('sessions.title')}</h2>
    <p class="muted">${t('sessions.body')}</p>
    <div class="actions actions--start">
      <button type="button" class="btn btn--secondary" onClick=${() => setConfirming(true)} data-testid="logout-all">
        ${Icon.logout()}<span>${t('sessions.logout_all')}</span>
      </button>
    </div>
    ${confirming &&
    html`<${ConfirmDialog} title=${t('sessions.confirm_title')} message=${html`<p>${t('sessions.confirm_body')}</p>`}
      confirmLabel=${t('sessions.logout_all')} onConfirm=${onConfirm} onCancel=${() => setConfirming(false)}
      busy=${busy} error=${error && errorText(error)} />`}
  </section>`;
}

export function ProfilePage() {
  const { me } = getState();
  const simple = me.ui_mode === 'simple';
  return html`<div class="page page--narrow" data-testid="profile-page">
    <${PageHead} title=${t('profile.title')} lead=${t('profile.signed_in_as', { username: me.username })} />
    <div class="stack stack--lg">
      <${AboutYou} me=${me} simple=${simple} />
      <${MyPeople} />
      <${MyReview} />
      ${!simple && html`<${Privacy} me=${me} />`}
      ${!simple && me.encrypted && html`<${KeepKeyCard} />`}
      <${PasswordForm} me=${me} />
      <${NotificationSettings} />
      ${!simple && html`<${ApiTokensCard} />`}
      ${!simple && html`<${Sessions} />`}
    </div>
  </div>`;
}
