// #/admin/approvals (capability admin.roles): security groups and the rules
// that decide, per group, whether a tool call runs (allow), waits for the
// member's approval (require) or is refused (deny). Rules of a group are
// tried in priority order, lowest number first; the first match decides.
// A "test a call" form asks the server what it would decide and why.
import { html, useEffect, useState } from '../../js/lib.js';
import { t, groupLabel, groupDescription } from '../../js/i18n.js';
import { toolTitle } from '../../js/components/tool-text.js';
import { api } from '../../js/api.js';
import { Icon } from '../../js/components/icons.js';
import { Dialog, ConfirmDialog } from '../../js/components/dialog.js';
import { AdminTop, Field, ErrorNotice, FormActions, SectionHead, errorText, useAction, useDeleting, useFlash, useId } from '../../js/components/form.js';

const ACTIONS = ['allow', 'require', 'deny'];

const byPriority = (a, b) => a.priority - b.priority || String(a.id).localeCompare(String(b.id));

// A rule in words ("Ask before writing files in the household notes"). The tool and
// path patterns are the engine's (skald/approvals/rules.py); anything not known here
// is named as it is. `last` marks the group's catch-all (`*`, no path, last in order).
const TOOL_WORDS = {
  '@paid': 'approvals.w_paid',
  schedule: 'approvals.w_schedule',
  background_task: 'approvals.w_background_task',
  notify: 'approvals.w_notify',
  '@fs_read': 'approvals.w_fs_read',
  '@fs_write': 'approvals.w_fs_write',
  '@fs_append': 'approvals.w_fs_append',
  '@exec': 'approvals.w_exec',
  execute_cmd: 'approvals.w_execute_cmd',
  install_packages: 'approvals.w_install_packages',
  execute_task: 'approvals.w_execute_task',
  ask_user: 'approvals.w_ask_user',
};
const PATH_WORDS = {
  'user-memory/**': 'approvals.p_user_memory',
  'shared-memory/**': 'approvals.p_shared_memory',
  'docs/**': 'approvals.p_docs',
  '.': 'approvals.p_no_path',
  '**': 'approvals.p_home',
};

export function ruleWords(rule, last = false) {
  const tp = rule.tool_pattern;
  let what;
  if (tp === '*') what = t(last && !rule.path_pattern ? 'approvals.w_any_other' : 'approvals.w_any');
  else if (TOOL_WORDS[tp]) what = t(TOOL_WORDS[tp]);
  else if (tp.startsWith('@mcp:')) what = t('approvals.w_connector', { name: tp.slice(5) });
  else if (tp.endsWith('*')) what = t('approvals.w_prefix', { prefix: tp.slice(0, -1) });
  else what = t('approvals.w_tool', { name: toolTitle(tp) }); // a built-in's title, else its id in words
  const pp = rule.path_pattern;
  const where = !pp ? '' : PATH_WORDS[pp] ? t(PATH_WORDS[pp]) : t('approvals.p_other', { path: pp });
  return t(`approvals.sentence_${rule.action}`, { what: where ? `${what} ${where}` : what });
}

// The plain examples of the "what would happen if…" tester, as the call the
// assistant would make: a kind, one field, the tool and its arguments.
const EXAMPLES = {
  command: { field: 'approvals.ex_command_field', placeholder: 'ls -la', call: (v) => ['execute_cmd', { command: v }] },
  read: { field: 'approvals.ex_path_field', placeholder: 'Documents/list.txt', call: (v) => ['read_file', { path: v }] },
  write: { field: 'approvals.ex_path_field', placeholder: 'Documents/list.txt', call: (v) => ['write_file', { path: v, content: '' }] },
  note: {
    field: 'approvals.ex_note_field',
    placeholder: 'wifi.md',
    call: (v) => ['write_file', { path: `shared-memory/${v.replace(/^\/+/, '')}`, content: '' }],
  },
  install: { field: 'approvals.ex_packages_field', placeholder: 'pandoc', call: (v) => ['install_packages', { packages: v.split(/[\s,]+/).filter(Boolean) }] },
  other: { field: 'approvals.ex_tool_field', placeholder: 'web_search', call: (v) => [v, {}] },
};

