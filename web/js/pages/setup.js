// #/setup — first run. Creates the first administrator with the one-time
// setup token printed in the server log (so a neighbour on the same network
// cannot claim the box first). The link in the log looks like
// #/setup?token=XYZ; the token field is prefilled from it.
import { html, useState, useEffect } from '../lib.js';
import { t } from '../i18n.js';
import { api } from '../api.js';
import { getState, setState } from '../store.js';
import { setMe } from '../session.js';
import { redirect } from '../router.js';
import { Field, ErrorNotice, useAction, useId } from '../components/form.js';
import { RecoveryCode } from '../components/recovery.js';
import { AuthLayout } from './auth-layout.js';

export function SetupPage() {
  const { route, locale } = getState();
  const tokenFromUrl = route.query.get('token') || '';
  const [form, setForm] = useState({ token: tokenFromUrl, username: '', display_name: '', password: '', confirm: '' });
  const [mismatch, setMismatch] = useState(false);
  const [done, setDone] = useState(null); // {me, recovery_code} after success
  const [run, busy, error] = useAction();
  const ids = { token: useId('s-token'), user: useId('s-user'), name: useId('s-name'), pw: useId('s-pw'), pw2: useId('s-pw2') };

  // The link may be opened while this page is already showing (same component,
  // new hash): take the token from it.
  useEffect(() => {
    if (tokenFromUrl) setForm((f) => ({ ...f, token: tokenFromUrl }));
  }, [tokenFromUrl]);

  const set = (key) => (e) => {
    setForm({ ...form, [key]: e.target.value });
    if (key === 'password' || key === 'confirm') setMismatch(false);
  };

  // The new admin is logged in by the server already; we only enter the app
  // once the recovery code has been acknowledged, so it cannot be skipped by
  // the router redirecting away.
  const finish = async (result) => {
    setState({ setupNeeded: false });
    await setMe(result.me);
    // On to the household's setup (name, time zone, a model, the family).
    redirect('/welcome');
  };

  const onSubmit = (e) => {
    e.preventDefault();
    if (form.password !== form.confirm) {
      setMismatch(true);
      return;
    }
    run(async () => {
      const body = { token: form.token.trim(), username: form.username.trim(), password: form.password, locale };
      if (form.display_name.trim()) body.display_name = form.display_name.trim();
      const result = await api.setup(body);
      setForm({ ...form, password: '', confirm: '' });
      if (result.recovery_code) setDone(result);
      else await finish(result);
    });
  };

  if (done) {
    return html`<${AuthLayout} title=${t('recovery.title')} testid="setup-page">
      <div class="stack" data-testid="setup-recovery">
        <p>${t('setup.recovery_intro')}</p>
        <${RecoveryCode} code=${done.recovery_code} warning=${t('setup.recovery_warning')}
          confirmLabel=${t('recovery.saved')} onConfirm=${() => finish(done)} />
      </div>
    <//>`;
  }

  return html`<${AuthLayout} title=${t('setup.title')} subtitle=${t('setup.subtitle')} testid="setup-page" wide>
    <form class="stack" onSubmit=${onSubmit} data-testid="setup-form" novalidate>
      <${Field} label=${t('setup.token')} id=${ids.token}
        hint=${tokenFromUrl ? t('setup.token_from_link') : t('setup.token_hint')}>
        <input id=${ids.token} class="input mono" required autocomplete="off" spellcheck="false" autocapitalize="none"
          value=${form.token} onInput=${set('token')} data-testid="setup-token" aria-describedby=${`${ids.token}-hint`} />
      <//>
      <fieldset class="fieldset">
        <legend>${t('setup.admin_account')}</legend>
        <div class="grid-2">
          <${Field} label=${t('setup.username')} id=${ids.user}>
            <input id=${ids.user} class="input" required autocomplete="username" autocapitalize="none" spellcheck="false"
              value=${form.username} onInput=${set('username')} data-testid="setup-username" />
          <//>
          <${Field} label=${t('setup.display_name')} id=${ids.name} hint=${t('common.optional')}>
            <input id=${ids.name} class="input" autocomplete="name" value=${form.display_name}
              onInput=${set('display_name')} data-testid="setup-display-name" />
          <//>
          <${Field} label=${t('setup.password')} id=${ids.pw}>
            <input id=${ids.pw} class="input" type="password" required autocomplete="new-password"
              value=${form.password} onInput=${set('password')} data-testid="setup-password" />
          <//>
          <${Field} label=${t('setup.password_confirm')} id=${ids.pw2}>
            <input id=${ids.pw2} class="input" type="password" required autocomplete="new-password"
              value=${form.confirm} onInput=${set('confirm')} data-testid="setup-password-confirm"
              aria-invalid=${mismatch ? 'true' : undefined} />
          <//>
        </div>
        <p class="field__hint">${t('setup.password_hint')}</p>
      </fieldset>
      <${ErrorNotice} error=${mismatch ? t('common.password_mismatch') : error} testid="setup-error" />
      ${busy &&
      html`<div class="progress" role="status" data-testid="setup-progress">
        <span class="progress__bar" aria-hidden="true"></span>
        <span class="small">${t('setup.progress')}</span>
      </div>`}
      <button type="submit" class="btn btn--primary btn--block"
        disabled=${busy || !form.token.trim() || !form.username.trim() || !form.password || !form.confirm}
        data-testid="setup-submit">${busy ? t('setup.submitting') : t('setup.submit')}</button>
    </form>
  <//>`;
}
