// #/admin/shared-folders — the household's shared folders (capability folders.manage):
// make one, rename it (the path `shared/<slug>` never changes), describe it, choose who
// reads or writes it, delete to the trash, restore, delete for good.
// Rule: the server is the authority; every action reloads the list.
import { html, useEffect, useState } from '../../js/lib.js';
import { t } from '../../js/i18n.js';
import { get, post, patch, del, request } from '../../js/api.js';
import { Icon } from '../../js/components/icons.js';
import { ErrorNotice, errorText, useAction, useRead, PageHead, NameDescriptionForm } from '../../js/components/form.js';

const base = 'api/shared-folders';
const enc = encodeURIComponent;

function Members({ folder, users, act, busy }) {
  const [who, setWho] = useState('');
  const [access, setAccess] = useState('read');
  const name = (id) => (users.find((u) => u.id === id) || {}).username || id;
  const others = users.filter((u) => !folder.members.some((m) => m.user_id === u.id));
  return html`<div class="stack small">
    <ul class="sf-members" data-testid="sf-members">
      ${folder.members.map((m) => html`<li data-testid="sf-member" data-user=${name(m.user_id)} data-access=${m.access}>
        <span>${name(m.user_id)}</span>
        <select class="select" value=${m.access} disabled=${busy} aria-label=${t('sf.access')}
          onChange=${(e) => act(() => request('PUT', `${base}/${enc(folder.slug)}/members/${enc(m.user_id)}`, { access: e.target.value }))}>
          <option value="read">${t('sf.read')}</option><option value="write">${t('sf.write')}</option>
        </select>
        <button type="button" class="btn btn--small btn--ghost" disabled=${busy} data-testid="sf-member-remove"
          onClick=${() => act(() => del(`${base}/${enc(folder.slug)}/members/${enc(m.user_id)}`))}>${t('sf.remove')}</button>
      </li>`)}
    </ul>
    ${others.length > 0 && html`<div class="actions actions--start">
      <select class="select" value=${who} onChange=${(e) => setWho(e.target.value)} data-testid="sf-member-user" aria-label=${t('sf.member')}>
        <option value="">${t('sf.choose_member')}</option>
        ${others.map((u) => html`<option value=${u.id}>${u.username}</option>`)}
      </select>
      <select class="select" value=${access} onChange=${(e) => setAccess(e.target.value)} data-testid="sf-member-access" aria-label=${t('sf.access')}>
        <option value="read">${t('sf.read')}</option><option value="write">${t('sf.write')}</option>
      </select>
      <button type="button" class="btn btn--secondary" disabled=${busy || !who} data-testid="sf-member-add"
        onClick=${() => act(() => request('PUT', `${base}/${enc(folder.slug)}/members/${enc(who)}`, { access }))}>
        ${Icon.plus()}<span>${t('sf.add_member')}</span></button>
    </div>`}
  </div>`;
}

function FolderItem({ folder, users, onChanged }) {
  const [run, busy, error] = useAction();
  const act = (fn) => run(async () => { await fn(); await onChanged(); });
  const trashed = !!folder.trashed_at;
  const path = `${base}/${enc(folder.slug)}`;
  return html`<li class="inbox-item" data-testid="sf-folder" data-slug=${folder.slug} data-trashed=${trashed ? 'true' : 'false'}>
    <div class="inbox-item__head">
      <span class="inbox-item__icon">${Icon.folder()}</span>
      <div class="inbox-item__title">
        <strong data-testid="sf-folder-name">${folder.name}</strong>
        <span class="muted small"><code>${`shared/${folder.slug}/`}</code></span>
      </div>
      ${trashed && html`<span class="badge badge--off">${t('sf.in_trash')}</span>`}
    </div>
    ${folder.description && html`<p class="small">${folder.description}</p>`}
    ${!trashed && html`<${Members} folder=${folder} users=${users} act=${act} busy=${busy} />`}
    ${error && html`<p class="approval__error" role="alert">${errorText(error)}</p>`}
    <div class="inbox-item__choices">
      ${!trashed && html`
        <button type="button" class="btn btn--secondary" disabled=${busy} data-testid="sf-rename"
          onClick=${() => { const n = window.prompt(t('sf.rename_prompt'), folder.name); if (n) act(() => patch(path, { name: n })); }}>
          ${Icon.edit()}<span>${t('sf.rename')}</span></button>
        <button type="button" class="btn btn--secondary" disabled=${busy} data-testid="sf-describe"
          onClick=${() => { const d = window.prompt(t('sf.describe_prompt'), folder.description); if (d !== null) act(() => patch(path, { description: d })); }}>
          ${t('sf.describe')}</button>
        <button type="button" class="btn btn--secondary" disabled=${busy} data-testid="sf-delete"
          onClick=${() => window.confirm(t('sf.delete_confirm')) && act(() => del(path))}>
          ${Icon.trash()}<span>${t('sf.delete')}</span></button>`}
      ${trashed && html`
        <button type="button" class="btn btn--secondary" disabled=${busy} data-testid="sf-restore"
          onClick=${() => act(() => post(`${path}/restore`))}>${t('sf.restore')}</button>
        <button type="button" class="btn btn--secondary" disabled=${busy} data-testid="sf-purge"
          onClick=${() => window.confirm(t('sf.purge_confirm')) && act(() => del(`${path}/trash`))}>
          ${Icon.trash()}<span>${t('sf.purge')}</span></button>`}
    </div>
  </li>`;
}

export function SharedFoldersPage() {
  const [folders, error, loadFolders] = useRead(base);
  const [users, setUsers] = useState([]);
  const load = async () => {
    await loadFolders();
    try {
      setUsers(await get('api/users'));
    } catch (e) {
      setUsers([]); // without admin.users: members cannot be chosen here
    }
  };
  useEffect(() => { load(); }, []);
  return html`<section class="page page--narrow" data-testid="sf-page">
    <${PageHead} title=${t('nav.shared_folders')} lead=${t('sf.lead')} />
    ${error && html`<${ErrorNotice} error=${error} testid="sf-error" />`}
    <${NameDescriptionForm} path=${base} onMade=${load} icon=${Icon.folderPlus()}
      text=${{ name: t('sf.name'), description: t('sf.description'), create: t('sf.create') }}
      ids=${{ form: 'sf-form', name: 'sf-name', description: 'sf-description', create: 'sf-create', error: 'sf-create-error' }} />
    ${folders !== null && folders.length === 0 && html`<div class="inbox-empty" data-testid="sf-empty"><p>${t('sf.empty')}</p></div>`}
    ${folders !== null && folders.length > 0 && html`<ul class="inbox-list" data-testid="sf-list">
      ${folders.map((f) => html`<${FolderItem} key=${f.slug} folder=${f} users=${users} onChanged=${load} />`)}
    </ul>`}
  </section>`;
}