function PlainTest({ groups, initialGroup, rules }) {
  const [group, setGroup] = useState(initialGroup || '');
  const [kind, setKind] = useState('command');
  const [value, setValue] = useState('');
  const [result, setResult] = useState(null);
  const [run, busy, error] = useAction();
  const ids = { group: useId('pt-group'), kind: useId('pt-kind'), value: useId('pt-value') };
  useEffect(() => {
    if (!group && initialGroup) setGroup(initialGroup);
  }, [initialGroup]);
  const ex = EXAMPLES[kind];
  const onSubmit = (e) => {
    e.preventDefault();
    const [tool, args] = ex.call(value.trim());
    setResult(null);
    run(async () => setResult(await api.testApproval({ group, tool, arguments: args })));
  };
  const groupRules = rules.filter((r) => r.group === group).sort(byPriority);
  const decided = result && groupRules.find((r) => r.id === result.rule_id);
  return html`<form class="stack" onSubmit=${onSubmit} novalidate data-testid="approval-plain-test">
    <div class="grid-2">
      <${Field} label=${t('approvals.test_group')} id=${ids.group}>
        <select id=${ids.group} class="select" value=${group} onChange=${(e) => setGroup(e.target.value)} data-testid="approval-plain-group">
          ${groups.map((g) => html`<option value=${g.name}>${groupLabel(g)}</option>`)}
        </select>
      <//>
      <${Field} label=${t('approvals.ex_kind')} id=${ids.kind}>
        <select id=${ids.kind} class="select" value=${kind} onChange=${(e) => setKind(e.target.value)} data-testid="approval-plain-kind">
          ${Object.keys(EXAMPLES).map((k) => html`<option value=${k}>${t(`approvals.ex_${k}`)}</option>`)}
        </select>
      <//>
    </div>
    <${Field} label=${t(ex.field)} id=${ids.value}>
      <input id=${ids.value} class="input mono" value=${value} onInput=${(e) => setValue(e.target.value)} autocomplete="off"
        autocapitalize="none" spellcheck="false" placeholder=${ex.placeholder} data-testid="approval-plain-value" />
    <//>
    <${ErrorNotice} error=${error} testid="approval-plain-error" />
    <div class="actions">
      <button type="submit" class="btn btn--primary" disabled=${busy || !group || !value.trim()}
        data-testid="approval-plain-submit">${t('approvals.test_submit')}</button>
    </div>
    ${result &&
    html`<div class=${`test-result test-result--${result.action}`} role="status" data-testid="approval-plain-result"
        data-action=${result.action}>
      <p><strong>${t(`approvals.outcome_${result.action}`)}</strong></p>
      <p class="small" data-testid="approval-plain-why">${decided
        ? t('approvals.outcome_because', { rule: ruleWords(decided, decided === groupRules[groupRules.length - 1]) })
        : t('approvals.test_no_rule')}</p>
    </div>`}
  </form>`;
}

function GroupDialog({ group, onClose, onSaved }) {
  const editing = !!group;
  const [form, setForm] = useState({
    name: group ? group.name : '',
    display_name: group ? group.display_name || '' : '',
    description: group ? group.description || '' : '',
  });
  const [run, busy, error] = useAction();
  const ids = { name: useId('ag-name'), dn: useId('ag-dn'), desc: useId('ag-desc') };
  const set = (key) => (e) => setForm({ ...form, [key]: e.target.value });
  const onSubmit = (e) => {
    e.preventDefault();
    run(async () => {
      const body = { display_name: form.display_name.trim(), description: form.description.trim() };
      const saved = editing
        ? await api.updateApprovalGroup(group.name, body)
        : await api.createApprovalGroup({ name: form.name.trim(), ...body });
      onSaved(saved, editing);
    });
  };
  return html`<${Dialog} title=${editing ? t('approvals.group_edit_title', { name: group.name }) : t('approvals.group_new_title')}
      onClose=${onClose} testid="approval-group-dialog">
    <form class="stack" onSubmit=${onSubmit} novalidate>
      <${Field} label=${t('approvals.group_name')} id=${ids.name} hint=${editing ? undefined : t('approvals.group_name_hint')}>
        <input id=${ids.name} class="input mono" value=${form.name} onInput=${set('name')} disabled=${editing}
          required maxlength="64" autocomplete="off" autocapitalize="none" spellcheck="false"
          data-testid="approval-group-name" />
      <//>
      <${Field} label=${t('approvals.group_display_name')} id=${ids.dn}>
        <input id=${ids.dn} class="input" value=${form.display_name} onInput=${set('display_name')} maxlength="80"
          data-testid="approval-group-display-name" />
      <//>
      <${Field} label=${t('approvals.group_description')} id=${ids.desc}>
        <textarea id=${ids.desc} class="input" rows="3" value=${form.description} onInput=${set('description')}
          data-testid="approval-group-description"></textarea>
      <//>
      <${FormActions} error=${error} errorTestid="approval-group-error" onCancel=${onClose} busy=${busy}
        disabled=${busy || !form.name.trim()} testid="approval-group-save" />
    </form>
  <//>`;
}

