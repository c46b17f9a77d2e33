// #/projects — the member's projects (capability projects.use): make one, add members
// read-only or read-write (owner and writers), open my own project chat, open its files,
// delete (owner only). Rule: the server says what the caller may do (`manage`, `delete`).
import { html, useEffect, useState } from '../../js/lib.js';
import { t } from '../../js/i18n.js';
import { get, post, del, request } from '../../js/api.js';
import { Icon } from '../../js/components/icons.js';
import { ErrorNotice, errorText, useAction, useRead, PageHead, NameDescriptionForm } from '../../js/components/form.js';

const enc = encodeURIComponent;

// The project's git history (when its owner turned it on): the last commits, one open
// with its diff, and for writers a button per changed file restoring it as it was then.
function History({ project, base }) {
  const [log, setLog] = useState(null);
  const [open, setOpen] = useState(null);
  const [run, busy, error] = useAction();
  const load = () => run(async () => setLog(await get(`${base}/history`)));
  const show = (id) => run(async () => setOpen(await get(`${base}/history/${enc(id)}`)));
  const restore = (rev, path) => run(async () => {
    await post(`${base}/history/${enc(rev)}/restore`, { path });
    setOpen(null);
    setLog(await get(`${base}/history`));
  });
  const fileRow = (line) => {
    const [status, path] = line.split('\t');
    const rev = status === 'D' ? open.commit.parent : open.commit.id;
    return html`<li data-testid="pj-history-file" data-path=${path}><code>${status} ${path}</code>
      ${project.access === 'write' && rev && html` <button type="button" class="btn btn--small btn--ghost" disabled=${busy}
        data-testid="pj-history-restore" onClick=${() => restore(rev, path)}>${t('pj.history_restore')}</button>`}</li>`;
  };
  return html`<div class="stack" data-testid="pj-history">
    ${log === null && html`<div class="actions actions--start"><button type="button" class="btn btn--secondary" disabled=${busy}
      data-testid="pj-history-show" onClick=${load}>${t('pj.history_show')}</button></div>`}
    ${log !== null && log.commits.length === 0 && html`<p class="small" data-testid="pj-history-empty">${t('pj.history_empty')}</p>`}
    ${log !== null && log.commits.length > 0 && html`<ul class="small" data-testid="pj-history-list">
      ${log.commits.map((c) => html`<li key=${c.id} data-testid="pj-commit" data-id=${c.id}>
        <button type="button" class="btn btn--small btn--ghost" disabled=${busy} data-testid="pj-commit-open"
          onClick=${() => show(c.id)}><code>${c.id.slice(0, 7)}</code></button>
        ${c.message} · ${c.author} · ${new Date(c.date).toLocaleString()}
      </li>`)}
    </ul>`}
    ${open && html`<div class="card stack" data-testid="pj-commit-view">
      <strong>${open.commit.message}</strong>
      <ul class="small">${open.files.map(fileRow)}</ul>
      <div class="diff"><pre class="diff__pre" data-testid="pj-diff">${open.diff}</pre></div>
      ${open.truncated && html`<p class="small">${t('pj.history_cut')}</p>`}
    </div>`}
    ${error && html`<p class="approval__error" role="alert" data-testid="pj-history-error">${errorText(error)}</p>`}
  </div>`;
}

