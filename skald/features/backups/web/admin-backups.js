// #/admin/backups (capability admin.system): the household's backups.
// The server backs up on a schedule into the folder chosen here, keeps what the
// retention rules say, and once a month restores the newest backup into a scratch
// folder to prove it opens (the "restore drill"). This page shows the last results,
// the archives in the folder, and two buttons: back up now, test a restore now.
// Each archive has "Restore…": a dialog shows what it holds and, confirmed, the server
// restores it and restarts (skald/features/backups/restart.py); the page then follows the restart
// like any other (connection lost, then the sign-in page: sessions are not restored).
import { html, useState, useEffect } from '../../js/lib.js';
import { t } from '../../js/i18n.js';
import { api } from '../../js/api.js';
import { getState } from '../../js/store.js';
import { Icon } from '../../js/components/icons.js';
import { Check, Field, ErrorNotice, Notice, useAction, useFlash, useId, PageHead } from '../../js/components/form.js';
import { Dialog } from '../../js/components/dialog.js';
import { formatSize } from '../files/files.js';

function when(iso) {
  if (!iso) return '';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return String(iso);
  return d.toLocaleString(getState().locale, { dateStyle: 'medium', timeStyle: 'short' });
}

function LastBackup({ run }) {
  if (!run) return html`<p class="muted" data-testid="backups-last">${t('backups.never')}</p>`;
  return html`<div data-testid="backups-last" data-ok=${run.ok ? 'true' : 'false'}>
    ${run.ok
      ? html`<${Notice} kind="success">${t('backups.last_ok', { when: when(run.at), size: formatSize(run.bytes) })}<//>`
      : html`<${Notice} kind="warning">${t('backups.last_failed', { when: when(run.at) })}
          <span class="notice__detail muted small">${run.error}</span><//>`}
  </div>`;
}

const VERDICT_KEYS = { ok: 'backups.db_ok', failed: 'backups.db_failed', locked: 'backups.db_locked' };

function LastDrill({ drill }) {
  if (!drill) return html`<p class="muted" data-testid="backups-drill">${t('backups.drill_never')}</p>`;
  return html`<div class="stack" data-testid="backups-drill" data-ok=${drill.ok ? 'true' : 'false'}>
    ${drill.ok
      ? html`<${Notice} kind="success">${t('backups.drill_ok', { when: when(drill.at), files: drill.files })}<//>`
      : html`<${Notice} kind="warning">${t('backups.drill_failed', { when: when(drill.at) })}
          <span class="notice__detail muted small">${drill.error}</span><//>`}
    ${drill.databases && drill.databases.length > 0 &&
    html`<ul class="plain-list" data-testid="backups-drill-databases">
      ${drill.databases.map((d) => html`<li data-status=${d.status}>
        <span class=${`badge badge--${d.status === 'ok' ? 'plain' : 'locked'}`}>${t(VERDICT_KEYS[d.status] || 'backups.db_failed')}</span>
        <span>${d.username ? t('backups.db_member', { name: d.username }) : t('backups.db_household')}</span>
      </li>`)}
    </ul>`}
  </div>`;
}

function LastRestore({ outcome }) {
  if (!outcome) return null;
  return html`<div data-testid="backups-restored" data-ok=${outcome.ok ? 'true' : 'false'}>
    ${outcome.ok
      ? html`<${Notice} kind="success">${t('backups.restored_ok', { created: when(outcome.created), when: when(outcome.at), name: outcome.by })}
          ${outcome.replaced && html`<span class="notice__detail muted small">${t('backups.restored_kept', { folder: outcome.replaced })}</span>`}<//>`
      : html`<${Notice} kind="warning">${t('backups.restored_failed', { when: when(outcome.at) })}
          <span class="notice__detail muted small">${outcome.error}</span><//>`}
  </div>`;
}

function Contents({ c }) {
  const names = c.members.map((m) => m.username).filter(Boolean);
  return html`<ul class="plain-list" data-testid="restore-contents">
    <li>${t('backups.contents_made', { when: when(c.created), version: c.skald_version })}</li>
    <li data-kind=${c.kind}>${t(c.kind === 'quick' ? 'backups.contents_quick' : 'backups.contents_full')}</li>
    <li data-testid="restore-members">${names.length
      ? t('backups.contents_members', { names: names.join(', ') })
      : t('backups.contents_household')}</li>
    <li>${t('backups.contents_size', { files: c.files, size: formatSize(c.bytes) })}</li>
  </ul>`;
}

// Choose → see what it holds → confirm. After the 202 the server is already stopping:
// the dialog stays, saying so, until the page's own restart handling takes over.
function RestoreDialog({ archive, onClose }) {
  const [contents, setContents] = useState(null);
  const [loadError, setLoadError] = useState(null);
  const [restarting, setRestarting] = useState(false);
  const [run, busy, error] = useAction();
  useEffect(() => {
    api.backupContents(archive.name).then(setContents, setLoadError);
  }, [archive.name]);
  const confirm = () => run(async () => {
    await api.restoreBackup(archive.name);
    setRestarting(true);
  });
  let body;
  if (restarting) {
    body = html`<${Notice} kind="info" testid="restore-restarting">${t('backups.restarting')}<//>`;
  } else if (loadError) {
    body = html`<${ErrorNotice} error=${loadError} testid="restore-load-error" />`;
  } else if (!contents) {
    body = html`<p class="muted">${t('common.loading')}</p>`;
  } else {
    body = html`<div class="stack">
      <${Contents} c=${contents} />
      <${Notice} kind="warning" testid="restore-warning">${t('backups.restore_warning')}<//>
      <${ErrorNotice} error=${error} testid="restore-error" />
      <div class="actions">
        <button type="button" class="btn btn--ghost" onClick=${onClose} data-testid="restore-cancel">${t('common.cancel')}</button>
        <button type="button" class="btn btn--danger" disabled=${busy} onClick=${confirm} data-testid="restore-confirm">
          ${busy ? t('backups.checking') : t('backups.restore_confirm')}</button>
      </div>
    </div>`;
  }
  return html`<${Dialog} title=${t('backups.restore_title', { when: when(archive.created) })} onClose=${onClose}
      testid="restore-dialog" dismissable=${!restarting}>${body}<//>`;
}