function RuleDialog({ rule, group, nextPriority, onClose, onSaved }) {
  const editing = !!rule;
  const [form, setForm] = useState({
    tool_pattern: rule ? rule.tool_pattern : '',
    path_pattern: rule && rule.path_pattern ? rule.path_pattern : '',
    action: rule ? rule.action : 'require',
    priority: String(rule ? rule.priority : nextPriority),
    description: rule ? rule.description || '' : '',
  });
  const [run, busy, error] = useAction();
  const ids = {
    tool: useId('ar-tool'), path: useId('ar-path'), action: useId('ar-action'),
    prio: useId('ar-prio'), desc: useId('ar-desc'),
  };
  const set = (key) => (e) => setForm({ ...form, [key]: e.target.value });
  const onSubmit = (e) => {
    e.preventDefault();
    run(async () => {
      const body = {
        tool_pattern: form.tool_pattern.trim(),
        path_pattern: form.path_pattern.trim() || null,
        action: form.action,
        priority: Number.parseInt(form.priority, 10) || 0,
        description: form.description.trim(),
      };
      const saved = editing ? await api.updateApprovalRule(rule.id, body) : await api.createApprovalRule({ group, ...body });
      onSaved(saved, editing);
    });
  };
  return html`<${Dialog} title=${editing ? t('approvals.rule_edit_title') : t('approvals.rule_new_title', { group })}
      onClose=${onClose} testid="approval-rule-dialog">
    <form class="stack" onSubmit=${onSubmit} novalidate>
      <div class="grid-2">
        <${Field} label=${t('approvals.tool_pattern')} id=${ids.tool} hint=${t('approvals.tool_pattern_hint')}>
          <input id=${ids.tool} class="input mono" value=${form.tool_pattern} onInput=${set('tool_pattern')} required
            autocomplete="off" autocapitalize="none" spellcheck="false" data-testid="approval-rule-tool" />
        <//>
        <${Field} label=${t('approvals.path_pattern')} id=${ids.path} hint=${t('approvals.path_pattern_hint')}>
          <input id=${ids.path} class="input mono" value=${form.path_pattern} onInput=${set('path_pattern')}
            autocomplete="off" autocapitalize="none" spellcheck="false" data-testid="approval-rule-path" />
        <//>
      </div>
      <div class="grid-2">
        <${Field} label=${t('approvals.action')} id=${ids.action}>
          <select id=${ids.action} class="select" value=${form.action} onChange=${set('action')} data-testid="approval-rule-action">
            ${ACTIONS.map((a) => html`<option value=${a}>${t(`approvals.action_${a}`)}</option>`)}
          </select>
        <//>
        <${Field} label=${t('approvals.priority')} id=${ids.prio} hint=${t('approvals.priority_hint')}>
          <input id=${ids.prio} class="input" type="number" step="1" value=${form.priority} onInput=${set('priority')}
            data-testid="approval-rule-priority" />
        <//>
      </div>
      <${Field} label=${t('approvals.rule_description')} id=${ids.desc}>
        <input id=${ids.desc} class="input" value=${form.description} onInput=${set('description')}
          data-testid="approval-rule-description" />
      <//>
      <${FormActions} error=${error} errorTestid="approval-rule-error" onCancel=${onClose} busy=${busy}
        disabled=${busy || !form.tool_pattern.trim()} testid="approval-rule-save" />
    </form>
  <//>`;
}

