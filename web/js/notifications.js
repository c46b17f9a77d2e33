// The member's notifications: one shared model for the bell's badge, its
// panel (the notification centre) and the profile settings. The server says
// "notifications_changed" with the unread count at every write, read mark
// and deletion, and "notified" when a batch is delivered to the web; the list
// is read again only while someone shows it.
// Rule: every member has notifications (no capability); the server answers
// from the caller's own database only.
import { useEffect } from './lib.js';
import { api } from './api.js';
import * as ws from './ws.js';
import { liveSinceRead, newestRead, sharedModel, subscribe } from './store.js';

const state = {
  unread: null, // null until the first answer
  items: null, // the newest page read, or null
  error: null,
  loading: false,
  latest: null, // the last batch delivered live (for a short announcement)
};
const { set, use: useModel } = sharedModel(state);
let showing = 0; // how many views show the list
const newest = newestRead();
const live = liveSinceRead(); // a count that came live wins over a read sent before it

export function useNotifications() {
  return useModel();
}

export async function loadNotifications() {
  const current = newest();
  const seen = live.begin();
  set({ loading: true });
  try {
    const page = await api.notifications();
    if (!current()) return;
    const unread = seen.has('unread') ? seen.get('unread') : page.unread;
    set({ items: page.items || [], unread, error: null, loading: false });
  } catch (e) {
    if (!current()) return;
    set({ error: e, loading: false });
  } finally {
    live.end(seen);
  }
}

// Views that show the list hold it while mounted.
export function useNotificationList(open) {
  const s = useNotifications();
  useEffect(() => {
    if (!open) return undefined;
    showing += 1;
    loadNotifications();
    return () => {
      showing -= 1;
    };
  }, [open]);
  return s;
}

function patchItems(fn) {
  if (state.items) set({ items: state.items.map(fn) });
}

export async function markRead(id) {
  patchItems((n) => (n.id === id ? { ...n, read: true } : n));
  const out = await api.notificationsRead([id]);
  set({ unread: out.unread });
}

export async function markAllRead() {
  patchItems((n) => ({ ...n, read: true }));
  const out = await api.notificationsReadAll();
  set({ unread: out.unread });
}

export async function removeNotification(id) {
  await api.notificationDelete(id);
  if (state.items) set({ items: state.items.filter((n) => n.id !== id) });
}

let timer = null;
function refreshSoon() {
  clearTimeout(timer);
  timer = setTimeout(loadNotifications, 150);
}

ws.onMessage((msg) => {
  if (msg.type === 'notifications_changed') {
    if (typeof msg.unread === 'number') {
      live.record('unread', msg.unread);
      set({ unread: msg.unread });
    }
    if (showing > 0) refreshSoon();
  } else if (msg.type === 'notified') {
    live.record('unread', msg.unread);
    set({ unread: msg.unread, latest: msg.items || [] });
    if (showing > 0) refreshSoon();
  }
});

ws.onHello(refreshSoon);

// Forget everything on logout; read the count once someone logs in.
let lastMe = null;
subscribe((app) => {
  if (app.me === lastMe) return;
  const was = lastMe;
  lastMe = app.me;
  if (was && !app.me) set({ unread: null, items: null, error: null, latest: null });
  else if (!was && app.me) refreshSoon();
});
