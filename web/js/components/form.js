// Form building blocks shared by every page: a labelled field, notices, and a
// hook that runs an API call while tracking "busy" and the error text.
import { html, useState, useCallback, useRef, useEffect } from '../lib.js';
import { t, hasText } from '../i18n.js';
import { getState } from '../store.js';
import { Icon } from './icons.js';
import { get, post } from '../api.js';

let fieldSeq = 0;

// Stable unique id per component instance, for <label for>.
export function useId(prefix) {
  const ref = useRef(null);
  if (ref.current === null) ref.current = `${prefix}-${++fieldSeq}`;
  return ref.current;
}

// A <label> + control + optional hint. `children` is the control; it receives
// the id through `id` so the label is bound to it.
export function Field({ label, hint, id, children, inline = false }) {
  const hintId = hint ? `${id}-hint` : null;
  return html`<div class=${`field${inline ? ' field--inline' : ''}`}>
    <label class="field__label" for=${id}>${label}</label>
    ${children}
    ${hint && html`<p class="field__hint" id=${hintId}>${hint}</p>`}
  </div>`;
}

// Turn an ApiError (or anything thrown) into text for the user. Every error code the
// server sends has a sentence in web/i18n (`error.code.<code>`; tests/test_translations.py
// fails when one is missing). In English the server's own message wins (it is more
// specific); in another language the translated sentence is shown and the server's
// English detail goes underneath (errorDetail), so nobody gets an English-only error.
export function errorText(err) {
  if (!err) return '';
  if (err.status === 0) return t('error.network');
  const key = err.code ? `error.code.${err.code}` : null;
  const known = key && hasText(key);
  const english = getState().locale === 'en';
  if (err.serverMessage && (english || !known)) {
    // Shown as sent, only starting with a capital so it reads like a sentence
    // (the server also says when to retry after a 429).
    const m = String(err.serverMessage);
    return m.charAt(0).toUpperCase() + m.slice(1);
  }
  if ((err.status === 429 || err.status === 503) && err.retryAfter) {
    return `${known ? `${t(key)} ` : ''}${t('error.retry_after', { seconds: err.retryAfter })}`;
  }
  if (known) return t(key);
  if (err.status === 403) return t('error.forbidden');
  if (err.status) return t('error.http', { status: err.status });
  return t('error.unexpected');
}

// The server's own (English) words, when errorText showed a translation instead.
export function errorDetail(err) {
  if (!err || typeof err === 'string' || !err.serverMessage || getState().locale === 'en') return '';
  const key = err.code ? `error.code.${err.code}` : null;
  return key && hasText(key) ? String(err.serverMessage) : '';
}

export function ErrorNotice({ error, testid }) {
  if (!error) return null;
  const detail = errorDetail(error);
  return html`<div class="notice notice--error" role="alert" data-testid=${testid}>
    ${Icon.alert()}<span>${typeof error === 'string' ? error : errorText(error)}
      ${detail && html`<span class="notice__detail muted small" data-testid="error-detail">${detail}</span>`}</span>
  </div>`;
}

export function Notice({ kind = 'info', testid, children }) {
  const icon = kind === 'success' ? Icon.check() : kind === 'warning' ? Icon.alert() : Icon.info();
  return html`<div class=${`notice notice--${kind}`} role="status" data-testid=${testid}>${icon}<span>${children}</span></div>`;
}

// const [run, busy, error, setError] = useAction();
// run(async () => {...}) sets busy while the promise runs and catches errors
// into `error` (cleared at the next run). Returns the promise's value or undefined.
export function useAction() {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);
  const alive = useRef(true);
  useEffect(() => () => (alive.current = false), []);
  const run = useCallback(async (fn) => {
    setBusy(true);
    setError(null);
    try {
      return await fn();
    } catch (e) {
      if (alive.current) setError(e);
      return undefined;
    } finally {
      if (alive.current) setBusy(false);
    }
  }, []);
  return [run, busy, error, setError];
}

// The doctor's own words (English, as `skald doctor` prints them), under a translated
// "Technical details": the setup checklist and the Overview's health lines.
export function DoctorWords({ text }) {
  return html`<details class="small muted"><summary>${t('approval.technical')}</summary><span lang="en">${text}</span></details>`;
}

// The head every page opens with: its title and, below it, one lead line.
export function PageHead({ title, lead }) {
  return html`<header class="page__head">
      <h1 class="page__title">${title}</h1>
      <p class="page__lead muted">${lead}</p>
    </header>`;
}

// A small "Saved" confirmation that fades after a few seconds.
export function useFlash(ms = 4000) {
  const [flash, setFlash] = useState(null);
  useEffect(() => {
    if (!flash) return undefined;
    const id = setTimeout(() => setFlash(null), ms);
    return () => clearTimeout(id);
  }, [flash]);
  return [flash, setFlash];
}