function RuleRow({ rule, index, count, busy, advanced, onMove, onEdit, onDelete }) {
  return html`<li class="list-row" data-testid="approval-rule-row" data-rule-id=${rule.id} data-priority=${rule.priority}
      data-action=${rule.action} data-tool-pattern=${rule.tool_pattern}>
    <div class="list-row__main">
      <div class="list-row__title">
        <span class=${`badge badge--action-${rule.action}`} data-testid="approval-rule-action-badge">
          ${t(`approvals.action_${rule.action}`)}</span>
        <span data-testid="approval-rule-words">${ruleWords(rule, index === count - 1)}</span>
      </div>
      ${advanced &&
      html`<div class="list-row__facts" data-testid="approval-rule-patterns">
        <code>${rule.tool_pattern}</code>
        ${rule.path_pattern && html`<code class="muted small">${rule.path_pattern}</code>`}
        <span class="muted small">${t('approvals.priority_n', { n: rule.priority })}</span>
        ${rule.description && !rule.description.includes('{') && html`<span class="muted small">${rule.description}</span>`}
      </div>`}
    </div>
    <div class="list-row__actions">
      <span class="model-row__move">
        <button type="button" class="icon-btn" disabled=${busy || index === 0} onClick=${() => onMove(index, -1)}
          aria-label=${t('approvals.move_up')} title=${t('approvals.move_up')} data-testid="approval-rule-up">${Icon.up()}</button>
        <button type="button" class="icon-btn" disabled=${busy || index === count - 1} onClick=${() => onMove(index, 1)}
          aria-label=${t('approvals.move_down')} title=${t('approvals.move_down')} data-testid="approval-rule-down">${Icon.down()}</button>
      </span>
      <button type="button" class="btn btn--small btn--ghost" onClick=${() => onEdit(rule)} data-testid="approval-rule-edit">
        ${Icon.edit()}<span class="btn__label">${t('common.edit')}</span></button>
      <button type="button" class="btn btn--small btn--danger-ghost" onClick=${() => onDelete(rule)}
        data-testid="approval-rule-delete">${Icon.trash()}<span class="btn__label">${t('common.delete')}</span></button>
    </div>
  </li>`;
}

function TestForm({ groups, initialGroup }) {
  const [form, setForm] = useState({ group: initialGroup || '', tool: '', args: '{}' });
  const [result, setResult] = useState(null);
  const [argsError, setArgsError] = useState(null);
  const [run, busy, error] = useAction();
  const ids = { group: useId('at-group'), tool: useId('at-tool'), args: useId('at-args') };
  useEffect(() => {
    if (!form.group && initialGroup) setForm((f) => ({ ...f, group: initialGroup }));
  }, [initialGroup]);
  const set = (key) => (e) => setForm({ ...form, [key]: e.target.value });
  const onSubmit = (e) => {
    e.preventDefault();
    let args;
    try {
      args = form.args.trim() ? JSON.parse(form.args) : {};
      if (!args || typeof args !== 'object' || Array.isArray(args)) throw new Error('not an object');
    } catch (err) {
      setArgsError(t('approvals.test_bad_json'));
      return;
    }
    setArgsError(null);
    setResult(null);
    run(async () => setResult(await api.testApproval({ group: form.group, tool: form.tool.trim(), arguments: args })));
  };
  return html`<form class="stack" onSubmit=${onSubmit} novalidate data-testid="approval-test-form">
    <div class="grid-2">
      <${Field} label=${t('approvals.test_group')} id=${ids.group}>
        <select id=${ids.group} class="select" value=${form.group} onChange=${set('group')} data-testid="approval-test-group">
          ${groups.map((g) => html`<option value=${g.name}>${groupLabel(g)}</option>`)}
        </select>
      <//>
      <${Field} label=${t('approvals.test_tool')} id=${ids.tool}>
        <input id=${ids.tool} class="input mono" value=${form.tool} onInput=${set('tool')} autocomplete="off"
          autocapitalize="none" spellcheck="false" placeholder="write_file" data-testid="approval-test-tool" />
      <//>
    </div>
    <${Field} label=${t('approvals.test_arguments')} id=${ids.args} hint=${t('approvals.test_arguments_hint')}>
      <textarea id=${ids.args} class="input mono" rows="4" value=${form.args} onInput=${set('args')}
        spellcheck="false" data-testid="approval-test-arguments"></textarea>
    <//>
    <${ErrorNotice} error=${argsError || error} testid="approval-test-error" />
    <div class="actions">
      <button type="submit" class="btn btn--primary" disabled=${busy || !form.group || !form.tool.trim()}
        data-testid="approval-test-submit">${t('approvals.test_submit')}</button>
    </div>
    ${result &&
    html`<div class=${`test-result test-result--${result.action}`} role="status" data-testid="approval-test-result"
        data-action=${result.action} data-rule-id=${result.rule_id === null || result.rule_id === undefined ? undefined : result.rule_id}>
      <p><strong>${t(`approvals.decision_${result.action}`)}</strong>
        ${result.rule_id !== null && result.rule_id !== undefined
          ? html` <span class="muted small">${t('approvals.test_rule', { id: result.rule_id })}</span>`
          : html` <span class="muted small">${t('approvals.test_no_rule')}</span>`}</p>
      ${result.explanation && html`<p class="small" data-testid="approval-test-explanation">${result.explanation}</p>`}
    </div>`}
  </form>`;
}

