// #/admin/users — the household's accounts (capability admin.users).
// A table on wide screens that CSS turns into one card per person on phones.
// Creating an encrypted account returns its recovery code exactly once: it is
// shown in a dialog that has to be acknowledged.
import { html, useState, useEffect, useCallback } from '../../js/lib.js';
import { t, formatDate, roleLabel as roleText } from '../../js/i18n.js';
import { api } from '../../js/api.js';
import { getState } from '../../js/store.js';
import { Icon } from '../../js/components/icons.js';
import { AdminTop, Field, ErrorNotice, FormActions, useAction, useDeleting, useFlash, useId, errorText } from '../../js/components/form.js';
import { Dialog, ConfirmDialog } from '../../js/components/dialog.js';
import { RecoveryCode } from '../../js/components/recovery.js';
import { formatSize } from '../files/files.js';
import { UserConnectorGrants } from '../connectors/connectors.js';
import { PeopleDialog } from '../people/people.js';

function roleLabel(roles, name) {
  const r = roles.find((x) => x.name === name);
  return r ? roleText(r) : name;
}

function RoleSelect({ id, roles, value, onChange, testid }) {
  return html`<select id=${id} class="select" value=${value} onChange=${(e) => onChange(e.target.value)}
    data-testid=${testid} required>
    ${roles.map((r) => html`<option value=${r.name}>${roleText(r)}</option>`)}
  </select>`;
}

export function CreateUser({ roles, onCreated }) {
  const defaultRole = (roles.find((r) => r.name === 'member') || roles[0] || {}).name || '';
  const empty = { username: '', display_name: '', password: '', role: defaultRole };
  const [form, setForm] = useState(empty);
  const [run, busy, error] = useAction();
  const ids = { user: useId('cu-user'), name: useId('cu-name'), pw: useId('cu-pw'), role: useId('cu-role') };
  const role = form.role || defaultRole;
  const roleObj = roles.find((r) => r.name === role);
  const set = (key) => (e) => setForm({ ...form, [key]: e.target.value });

  const onSubmit = (e) => {
    e.preventDefault();
    run(async () => {
      const body = { username: form.username.trim(), password: form.password, role };
      if (form.display_name.trim()) body.display_name = form.display_name.trim();
      const result = await api.createUser(body);
      setForm({ ...empty, role });
      onCreated(result);
    });
  };

  return html`<section class="card" aria-labelledby="create-user-title">
    <h2 class="card__title" id="create-user-title">${t('users.create_title')}</h2>
    <p class="muted">${t('users.create_body')}</p>
    <form class="stack" onSubmit=${onSubmit} data-testid="user-create-form" novalidate>
      <div class="grid-2">
        <${Field} label=${t('users.username')} id=${ids.user}>
          <input id=${ids.user} class="input" required autocomplete="off" autocapitalize="none" spellcheck="false"
            value=${form.username} onInput=${set('username')} data-testid="user-create-username" />
        <//>
        <${Field} label=${t('users.display_name')} id=${ids.name} hint=${t('common.optional')}>
          <input id=${ids.name} class="input" autocomplete="off" value=${form.display_name}
            onInput=${set('display_name')} data-testid="user-create-display-name" />
        <//>
        <${Field} label=${t('users.initial_password')} id=${ids.pw} hint=${t('users.initial_password_hint')}>
          <input id=${ids.pw} class="input" type="password" required autocomplete="new-password"
            value=${form.password} onInput=${set('password')} data-testid="user-create-password" />
        <//>
        <${Field} label=${t('users.role')} id=${ids.role}
          hint=${roleObj ? (roleObj.attributes && roleObj.attributes.encrypted ? t('users.role_encrypted') : t('users.role_plain')) : ''}>
          <${RoleSelect} id=${ids.role} roles=${roles} value=${role} testid="user-create-role"
            onChange=${(v) => setForm({ ...form, role: v })} />
        <//>
      </div>
      <${ErrorNotice} error=${error} testid="user-create-error" />
      <div class="actions actions--start">
        <button type="submit" class="btn btn--primary" disabled=${busy || !form.username.trim() || !form.password || !role}
          data-testid="user-create-submit">${Icon.plus()}<span>${busy ? t('common.saving') : t('users.create_submit')}</span></button>
      </div>
    </form>
  </section>`;
}

