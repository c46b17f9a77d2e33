// #/login — username and password. After success the app shell takes over
// (the router guard sends a logged-in user from #/login to #/).
import { html, useState } from '../lib.js';
import { t } from '../i18n.js';
import { api } from '../api.js';
import { getState, setState } from '../store.js';
import { setMe } from '../session.js';
import { redirect } from '../router.js';
import { Field, ErrorNotice, Notice, useAction, useId } from '../components/form.js';
import { AuthLayout } from './auth-layout.js';

export function LoginPage() {
  const [username, setUsername] = useState('');
  const [password, setPassword] = useState('');
  const [run, busy, error] = useAction();
  const { notice } = getState();
  const uid = useId('login-user');
  const pid = useId('login-pass');

  const onSubmit = (e) => {
    e.preventDefault();
    if (notice) setState({ notice: null }); // the old message no longer applies
    run(async () => {
      const me = await api.login(username.trim(), password);
      setPassword('');
      await setMe(me);
      redirect('/');
    });
  };

  return html`<${AuthLayout} title=${t('login.title')} subtitle=${t('login.subtitle')} testid="login-page">
    ${notice &&
    html`<${Notice} kind=${notice.kind || 'info'} testid="login-notice">${t(notice.key, notice.vars)}<//>`}
    <form class="stack" onSubmit=${onSubmit} data-testid="login-form" novalidate>
      <${Field} label=${t('login.username')} id=${uid}>
        <input id=${uid} class="input" name="username" autocomplete="username" autocapitalize="none"
          spellcheck="false" required value=${username} onInput=${(e) => setUsername(e.target.value)}
          data-testid="login-username" />
      <//>
      <${Field} label=${t('login.password')} id=${pid}>
        <input id=${pid} class="input" type="password" name="password" autocomplete="current-password" required
          value=${password} onInput=${(e) => setPassword(e.target.value)} data-testid="login-password" />
      <//>
      <${ErrorNotice} error=${error} testid="login-error" />
      <button type="submit" class="btn btn--primary btn--block" disabled=${busy || !username || !password}
        data-testid="login-submit">${busy ? t('login.submitting') : t('login.submit')}</button>
    </form>
    <p class="muted small auth__foot">${t('login.help')}</p>
  <//>`;
}