function SettingsForm({ view, onSaved }) {
  const [form, setForm] = useState({ ...view.settings });
  const [run, busy, error] = useAction();
  const [saved, setSaved] = useFlash();
  const ids = {
    enabled: useId('b-en'), folder: useId('b-folder'), every: useId('b-every'), daily: useId('b-daily'),
    weekly: useId('b-weekly'), monthly: useId('b-monthly'), drill: useId('b-drill'), quick: useId('b-quick'),
  };
  const num = (key) => (e) => setForm({ ...form, [key]: Math.max(0, Math.floor(Number(e.target.value)) || 0) });
  const onSubmit = (e) => {
    e.preventDefault();
    run(async () => {
      const result = await api.saveBackupSettings({ ...form, folder: form.folder.trim() });
      setSaved(true);
      onSaved(result);
    });
  };
  return html`<form class="card stack" onSubmit=${onSubmit} data-testid="backups-settings" novalidate>
    <h2 class="card__title">${t('backups.schedule')}</h2>
    <${Check} id=${ids.enabled} checked=${form.enabled} testid="backups-enabled"
      onChange=${(e) => setForm({ ...form, enabled: e.target.checked })} label=${t('backups.enabled')} hint=${t('backups.enabled_hint')} />
    <${Field} label=${t('backups.folder')} id=${ids.folder} hint=${t('backups.folder_hint', { folder: view.folder })}>
      <input id=${ids.folder} class="input mono" value=${form.folder} spellcheck="false" autocapitalize="none"
        placeholder=${view.folder} onInput=${(e) => setForm({ ...form, folder: e.target.value })}
        data-testid="backups-folder" />
    <//>
    <div class="grid-2">
      <${Field} label=${t('backups.every_hours')} id=${ids.every}>
        <input id=${ids.every} class="input" type="number" min="1" value=${form.every_hours}
          onInput=${num('every_hours')} data-testid="backups-every" />
      <//>
      <${Field} label=${t('backups.drill_every_days')} id=${ids.drill}>
        <input id=${ids.drill} class="input" type="number" min="1" value=${form.drill_every_days}
          onInput=${num('drill_every_days')} data-testid="backups-drill-every" />
      <//>
      <${Field} label=${t('backups.keep_daily')} id=${ids.daily}>
        <input id=${ids.daily} class="input" type="number" min="0" value=${form.keep_daily} onInput=${num('keep_daily')} />
      <//>
      <${Field} label=${t('backups.keep_weekly')} id=${ids.weekly}>
        <input id=${ids.weekly} class="input" type="number" min="0" value=${form.keep_weekly} onInput=${num('keep_weekly')} />
      <//>
      <${Field} label=${t('backups.keep_monthly')} id=${ids.monthly} hint=${t('backups.keep_hint')}>
        <input id=${ids.monthly} class="input" type="number" min="0" value=${form.keep_monthly} onInput=${num('keep_monthly')} />
      <//>
    </div>
    <${Check} id=${ids.quick} checked=${form.quick} onChange=${(e) => setForm({ ...form, quick: e.target.checked })}
      label=${t('backups.quick')} hint=${t('backups.quick_hint')} />
    <${ErrorNotice} error=${error} testid="backups-settings-error" />
    ${saved && html`<${Notice} kind="success" testid="backups-saved">${t('common.saved')}<//>`}
    <div class="actions">
      <button type="submit" class="btn btn--primary" disabled=${busy} data-testid="backups-save">
        ${busy ? t('common.saving') : t('common.save')}</button>
    </div>
  </form>`;
}

export function AdminBackupsPage() {
  const [view, setView] = useState(null);
  const [loadError, setLoadError] = useState(null);
  const [run, busy, error] = useAction();
  const [restoring, setRestoring] = useState(null);
  const reload = () => api.backups().then(setView, setLoadError);
  useEffect(() => {
    reload();
  }, []);
  const act = (fn) => run(async () => {
    await fn();
    await reload();
  });

  let body;
  if (loadError && !view) body = html`<${ErrorNotice} error=${loadError} testid="backups-error" />`;
  else if (!view) body = html`<p class="muted">${t('common.loading')}</p>`;
  else {
    body = html`<div class="stack stack--lg">
      <section class="card stack">
        <h2 class="card__title">${t('backups.status')}</h2>
        <${LastBackup} run=${view.state.last_backup} />
        <${LastDrill} drill=${view.state.last_drill} />
        <${LastRestore} outcome=${view.last_restore} />
        <${ErrorNotice} error=${error} testid="backups-action-error" />
        <div class="actions">
          <button type="button" class="btn btn--primary" disabled=${busy} data-testid="backups-run"
            onClick=${() => act(api.runBackup)}>${Icon.archive()}<span>${busy ? t('backups.working') : t('backups.run_now')}</span></button>
          <button type="button" class="btn btn--secondary" disabled=${busy || view.archives.length === 0}
            data-testid="backups-drill-run" onClick=${() => act(api.runDrill)}>
            ${Icon.check()}<span>${t('backups.drill_now')}</span></button>
        </div>
      </section>
      <${SettingsForm} key=${JSON.stringify(view.settings)} view=${view} onSaved=${() => reload()} />
      <section class="card stack">
        <h2 class="card__title">${t('backups.archives', { folder: view.folder })}</h2>
        ${view.archives.length === 0
          ? html`<p class="muted">${t('backups.no_archives')}</p>`
          : html`<ul class="plain-list" data-testid="backups-archives">
              ${view.archives.map((a) => html`<li data-testid="backups-archive" class="backups-archive">
                <span>${when(a.created)}</span> <span class="muted small">${formatSize(a.bytes)}</span>
                <code class="muted small">${a.name}</code>
                <button type="button" class="btn btn--secondary btn--small" data-testid="backups-restore"
                  onClick=${() => setRestoring(a)}>${t('backups.restore')}</button>
              </li>`)}
            </ul>`}
        <p class="muted small">${t('backups.restore_hint')}</p>
      </section>
    </div>`;
  }
  return html`<div class="page" data-testid="backups-page">
    <${PageHead} title=${t('backups.title')} lead=${t('backups.lead')} />
    ${body}
    ${restoring && html`<${RestoreDialog} archive=${restoring} onClose=${() => setRestoring(null)} />`}
  </div>`;
}
