// #/skills — the household's skills and the member's own (capability files): name, one
// line, SKILL.md opened read-only; add one from a ZIP and delete, in the member's own
// tree for themselves and in the household's only with skills.manage. Rule: the server
// decides (403 otherwise); the page only hides what the caller's role cannot do.
import { html, useEffect, useState } from '../../js/lib.js';
import { t } from '../../js/i18n.js';
import { api, get, del, request } from '../../js/api.js';
import { Icon } from '../../js/components/icons.js';
import { ErrorNotice, errorText, useAction, useRead, PageHead } from '../../js/components/form.js';

const enc = encodeURIComponent;
const ID = /^[a-z0-9][a-z0-9-]{0,47}$/;

function SkillItem({ skill, canChange, onChanged }) {
  const [text, setText] = useState(null);
  const [run, busy, error] = useAction();
  const base = `api/skills/${enc(skill.tree)}/${enc(skill.id)}`;
  const toggle = () => run(async () => setText(text === null ? (await get(base)).text : null));
  const remove = () => window.confirm(t('sk.delete_confirm'))
    && run(async () => { await del(base); await onChanged(); });
  return html`<li class="inbox-item" data-testid="sk-skill" data-tree=${skill.tree} data-id=${skill.id}>
    <div class="inbox-item__head">
      <span class="inbox-item__icon">${Icon.folder()}</span>
      <div class="inbox-item__title">
        <strong data-testid="sk-name">${skill.name}</strong>
        <code class="small">${skill.tree}/${skill.id}</code>
      </div>
    </div>
    ${skill.description && html`<p class="small" data-testid="sk-line">${skill.description}</p>`}
    ${text !== null && html`<div class="diff"><pre class="diff__pre" data-testid="sk-text">${text}</pre></div>`}
    ${error && html`<p class="approval__error" role="alert">${errorText(error)}</p>`}
    <div class="inbox-item__choices">
      <button type="button" class="btn btn--secondary" disabled=${busy} data-testid="sk-open" onClick=${toggle}>
        <span>${text === null ? t('sk.open') : t('sk.close')}</span></button>
      ${canChange && html`<button type="button" class="btn btn--secondary" disabled=${busy} data-testid="sk-delete" onClick=${remove}>
        ${Icon.trash()}<span>${t('sk.delete')}</span></button>`}
    </div>
  </li>`;
}

function AddSkill({ household, onChanged }) {
  const [id, setId] = useState('');
  const [tree, setTree] = useState('mine');
  const [file, setFile] = useState(null);
  const [run, busy, error] = useAction();
  const ok = ID.test(id) && file;
  const add = (e) => {
    e.preventDefault();
    run(async () => {
      await request('POST', `api/skills/${enc(tree)}/${enc(id)}/zip`, file);
      setId('');
      setFile(null);
      e.target.reset();
      await onChanged();
    });
  };
  return html`<form class="card stack" onSubmit=${add} data-testid="sk-form">
    <p class="small">${t('sk.add_lead')}</p>
    <label class="field"><span>${t('sk.id')}</span>
      <input class="input" required maxlength="48" value=${id} onInput=${(e) => setId(e.target.value.trim())}
        data-testid="sk-new-id" /></label>
    <label class="field"><span>${t('sk.zip')}</span>
      <input class="input" type="file" accept=".zip,application/zip" data-testid="sk-new-zip"
        onChange=${(e) => setFile(e.target.files[0] || null)} /></label>
    ${household && html`<label class="field"><span>${t('sk.tree')}</span>
      <select class="select" value=${tree} onChange=${(e) => setTree(e.target.value)} data-testid="sk-new-tree">
        <option value="mine">${t('sk.mine')}</option><option value="shared">${t('sk.shared')}</option>
      </select></label>`}
    ${error && html`<p class="approval__error" role="alert" data-testid="sk-add-error">${errorText(error)}</p>`}
    <div class="actions actions--start"><button type="submit" class="btn btn--primary" disabled=${busy || !ok}
      data-testid="sk-add">${Icon.plus()}<span>${t('sk.add')}</span></button></div>
  </form>`;
}

export function SkillsPage() {
  const [skills, error, load] = useRead('api/skills');
  const [me, setMe] = useState(null);
  const caps = (me && me.capabilities) || [];
  const mine = caps.includes('files');
  const household = caps.includes('skills.manage');
  useEffect(() => { load(); api.me().then(setMe, () => {}); }, []);
  const section = (tree, title, canChange) => {
    const list = (skills || []).filter((s) => s.tree === tree);
    return html`<section class="stack" data-testid=${`sk-${tree}`}>
      <h2>${title}</h2>
      ${list.length === 0 && html`<p class="small" data-testid="sk-empty">${t('sk.empty')}</p>`}
      ${list.length > 0 && html`<ul class="inbox-list">
        ${list.map((s) => html`<${SkillItem} key=${s.id} skill=${s} canChange=${canChange} onChanged=${load} />`)}
      </ul>`}
    </section>`;
  };
  return html`<section class="page page--narrow" data-testid="sk-page">
    <${PageHead} title=${t('nav.skills')} lead=${t('sk.lead')} />
    ${error && html`<${ErrorNotice} error=${error} testid="sk-load-error" />`}
    ${skills !== null && section('shared', t('sk.shared'), household)}
    ${skills !== null && section('mine', t('sk.mine'), mine)}
    ${(mine || household) && html`<${AddSkill} household=${household} onChanged=${load} />`}
  </section>`;
}
