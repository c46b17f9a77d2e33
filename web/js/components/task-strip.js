// The background tasks of one conversation, in a strip above the composer:
// the queued and running ones with a Cancel button, and the ones that ended in
// the last few minutes with how they ended. Live: the server says
// "tasks_changed" (with the task's origin conversation) at every state write,
// and the strip reads the list again; at every hello (sign-in, reconnect) it reads it too.
// Rule: the server is the authority (GET /api/schedule/tasks); the strip never
// guesses a state. Trap: only members with `schedule.use` may read tasks; the
// strip stays away (no request, no 403 in the console) for the others.
import { html, useEffect, useState } from '../lib.js';
import { t } from '../i18n.js';
import { api } from '../api.js';
import * as ws from '../ws.js';
import { getState, newestRead } from '../store.js';
import { Icon } from './icons.js';
import { errorText, useAction } from './form.js';

// How long an ended task stays in the strip (the origin conversation has its
// result message by then; the Tasks page keeps the history).
const RECENT_MS = 5 * 60 * 1000;

function visible(task, now) {
  if (task.state === 'queued' || task.state === 'running') return true;
  const ended = Date.parse(task.ended_at || '');
  return Number.isFinite(ended) && now - ended < RECENT_MS;
}

// A task's Cancel action, the same in the strip and on the Tasks page.
export function useCancelTask(task, onChanged) {
  const [run, busy, error] = useAction();
  const active = task.state === 'queued' || task.state === 'running';
  const cancel = () =>
    run(async () => {
      await api.cancelTask(task.id);
      await onChanged();
    });
  return { active, busy, error, cancel };
}

function StripItem({ task, onChanged }) {
  const { active, busy, error, cancel } = useCancelTask(task, onChanged);
  return html`<li class=${`task-strip__item task-strip__item--${task.state}`} data-testid="chat-task"
      data-task-id=${task.id} data-state=${task.state}>
    <a class="task-strip__title" href=${`#/?c=${encodeURIComponent(task.conversation_id)}`}
      title=${t('chat.task_open')}>${Icon.sparkle()}<span>${task.title}</span></a>
    <span class="task-strip__state" data-testid="chat-task-state">
      ${task.state === 'running' && !task.waiting_call && html`<span class="chip__spin" aria-hidden="true"></span>`}
      ${task.state === 'running' && task.waiting_call
        ? html`<a href="#/inbox" data-testid="chat-task-waiting">${t('tasks.waiting_approval')}</a>`
        : t(`tasks.task_${task.state}`)}</span>
    ${active &&
    html`<button type="button" class="btn btn--secondary btn--small" disabled=${busy} data-testid="chat-task-cancel"
      aria-label=${t('chat.task_cancel', { title: task.title })} onClick=${cancel}>${t('tasks.cancel')}</button>`}
    ${error && html`<span class="task-strip__error" role="alert">${errorText(error)}</span>`}
  </li>`;
}

export function TaskStrip({ conversationId }) {
  const [tasks, setTasks] = useState([]);
  const [now, setNow] = useState(Date.now());
  const [reload, setReload] = useState(() => async () => {});
  const { me } = getState();
  const allowed = !!me && (me.capabilities || []).includes('schedule.use');
  useEffect(() => {
    setTasks([]);
    if (!allowed || !conversationId) return undefined;
    let live = true;
    const newest = newestRead();
    const load = async () => {
      const current = newest();
      try {
        const list = await api.tasks();
        if (!live || !current()) return;
        setTasks((Array.isArray(list) ? list : []).filter((x) => x.origin_conversation === conversationId));
        setNow(Date.now());
      } catch (e) {
        // The strip is a convenience: a failed read leaves the last list (the Tasks page shows errors).
        console.warn('tasks not read', e);
      }
    };
    setReload(() => load);
    load();
    const offMessage = ws.onMessage((msg) => {
      if (msg.type === 'tasks_changed' && msg.origin_conversation === conversationId) load();
    });
    const offHello = ws.onHello(load);
    // Ended tasks leave the strip after a few minutes without any event.
    const timer = setInterval(() => setNow(Date.now()), 30000);
    return () => {
      live = false;
      offMessage();
      offHello();
      clearInterval(timer);
    };
  }, [conversationId, allowed]);
  const shown = tasks.filter((task) => visible(task, now));
  if (shown.length === 0) return null;
  return html`<section class="task-strip" aria-label=${t('chat.tasks_label')} data-testid="chat-tasks">
    <ul class="task-strip__list" aria-live="polite">
      ${shown.map((task) => html`<${StripItem} key=${task.id} task=${task} onChanged=${reload} />`)}
    </ul>
  </section>`;
}
