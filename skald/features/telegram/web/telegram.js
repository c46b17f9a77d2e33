// #/telegram (capability telegram.use): the member pairs their Telegram chat. The bot
// gives an unpaired chat a code to type here; or this page gives a code to type into
// the bot. Unpairing here ends the link (so does /unpair in the chat).
import { html, useEffect, useState } from '../../js/lib.js';
import { t } from '../../js/i18n.js';
import { request } from '../../js/api.js';
import { ErrorNotice, Field, Notice, PageHead, useAction, useFlash, useId } from '../../js/components/form.js';

export function TelegramPage() {
  const [mine, setMine] = useState(null);
  const [loadError, setLoadError] = useState(null);
  const [code, setCode] = useState('');
  const [given, setGiven] = useState(null);
  const [run, busy, error] = useAction();
  const [flash, setFlash] = useFlash();
  const id = useId('tg-code');
  const load = () => request('GET', 'api/telegram/me').then(setMine, setLoadError);
  useEffect(() => { load(); }, []);
  const pair = (e) => {
    e.preventDefault();
    run(async () => {
      setMine(await request('POST', 'api/telegram/pair', { code }));
      setCode('');
      setFlash(t('telegram.paired'));
    });
  };
  const unpair = () => run(async () => {
    await request('DELETE', 'api/telegram/me');
    await load();
  });
  const giveCode = () => run(async () => setGiven(await request('POST', 'api/telegram/code')));
  return html`<div class="page" data-testid="telegram-page">
    <${PageHead} title=${t('telegram.title')} lead=${t('telegram.lead')} />
    ${flash && html`<${Notice} kind="success" testid="telegram-flash">${flash}<//>`}
    <${ErrorNotice} error=${loadError || error} testid="telegram-error" />
    ${mine && !mine.available && html`<${Notice} testid="telegram-off">${t('telegram.off')}<//>`}
    ${mine && mine.links.length > 0 &&
    html`<section class="card stack" data-testid="telegram-linked">
      <p>${t('telegram.linked', { n: mine.links.length })}</p>
      <button class="btn" type="button" disabled=${busy} onClick=${unpair} data-testid="telegram-unpair">${t('telegram.unpair')}</button>
    </section>`}
    ${mine &&
    html`<section class="card stack">
      <p>${mine.bot_username ? t('telegram.how_bot', { bot: '@' + mine.bot_username }) : t('telegram.how')}</p>
      <form class="stack" onSubmit=${pair} data-testid="telegram-pair-form">
        <${Field} label=${t('telegram.code')} id=${id}>
          <input id=${id} class="input" value=${code} maxlength="40" autocomplete="off"
            onInput=${(e) => setCode(e.currentTarget.value)} data-testid="telegram-code" />
        <//>
        <button class="btn btn--primary" type="submit" disabled=${busy || !code.trim()} data-testid="telegram-pair">${t('telegram.pair')}</button>
      </form>
      <p class="muted">${t('telegram.or')}</p>
      <button class="btn" type="button" disabled=${busy} onClick=${giveCode} data-testid="telegram-give-code">${t('telegram.give_code')}</button>
      ${given && html`<p data-testid="telegram-given"><strong>${given.code}</strong> — ${t('telegram.given')}</p>`}
    </section>`}
  </div>`;
}
