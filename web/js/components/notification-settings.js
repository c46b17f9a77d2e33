// The profile's "Notifications" card: where notifications arrive (the
// channels the server has, in the member's order), quiet hours, Web Push on
// this device and on the others, and a test notification.
import { html, useEffect, useState } from '../lib.js';
import { t, formatDate } from '../i18n.js';
import { api } from '../api.js';
import { Icon } from './icons.js';
import { ErrorNotice, Notice, useAction, useFlash, useId } from './form.js';
import { pushSupported, currentSubscription, enablePush, disablePush } from '../push.js';

const CHANNEL_LABELS = { web: 'notifications.channel_web', telegram: 'notifications.channel_telegram' };
const channelLabel = (name) => (CHANNEL_LABELS[name] ? t(CHANNEL_LABELS[name]) : name);

function Where({ settings, onSaved }) {
  const [chosen, setChosen] = useState(settings.channels);
  const [quietOn, setQuietOn] = useState(!!settings.quiet);
  const [start, setStart] = useState(settings.quiet ? settings.quiet.start : '22:00');
  const [end, setEnd] = useState(settings.quiet ? settings.quiet.end : '07:00');
  const [zone, setZone] = useState(settings.quiet && settings.quiet.timezone ? settings.quiet.timezone : '');
  const [run, busy, error] = useAction();
  const [saved, setSaved] = useFlash();
  const startId = useId('q-start');
  const endId = useId('q-end');
  const zoneId = useId('q-zone');

  const toggle = (name) =>
    setChosen(chosen.includes(name) ? chosen.filter((c) => c !== name) : [...chosen, name]);

  const onSubmit = (e) => {
    e.preventDefault();
    run(async () => {
      const body = {
        channels: chosen.length ? chosen : ['web'],
        quiet: quietOn ? { start, end, timezone: zone.trim() || null } : null,
      };
      onSaved(await api.saveNotificationSettings(body));
      setSaved(true);
    });
  };

  return html`<form class="stack" onSubmit=${onSubmit} data-testid="notif-settings-form">
    <fieldset class="fieldset">
      <legend class="field__label">${t('notifications.where')}</legend>
      <p class="muted small">${t('notifications.where_hint')}</p>
      ${settings.available.map(
        (name) => html`<label class="check">
          <input type="checkbox" checked=${chosen.includes(name)} onChange=${() => toggle(name)}
            data-testid=${`notif-channel-${name}`} />
          <span>${channelLabel(name)}</span>
        </label>`,
      )}
    </fieldset>
    <fieldset class="fieldset">
      <legend class="field__label">${t('notifications.quiet')}</legend>
      <label class="check">
        <input type="checkbox" checked=${quietOn} onChange=${(e) => setQuietOn(e.target.checked)} data-testid="notif-quiet-on" />
        <span>${t('notifications.quiet_on')}</span>
      </label>
      ${quietOn &&
      html`<div class="notif-quiet">
        <div class="field"><label class="field__label" for=${startId}>${t('notifications.quiet_from')}</label>
          <input id=${startId} class="input" type="time" value=${start} required onInput=${(e) => setStart(e.target.value)} data-testid="notif-quiet-start" /></div>
        <div class="field"><label class="field__label" for=${endId}>${t('notifications.quiet_to')}</label>
          <input id=${endId} class="input" type="time" value=${end} required onInput=${(e) => setEnd(e.target.value)} data-testid="notif-quiet-end" /></div>
        <div class="field"><label class="field__label" for=${zoneId}>${t('notifications.quiet_zone')}</label>
          <input id=${zoneId} class="input" value=${zone} maxlength="64" placeholder=${settings.household_timezone}
            onInput=${(e) => setZone(e.target.value)} data-testid="notif-quiet-zone" /></div>
      </div>
      <p class="muted small">${t('notifications.quiet_hint')}</p>`}
    </fieldset>
    <div class="actions actions--start">
      <button type="submit" class="btn btn--primary" disabled=${busy} data-testid="notif-settings-save">${t('common.save')}</button>
    </div>
    <${ErrorNotice} error=${error} testid="notif-settings-error" />
    ${saved && html`<${Notice} kind="success" testid="notif-settings-saved">${t('common.saved')}<//>`}
  </form>`;
}

function Devices() {
  const [devices, setDevices] = useState(null);
  const [here, setHere] = useState(null); // this browser's endpoint, or null
  const [denied, setDenied] = useState(false);
  const [run, busy, error] = useAction();
  const supported = pushSupported();

  const reload = async () => {
    setDevices(await api.pushDevices());
    const sub = supported ? await currentSubscription() : null;
    setHere(sub ? sub.endpoint : null);
  };
  useEffect(() => {
    reload().catch(() => setDevices([]));
  }, []);

  const mine = devices && here ? devices.find((d) => d.endpoint === here) : null;
  const turnOn = () =>
    run(async () => {
      setDenied((await enablePush()) === 'denied');
      await reload();
    });
  const turnOff = () =>
    run(async () => {
      await disablePush(devices);
      await reload();
    });

  return html`<div class="stack" data-testid="notif-devices">
    <h3 class="card__subtitle">${t('notifications.push')}</h3>
    ${!supported && html`<p class="muted small" data-testid="notif-push-unsupported">${t('notifications.push_unsupported')}</p>`}
    ${supported &&
    html`<div class="row">
      <span data-testid="notif-push-here" data-state=${mine ? 'on' : 'off'}>${mine ? t('notifications.push_here_on') : t('notifications.push_here_off')}</span>
      ${mine
        ? html`<button type="button" class="btn btn--secondary" disabled=${busy} onClick=${turnOff} data-testid="notif-push-off">${t('notifications.push_turn_off')}</button>`
        : html`<button type="button" class="btn btn--secondary" disabled=${busy} onClick=${turnOn} data-testid="notif-push-on">${t('notifications.push_turn_on')}</button>`}
    </div>`}
    ${denied && html`<${Notice} kind="warning" testid="notif-push-denied">${t('notifications.push_denied')}<//>`}
    ${devices && devices.length > 0 &&
    html`<ul class="list">${devices.map(
      (d) => html`<li class="row" data-testid="notif-device" data-id=${d.id}>
        <label class="check">
          <input type="checkbox" checked=${d.enabled} data-testid="notif-device-enabled"
            onChange=${(e) => run(async () => { await api.pushDevice(d.id, e.target.checked); await reload(); })} />
          <span>${d.label || t('notifications.device')}${d.endpoint === here ? ` (${t('notifications.this_device')})` : ''}</span>
        </label>
        <span class="muted small">${formatDate(d.created_at)}</span>
        <button type="button" class="icon-btn" aria-label=${t('common.delete')} title=${t('common.delete')} data-testid="notif-device-remove"
          onClick=${() => run(async () => { await api.pushRemove(d.id); await reload(); })}>${Icon.trash()}</button>
      </li>`,
    )}</ul>`}
    <${ErrorNotice} error=${error} testid="notif-devices-error" />
  </div>`;
}

export function NotificationSettings() {
  const [settings, setSettings] = useState(null);
  const [run, busy, error] = useAction();
  const [sent, setSent] = useFlash();
  useEffect(() => {
    run(async () => setSettings(await api.notificationSettings()));
  }, []);
  const test = () =>
    run(async () => {
      await api.notificationTest();
      setSent(true);
    });
  return html`<section class="card" aria-labelledby="notif-title" data-testid="notif-settings">
    <h2 class="card__title" id="notif-title">${t('notifications.title')}</h2>
    ${settings && html`<${Where} settings=${settings} onSaved=${setSettings} />`}
    <${Devices} />
    <div class="actions actions--start">
      <button type="button" class="btn btn--ghost" disabled=${busy} onClick=${test} data-testid="notif-test">${t('notifications.send_test')}</button>
    </div>
    <${ErrorNotice} error=${error} testid="notif-error" />
    ${sent && html`<${Notice} kind="success" testid="notif-test-sent">${t('notifications.test_sent')}<//>`}
  </section>`;
}
