// #/admin/roles            list of roles (capability admin.roles)
// #/admin/roles/new        create a role
// #/admin/roles/<name>     edit a role
// Roles are data on the server: a set of capabilities plus attributes (simple
// or full UI, encrypted storage, sandbox network...). The editor is a page,
// not a dialog, because the capability list is long and phones need the room.
import { html, useState, useEffect } from '../../js/lib.js';
import { t, roleLabel, capabilityText, groupLabel } from '../../js/i18n.js';
import { api } from '../../js/api.js';
import { navigate } from '../../js/router.js';
import { Icon } from '../../js/components/icons.js';
import { Check, Field, ErrorNotice, Notice, useAction, useFlash, useId } from '../../js/components/form.js';

const DEFAULT_ATTRIBUTES = {
  ui_mode: 'full',
  encrypted: true,
  auto_grant: false,
  sandbox_network: 'bridge',
  default_security_group: '',
  allowed_security_groups: [],
  default_chat_agent: '',
  storage_quota_mb: null, // null: the server's `storage.member_quota_mb`; 0: no limit
  turn_max_rounds: null, // null: the server's `assistant.max_rounds`
  turn_max_tokens: null, // null: no token budget per turn
};

const countOrNull = (value, min) => (value === '' ? null : Math.max(min, Math.floor(Number(value)) || min));
// What a new role starts with: talking to the assistant and answering its questions.
// Everything else is a deliberate choice of the administrator.
const DEFAULT_CAPABILITIES = ['chat', 'inbox'];

function useRolesData() {
  const [data, setData] = useState({ roles: null, capabilities: [], error: null });
  const reload = () =>
    Promise.all([api.roles(), api.capabilities().catch(() => [])]).then(
      ([roles, capabilities]) => setData({ roles, capabilities, error: null }),
      (error) => setData((d) => ({ ...d, error })),
    );
  useEffect(() => {
    reload();
  }, []);
  return [data, reload];
}

function RoleList({ roles }) {
  return html`<ul class="role-list" data-testid="roles-list">
    ${roles.map((r) => {
      const a = r.attributes || {};
      return html`<li class="card role-card" data-testid="role-row" data-role-name=${r.name}>
        <div class="role-card__main">
          <div class="role-card__title">
            <h2 class="card__title">${roleLabel(r)}</h2>
            ${r.builtin && html`<span class="badge badge--plain" data-testid="role-builtin">${t('roles.builtin')}</span>`}
          </div>
          <div class="role-card__facts">
            <span class="badge badge--${a.encrypted ? 'locked' : 'plain'}">
              ${a.encrypted ? Icon.lock() : Icon.unlock()}${a.encrypted ? t('users.encrypted') : t('users.not_encrypted')}
            </span>
            <span class="badge badge--plain">${a.ui_mode === 'simple' ? t('roles.ui_simple') : t('roles.ui_full')}</span>
            <span class="muted small">${t('roles.capability_count', { count: (r.capabilities || []).length })}</span>
          </div>
        </div>
        <a class="btn btn--secondary btn--small" href=${`#/admin/roles/${encodeURIComponent(r.name)}`}
          data-testid="role-edit" aria-label=${t('roles.edit_aria', { name: roleLabel(r) })}>
          ${Icon.edit()}<span>${t('common.edit')}</span>
        </a>
      </li>`;
    })}
  </ul>`;
}

