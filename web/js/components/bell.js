// The bell in the header: the unread count as a badge, and the notification
// centre as a panel under it (newest first; mark one or all read; delete).
// A notification's link is an in-app path (the server refuses anything else),
// opened as a route of this app.
import { html, useRef, useState } from '../lib.js';
import { t, formatDate } from '../i18n.js';
import { Icon } from './icons.js';
import { useDismiss } from './dismiss.js';
import { navigate } from '../router.js';
import {
  useNotificationList,
  markRead,
  markAllRead,
  removeNotification,
  loadNotifications,
} from '../notifications.js';

function when(iso) {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return '';
  const today = new Date().toDateString() === d.toDateString();
  return today ? d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' }) : formatDate(iso);
}

// Who sent it, in the member's language; a plugin's own source shows as named.
const SOURCES = {
  assistant: 'notifications.source_assistant',
  job: 'notifications.source_job',
  schedule: 'notifications.source_schedule',
  task: 'notifications.source_task',
  test: 'notifications.source_test',
  system: 'notifications.source_system',
};
function sourceLabel(source) {
  return SOURCES[source] ? t(SOURCES[source]) : source;
}

function Item({ n, close }) {
  const open = async () => {
    if (!n.read) markRead(n.id).catch(() => loadNotifications());
    if (n.link) {
      close();
      navigate(n.link);
    }
  };
  return html`<li class=${`notif${n.read ? '' : ' notif--unread'}`} data-testid="notif-item"
      data-id=${n.id} data-read=${n.read ? 'true' : 'false'}>
    <button type="button" class="notif__main" onClick=${open} data-testid="notif-open">
      <strong class="notif__title">${n.title}</strong>
      ${n.body && html`<span class="notif__body">${n.body}</span>`}
      <span class="muted small">${when(n.created_at)} · ${sourceLabel(n.source)}</span>
    </button>
    <div class="notif__actions">
      ${!n.read &&
      html`<button type="button" class="icon-btn" title=${t('notifications.mark_read')} aria-label=${t('notifications.mark_read')}
        onClick=${() => markRead(n.id).catch(() => loadNotifications())} data-testid="notif-mark-read">${Icon.check()}</button>`}
      <button type="button" class="icon-btn" title=${t('common.delete')} aria-label=${t('common.delete')}
        onClick=${() => removeNotification(n.id).catch(() => loadNotifications())} data-testid="notif-delete">${Icon.trash()}</button>
    </div>
  </li>`;
}

export function Bell() {
  const [open, setOpen] = useState(false);
  const root = useRef(null);
  const s = useNotificationList(open);
  const close = () => setOpen(false);

  // pointerdown, not click: a button the click re-renders away (mark read) is no
  // longer inside the panel when the click reaches the document.
  useDismiss(open, close, root, 'pointerdown');

  const unread = s.unread || 0;
  const items = s.items || [];
  return html`<div class="bell" ref=${root}>
    <button type="button" class="icon-btn bell__button" aria-expanded=${open ? 'true' : 'false'}
      aria-controls="notif-panel" aria-label=${t('notifications.open', { count: unread })}
      title=${t('notifications.title')} onClick=${() => setOpen(!open)} data-testid="notif-bell">
      ${Icon.bell()}
      ${unread > 0 &&
      html`<span class="badge-count" data-testid="notif-badge" data-count=${unread}>${unread > 99 ? '99+' : unread}</span>`}
    </button>
    <div class="visually-hidden" aria-live="polite">${s.latest && s.latest.length ? t('notifications.arrived', { count: s.latest.length }) : ''}</div>
    ${open &&
    html`<div class="bell__panel" id="notif-panel" role="dialog" aria-label=${t('notifications.title')} data-testid="notif-panel">
      <div class="bell__head">
        <strong>${t('notifications.title')}</strong>
        <button type="button" class="btn btn--ghost btn--small" disabled=${unread === 0}
          onClick=${() => markAllRead().catch(() => loadNotifications())} data-testid="notif-mark-all">${t('notifications.mark_all_read')}</button>
      </div>
      ${s.error && html`<p class="notice notice--error" role="alert">${t('notifications.load_failed')}</p>`}
      ${!s.error && s.items !== null && items.length === 0 &&
      html`<p class="muted bell__empty" data-testid="notif-empty">${t('notifications.empty')}</p>`}
      ${items.length > 0 && html`<ul class="bell__list">${items.map((n) => html`<${Item} key=${n.id} n=${n} close=${close} />`)}</ul>`}
      <a class="bell__settings small" href="#/profile" onClick=${close} data-testid="notif-settings-link">${t('notifications.settings_link')}</a>
    </div>`}
  </div>`;
}