function ProjectItem({ project, onChanged }) {
  const [run, busy, error] = useAction();
  const [who, setWho] = useState('');
  const [access, setAccess] = useState('read');
  const base = `api/projects/${enc(project.owner)}/${enc(project.slug)}`;
  const act = (fn) => run(async () => { await fn(); await onChanged(); });
  const openChat = () => run(async () => {
    const conversation = await post(`${base}/chat`);
    window.location.hash = `#/?c=${enc(conversation.id)}`;
  });
  return html`<li class="inbox-item" data-testid="pj-project" data-path=${project.path} data-access=${project.access}>
    <div class="inbox-item__head">
      <span class="inbox-item__icon">${Icon.folder()}</span>
      <div class="inbox-item__title">
        <strong data-testid="pj-name">${project.name}</strong>
        <a class="small" href=${`#/files?path=${enc(project.path)}`} data-testid="pj-files"><code>${project.path}/</code></a>
      </div>
      ${project.access === 'read' && html`<span class="badge badge--off" data-testid="pj-readonly">${Icon.lock()}${t('pj.read_only')}</span>`}
    </div>
    ${project.description && html`<p class="small">${project.description}</p>`}
    <ul class="small" data-testid="pj-members">
      ${project.members.map((m) => html`<li data-testid="pj-member" data-user=${m.username}>
        ${m.username} · ${m.owner ? t('pj.owner') : m.access === 'write' ? t('pj.write') : t('pj.read')}
        ${project.manage && !m.owner && html` <button type="button" class="btn btn--small btn--ghost" disabled=${busy}
          data-testid="pj-member-remove" onClick=${() => act(() => del(`${base}/members/${enc(m.username)}`))}>${t('pj.remove')}</button>`}
      </li>`)}
    </ul>
    ${project.manage && html`<div class="actions actions--start">
      <input class="input" placeholder=${t('pj.username')} value=${who} onInput=${(e) => setWho(e.target.value)}
        data-testid="pj-member-name" aria-label=${t('pj.username')} />
      <select class="select" value=${access} onChange=${(e) => setAccess(e.target.value)} data-testid="pj-member-access" aria-label=${t('pj.access')}>
        <option value="read">${t('pj.read')}</option><option value="write">${t('pj.write')}</option>
      </select>
      <button type="button" class="btn btn--secondary" disabled=${busy || !who.trim()} data-testid="pj-member-add"
        onClick=${() => act(async () => { await request('PUT', `${base}/members/${enc(who.trim())}`, { access }); setWho(''); })}>
        ${Icon.plus()}<span>${t('pj.add_member')}</span></button>
    </div>`}
    ${project.delete && html`<label class="field field--inline small">
      <input type="checkbox" checked=${project.history} disabled=${busy} data-testid="pj-history-switch"
        onChange=${(e) => act(() => request('PATCH', base, { history: e.target.checked }))} />
      <span>${t('pj.history_switch')}</span></label>`}
    ${project.history && html`<${History} project=${project} base=${base} />`}
    ${error && html`<p class="approval__error" role="alert" data-testid="pj-error">${errorText(error)}</p>`}
    <div class="inbox-item__choices">
      <button type="button" class="btn btn--primary" disabled=${busy} data-testid="pj-chat" onClick=${openChat}>
        ${Icon.chat()}<span>${t('pj.open_chat')}</span></button>
      ${project.delete && html`<button type="button" class="btn btn--secondary" disabled=${busy} data-testid="pj-delete"
        onClick=${() => window.confirm(t('pj.delete_confirm')) && act(() => del(base))}>
        ${Icon.trash()}<span>${t('pj.delete')}</span></button>`}
    </div>
  </li>`;
}

export function ProjectsPage() {
  const [projects, error, load] = useRead('api/projects');
  useEffect(() => { load(); }, []);
  return html`<section class="page page--narrow" data-testid="pj-page">
    <${PageHead} title=${t('nav.projects')} lead=${t('pj.lead')} />
    ${error && html`<${ErrorNotice} error=${error} testid="pj-load-error" />`}
    <${NameDescriptionForm} path="api/projects" onMade=${load} icon=${Icon.plus()}
      text=${{ name: t('pj.name'), description: t('pj.description'), create: t('pj.create') }}
      ids=${{ form: 'pj-form', name: 'pj-new-name', description: 'pj-new-description', create: 'pj-create', error: 'pj-create-error' }} />
    ${projects !== null && projects.length === 0 && html`<div class="inbox-empty" data-testid="pj-empty"><p>${t('pj.empty')}</p></div>`}
    ${projects !== null && projects.length > 0 && html`<ul class="inbox-list" data-testid="pj-list">
      ${projects.map((p) => html`<${ProjectItem} key=${p.path} project=${p} onChanged=${load} />`)}
    </ul>`}
  </section>`;
}