function RoleEditor({ role, capabilities, onSaved }) {
  const isNew = !role;
  const [name, setName] = useState('');
  const [displayName, setDisplayName] = useState(role ? role.display_name || '' : '');
  const [caps, setCaps] = useState(new Set(role ? role.capabilities || [] : DEFAULT_CAPABILITIES));
  const [attrs, setAttrs] = useState({ ...DEFAULT_ATTRIBUTES, ...(role ? role.attributes || {} : {}) });
  const [groupsText, setGroupsText] = useState((attrs.allowed_security_groups || []).join(', '));
  // The security groups that exist (from the approvals admin); null while
  // unknown, and the plain text field stays as a fallback if they cannot be read.
  const [groups, setGroups] = useState(null);
  useEffect(() => {
    let live = true;
    api.approvalGroups().then((g) => live && setGroups(Array.isArray(g) ? g : null), () => {});
    return () => {
      live = false;
    };
  }, []);
  const chosenGroups = groupsText.split(/[,\s]+/).map((s) => s.trim()).filter(Boolean);
  const toggleGroup = (groupName) => {
    const next = chosenGroups.includes(groupName) ? chosenGroups.filter((g) => g !== groupName) : [...chosenGroups, groupName];
    setGroupsText(next.join(', '));
  };
  const [run, busy, error] = useAction();
  const [saved, setSaved] = useFlash();
  const ids = {
    name: useId('r-name'), dn: useId('r-dn'), ui: useId('r-ui'), net: useId('r-net'),
    dsg: useId('r-dsg'), asg: useId('r-asg'), agent: useId('r-agent'), enc: useId('r-enc'), auto: useId('r-auto'),
    quota: useId('r-quota'),
    rounds: useId('r-rounds'),
    tokens: useId('r-tokens'),
  };

  // The catalogue may not list a capability the role already has (e.g. from
  // a plugin that is gone): still show it so it can be removed.
  const known = new Set(capabilities.map((c) => c.name));
  const allCaps = [...capabilities, ...[...caps].filter((c) => !known.has(c)).map((c) => ({ name: c, description: '' }))];

  const toggleCap = (capName) => {
    const next = new Set(caps);
    if (next.has(capName)) next.delete(capName);
    else next.add(capName);
    setCaps(next);
  };
  const setAttr = (key, value) => setAttrs({ ...attrs, [key]: value });

  const onSubmit = (e) => {
    e.preventDefault();
    run(async () => {
      const attributes = {
        ...attrs,
        allowed_security_groups: chosenGroups,
      };
      const capabilitiesList = allCaps.map((c) => c.name).filter((c) => caps.has(c));
      let result;
      if (isNew) {
        result = await api.createRole({
          name: name.trim(), display_name: displayName.trim() || name.trim(), capabilities: capabilitiesList, attributes,
        });
      } else {
        // Send only what changed: the server judges some changes (such as
        // flipping `encrypted` on a role with members) and may refuse them.
        const body = {};
        if (displayName.trim() !== (role.display_name || '')) body.display_name = displayName.trim();
        const before = [...(role.capabilities || [])].sort().join('\n');
        if ([...capabilitiesList].sort().join('\n') !== before) body.capabilities = capabilitiesList;
        if (JSON.stringify(attributes) !== JSON.stringify({ ...DEFAULT_ATTRIBUTES, ...(role.attributes || {}) })) {
          body.attributes = attributes;
        }
        result = Object.keys(body).length ? await api.updateRole(role.name, body) : role;
      }
      setSaved(true);
      onSaved(result, isNew);
    });
  };

  return html`<form class="stack stack--lg" onSubmit=${onSubmit} data-testid="role-form" novalidate>
    <section class="card stack">
      <h2 class="card__title">${t('roles.identity')}</h2>
      <div class="grid-2">
        ${isNew
          ? html`<${Field} label=${t('roles.name')} id=${ids.name} hint=${t('roles.name_hint')}>
              <input id=${ids.name} class="input mono" required autocapitalize="none" spellcheck="false" value=${name}
                onInput=${(e) => setName(e.target.value)} data-testid="role-name" />
            <//>`
          : html`<div class="field">
              <span class="field__label">${t('roles.name')}</span>
              <code class="field__static" data-testid="role-name">${role.name}</code>
            </div>`}
        <${Field} label=${t('roles.display_name')} id=${ids.dn}>
          <input id=${ids.dn} class="input" value=${displayName} onInput=${(e) => setDisplayName(e.target.value)}
            data-testid="role-display-name" />
        <//>
      </div>
    </section>

    <section class="card stack">
      <h2 class="card__title">${t('roles.behaviour')}</h2>
      <div class="grid-2">
        <${Field} label=${t('roles.ui_mode')} id=${ids.ui} hint=${t('roles.ui_mode_hint')}>
          <select id=${ids.ui} class="select" value=${attrs.ui_mode} onChange=${(e) => setAttr('ui_mode', e.target.value)}
            data-testid="role-ui-mode">
            <option value="full">${t('roles.ui_full')}</option>
            <option value="simple">${t('roles.ui_simple')}</option>
          </select>
        <//>
        <${Field} label=${t('roles.sandbox_network')} id=${ids.net} hint=${t('roles.sandbox_network_hint')}>
          <select id=${ids.net} class="select" value=${attrs.sandbox_network}
            onChange=${(e) => setAttr('sandbox_network', e.target.value)} data-testid="role-sandbox-network">
            <option value="bridge">${t('roles.network_bridge')}</option>
            <option value="none">${t('roles.network_none')}</option>
          </select>
        <//>
      </div>
      <${Check} id=${ids.enc} checked=${!!attrs.encrypted} testid="role-encrypted"
        onChange=${(e) => setAttr('encrypted', e.target.checked)} label=${t('roles.encrypted')} hint=${t('roles.encrypted_hint')} />
      <${Check} id=${ids.auto} checked=${!!attrs.auto_grant} testid="role-auto-grant"
        onChange=${(e) => setAttr('auto_grant', e.target.checked)} label=${t('roles.auto_grant')} hint=${t('roles.auto_grant_hint')} />
      <div class="grid-2">
        <${Field} label=${t('roles.default_security_group')} id=${ids.dsg}>
          ${groups
            ? html`<select id=${ids.dsg} class="select" value=${attrs.default_security_group || ''}
                onChange=${(e) => setAttr('default_security_group', e.target.value)} data-testid="role-default-security-group">
                <option value="">${t('roles.security_group_none')}</option>
                ${groups.map((g) => html`<option value=${g.name}>${groupLabel(g)}</option>`)}
                ${attrs.default_security_group && !groups.some((g) => g.name === attrs.default_security_group) &&
                html`<option value=${attrs.default_security_group}>${attrs.default_security_group}</option>`}
              </select>`
            : html`<input id=${ids.dsg} class="input mono" value=${attrs.default_security_group || ''}
                onInput=${(e) => setAttr('default_security_group', e.target.value)} data-testid="role-default-security-group" />`}
        <//>
        ${groups
          ? html`<fieldset class="fieldset" data-testid="role-allowed-security-groups">
              <legend>${t('roles.allowed_security_groups')}</legend>
              ${[...groups.map((g) => g.name), ...chosenGroups.filter((n) => !groups.some((g) => g.name === n))].map((n) => {
                const g = groups.find((x) => x.name === n);
                const cid = `${ids.asg}-${n}`;
                return html`<div class="check">
                  <input id=${cid} type="checkbox" checked=${chosenGroups.includes(n)} onChange=${() => toggleGroup(n)}
                    data-testid="role-allowed-security-group" data-group=${n} />
                  <label for=${cid}><span>${g ? groupLabel(g) : n}</span>
                    ${g && g.description && html`<span class="field__hint">${g.description}</span>`}</label>
                </div>`;
              })}
              <p class="field__hint">${t('roles.allowed_security_groups_pick')}</p>
            </fieldset>`
          : html`<${Field} label=${t('roles.allowed_security_groups')} id=${ids.asg} hint=${t('roles.allowed_security_groups_hint')}>
              <input id=${ids.asg} class="input mono" value=${groupsText} onInput=${(e) => setGroupsText(e.target.value)}
                data-testid="role-allowed-security-groups" />
            <//>`}
        <${Field} label=${t('roles.default_chat_agent')} id=${ids.agent}>
          <input id=${ids.agent} class="input mono" value=${attrs.default_chat_agent || ''}
            onInput=${(e) => setAttr('default_chat_agent', e.target.value)} data-testid="role-default-chat-agent" />
        <//>
        <${Field} label=${t('roles.storage_quota')} id=${ids.quota} hint=${t('roles.storage_quota_hint')}>
          <input id=${ids.quota} class="input" type="number" min="0" step="1" inputmode="numeric"
            value=${attrs.storage_quota_mb ?? ''} data-testid="role-storage-quota"
            onInput=${(e) => setAttr('storage_quota_mb',
              e.target.value === '' ? null : Math.max(0, Math.floor(Number(e.target.value)) || 0))} />
        <//>
        <${Field} label=${t('roles.turn_max_rounds')} id=${ids.rounds} hint=${t('roles.turn_max_rounds_hint')}>
          <input id=${ids.rounds} class="input" type="number" min="1" max="200" step="1" inputmode="numeric"
            value=${attrs.turn_max_rounds ?? ''} data-testid="role-turn-max-rounds"
            onInput=${(e) => setAttr('turn_max_rounds', countOrNull(e.target.value, 1))} />
        <//>
        <${Field} label=${t('roles.turn_max_tokens')} id=${ids.tokens} hint=${t('roles.turn_max_tokens_hint')}>
          <input id=${ids.tokens} class="input" type="number" min="1000" step="1000" inputmode="numeric"
            value=${attrs.turn_max_tokens ?? ''} data-testid="role-turn-max-tokens"
            onInput=${(e) => setAttr('turn_max_tokens', countOrNull(e.target.value, 1000))} />
        <//>
      </div>
    </section>

    <section class="card stack">
      <h2 class="card__title">${t('roles.capabilities')}</h2>
      <p class="muted">${t('roles.capabilities_hint')}</p>
      ${allCaps.length === 0 && html`<p class="muted">${t('roles.no_capabilities')}</p>`}
      <div class="caps">
        ${allCaps.map((c) => {
          const id = `cap-${c.name.replace(/[^a-zA-Z0-9_-]/g, '_')}`;
          const text = capabilityText(c);
          // A capability of a feature Skald does not have yet grants nothing: it cannot
          // be ticked (one a role already holds stays, so an edit does not drop it).
          const unavailable = !!c.reserved_for;
          return html`<div class=${`check cap${unavailable ? ' cap--unavailable' : ''}`} data-testid="role-cap-row"
            data-capability=${c.name}>
            <input type="checkbox" id=${id} checked=${caps.has(c.name)} onChange=${() => toggleCap(c.name)}
              disabled=${unavailable && !caps.has(c.name)} data-testid="role-cap" data-capability=${c.name} />
            <label for=${id}>
              <strong>${text.label}</strong>
              ${unavailable && html`<span class="badge" data-testid="cap-reserved">${t('roles.cap_reserved')}</span>`}
              ${text.description && html`<span class="muted small">${text.description}</span>`}
              ${unavailable && html`<span class="muted small" data-testid="cap-reserved-note">${t('roles.cap_unavailable_hint')}</span>`}
            </label>
          </div>`;
        })}
      </div>
    </section>

    <div class="sticky-actions">
      <${ErrorNotice} error=${error} testid="role-error" />
      ${saved && html`<${Notice} kind="success" testid="role-saved">${t('common.saved')}<//>`}
      <div class="actions">
        <a class="btn btn--ghost" href="#/admin/roles" data-testid="role-cancel">${t('common.back')}</a>
        <button type="submit" class="btn btn--primary" disabled=${busy || (isNew && !name.trim())} data-testid="role-save">
          ${busy ? t('common.saving') : isNew ? t('roles.create_submit') : t('common.save')}
        </button>
      </div>
    </div>
  </form>`;
}

export function AdminRolesPage({ roleName }) {
  const [data, reload] = useRolesData();
  const editing = roleName && roleName !== 'new';
  const creating = roleName === 'new';
  const role = editing && data.roles ? data.roles.find((r) => r.name === roleName) : null;

  let body;
  if (data.error && !data.roles) body = html`<${ErrorNotice} error=${data.error} testid="roles-error" />`;
  else if (!data.roles) body = html`<p class="muted">${t('common.loading')}</p>`;
  else if (creating || role) {
    body = html`<${RoleEditor} key=${roleName} role=${role} capabilities=${data.capabilities}
      onSaved=${(saved, isNew) => {
        // Wait for the fresh list so the new role's page finds it at once.
        reload().then(() => isNew && navigate(`/admin/roles/${encodeURIComponent(saved.name)}`));
      }} />`;
  } else if (editing) body = html`<${Notice} kind="warning" testid="role-not-found">${t('roles.not_found', { name: roleName })}<//>`;
  else body = html`<${RoleList} roles=${data.roles} />`;

  const title = creating
    ? t('roles.create_title')
    : role
      ? t('roles.edit_title', { name: roleLabel(role) })
      : t('roles.title');

  return html`<div class="page" data-testid="roles-page">
    <header class="page__head page__head--row">
      <div>
        ${(creating || editing) && html`<a class="back-link" href="#/admin/roles">← ${t('roles.title')}</a>`}
        <h1 class="page__title">${title}</h1>
        ${!creating && !editing && html`<p class="page__lead muted">${t('roles.lead')}</p>`}
      </div>
      ${!creating && !editing &&
      html`<a class="btn btn--primary" href="#/admin/roles/new" data-testid="role-new">${Icon.plus()}<span>${t('roles.new')}</span></a>`}
    </header>
    ${body}
  </div>`;
}
