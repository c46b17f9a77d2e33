// The member's inbox: tool calls waiting for an approval and questions the
// assistant asked. One shared model for the sidebar badge, the phone header,
// the Inbox page and the chat's approval cards (which look up the diff
// preview here). The server says "inbox_changed" with the new count; the
// list itself is read again only when someone shows it.
import { useEffect } from './lib.js';
import { api } from './api.js';
import * as ws from './ws.js';
import { getState as getAppState, liveSinceRead, newestRead, sharedModel, subscribe } from './store.js';

const inbox = {
  count: null, // null until the first answer
  items: null, // the last list read, or null
  error: null,
  loading: false,
};
const { set, use: useInboxModel } = sharedModel(inbox);
let wantList = 0; // how many views show the list (page, chat cards)
const newest = newestRead();
const live = liveSinceRead(); // a count that came live wins over a read sent before it

export function getInbox() {
  return inbox;
}

export function useInbox() {
  return useInboxModel();
}

// Read the list (and so the count) again; only the newest read's answer lands.
// Only for members whose role has the inbox capability (children's included).
export function hasInbox() {
  const { me } = getAppState();
  return !!me && (me.capabilities || []).includes('inbox');
}

export async function loadInbox() {
  if (!hasInbox()) return;
  const current = newest();
  const seen = live.begin();
  set({ loading: true });
  try {
    const items = await api.inbox();
    if (!current()) return;
    const list = Array.isArray(items) ? items : [];
    // The list may be older than a count that came since; a view that shows the list
    // reads it again at that event (below).
    const count = seen.has('count') ? seen.get('count') : list.length;
    set({ items: list, count, error: null, loading: false });
  } catch (e) {
    if (!current()) return;
    set({ error: e, loading: false });
  } finally {
    live.end(seen);
  }
}

// Views that need the list (not only the count) hold it while mounted.
export function useInboxList() {
  const state = useInbox();
  useEffect(() => {
    wantList += 1;
    loadInbox();
    return () => {
      wantList -= 1;
    };
  }, []);
  return state;
}

// An item the page answered leaves the list at once; the event confirms.
export function dropItem(id) {
  if (!inbox.items) return;
  const items = inbox.items.filter((i) => i.id !== id);
  set({ items, count: items.length });
}

// The item for a tool call of the chat: by id (== the call id), else the
// only waiting approval of that tool in that conversation.
export function itemForCall(conversationId, call) {
  const items = inbox.items || [];
  const byId = items.find((i) => i.id === call.id);
  if (byId) return byId;
  const same = items.filter(
    (i) => i.kind === 'approval' && i.conversation_id === conversationId && i.tool === call.name,
  );
  return same.length === 1 ? same[0] : null;
}

let timer = null;
function refreshSoon() {
  clearTimeout(timer);
  timer = setTimeout(loadInbox, 150);
}

ws.onMessage((msg) => {
  if (!hasInbox()) return;
  if (msg.type === 'inbox_changed') {
    if (typeof msg.count === 'number') {
      live.record('count', msg.count);
      set({ count: msg.count });
    }
    if (wantList > 0 || inbox.items === null) refreshSoon();
  } else if (msg.type === 'chat' && msg.event && msg.event.type === 'approval_requested' && wantList > 0) {
    refreshSoon();
  }
});

ws.onHello(() => {
  if (hasInbox()) refreshSoon();
});

// Forget everything on logout; read the count once someone logs in.
let lastMe = null;
subscribe((app) => {
  if (app.me === lastMe) return;
  const was = lastMe;
  lastMe = app.me;
  if (was && !app.me) set({ count: null, items: null, error: null });
  else if (!was && app.me) refreshSoon();
});