function EditUser({ user, roles, onClose, onSaved }) {
  const [form, setForm] = useState({ display_name: user.display_name || '', role: user.role });
  const [run, busy, error] = useAction();
  const ids = { name: useId('eu-name'), role: useId('eu-role') };

  const onSubmit = (e) => {
    e.preventDefault();
    run(async () => {
      const body = {};
      if (form.display_name.trim() !== (user.display_name || '')) body.display_name = form.display_name.trim();
      if (form.role !== user.role) body.role = form.role;
      const updated = Object.keys(body).length ? await api.updateUser(user.id, body) : user;
      onSaved(updated);
    });
  };

  return html`<${Dialog} title=${t('users.edit_title', { username: user.username })} onClose=${onClose}
      testid="user-edit-dialog">
    <form class="stack" onSubmit=${onSubmit} novalidate>
      <${Field} label=${t('users.display_name')} id=${ids.name}>
        <input id=${ids.name} class="input" value=${form.display_name} data-testid="user-edit-display-name"
          onInput=${(e) => setForm({ ...form, display_name: e.target.value })} />
      <//>
      <${Field} label=${t('users.role')} id=${ids.role} hint=${t('users.role_change_hint')}>
        <${RoleSelect} id=${ids.role} roles=${roles} value=${form.role} testid="user-edit-role"
          onChange=${(v) => setForm({ ...form, role: v })} />
      <//>
      <${UserConnectorGrants} user=${user} />
      <${FormActions} error=${error} errorTestid="user-edit-error" onCancel=${onClose} busy=${busy} testid="user-edit-save" />
    </form>
  <//>`;
}

function Badge({ kind, children, testid }) {
  return html`<span class=${`badge badge--${kind}`} data-testid=${testid}>${children}</span>`;
}

// How much a member stores (counts only: the administrator never sees what).
function storageText(usage) {
  if (!usage) return '—';
  return usage.quota > 0
    ? t('users.storage_of', { used: formatSize(usage.used), quota: formatSize(usage.quota) })
    : formatSize(usage.used);
}

