// #/admin/telegram (capability admin.system): the bridge's settings. The token goes in
// and never comes back (only "a token is set"); problems the bridge meets (the pairing
// store unreadable, Telegram unreachable, the token refused) are listed here.
import { html, useEffect, useState } from '../../js/lib.js';
import { t } from '../../js/i18n.js';
import { request } from '../../js/api.js';
import { ErrorNotice, Field, Notice, PageHead, useAction, useFlash, useId } from '../../js/components/form.js';

function GroupRow({ group, onSaved }) {
  const [prefix, setPrefix] = useState(group.prefix);
  const [media, setMedia] = useState(group.media);
  const [run, busy, error] = useAction();
  const save = (e) => {
    e.preventDefault();
    run(async () => {
      await request('PUT', `api/telegram/groups/${group.chat_id}`, { prefix, media });
      onSaved();
    });
  };
  return html`<form class="card stack" onSubmit=${save} data-testid="admin-telegram-group">
    <strong>${group.title || group.chat_id}</strong>
    <${ErrorNotice} error=${error} />
    <label>${t('telegram.group_prefix')} <input class="input" value=${prefix} maxlength="40"
      onInput=${(e) => setPrefix(e.currentTarget.value)} data-testid="admin-telegram-group-prefix" /></label>
    <label class="field--inline"><input type="checkbox" checked=${media}
      onChange=${(e) => setMedia(e.currentTarget.checked)} /> ${t('telegram.group_media')}</label>
    <button class="btn" type="submit" disabled=${busy}>${t('common.save')}</button>
  </form>`;
}

function Groups({ onSaved }) {
  const [groups, setGroups] = useState(null);
  const [error, setError] = useState(null);
  useEffect(() => { request('GET', 'api/telegram/groups').then(setGroups, setError); }, []);
  return html`<section class="stack" data-testid="admin-telegram-groups">
    <h2 class="card__title">${t('telegram.groups')}</h2>
    <p class="muted">${t('telegram.groups_lead')}</p>
    <${ErrorNotice} error=${error} />
    ${groups && groups.length === 0 && html`<p class="muted">${t('telegram.no_groups')}</p>`}
    ${groups && groups.map((g) => html`<${GroupRow} key=${g.chat_id} group=${g} onSaved=${onSaved} />`)}
  </section>`;
}

export function AdminTelegramPage() {
  const [settings, setSettings] = useState(null);
  const [form, setForm] = useState(null);
  const [loadError, setLoadError] = useState(null);
  const [run, busy, error] = useAction();
  const [flash, setFlash] = useFlash();
  const ids = { token: useId('tg-token'), base: useId('tg-base'), web: useId('tg-web') };
  const show = (s) => {
    setSettings(s);
    setForm({ enabled: s.enabled, base_url: s.base_url, web_url: s.web_url, token: '' });
  };
  useEffect(() => { request('GET', 'api/telegram/settings').then(show, setLoadError); }, []);
  const save = (e) => {
    e.preventDefault();
    run(async () => {
      const body = { enabled: form.enabled, base_url: form.base_url, web_url: form.web_url };
      if (form.token.trim()) body.token = form.token.trim();
      show(await request('PUT', 'api/telegram/settings', body));
      setFlash(t('common.saved'));
    });
  };
  const set = (key) => (e) => setForm({ ...form, [key]: e.currentTarget.type === 'checkbox' ? e.currentTarget.checked : e.currentTarget.value });
  return html`<div class="page" data-testid="admin-telegram-page">
    <${PageHead} title=${t('telegram.admin_title')} lead=${t('telegram.admin_lead')} />
    ${flash && html`<${Notice} kind="success" testid="admin-telegram-flash">${flash}<//>`}
    <${ErrorNotice} error=${loadError || error} testid="admin-telegram-error" />
    ${settings && settings.problems.map((p) => html`<${Notice} kind="error" testid="admin-telegram-problem">${p}<//>`)}
    ${settings &&
    html`<p class="muted" data-testid="admin-telegram-status">${settings.connected
      ? t('telegram.connected', { bot: '@' + settings.bot_username, n: settings.links })
      : t('telegram.not_connected')}</p>`}
    ${form &&
    html`<form class="card stack" onSubmit=${save} data-testid="admin-telegram-form">
      <label class="field--inline"><input type="checkbox" checked=${form.enabled} onChange=${set('enabled')} data-testid="admin-telegram-enabled" /> ${t('telegram.enabled')}</label>
      <${Field} label=${t('telegram.token')} hint=${settings.has_token ? t('telegram.token_set') : t('telegram.token_hint')} id=${ids.token}>
        <input id=${ids.token} class="input" type="password" autocomplete="off" value=${form.token} onInput=${set('token')} data-testid="admin-telegram-token" />
      <//>
      <${Field} label=${t('telegram.base_url')} hint=${t('telegram.base_url_hint')} id=${ids.base}>
        <input id=${ids.base} class="input" value=${form.base_url} onInput=${set('base_url')} data-testid="admin-telegram-base" />
      <//>
      <${Field} label=${t('telegram.web_url')} hint=${t('telegram.web_url_hint')} id=${ids.web}>
        <input id=${ids.web} class="input" value=${form.web_url} onInput=${set('web_url')} data-testid="admin-telegram-web" />
      <//>
      <button class="btn btn--primary" type="submit" disabled=${busy} data-testid="admin-telegram-save">${t('common.save')}</button>
    </form>`}
    ${settings && html`<${Groups} onSaved=${() => setFlash(t('common.saved'))} />`}
  </div>`;
}
