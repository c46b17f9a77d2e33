// The people feature's parts of two pages (served as plugins/people/people.js):
// - PeopleDialog: on the People page (#/admin/users), an administrator sets a
//   member's directory profile (date of birth, sex, notes) and who supervises them.
// - MyPeople: on the member's own profile, who supervises them (in plain words),
//   whom they supervise, and what the directory says about them.
// The server validates everything (a 400 says what is wrong); the inputs only help.
import { html, useState, useEffect } from '../../js/lib.js';
import { t } from '../../js/i18n.js';
import { getState } from '../../js/store.js';
import { request } from '../../js/api.js';
import { Field, ErrorNotice, Notice, useAction, useFlash, useId } from '../../js/components/form.js';
import { Dialog } from '../../js/components/dialog.js';

const SEX_MAX = 40;
const NOTES_MAX = 2000;
const enc = encodeURIComponent;

function nameOf(person) {
  return person.display_name || person.username;
}

// "Mum", "Mum and Dad", "Mum, Dad and Nan" in the reader's language.
function joinNames(names) {
  if (names.length <= 1) return names.join('');
  return t('people.names_and', { first: names.slice(0, -1).join(', '), last: names[names.length - 1] });
}

// A calendar date in the reader's language (parsed as local, so it never shifts a day).
function dateText(iso) {
  const [y, m, d] = iso.split('-').map(Number);
  return new Date(y, m - 1, d).toLocaleDateString(getState().locale, { year: 'numeric', month: 'long', day: 'numeric' });
}

function localToday() {
  const d = new Date();
  const pad = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`;
}

function DirectoryForm({ user }) {
  const [form, setForm] = useState(null);
  const [age, setAge] = useState(null);
  const [run, busy, error] = useAction();
  const [saved, setSaved] = useFlash();
  const ids = { born: useId('pp-born'), sex: useId('pp-sex'), notes: useId('pp-notes') };
  const show = (p) => {
    setForm({ date_of_birth: p.date_of_birth || '', sex: p.sex, notes: p.notes });
    setAge(p.age);
  };
  useEffect(() => {
    run(async () => show(await request('GET', `api/people/${enc(user.id)}/profile`)));
  }, [user.id]);
  if (!form) return html`<${ErrorNotice} error=${error} testid="people-profile-error" />`;
  const set = (key) => (e) => setForm({ ...form, [key]: e.target.value });
  const onSave = () =>
    run(async () => {
      const body = { date_of_birth: form.date_of_birth || null, sex: form.sex, notes: form.notes };
      show(await request('PUT', `api/people/${enc(user.id)}/profile`, body));
      setSaved(true);
    });
  return html`<fieldset class="stack" data-testid="people-profile">
    <legend>${t('people.directory_title')}</legend>
    <p class="muted small">${t('people.directory_hint')}</p>
    <div class="grid-2">
      <${Field} label=${t('people.date_of_birth')} id=${ids.born}
        hint=${age === null || age === undefined ? t('people.age_unknown') : t('people.age', { age })}>
        <input id=${ids.born} class="input" type="date" max=${localToday()} value=${form.date_of_birth}
          onInput=${set('date_of_birth')} data-testid="people-date-of-birth" />
      <//>
      <${Field} label=${t('people.sex')} id=${ids.sex} hint=${t('common.optional')}>
        <input id=${ids.sex} class="input" maxlength=${SEX_MAX} value=${form.sex} autocomplete="off"
          onInput=${set('sex')} data-testid="people-sex" />
      <//>
    </div>
    <${Field} label=${t('people.notes')} id=${ids.notes} hint=${t('people.notes_hint')}>
      <textarea id=${ids.notes} class="input" rows="3" maxlength=${NOTES_MAX} value=${form.notes}
        onInput=${set('notes')} data-testid="people-notes"></textarea>
    <//>
    <${ErrorNotice} error=${error} testid="people-profile-error" />
    ${saved && html`<${Notice} kind="success" testid="people-profile-saved">${t('common.saved')}<//>`}
    <div class="actions actions--start">
      <button type="button" class="btn btn--primary" disabled=${busy} onClick=${onSave}
        data-testid="people-profile-save">${busy ? t('common.saving') : t('people.save_profile')}</button>
    </div>
  </fieldset>`;
}

function Supervisors({ user, users }) {
  const [links, setLinks] = useState(null);
  const [pick, setPick] = useState('');
  const [run, busy, error] = useAction();
  const pickId = useId('pp-sup');
  useEffect(() => {
    run(async () => setLinks(await request('GET', 'api/people/links')));
  }, [user.id]);
  if (!links) return html`<${ErrorNotice} error=${error} testid="people-links-error" />`;
  const byId = Object.fromEntries(users.map((u) => [u.id, u]));
  const mine = links.filter((l) => l.supervised_id === user.id && byId[l.supervisor_id]);
  const taken = new Set(mine.map((l) => l.supervisor_id));
  const choices = users.filter((u) => u.id !== user.id && !taken.has(u.id));
  const reload = async () => setLinks(await request('GET', 'api/people/links'));
  const add = () =>
    run(async () => {
      await request('PUT', `api/people/links/${enc(pick)}/${enc(user.id)}`);
      setPick('');
      await reload();
    });
  const remove = (id) =>
    run(async () => {
      await request('DELETE', `api/people/links/${enc(id)}/${enc(user.id)}`);
      await reload();
    });
  return html`<fieldset class="stack" data-testid="people-supervisors">
    <legend>${t('people.supervisors_title')}</legend>
    <p class="muted small">${t('people.supervisors_hint', { name: nameOf(user) })}</p>
    ${mine.length === 0 && html`<p class="muted" data-testid="people-no-supervisors">${t('people.no_supervisors')}</p>`}
    <ul class="stack" data-testid="people-supervisor-list">
      ${mine.map(
        (l) => html`<li class="row" data-testid="people-supervisor" data-user-id=${l.supervisor_id}>
          <span>${nameOf(byId[l.supervisor_id])}</span>
          <button type="button" class="btn btn--small btn--ghost" disabled=${busy} onClick=${() => remove(l.supervisor_id)}
            data-testid="people-supervisor-remove"
            aria-label=${t('people.remove_supervisor', { name: nameOf(byId[l.supervisor_id]) })}>${t('common.delete')}</button>
        </li>`,
      )}
    </ul>
    ${choices.length > 0 &&
    html`<div class="row">
      <label class="visually-hidden" for=${pickId}>${t('people.add_supervisor')}</label>
      <select id=${pickId} class="select" value=${pick} onChange=${(e) => setPick(e.target.value)}
        data-testid="people-supervisor-select">
        <option value="">${t('people.choose_supervisor')}</option>
        ${choices.map((u) => html`<option value=${u.id}>${nameOf(u)} (@${u.username})</option>`)}
      </select>
      <button type="button" class="btn btn--secondary" disabled=${busy || !pick} onClick=${add}
        data-testid="people-supervisor-add">${t('people.add_supervisor')}</button>
    </div>`}
    <${ErrorNotice} error=${error} testid="people-links-error" />
  </fieldset>`;
}

// The People page's dialog for one member (opened from their row).
export function PeopleDialog({ user, users, onClose }) {
  return html`<${Dialog} title=${t('people.dialog_title', { name: nameOf(user) })} onClose=${onClose}
      testid="people-dialog">
    <div class="stack">
      <${DirectoryForm} user=${user} />
      <${Supervisors} user=${user} users=${users} />
      <div class="actions">
        <button type="button" class="btn btn--ghost" onClick=${onClose} data-testid="people-dialog-done">
          ${t('people.done')}</button>
      </div>
    </div>
  <//>`;
}

