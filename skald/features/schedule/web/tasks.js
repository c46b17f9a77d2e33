// #/tasks — the member's scheduled jobs (and, below, their recent runs):
// create and edit (JobForm: no model needed to set a reminder), pause, resume,
// run now, delete. The assistant also creates jobs from chat (the `schedule`
// tool, or `/remind` with no model).
// Rule: the server is the authority (GET /api/schedule/jobs and /runs);
// every action reloads the list rather than guessing the new state.
import { html, useEffect, useMemo, useState } from '../../js/lib.js';
import { newestRead } from '../../js/store.js';
import { t, formatDate } from '../../js/i18n.js';
import { api } from '../../js/api.js';
import * as ws from '../../js/ws.js';
import { Icon } from '../../js/components/icons.js';
import { ErrorNotice, useAction, PageHead } from '../../js/components/form.js';
import { JobForm } from '../../js/components/job-form.js';
import { useCancelTask } from '../../js/components/task-strip.js';

const JOB_REFRESH_MS = 30000;

function when(iso) {
  if (!iso) return t('tasks.never');
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  return `${formatDate(iso)} ${d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' })}`;
}

function JobItem({ job, runs, onChanged }) {
  const [run, busy, error] = useAction();
  const [editing, setEditing] = useState(false);
  const act = (fn) =>
    run(async () => {
      await fn();
      await onChanged();
    });
  const last = runs.find((r) => r.job_id === job.id);
  return html`<li class="inbox-item" data-testid="task-job" data-job-id=${job.id} data-state=${job.state}>
    <div class="inbox-item__head">
      <span class="inbox-item__icon">${Icon.clock()}</span>
      <div class="inbox-item__title">
        <strong data-testid="task-job-title">${job.title}</strong>
        <span class="muted small" data-testid="task-job-kind">${t(`tasks.kind_${job.kind || 'prompt'}`)}</span>
        <a class="inbox-item__conv small" href=${`#/?c=${encodeURIComponent(job.conversation_id)}`}
          data-testid="task-job-chat">${Icon.chat()}<span>${t('tasks.open_chat')}</span></a>
      </div>
      <span class="muted small" data-testid="task-job-state">${t(`tasks.state_${job.state}`)}</span>
    </div>
    <p class="small">
      <span data-testid="task-job-when" title=${job.cron || ''}>${job.when_text || job.cron || when(job.run_at)}</span> · ${job.zone}
      ${' · '}${t('tasks.next_run')}: <span data-testid="task-job-next">${job.state === 'active' ? when(job.next_run) : '—'}</span>
    </p>
    ${last && html`<p class="small muted" data-testid="task-job-last">
      ${t('tasks.last_run')}: ${when(last.started_at)} — ${last.outcome === 'running' && last.waiting_call
        ? html`<a href="#/inbox" data-testid="task-job-waiting">${t('tasks.waiting_approval')}</a>`
        : t(`tasks.outcome_${last.outcome}`)}${last.late ? ` (${t('tasks.late')})` : ''}
      ${last.error ? html` · <span>${last.error}</span>` : ''}</p>`}
    ${editing &&
    html`<${JobForm} job=${job} onCancel=${() => setEditing(false)}
      onSaved=${async () => { setEditing(false); await onChanged(); }} />`}
    <${ErrorNotice} error=${error} testid="task-job-error" />
    <div class="inbox-item__choices">
      ${job.state === 'active' &&
      html`<button type="button" class="btn btn--secondary" disabled=${busy} data-testid="task-job-pause"
        onClick=${() => act(() => api.updateJob(job.id, { state: 'paused' }))}>${t('tasks.pause')}</button>`}
      ${job.state !== 'active' &&
      html`<button type="button" class="btn btn--secondary" disabled=${busy} data-testid="task-job-resume"
        onClick=${() => act(() => api.updateJob(job.id, { state: 'active' }))}>${t('tasks.resume')}</button>`}
      <button type="button" class="btn btn--secondary" disabled=${busy} data-testid="task-job-run"
        onClick=${() => act(() => api.runJob(job.id))}>${t('tasks.run_now')}</button>
      <button type="button" class="btn btn--secondary" disabled=${busy} data-testid="task-job-edit"
        onClick=${() => setEditing(!editing)}>${Icon.edit()}<span>${t('common.edit')}</span></button>
      <button type="button" class="btn btn--secondary" disabled=${busy} data-testid="task-job-delete"
        onClick=${() => window.confirm(t('tasks.delete_confirm')) && act(() => api.deleteJob(job.id))}>
        ${Icon.trash()}<span>${t('tasks.delete')}</span></button>
    </div>
  </li>`;
}

function TaskItem({ task, onChanged }) {
  const { active, busy, error, cancel } = useCancelTask(task, onChanged);
  return html`<li class="inbox-item" data-testid="task-item" data-task-id=${task.id} data-state=${task.state}>
    <div class="inbox-item__head">
      <span class="inbox-item__icon">${Icon.sparkle()}</span>
      <div class="inbox-item__title">
        <strong>${task.title}</strong>
        <a class="inbox-item__conv small" href=${`#/?c=${encodeURIComponent(task.origin_conversation)}`}>
          ${Icon.chat()}<span>${t('tasks.open_chat')}</span></a>
      </div>
      <span class="muted small" data-testid="task-item-state">${task.state === 'running' && task.waiting_call
        ? html`<a href="#/inbox" data-testid="task-item-waiting">${t('tasks.waiting_approval')}</a>`
        : t(`tasks.task_${task.state}`)}</span>
    </div>
    ${task.error && html`<p class="small muted" data-testid="task-item-error">${task.error}</p>`}
    <${ErrorNotice} error=${error} testid="task-item-cancel-error" />
    ${active &&
    html`<div class="inbox-item__choices"><button type="button" class="btn btn--secondary" disabled=${busy}
      data-testid="task-item-cancel" onClick=${cancel}>${t('tasks.cancel')}</button></div>`}
  </li>`;
}

export function TasksPage() {
  const [jobs, setJobs] = useState(null);
  const [runs, setRuns] = useState([]);
  const [tasks, setTasks] = useState([]);
  const [error, setError] = useState(null);
  const [creating, setCreating] = useState(false);
  // An answer that comes after a newer read started is dropped (it is older).
  const newest = useMemo(newestRead, []);
  const load = async () => {
    const current = newest();
    try {
      const [j, r, k] = await Promise.all([api.jobs(), api.jobRuns(), api.tasks()]);
      if (!current()) return;
      setJobs(j);
      setRuns(r);
      setTasks(k);
      setError(null);
    } catch (e) {
      if (current()) setError(e);
    }
  };
  useEffect(() => {
    load();
    // A live list: background tasks change state by themselves, and the server
    // says so ("tasks_changed"); at every hello, read what may have been missed.
    const offMessage = ws.onMessage((msg) => {
      if (msg.type === 'tasks_changed') load();
    });
    const offHello = ws.onHello(load);
    // Scheduled runs have no event yet: their outcome and next time are read now and then.
    const timer = setInterval(load, JOB_REFRESH_MS);
    return () => {
      offMessage();
      offHello();
      clearInterval(timer);
    };
  }, []);
  let body;
  if (jobs === null && !error) {
    body = html`<div class="inbox-empty"><span class="spinner" aria-hidden="true"></span></div>`;
  } else if (jobs !== null && jobs.length === 0) {
    body = html`<div class="inbox-empty" data-testid="tasks-empty"><p>${t('tasks.empty')}</p></div>`;
  } else if (jobs !== null) {
    body = html`<ul class="inbox-list" data-testid="tasks-jobs">
      ${jobs.map((job) => html`<${JobItem} key=${job.id} job=${job} runs=${runs} onChanged=${load} />`)}
    </ul>`;
  }
  return html`<section class="page page--narrow" data-testid="tasks-page">
    <${PageHead} title=${t('nav.tasks')} lead=${t('tasks.lead')} />
    ${error && html`<${ErrorNotice} error=${error} testid="tasks-error" />`}
    ${creating
      ? html`<${JobForm} onCancel=${() => setCreating(false)} onSaved=${async () => { setCreating(false); await load(); }} />`
      : html`<div class="actions actions--start"><button type="button" class="btn btn--primary" data-testid="tasks-new"
          onClick=${() => setCreating(true)}>${Icon.clock()}<span>${t('tasks.new')}</span></button></div>`}
    ${tasks.length > 0 &&
    html`<h2 class="card__title">${t('tasks.background')}</h2>
      <ul class="inbox-list" data-testid="tasks-background">
        ${tasks.map((task) => html`<${TaskItem} key=${task.id} task=${task} onChanged=${load} />`)}
      </ul>
      <h2 class="card__title">${t('tasks.scheduled')}</h2>`}
    ${body}
  </section>`;
}
