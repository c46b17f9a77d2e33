// The Tasks page's form for a new or an existing job: what to do (a reminder, told as
// written, or something the assistant does), when (in N minutes, at a date and time,
// every day / weekday / week at a time, or a cron expression) and the model it runs with.
// Rule: the server says when it runs: every change asks POST /api/schedule/preview
// (the next runs in words, in the member's zone and language, with the checks of saving),
// so the page never computes a time and a refusal shows before Save. Refusals show as an
// ErrorNotice: in Italian or French the translated sentence and, below it, the server's own
// words (a bad cron expression's explanation of the five fields has no translation).
// Trap: the preview is debounced and only the newest answer is shown (an older, slower
// answer must not replace it).
import { html, useEffect, useRef, useState } from '../lib.js';
import { t } from '../i18n.js';
import { api } from '../api.js';
import { Field, useId, ErrorNotice } from './form.js';

const MODES = ['in', 'at', 'daily', 'weekdays', 'weekly', 'cron'];
const PREVIEW_DELAY_MS = 300;

function pad(n) {
  return String(n).padStart(2, '0');
}

function today() {
  const d = new Date();
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`;
}

// A job's run_at (UTC) as date and time fields in the job's own zone.
function localParts(iso, zone) {
  try {
    const parts = new Intl.DateTimeFormat('en-CA', {
      timeZone: zone, year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', hourCycle: 'h23',
    }).formatToParts(new Date(iso));
    const p = Object.fromEntries(parts.map((x) => [x.type, x.value]));
    return { date: `${p.year}-${p.month}-${p.day}`, time: `${p.hour}:${p.minute}` };
  } catch {
    return { date: today(), time: '08:00' };
  }
}

// The form's fields from an existing job (simple cron shapes open in their friendly mode).
function fromJob(job) {
  const base = { text: job.prompt, kind: job.kind || 'prompt', model: job.model_id || '',
    window: job.approval_window_s ? String(job.approval_window_s) : '', minutes: 10,
    date: today(), time: '08:00', weekday: '1', cron: job.cron || '', mode: 'cron' };
  if (!job.cron) return { ...base, mode: 'at', ...localParts(job.run_at, job.zone) };
  const m = /^(\d{1,2}) (\d{1,2}) \* \* (\*|1-5|[0-7])$/.exec(job.cron);
  if (!m) return base;
  const time = `${pad(m[2])}:${pad(m[1])}`;
  if (m[3] === '*') return { ...base, mode: 'daily', time };
  if (m[3] === '1-5') return { ...base, mode: 'weekdays', time };
  return { ...base, mode: 'weekly', time, weekday: String(Number(m[3]) % 7) };
}

function blank() {
  return { text: '', kind: 'reminder', model: '', minutes: 10, date: today(), time: '08:00', weekday: '1', cron: '', mode: 'in' };
}

// The time fields of the API (exactly one of in_minutes, at, cron), or null if incomplete.
function whenOf(f) {
  const [h, mi] = (f.time || '').split(':').map((x) => Number(x));
  const clock = Number.isInteger(h) && Number.isInteger(mi);
  switch (f.mode) {
    case 'in':
      return Number(f.minutes) >= 1 ? { in_minutes: Math.round(Number(f.minutes)) } : null;
    case 'at':
      return f.date && clock ? { at: `${f.date}T${f.time}` } : null;
    case 'daily':
      return clock ? { cron: `${mi} ${h} * * *` } : null;
    case 'weekdays':
      return clock ? { cron: `${mi} ${h} * * 1-5` } : null;
    case 'weekly':
      return clock ? { cron: `${mi} ${h} * * ${f.weekday}` } : null;
    default:
      return f.cron.trim() ? { cron: f.cron.trim() } : null;
  }
}

// Hour and minute as two lists written the page's way (13:00 in Italian and French,
// 1 PM in English). The browser's own time field follows the device's language
// instead, so an Italian page on an English phone asked for "07:30 AM".
const HOURS = Array.from({ length: 24 }, (_, h) => h);
const MINUTES = Array.from({ length: 60 }, (_, m) => m);

function hourLabel(h) {
  const lang = document.documentElement.lang || 'en';
  return new Intl.DateTimeFormat(lang, { hour: 'numeric', timeZone: 'UTC' }).format(Date.UTC(2020, 0, 1, h));
}

function TimePicker({ id, value, onChange }) {
  const [h, m] = (value || '08:00').split(':').map((x) => Number(x));
  const put = (hour, minute) => onChange(`${pad(hour)}:${pad(minute)}`);
  return html`<span class="time-picker" data-testid="job-form-time">
    <select id=${id} class="select" aria-label=${t('tasks.form_hour')} value=${String(h)}
      onChange=${(e) => put(Number(e.target.value), m)} data-testid="job-form-hour">
      ${HOURS.map((x) => html`<option value=${String(x)}>${hourLabel(x)}</option>`)}
    </select>
    <span aria-hidden="true">:</span>
    <select class="select" aria-label=${t('tasks.form_minute')} value=${String(m)}
      onChange=${(e) => put(h, Number(e.target.value))} data-testid="job-form-minute">
      ${MINUTES.map((x) => html`<option value=${String(x)}>${pad(x)}</option>`)}
    </select>
  </span>`;
}

// The approval windows offered (seconds); the API takes any from 60 s to 7 days.
const WINDOWS = [3600, 14400, 86400];

export function JobForm({ job = null, onSaved, onCancel }) {
  const [f, setF] = useState(() => (job ? fromJob(job) : blank()));
  const [models, setModels] = useState([]);
  const [preview, setPreview] = useState(null);
  const [previewError, setPreviewError] = useState(null);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);
  const asked = useRef(0);
  const ids = { text: useId('job-text'), kind: useId('job-kind'), mode: useId('job-mode'), minutes: useId('job-minutes'),
    date: useId('job-date'), time: useId('job-time'), weekday: useId('job-weekday'), cron: useId('job-cron'), model: useId('job-model'),
    window: useId('job-window') };
  const set = (name) => (e) => setF((old) => ({ ...old, [name]: e.target.value }));
  const when = whenOf(f);
  const whenKey = JSON.stringify(when);

  useEffect(() => {
    api.chatModels().then(setModels, () => setModels([]));
  }, []);
  useEffect(() => {
    const mine = ++asked.current;
    if (!when) {
      setPreview(null);
      setPreviewError(null);
      return undefined;
    }
    const timer = setTimeout(async () => {
      try {
        const body = { ...when, ...(f.model ? { model_id: f.model } : {}), ...(job ? { job_id: job.id } : {}) };
        const answer = await api.previewSchedule(body);
        if (mine === asked.current) {
          setPreview(answer);
          setPreviewError(null);
        }
      } catch (e) {
        if (mine === asked.current) {
          setPreview(null);
          setPreviewError(e);
        }
      }
    }, PREVIEW_DELAY_MS);
    return () => clearTimeout(timer);
  }, [whenKey, f.model]);

  const onSubmit = async (e) => {
    e.preventDefault();
    if (!when || !f.text.trim()) return;
    setBusy(true);
    setError(null);
    try {
      const body = { prompt: f.text.trim(), kind: f.kind, ...when };
      // How long an approval its run asks for waits in the Inbox (0: until the next run, at most a day).
      const windowS = f.window ? Number(f.window) : 0;
      if (job) await api.updateJob(job.id, { ...body, model_id: f.model, approval_window_s: windowS });
      else await api.createJob({ ...body, ...(f.model ? { model_id: f.model } : {}), ...(windowS ? { approval_window_s: windowS } : {}) });
      await onSaved();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };

  const timeField = html`<${Field} label=${t('tasks.form_time')} id=${ids.time}>
    <${TimePicker} id=${ids.time} value=${f.time} onChange=${(time) => setF((old) => ({ ...old, time }))} />
  <//>`;
  return html`<form class="stack card" onSubmit=${onSubmit} data-testid="job-form" novalidate>
    <${Field} label=${t('tasks.form_text')} id=${ids.text} hint=${t(f.kind === 'reminder' ? 'tasks.form_text_hint_reminder' : 'tasks.form_text_hint_prompt')}>
      <textarea id=${ids.text} class="input" rows="2" maxlength="8000" required value=${f.text}
        onInput=${set('text')} placeholder=${t('tasks.form_text_placeholder')} data-testid="job-form-text"></textarea>
    <//>
    <${Field} label=${t('tasks.form_kind')} id=${ids.kind}>
      <select id=${ids.kind} class="select" value=${f.kind} onChange=${set('kind')} data-testid="job-form-kind">
        <option value="reminder">${t('tasks.kind_reminder')}</option>
        <option value="prompt">${t('tasks.kind_prompt')}</option>
      </select>
    <//>
    <${Field} label=${t('tasks.form_when')} id=${ids.mode}>
      <select id=${ids.mode} class="select" value=${f.mode} onChange=${set('mode')} data-testid="job-form-mode">
        ${MODES.map((m) => html`<option value=${m}>${t(`tasks.mode_${m}`)}</option>`)}
      </select>
    <//>
    ${f.mode === 'in' &&
    html`<${Field} label=${t('tasks.form_minutes')} id=${ids.minutes}>
      <input id=${ids.minutes} class="input" type="number" min="1" step="1" inputmode="numeric" value=${f.minutes}
        onInput=${set('minutes')} data-testid="job-form-minutes" />
    <//>`}
    ${f.mode === 'at' &&
    html`<div class="grid-2">
      <${Field} label=${t('tasks.form_date')} id=${ids.date}>
        <input id=${ids.date} class="input" type="date" required value=${f.date} onInput=${set('date')} data-testid="job-form-date" />
      <//>
      ${timeField}
    </div>`}
    ${(f.mode === 'daily' || f.mode === 'weekdays') && timeField}
    ${f.mode === 'weekly' &&
    html`<div class="grid-2">
      <${Field} label=${t('tasks.form_weekday')} id=${ids.weekday}>
        <select id=${ids.weekday} class="select" value=${f.weekday} onChange=${set('weekday')} data-testid="job-form-weekday">
          ${['1', '2', '3', '4', '5', '6', '0'].map((d) => html`<option value=${d}>${t(`tasks.day_${d}`)}</option>`)}
        </select>
      <//>
      ${timeField}
    </div>`}
    ${f.mode === 'cron' &&
    html`<${Field} label=${t('tasks.form_cron')} id=${ids.cron} hint=${t('tasks.form_cron_hint')}>
      <input id=${ids.cron} class="input mono" value=${f.cron} onInput=${set('cron')} placeholder="30 7 * * 1-5"
        autocapitalize="none" spellcheck="false" data-testid="job-form-cron" />
    <//>`}
    ${f.kind === 'prompt' &&
    html`<${Field} label=${t('tasks.form_model')} id=${ids.model} hint=${t('tasks.form_model_hint')}>
      <select id=${ids.model} class="select" value=${f.model} onChange=${set('model')} data-testid="job-form-model">
        <option value="">${t('tasks.model_auto')}</option>
        ${models.map((m) => html`<option value=${m.id}>${m.name}</option>`)}
      </select>
    <//>`}
    ${f.kind === 'prompt' &&
    html`<${Field} label=${t('tasks.form_window')} id=${ids.window} hint=${t('tasks.form_window_hint')}>
      <select id=${ids.window} class="select" value=${f.window} onChange=${set('window')} data-testid="job-form-window">
        <option value="">${t('tasks.window_default')}</option>
        ${WINDOWS.map((w) => html`<option value=${String(w)}>${t(`tasks.window_${w}`)}</option>`)}
      </select>
    <//>`}
    <div class="small" aria-live="polite" data-testid="job-form-preview">
      ${preview &&
      html`<p><strong data-testid="job-form-preview-text">${preview.description}</strong></p>
        <ul class="muted">${preview.next_runs_text.map((w) => html`<li data-testid="job-form-preview-run">${w}</li>`)}</ul>`}
      <${ErrorNotice} error=${previewError} testid="job-form-preview-error" />
    </div>
    <${ErrorNotice} error=${error} testid="job-form-error" />
    <div class="actions">
      <button type="button" class="btn btn--secondary" onClick=${onCancel} data-testid="job-form-cancel">${t('common.cancel')}</button>
      <button type="submit" class="btn btn--primary" disabled=${busy || !when || !f.text.trim() || !!previewError}
        data-testid="job-form-save">${t(job ? 'common.save' : 'tasks.create')}</button>
    </div>
  </form>`;
}