// On the member's own profile page: who looks after them and what the directory says.
export function MyPeople() {
  const [mine, setMine] = useState(null);
  const [run, , error] = useAction();
  useEffect(() => {
    run(async () => setMine(await request('GET', 'api/people/me')));
  }, []);
  if (!mine) return html`<${ErrorNotice} error=${error} testid="my-people-error" />`;
  const p = mine.profile;
  const supervisors = mine.supervised_by.map(nameOf);
  const supervising = mine.supervising.map(nameOf);
  return html`<section class="card" aria-labelledby="my-people-title" data-testid="my-people">
    <h2 class="card__title" id="my-people-title">${t('people.mine_title')}</h2>
    ${supervisors.length > 0 &&
    html`<p data-testid="supervision-line">${t(supervisors.length === 1 ? 'people.supervised_one' : 'people.supervised_many', { names: joinNames(supervisors) })}</p>`}
    ${supervising.length > 0 &&
    html`<p data-testid="supervising-line">${t('people.supervising', { names: joinNames(supervising) })}</p>`}
    <dl class="stack small" data-testid="my-directory">
      <div><dt class="muted">${t('people.date_of_birth')}</dt>
        <dd data-testid="my-date-of-birth">${p.date_of_birth ? `${dateText(p.date_of_birth)} (${t('people.age', { age: p.age })})` : t('people.not_set')}</dd></div>
      <div><dt class="muted">${t('people.sex')}</dt><dd>${p.sex || t('people.not_set')}</dd></div>
      ${p.notes && html`<div><dt class="muted">${t('people.notes')}</dt><dd data-testid="my-notes">${p.notes}</dd></div>`}
    </dl>
    <p class="muted small">${t('people.mine_hint')}</p>
  </section>`;
}