export function AdminApprovalsPage() {
  const [groups, setGroups] = useState(null);
  const [rules, setRules] = useState(null);
  const [loadError, setLoadError] = useState(null);
  const [selected, setSelected] = useState(null);
  const [dialog, setDialog] = useState(null); // {type: 'group'|'rule', item}
  const { deleting, ask, close: closeDelete, run: runDel, busy: delBusy, error: delError } = useDeleting(); // deleting: {type, item}
  const [flash, setFlash] = useFlash();
  const [runRow, rowBusy, rowError] = useAction();
  const [advanced, setAdvanced] = useState(false);

  const load = async () => {
    try {
      const [g, r] = await Promise.all([api.approvalGroups(), api.approvalRules()]);
      setGroups(g);
      setRules(r);
      setLoadError(null);
      setSelected((s) => (s && g.some((x) => x.name === s) ? s : g.length ? g[0].name : null));
    } catch (e) {
      setLoadError(e);
    }
  };
  useEffect(() => {
    load();
  }, []);

  const loaded = groups !== null && rules !== null;
  const groupRules = loaded ? rules.filter((r) => r.group === selected).sort(byPriority) : [];
  const nextPriority = (groupRules.reduce((mx, r) => Math.max(mx, r.priority), 0) || 0) + 10;

  const onMove = (index, delta) =>
    runRow(async () => {
      const a = groupRules[index];
      const b = groupRules[index + delta];
      if (!a || !b) return;
      // Swap the two priorities; equal ones are pulled apart first.
      let pa = b.priority;
      let pb = a.priority;
      if (pa === pb) {
        pa = delta < 0 ? b.priority - 1 : b.priority + 1;
      }
      const [na, nb] = await Promise.all([
        api.updateApprovalRule(a.id, { priority: pa }),
        pb !== b.priority ? api.updateApprovalRule(b.id, { priority: pb }) : Promise.resolve(b),
      ]);
      setRules((rs) => rs.map((r) => (r.id === na.id ? na : r.id === nb.id ? nb : r)));
    });

  const onSaved = (type) => (item, editing) => {
    if (type === 'group') {
      setGroups((gs) => (editing ? gs.map((g) => (g.name === item.name ? item : g)) : [...gs, item]));
      if (!editing) setSelected(item.name);
      setFlash(t('approvals.group_saved', { name: groupLabel(item) }));
    } else {
      setRules((rs) => (editing ? rs.map((r) => (r.id === item.id ? item : r)) : [...rs, item]));
      setFlash(t('approvals.rule_saved'));
    }
    setDialog(null);
  };

  const askDelete = (type) => (item) => ask({ type, item });
  const onDeleteConfirm = () =>
    runDel(async () => {
      const { type, item } = deleting;
      if (type === 'group') {
        await api.deleteApprovalGroup(item.name);
        await load();
      } else {
        await api.deleteApprovalRule(item.id);
        setRules((rs) => rs.filter((r) => r.id !== item.id));
      }
      closeDelete();
      setFlash(t('approvals.deleted'));
    });

  const current = loaded ? groups.find((g) => g.name === selected) : null;

  return html`<div class="page" data-testid="approvals-page">
    <${AdminTop} name="approvals" title=${t('approvals.title')} lead=${t('approvals.lead')} flash=${flash} rowError=${rowError}
      loadError=${loadError} loaded=${loaded} />

    ${loaded &&
    html`<section class="card" aria-labelledby="ag-title">
      <${SectionHead} id="ag-title" title=${t('approvals.groups_title')} lead=${t('approvals.groups_body')}>
        <button type="button" class="btn btn--secondary" onClick=${() => setDialog({ type: 'group', item: null })}
          data-testid="approval-group-new">${Icon.plus()}<span>${t('approvals.group_new')}</span></button>
      <//>
      <ul class="list" data-testid="approval-groups-list">
        ${groups.map(
          (g) => html`<li class=${`list-row${g.name === selected ? ' is-selected' : ''}`} data-testid="approval-group-row"
              data-group=${g.name} data-selected=${g.name === selected ? 'true' : 'false'}>
            <div class="list-row__main">
              <div class="list-row__title"><strong>${groupLabel(g)}</strong></div>
              ${g.description && html`<div class="list-row__facts"><span class="muted small">${groupDescription(g)}</span></div>`}
            </div>
            <div class="list-row__actions">
              <button type="button" class="btn btn--small btn--secondary" onClick=${() => setSelected(g.name)}
                aria-pressed=${g.name === selected ? 'true' : 'false'} data-testid="approval-group-select">
                ${t('approvals.group_rules', { n: rules.filter((r) => r.group === g.name).length })}</button>
              <button type="button" class="btn btn--small btn--ghost" onClick=${() => setDialog({ type: 'group', item: g })}
                data-testid="approval-group-edit">${Icon.edit()}<span class="btn__label">${t('common.edit')}</span></button>
              <button type="button" class="btn btn--small btn--danger-ghost" data-testid="approval-group-delete"
                onClick=${() => askDelete('group')(g)}>${Icon.trash()}<span class="btn__label">${t('common.delete')}</span></button>
            </div>
          </li>`,
        )}
      </ul>
    </section>`}

    ${loaded && current &&
    html`<section class="card" aria-labelledby="ar-title" data-testid="approval-rules" data-group=${current.name}>
      <${SectionHead} id="ar-title" title=${t('approvals.rules_title', { group: groupLabel(current) })} lead=${t('approvals.rules_body')}>
        <button type="button" class="btn btn--secondary" onClick=${() => setDialog({ type: 'rule', item: null })}
          data-testid="approval-rule-new">${Icon.plus()}<span>${t('approvals.rule_new')}</span></button>
      <//>
      <label class="check small">
        <input type="checkbox" checked=${advanced} onChange=${(e) => setAdvanced(e.target.checked)}
          data-testid="approval-advanced" />
        <span>${t('approvals.advanced')}</span>
      </label>
      ${groupRules.length === 0
        ? html`<p class="muted empty" data-testid="approval-rules-empty">${t('approvals.rules_empty')}</p>`
        : html`<ol class="list" data-testid="approval-rules-list">
            ${groupRules.map(
              (r, i) => html`<${RuleRow} key=${r.id} rule=${r} index=${i} count=${groupRules.length} busy=${rowBusy}
                advanced=${advanced}
                onMove=${onMove} onEdit=${(x) => setDialog({ type: 'rule', item: x })} onDelete=${askDelete('rule')} />`,
            )}
          </ol>`}
    </section>`}

    ${loaded && groups.length > 0 &&
    html`<section class="card" aria-labelledby="at-title">
      <h2 class="card__title" id="at-title">${t('approvals.test_title')}</h2>
      <p class="muted">${t('approvals.test_body')}</p>
      <${PlainTest} groups=${groups} initialGroup=${selected} rules=${rules} />
      ${advanced &&
      html`<h3 class="card__subtitle">${t('approvals.test_advanced')}</h3>
        <${TestForm} groups=${groups} initialGroup=${selected} />`}
    </section>`}

    ${dialog && dialog.type === 'group' &&
    html`<${GroupDialog} group=${dialog.item} onClose=${() => setDialog(null)} onSaved=${onSaved('group')} />`}
    ${dialog && dialog.type === 'rule' &&
    html`<${RuleDialog} rule=${dialog.item} group=${selected} nextPriority=${nextPriority}
      onClose=${() => setDialog(null)} onSaved=${onSaved('rule')} />`}
    ${deleting &&
    html`<${ConfirmDialog} danger
      title=${deleting.type === 'group'
        ? t('approvals.group_delete_title', { name: deleting.item.name })
        : t('approvals.rule_delete_title')}
      message=${html`<p>${deleting.type === 'group' ? t('approvals.group_delete_body') : t('approvals.rule_delete_body')}</p>`}
      confirmLabel=${t('common.delete')} busy=${delBusy} error=${delError && errorText(delError)}
      onConfirm=${onDeleteConfirm} onCancel=${closeDelete} />`}
  </div>`;
}