function UserRow({ user, roles, usage, worksSignedOut, apiTokens, isSelf, onEdit, onPeople, onToggle, onDelete, busy }) {
  return html`<tr class=${`user-row${user.active ? '' : ' is-inactive'}`} data-testid="user-row"
      data-username=${user.username} data-user-id=${user.id}>
    <td class="user-row__who-cell" data-label=${t('users.person')}>
      <div class="user-row__who">
        <span class="avatar avatar--sm" aria-hidden="true">${(user.display_name || user.username).slice(0, 1).toUpperCase()}</span>
        <span class="user-row__names">
          <strong data-testid="user-display-name">${user.display_name || user.username}</strong>
          <span class="muted small" data-testid="user-username">@${user.username}${isSelf ? ` · ${t('users.you')}` : ''}</span>
        </span>
      </div>
    </td>
    <td data-label=${t('users.role')} data-testid="user-role" data-role=${user.role}>${roleLabel(roles, user.role)}</td>
    <td data-label=${t('users.encryption')}>
      ${user.encrypted
        ? html`<${Badge} kind="locked" testid="user-encrypted">${Icon.lock()}${t('users.encrypted')}<//>`
        : html`<${Badge} kind="plain" testid="user-encrypted">${Icon.unlock()}${t('users.not_encrypted')}<//>`}
      ${user.encrypted && worksSignedOut &&
      html` <span title=${t('users.works_signed_out_hint')}><${Badge} kind="plain" testid="user-works-signed-out">${t('users.works_signed_out')}<//></span>`}
    </td>
    <td data-label=${t('users.status')}>
      ${user.active
        ? html`<${Badge} kind="ok" testid="user-active">${t('users.active')}<//>`
        : html`<${Badge} kind="off" testid="user-active">${t('users.inactive')}<//>`}
      ${apiTokens > 0 &&
      html` <span title=${t('users.api_tokens_hint')}><${Badge} kind="plain" testid="user-api-tokens">${t('users.api_tokens', { count: apiTokens })}<//></span>`}
    </td>
    <td class="small" data-label=${t('users.storage')} data-testid="user-storage"
      data-used=${usage ? usage.used : ''}>${storageText(usage)}</td>
    <td class="muted small user-row__created" data-label=${t('users.created')}>${formatDate(user.created_at)}</td>
    <td class="user-row__actions">
      <button type="button" class="btn btn--small btn--ghost" onClick=${() => onEdit(user)} data-testid="user-edit"
        aria-label=${t('users.edit_aria', { username: user.username })}>${Icon.edit()}<span>${t('common.edit')}</span></button>
      <button type="button" class="btn btn--small btn--ghost" onClick=${() => onPeople(user)} data-testid="user-people"
        aria-label=${t('users.people_open_aria', { username: user.username })}>${t('users.people_open')}</button>
      ${!isSelf &&
      (user.active
        ? html`<button type="button" class="btn btn--small btn--ghost" disabled=${busy} onClick=${() => onToggle(user)}
            data-testid="user-deactivate" aria-label=${t('users.deactivate_aria', { username: user.username })}>
            ${t('users.deactivate')}</button>`
        : html`<button type="button" class="btn btn--small btn--ghost" disabled=${busy} onClick=${() => onToggle(user)}
            data-testid="user-activate" aria-label=${t('users.activate_aria', { username: user.username })}>
            ${t('users.activate')}</button>`)}
      ${!isSelf &&
      html`<button type="button" class="btn btn--small btn--danger-ghost" onClick=${() => onDelete(user)}
        data-testid="user-delete" aria-label=${t('users.delete_aria', { username: user.username })}>${t('common.delete')}</button>`}
    </td>
  </tr>`;
}

export function AdminUsersPage() {
  const { me } = getState();
  const [users, setUsers] = useState(null);
  const [roles, setRoles] = useState([]);
  const [storage, setStorage] = useState({}); // user id -> {used, quota}
  const [loadError, setLoadError] = useState(null);
  const [editing, setEditing] = useState(null);
  const [peopleOf, setPeopleOf] = useState(null); // the row whose profile and supervisors are open
  const [signedOut, setSignedOut] = useState({});
  const [tokens, setTokens] = useState({}); // user id -> how many API tokens (never which)
  const { deleting, ask: askDelete, close: closeDelete, run: runDel, busy: delBusy, error: delError } = useDeleting();
  const [recovery, setRecovery] = useState(null); // {user, recovery_code}
  const [flash, setFlash] = useFlash();
  const [runRow, rowBusy, rowError, setRowError] = useAction();

  // Usage figures may take a moment (a first walk of each home): they come after the
  // list, and again when someone is added.
  const loadStorage = () => {
    // Who lets their assistant work signed out (a fact; schedules may be off: then none).
    api.scheduleCounts().then(
      (rows) => setSignedOut(Object.fromEntries(rows.map((row) => [row.user_id, row.works_signed_out]))),
      () => setSignedOut({}),
    );
    api.tokenCounts().then(
      (rows) => setTokens(Object.fromEntries(rows.map((row) => [row.user_id, row.tokens]))),
      () => setTokens({}),
    );
    return api.membersStorage().then(
      (rows) => setStorage(Object.fromEntries(rows.map((row) => [row.user_id, row]))),
      () => setStorage({}),
    );
  };

  const load = useCallback(async () => {
    try {
      const [u, r] = await Promise.all([api.users(), api.roles().catch(() => [])]);
      setUsers(u);
      // Listing roles may need admin.roles; an admin with only admin.users can
      // still pick among the roles the household already uses.
      const fallback = [...new Set(u.map((x) => x.role))].map((name) => ({ name, display_name: name }));
      setRoles(r && r.length ? r : fallback);
      setLoadError(null);
      loadStorage();
    } catch (e) {
      setLoadError(e);
    }
  }, []);
  useEffect(() => {
    load();
  }, [load]);

  // Keep the list in the server's order but replace the changed entry.
  const replace = (u) => setUsers((list) => list.map((x) => (x.id === u.id ? u : x)));

  const onToggle = (user) =>
    runRow(async () => {
      const updated = user.active ? await api.deactivateUser(user.id) : await api.activateUser(user.id);
      replace(updated);
      setFlash(t(updated.active ? 'users.activated' : 'users.deactivated', { username: user.username }));
    });

  const onDeleteConfirm = () =>
    runDel(async () => {
      // 200 with what is left when files root made in the sandbox could not be removed.
      const left = await api.deleteUser(deleting.id);
      setUsers((list) => list.filter((x) => x.id !== deleting.id));
      setFlash(
        left && left.count
          ? t('users.deleted_left_behind', { username: deleting.username, count: left.count, fix: left.fix })
          : t('users.deleted', { username: deleting.username }),
      );
      closeDelete();
    });

  const onCreated = (result) => {
    setUsers((list) => [...(list || []), result.user]);
    loadStorage();
    if (result.recovery_code) setRecovery(result);
    else setFlash(t('users.created_ok', { username: result.user.username }));
  };

  return html`<div class="page" data-testid="users-page">
    <${AdminTop} name="users" title=${t('users.title')} lead=${t('users.lead')} flash=${flash} rowError=${rowError}
      loadError=${loadError} loaded=${users !== null} />
    ${users &&
    html`<section class="card card--flush">
      <table class="table users-table" data-testid="users-table">
        <caption class="visually-hidden">${t('users.title')}</caption>
        <thead>
          <tr>
            <th scope="col">${t('users.person')}</th>
            <th scope="col">${t('users.role')}</th>
            <th scope="col">${t('users.encryption')}</th>
            <th scope="col">${t('users.status')}</th>
            <th scope="col">${t('users.storage')}</th>
            <th scope="col">${t('users.created')}</th>
            <th scope="col"><span class="visually-hidden">${t('common.actions')}</span></th>
          </tr>
        </thead>
        <tbody>
          ${users.map(
            (u) => html`<${UserRow} key=${u.id} user=${u} roles=${roles} usage=${storage[u.id]} worksSignedOut=${!!signedOut[u.id]}
              apiTokens=${tokens[u.id] || 0}
              isSelf=${u.id === me.id} busy=${rowBusy}
              onEdit=${(x) => {
                setRowError(null);
                setEditing(x);
              }}
              onPeople=${setPeopleOf}
              onToggle=${onToggle}
              onDelete=${askDelete} />`,
          )}
        </tbody>
      </table>
      ${users.length === 0 && html`<p class="muted empty">${t('users.empty')}</p>`}
    </section>`}

    ${users && roles.length > 0 && html`<${CreateUser} roles=${roles} onCreated=${onCreated} />`}

    ${editing &&
    html`<${EditUser} user=${editing} roles=${roles.length ? roles : [{ name: editing.role, display_name: editing.role }]}
      onClose=${() => setEditing(null)}
      onSaved=${(u) => {
        replace(u);
        setEditing(null);
        setFlash(t('common.saved'));
      }} />`}

    ${peopleOf && html`<${PeopleDialog} user=${peopleOf} users=${users || []} onClose=${() => setPeopleOf(null)} />`}

    ${deleting &&
    html`<${ConfirmDialog} danger title=${t('users.delete_title', { username: deleting.username })}
      message=${html`<div class="stack">
        <p>${t('users.delete_body', { name: deleting.display_name || deleting.username })}</p>
        <p class="notice notice--warning">${Icon.alert()}<span>${t('users.delete_warning')}</span></p>
      </div>`}
      confirmLabel=${t('users.delete_confirm')} busy=${delBusy} error=${delError && errorText(delError)}
      onConfirm=${onDeleteConfirm} onCancel=${closeDelete} />`}

    ${recovery &&
    html`<${Dialog} title=${t('users.recovery_title', { username: recovery.user.username })} dismissable=${false}
        testid="user-recovery-dialog">
      <p>${t('users.recovery_intro', { name: recovery.user.display_name || recovery.user.username })}</p>
      <${RecoveryCode} code=${recovery.recovery_code} warning=${t('users.recovery_warning', { name: recovery.user.display_name || recovery.user.username })}
        confirmLabel=${t('users.recovery_done')} onConfirm=${() => setRecovery(null)} />
    <//>`}
  </div>`;
}