// "Make one" for a place with a name and a description (a project, a shared folder):
// `POST path { name, description }`, then `onMade()` (the page reads its list again);
// the fields empty again when it worked. `text`: the labels { name, description,
// create }; `ids`: test ids of the same keys plus `form` and `error`; `icon`: the button's.
export function NameDescriptionForm({ path, text, ids, icon, onMade }) {
  const [name, setName] = useState('');
  const [description, setDescription] = useState('');
  const [run, busy, error] = useAction();
  const create = (e) => {
    e.preventDefault();
    run(async () => {
      await post(path, { name, description });
      await onMade();
      setName('');
      setDescription('');
    });
  };
  return html`<form class="card stack" onSubmit=${create} data-testid=${ids.form}>
      <label class="field"><span>${text.name}</span>
        <input class="input" required maxlength="80" value=${name} onInput=${(e) => setName(e.target.value)} data-testid=${ids.name} /></label>
      <label class="field"><span>${text.description}</span>
        <input class="input" maxlength="500" value=${description} onInput=${(e) => setDescription(e.target.value)} data-testid=${ids.description} /></label>
      ${error && html`<p class="approval__error" role="alert" data-testid=${ids.error}>${errorText(error)}</p>`}
      <div class="actions actions--start"><button type="submit" class="btn btn--primary" disabled=${busy || !name.trim()}
        data-testid=${ids.create}>${icon}<span>${text.create}</span></button></div>
    </form>`;
}

// const [list, error, load, setList] = useRead('api/things');
// A page's own copy of what `GET path` answers: null until the first answer, then the
// last one that came (or what the page put there with `setList`); `error` is the last
// read's failure, cleared by the next answer. `load` (the same function at every
// render) reads again; the page calls it when it opens and after each change it makes.
export function useRead(path) {
  const [value, setValue] = useState(null);
  const [error, setError] = useState(null);
  const load = useCallback(async () => {
    try {
      setValue(await get(path));
      setError(null);
    } catch (e) {
      setError(e);
    }
  }, [path]);
  return [value, error, load, setValue];
}

// A checkbox setting: the box, its name in bold and a line under it saying what it does.
export function Check({ id, checked, onChange, testid, label, hint }) {
  return html`<div class="check">
      <input type="checkbox" id=${id} checked=${checked} data-testid=${testid} onChange=${onChange} />
      <label for=${id}><strong>${label}</strong>
        <span class="muted small">${hint}</span></label>
    </div>`;
}

// The foot of a dialog's form: the error of its last try, then Cancel and the submit
// button (disabled while busy unless `disabled` says more; "Saving…" while busy).
// `errorTestid` and `testid` are the error's and the submit button's test ids.
export function FormActions({ error, errorTestid, onCancel, busy, disabled = busy, testid, label = t('common.save') }) {
  return html`<${ErrorNotice} error=${error} testid=${errorTestid} />
    <div class="actions">
      <button type="button" class="btn btn--ghost" onClick=${onCancel}>${t('common.cancel')}</button>
      <button type="submit" class="btn btn--primary" disabled=${disabled} data-testid=${testid}>${busy ? t('common.saving') : label}</button>
    </div>`;
}

// The top of an administration page that keeps a list: its head, the last change's
// "done" line, the error of an action on a row, the list read's error, and "Loading…"
// until the list is in. Test ids: `<name>-flash`, `<name>-action-error`, `<name>-error`,
// `<name>-loading`.
export function AdminTop({ name, title, lead, flash, rowError, loadError, loaded }) {
  return html`<${PageHead} title=${title} lead=${lead} />
    ${flash && html`<${Notice} kind="success" testid=${`${name}-flash`}>${flash}<//>`}
    <${ErrorNotice} error=${rowError} testid=${`${name}-action-error`} />
    <${ErrorNotice} error=${loadError} testid=${`${name}-error`} />
    ${!loaded && !loadError && html`<p class="muted" data-testid=${`${name}-loading`}>${t('common.loading')}</p>`}`;
}

// A card's head: its title (`id`, for the card's aria-labelledby) and a line about it,
// with the card's buttons (`children`) beside them.
export function SectionHead({ id, title, lead, children }) {
  return html`<div class="section-head">
      <div>
        <h2 class="card__title" id=${id}>${title}</h2>
        <p class="muted">${lead}</p>
      </div>
      ${children}
    </div>`;
}

// const { deleting, ask, close, run, busy, error } = useDeleting();
// Deleting one of a page's things after asking: `ask(what)` opens the question
// (`deleting` is `what` until `close()`) with no error left from an earlier try; `run`
// does the deletion, with `busy` and `error` as useAction's.
export function useDeleting() {
  const [deleting, setDeleting] = useState(null);
  const [run, busy, error, setError] = useAction();
  const ask = (what) => {
    setError(null);
    setDeleting(what);
  };
  return { deleting, ask, close: () => setDeleting(null), run, busy, error };
}
