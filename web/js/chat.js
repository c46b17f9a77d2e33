// The chat's client-side model: conversations (tabs), their history and the
// live part of the turn that is running, fed by the REST API and by the
// WebSocket. Kept outside the page component so that leaving the chat (to the
// profile, say) and coming back shows an up-to-date conversation, and so the
// event handling can be reasoned about without rendering.
//
// The server's history is the truth; events are only live updates. So:
//  - each conversation has `items` (the history as last fetched) and `tail`
//    (what happened since: messages being sent, live turns, small notes);
//  - when a turn ends, or the socket comes back after a drop, the history is
//    fetched again and the tail entries it now covers are dropped;
//  - token deltas are buffered and applied at most ~15 times a second.
import { useEffect, useRef, useState } from './lib.js';
import { api } from './api.js';
import { liveSinceRead, subscribe as subscribeApp, getState as getAppState } from './store.js';
import * as ws from './ws.js';

const FLUSH_MS = 66; // ~15 Hz
// The slash commands come from the server (GET /api/chat/commands), the one list.
let commandsPromise = null;
export function chatCommands() {
  if (!commandsPromise) {
    commandsPromise = api.chatCommands().catch((e) => {
      commandsPromise = null; // try again with the next message
      throw e;
    });
  }
  return commandsPromise;
}
const OUTPUT_LIMIT = 64 * 1024; // streamed tool output kept per call (the end of it)

function emptyChat() {
  return {
    loaded: false,
    loadError: null,
    conversations: [], // every conversation, open or closed, as the server sent them
    activeId: null,
    threads: {}, // conversation id -> thread (see newThread)
    models: null, // [{id, name, strength, capabilities}] for the picker, or null
    voice: null, // {transcription, speech}: which voice models exist, or null (unknown)
    offline: false, // the socket dropped and has not come back yet
  };
}

function newThread() {
  return {
    items: null, // history (null while loading)
    error: null,
    loading: false,
    tail: [],
    outputs: {}, // call id -> streamed output so far
    approvals: {}, // call id -> {kind, reason} from approval_requested
    decisions: {}, // call id -> 'approve' | 'reject' (sent, waiting for the events)
    decisionErrors: {}, // call id -> ApiError
    subtasks: {}, // call id -> true while a sub-agent of that call is working
  };
}

let chat = emptyChat();
// Unsent text per conversation id ('' = before the first conversation exists).
export const drafts = new Map();
let version = 0;
const listeners = new Set();
let keySeq = 0;
const nextKey = () => `k${++keySeq}`;

export function getChat() {
  return chat;
}

function notify() {
  version += 1;
  for (const fn of [...listeners]) fn(chat);
}

function setChat(patch) {
  chat = { ...chat, ...patch };
  notify();
}

// Copy-on-write update of one thread, so components see new references.
function updateThread(id, fn) {
  const current = chat.threads[id];
  if (!current) return;
  const th = { ...current };
  fn(th);
  chat = { ...chat, threads: { ...chat.threads, [id]: th } };
  notify();
}

// `conv` in place of the one with its id, or added at the end.
const upsert = (list, conv) =>
  list.some((c) => c.id === conv.id) ? list.map((c) => (c.id === conv.id ? conv : c)) : [...list, conv];

function updateConversation(conv) {
  setChat({ conversations: upsert(chat.conversations, conv) });
}

function patchConversation(id, patch) {
  const conv = chat.conversations.find((c) => c.id === id);
  if (conv) updateConversation({ ...conv, ...patch });
}

// Re-render the calling component on every chat change (same pattern as useStore).
export function useChat() {
  const [, bump] = useState(0);
  const seen = useRef(version);
  seen.current = version;
  useEffect(() => {
    const fn = () => bump((n) => n + 1);
    listeners.add(fn);
    if (seen.current !== version) fn();
    return () => listeners.delete(fn);
  }, []);
  return chat;
}

// ------------------------------------------------------------ loading

let listPromise = null;
// Updates that come on the socket while a list read is on its way (a conversation made
// on another device, a turn's status) win over its answer.
const live = liveSinceRead();

export function loadConversations() {
  if (listPromise) return listPromise;
  const seen = live.begin();
  listPromise = api
    .conversations()
    .then(
      (list) => {
        setChat({ conversations: withNewer(list, seen), loaded: true, loadError: null });
      },
      (error) => {
        setChat({ loaded: true, loadError: error });
      },
    )
    .finally(() => {
      listPromise = null;
      live.end(seen);
    });
  return listPromise;
}

// Every change of a conversation sends its update, so the last one seen is at least as
// new as the answer's copy unless the answer's is stamped later.
function withNewer(list, seen) {
  let out = list;
  for (const update of seen.values()) {
    const answered = list.find((c) => c.id === update.id);
    if (!answered || update.updated_at >= answered.updated_at) out = upsert(out, update);
  }
  return out;
}

// A fresh read even while one is on its way (that one was asked before now): after it,
// so the two never cross (the older answer would land last).
const readAfter = (pending, read) => (pending ? pending.then(read, read) : read());

function reloadConversations() {
  return readAfter(listPromise, () => loadConversations());
}

export function loadModels() {
  // Read aloud shows only with a speech model behind it (asked once per page load).
  if (!chat.voice) api.voiceOffer().then((voice) => setChat({ voice }), () => {});
  // An empty list is asked again: a model may have been added since (setup wizard).
  if (chat.models && chat.models.length) return;
  api.chatModels().then(
    (models) => setChat({ models }),
    () => setChat({ models: null }), // unknown: no "no model" notice on a hiccup
  );
}

// Trap: events that come while the history is on its way build a live turn; the history
// may hold the same calls already (stored before it was read), which would then show
// twice. The live turn keeps only what the history does not hold.
function withoutStored(turn, items) {
  const calls = new Set(items.flatMap((it) => (it.tool_calls || []).map((c) => c.id)));
  const stored = (it) =>
    (it.role === 'assistant' && (it.tool_calls || []).some((c) => calls.has(c.id))) ||
    (it.role === 'tool' && hasResult(items, it.tool_call_id));
  const kept = turn.items.filter((it) => !stored(it));
  return kept.length === turn.items.length ? turn : { ...turn, items: kept };
}

const maxSeq = (items) => (items || []).reduce((m, it) => Math.max(m, it.seq), -1);

const reading = new Map(); // conversation id -> its history read on the way

// Fetch the history of a conversation. Tail entries the history now covers
// are dropped: finished turns (all turns when `dropRunning`, after a
// reconnect, since events may have been missed), and sent messages that
// appear in it.
export function loadMessages(id, options) {
  const read = readMessages(id, options).finally(() => {
    if (reading.get(id) === read) reading.delete(id);
  });
  reading.set(id, read);
  return read;
}

async function readMessages(id, { dropRunning = false } = {}) {
  if (!chat.threads[id]) {
    // Echoes that came before this tab opened the conversation: the message is queued,
    // not yet in the history this fetch may return, and no echo comes again.
    const tail = (early.get(id) || []).map((item) => ({ key: nextKey(), kind: 'user', pending: false, item }));
    early.delete(id);
    chat = { ...chat, threads: { ...chat.threads, [id]: { ...newThread(), tail } } };
  }
  const before = chat.threads[id];
  const cutoff = new Set(before.tail.filter((e) => e.kind === 'turn' && (e.done || dropRunning)).map((e) => e.key));
  const prevMax = maxSeq(before.items);
  const noteKeys = new Set(before.tail.filter((e) => e.kind === 'note').map((e) => e.key));
  const userKeys = new Set(before.tail.filter((e) => e.kind === 'user').map((e) => e.key));
  updateThread(id, (th) => {
    th.loading = true;
  });
  let items;
  try {
    items = await api.messages(id);
  } catch (error) {
    updateThread(id, (th) => {
      th.loading = false;
      th.error = error;
    });
    return;
  }
  updateThread(id, (th) => {
    const seqs = new Set(items.map((it) => it.seq));
    // User messages stored since the last fetch, to match with the messages
    // we show as sent but whose stored copy we had not seen yet.
    const fresh = items.filter((it) => it.role === 'user' && it.seq > prevMax).map((it) => it.text);
    const unsaved = (e) => e.kind === 'user' && (e.item.seq === null || e.item.seq === undefined);
    const covered = new Set();
    // An echo that came while the history was on its way counts too: its message may
    // be in the history already.
    for (const e of th.tail) {
      if (!unsaved(e)) continue;
      const at = fresh.indexOf(e.item.text);
      if (at !== -1) {
        fresh.splice(at, 1);
        covered.add(e.key);
      }
    }
    // What is left is matched in order: the stored text may differ from what
    // was shown (the server may add or strip context around what was typed).
    for (const e of th.tail) {
      if (!unsaved(e) || !userKeys.has(e.key) || covered.has(e.key) || !fresh.length) continue;
      fresh.shift();
      covered.add(e.key);
    }
    // A finished turn's reasoning (live only, never stored) stays in view, folded,
    // after the question it answered, until the page is reloaded.
    const lastUser = [...items].reverse().find((it) => it.role === 'user');
    const thoughts = th.tail
      .filter((e) => e.kind === 'turn' && cutoff.has(e.key) && e.reasoning)
      .map((e) => ({ key: nextKey(), kind: 'reasoning', text: e.reasoning, anchor: lastUser ? lastUser.seq : undefined }));
    th.tail = [...th.tail, ...thoughts].map((e) => (e.kind === 'turn' && !cutoff.has(e.key) ? withoutStored(e, items) : e));
    th.items = items;
    th.loading = false;
    th.error = null;
    // How a turn ended (failed, stopped) is noted before its messages are
    // fetched: pin such notes after what the history now holds.
    const anchor = maxSeq(items);
    th.tail = th.tail.map((e) => (e.kind === 'note' && e.anchor === undefined && noteKeys.has(e.key) ? { ...e, anchor } : e));
    th.tail = th.tail.filter((e) => {
      if (e.kind === 'turn') return !cutoff.has(e.key);
      if (e.kind === 'user') return unsaved(e) ? !covered.has(e.key) : !seqs.has(e.item.seq);
      return true;
    });
    // Calls that are no longer waiting need no approval state.
    for (const it of items) {
      for (const call of it.tool_calls || []) {
        if (call.status !== 'awaiting_approval') {
          delete th.decisions[call.id];
          delete th.approvals[call.id];
        }
      }
    }
  });
}

// Make `id` the conversation on screen (loading its history the first time).
export function activate(id) {
  if (chat.activeId !== id) setChat({ activeId: id });
  if (id && !chat.threads[id]) loadMessages(id);
}

// ------------------------------------------------------------ actions

export async function newConversation(body = {}) {
  const conv = await api.createConversation(body);
  updateConversation(conv);
  chat = { ...chat, threads: { ...chat.threads, [conv.id]: { ...newThread(), items: [] } } };
  activate(conv.id);
  return conv;
}

export async function renameConversation(id, title) {
  updateConversation(await api.updateConversation(id, { title }));
}

export async function setConversationModel(id, modelId) {
  updateConversation(await api.updateConversation(id, { model_id: modelId }));
}

export async function setConversationSecurityGroup(id, group) {
  updateConversation(await api.updateConversation(id, { security_group: group }));
}

// Close a tab (the conversation is kept) and show a neighbour instead.
export async function closeConversation(id) {
  const open = chat.conversations.filter((c) => c.open);
  const at = open.findIndex((c) => c.id === id);
  const updated = await api.updateConversation(id, { open: false });
  updateConversation(updated);
  if (chat.activeId === id) {
    const rest = open.filter((c) => c.id !== id);
    const next = rest[Math.min(at, rest.length - 1)];
    setChat({ activeId: next ? next.id : null });
    if (next) activate(next.id);
  }
}

export async function reopenConversation(id) {
  updateConversation(await api.updateConversation(id, { open: true }));
  activate(id);
}

const capitalise = (s) => String(s).charAt(0).toUpperCase() + String(s).slice(1);

// A note is pinned after the newest message known when it is made, so that
// messages fetched later do not slide in above it.
function addNote(id, text, tone = 'info') {
  updateThread(id, (th) => {
    const sent = th.tail.filter((e) => e.kind === 'user' && e.item.seq !== null && e.item.seq !== undefined);
    const anchor = Math.max(maxSeq(th.items), maxSeq(sent.map((e) => e.item)));
    th.tail = [...th.tail, { key: nextKey(), kind: 'note', text, tone, anchor: anchor >= 0 ? anchor : undefined }];
  });
}

// Send one of the member's messages again (retry after a failure, regenerate
// the answer, or edit it: `text`); the server drops it and everything after it
// from the history first, so the thread is cut there at once and re-read when
// the new turn ends.
export async function resendMessage(id, seq, text = null) {
  const before = chat.threads[id];
  const old = before && before.items ? before.items.find((it) => it.seq === seq) : null;
  // Cut the thread first: a fast turn may end (and be re-read) before the answer.
  updateThread(id, (t) => {
    t.items = (t.items || []).filter((it) => it.seq < seq);
    t.sent = (t.sent || 0) + 1;
    t.tail = [
      {
        key: nextKey(),
        kind: 'user',
        pending: true,
        item: {
          seq: null,
          role: 'user',
          text: text === null ? (old ? old.text : '') : text,
          attachments: old ? old.attachments : [],
          tool_calls: [],
          view: old ? old.view : [],
        },
      },
    ];
  });
  let res;
  try {
    res = await api.resendMessage(id, seq, text === null ? {} : { text });
  } catch (e) {
    if (before) setChat({ threads: { ...chat.threads, [id]: before } });
    throw e;
  }
  if (res && res.images_not_seen) addNote(id, { key: 'chat.image_not_seen' }, 'info');
  if (res && res.videos_not_seen) addNote(id, { key: 'chat.video_not_seen' }, 'info');
  return res;
}

// Send a message (or a slash command) to conversation `id`.
// Returns {command, result} for commands, {accepted: true} for messages.
// Throws the ApiError on failure (the composer keeps the text then).
export async function sendMessage(id, { text, attachments = [], viewContext = null }) {
  // Same rule as the server: a known word right after the slash ("/etc/hosts?" is a message).
  const head = text.trim().split(/\s+/)[0] || '';
  const isCommand =
    attachments.length === 0 &&
    head.startsWith('/') &&
    (await chatCommands()).some((c) => c.name === head.slice(1));
  const body = { text };
  if (attachments.length) body.attachments = attachments.map((a) => a.path);
  if (viewContext) body.view_context = viewContext;
  let key = null;
  if (!isCommand) {
    key = nextKey();
    updateThread(id, (th) => {
      th.sent = (th.sent || 0) + 1; // the thread scrolls to the end for a new message
      th.tail = [
        ...th.tail,
        {
          key,
          kind: 'user',
          pending: true,
          item: { seq: null, role: 'user', text, attachments, tool_calls: [], view: viewContext || [] },
        },
      ];
    });
  }
  let res;
  try {
    res = await api.sendMessage(id, body);
  } catch (e) {
    if (key) {
      updateThread(id, (th) => {
        th.tail = th.tail.filter((x) => x.key !== key);
      });
    }
    throw e;
  }
  if (res && res.images_not_seen) addNote(id, { key: 'chat.image_not_seen' }, 'info');
  if (res && res.videos_not_seen) addNote(id, { key: 'chat.video_not_seen' }, 'info');
  if (res && res.command) {
    // The fixed answers are ours to word (in the user's language); answers
    // with data in them (cost, model) are shown as the server wrote them.
    const own = { stop: 'chat.cmd_result_stop', compact: 'chat.cmd_result_compact', new: 'chat.cmd_result_new' };
    addNote(id, own[res.command] ? { key: own[res.command] } : capitalise(res.result || `/${res.command}`), 'command');
    if (res.command === 'new' && res.conversation_id) {
      await loadConversations();
      activate(res.conversation_id);
    } else if (res.command === 'model' || res.command === 'stop') {
      loadConversations();
    } else if (res.command === 'compact') {
      loadMessages(id);
    }
  }
  return res;
}

export async function stopConversation(id) {
  await api.stopConversation(id);
}

// A bypass ('15m' | 'conversation') goes through the inbox API, which knows it.
export async function decide(id, callId, decision, bypass) {
  updateThread(id, (th) => {
    th.decisions = { ...th.decisions, [callId]: decision };
    const errs = { ...th.decisionErrors };
    delete errs[callId];
    th.decisionErrors = errs;
  });
  try {
    if (decision === 'approve' && bypass) await api.inboxApprove(callId, bypass);
    else await api.decideApproval(callId, decision);
  } catch (e) {
    updateThread(id, (th) => {
      const d = { ...th.decisions };
      delete d[callId];
      th.decisions = d;
      th.decisionErrors = { ...th.decisionErrors, [callId]: e };
    });
  }
}

// ------------------------------------------------------------ events

const deltas = {}; // conversation id -> text not applied yet
let flushTimer = null;

function lastOpenTurn(th) {
  for (let i = th.tail.length - 1; i >= 0; i -= 1) {
    const e = th.tail[i];
    if (e.kind === 'turn') return e.done ? null : e;
  }
  return null;
}

// The running turn entry, created when an event arrives without a
// turn_started (a resumed turn, or a page opened mid-turn).
function ensureTurn(th) {
  const open = lastOpenTurn(th);
  if (open) {
    // A message the member sent during this turn joins it (the server reads it at the
    // next step): what follows is the answer to it, so it goes below that message.
    const at = th.tail.findIndex((e) => e.key === open.key);
    if (!th.tail.slice(at + 1).some((e) => e.kind === 'user')) return open;
    th.tail = th.tail.map((e) => (e.key === open.key ? { ...e, done: true, continued: true } : e));
  }
  const turn = { key: nextKey(), kind: 'turn', items: [], done: false, status: null, error: null };
  th.tail = [...th.tail, turn];
  return turn;
}

// Replace the turn entry (copy-on-write) after `fn` changed a copy of it.
function withTurn(th, fn) {
  const turn = ensureTurn(th);
  const copy = { ...turn, items: [...turn.items] };
  fn(copy);
  th.tail = th.tail.map((e) => (e.key === turn.key ? copy : e));
}

function applyDelta(th, text) {
  withTurn(th, (turn) => {
    const last = turn.items[turn.items.length - 1];
    if (last && last.role === 'assistant' && !(last.tool_calls || []).length) {
      turn.items[turn.items.length - 1] = { ...last, text: last.text + text };
    } else {
      turn.items.push({ key: nextKey(), role: 'assistant', text, tool_calls: [], attachments: [] });
    }
  });
}

function flushDeltas(only) {
  const ids = only ? [only] : Object.keys(deltas);
  for (const id of ids) {
    const text = deltas[id];
    delete deltas[id];
    if (text && chat.threads[id]) updateThread(id, (th) => applyDelta(th, text));
  }
  if (!Object.keys(deltas).length && flushTimer) {
    clearTimeout(flushTimer);
    flushTimer = null;
  }
}

// Update a call wherever it is: in the fetched history or in the live turn.
// Returns true when found.
function updateCall(th, callId, patch) {
  if (th.items) {
    const idx = th.items.findIndex((it) => (it.tool_calls || []).some((c) => c.id === callId));
    if (idx !== -1) {
      const it = th.items[idx];
      const items = [...th.items];
      items[idx] = { ...it, tool_calls: it.tool_calls.map((c) => (c.id === callId ? { ...c, ...patch } : c)) };
      th.items = items;
      return true;
    }
  }
  for (const e of th.tail) {
    if (e.kind !== 'turn') continue;
    const idx = e.items.findIndex((it) => (it.tool_calls || []).some((c) => c.id === callId));
    if (idx !== -1) {
      const copy = { ...e, items: [...e.items] };
      const it = copy.items[idx];
      copy.items[idx] = { ...it, tool_calls: it.tool_calls.map((c) => (c.id === callId ? { ...c, ...patch } : c)) };
      th.tail = th.tail.map((x) => (x.key === e.key ? copy : x));
      return true;
    }
  }
  return false;
}

function upsertCall(th, call) {
  if (updateCall(th, call.id, call)) return;
  withTurn(th, (turn) => {
    const last = turn.items[turn.items.length - 1];
    if (last && last.role === 'assistant') {
      turn.items[turn.items.length - 1] = { ...last, tool_calls: [...(last.tool_calls || []), call] };
    } else {
      turn.items.push({ key: nextKey(), role: 'assistant', text: '', tool_calls: [call], attachments: [] });
    }
  });
}

const hasResult = (items, callId) => (items || []).some((it) => it.role === 'tool' && it.tool_call_id === callId);

// Sub-agents report under their own conversation id; remember which card of
// which conversation started them so the card can say "sub-task running".
const childOf = {}; // child conversation id -> {conv, call}

function markSubtask(root, running) {
  if (!root || !chat.threads[root.conv]) return;
  updateThread(root.conv, (th) => {
    th.subtasks = { ...th.subtasks, [root.call]: running };
  });
}

function onChatEvent(ev) {
  if (!ev || !ev.conversation_id) return;
  const id = ev.conversation_id;

  if (ev.type === 'subagent_started' || ev.type === 'subagent_finished') {
    const root = childOf[id] || { conv: id, call: ev.call_id };
    if (ev.type === 'subagent_started') childOf[ev.child_conversation_id] = root;
    markSubtask(root, ev.type === 'subagent_started');
    return;
  }
  if ((ev.depth || 0) > 0) {
    const root = childOf[id];
    if (root && ev.type !== 'token_delta') markSubtask(root, ev.type !== 'turn_done');
    return;
  }

  if (ev.type === 'reasoning_delta') {
    // What a reasoning model thinks before answering: shown folded in the live turn,
    // never stored (a re-read of the history drops it).
    if (!chat.threads[id] || !ev.text) return;
    updateThread(id, (th) =>
      withTurn(th, (turn) => {
        turn.reasoning = (turn.reasoning || '') + ev.text;
      }),
    );
    return;
  }
  if (ev.type === 'token_delta') {
    if (!chat.threads[id] || !ev.text) return;
    deltas[id] = (deltas[id] || '') + ev.text;
    if (!flushTimer) flushTimer = setTimeout(() => {
      flushTimer = null;
      flushDeltas();
    }, FLUSH_MS);
    return;
  }
  flushDeltas(id); // keep the order: text before the call that follows it

  // The conversation list reflects the running state even for tabs not loaded.
  if (ev.type === 'turn_started') patchConversation(id, { status: 'running' });
  if (ev.type === 'turn_done') {
    patchConversation(id, { status: ev.status === 'awaiting_approval' ? 'awaiting_approval' : 'idle' });
  }
  if (ev.type === 'usage') {
    const conv = chat.conversations.find((c) => c.id === id);
    if (conv) {
      const u = conv.usage || { input_tokens: 0, output_tokens: 0, cost_usd: null };
      patchConversation(id, {
        usage: {
          input_tokens: u.input_tokens + (ev.input_tokens || 0),
          output_tokens: u.output_tokens + (ev.output_tokens || 0),
          cost_usd: ev.cost_usd === null || ev.cost_usd === undefined ? u.cost_usd : (u.cost_usd || 0) + ev.cost_usd,
        },
      });
    }
  }

  if (!chat.threads[id]) return;

  switch (ev.type) {
    case 'turn_started':
      updateThread(id, (th) => {
        const open = lastOpenTurn(th);
        if (open && !open.items.length) return; // already created by an early event
        if (open) th.tail = th.tail.map((e) => (e.key === open.key ? { ...e, done: true } : e));
        th.tail = [...th.tail, { key: nextKey(), kind: 'turn', items: [], done: false, status: null, error: null, resumed: !!ev.resumed }];
      });
      break;
    case 'tool_call':
      updateThread(id, (th) => {
        upsertCall(th, { id: ev.call_id, name: ev.name, arguments: ev.arguments || {}, status: ev.status });
      });
      break;
    case 'tool_output':
      updateThread(id, (th) => {
        const prev = th.outputs[ev.call_id] || '';
        let next = prev + (ev.chunk || '');
        if (next.length > OUTPUT_LIMIT) next = next.slice(next.length - OUTPUT_LIMIT);
        th.outputs = { ...th.outputs, [ev.call_id]: next };
      });
      break;
    case 'tool_result':
      updateThread(id, (th) => {
        if (!updateCall(th, ev.call_id, { status: ev.status })) {
          upsertCall(th, { id: ev.call_id, name: ev.name, arguments: {}, status: ev.status });
        }
        const inTail = th.tail.some((e) => e.kind === 'turn' && hasResult(e.items, ev.call_id));
        if (!hasResult(th.items, ev.call_id) && !inTail) {
          withTurn(th, (turn) => {
            turn.items.push({
              key: nextKey(),
              role: 'tool',
              tool_call_id: ev.call_id,
              text: ev.content || '',
              is_error: !!ev.is_error,
              tool_calls: [],
              attachments: [],
            });
          });
        }
        const approvals = { ...th.approvals };
        delete approvals[ev.call_id];
        th.approvals = approvals;
      });
      break;
    case 'approval_requested':
      updateThread(id, (th) => {
        th.approvals = { ...th.approvals, [ev.call_id]: { kind: ev.kind, reason: ev.reason } };
        upsertCall(th, { id: ev.call_id, name: ev.name, arguments: ev.arguments || {}, status: 'awaiting_approval' });
      });
      break;
    case 'turn_done':
      updateThread(id, (th) => {
        const open = lastOpenTurn(th);
        const done = { done: true, status: ev.status, error: ev.error || null };
        if (open) th.tail = th.tail.map((e) => (e.key === open.key ? { ...e, ...done } : e));
        else th.tail = [...th.tail, { key: nextKey(), kind: 'turn', items: [], ...done }];
        // How the turn ended is not in the history: keep it as a note, which
        // outlives the turn entry when the history is fetched again.
        if (ev.status === 'failed') {
          // The plain sentence in the member's language (by code), the server's own
          // sentence when this page does not know the code; the technical detail
          // comes only for those who manage models, behind a toggle.
          const text = ev.error_code
            ? { key: `chat.error.${ev.error_code}`, fallback: ev.error }
            : ev.error ? { key: 'chat.turn_failed_reason', vars: { reason: ev.error } } : { key: 'chat.turn_failed' };
          th.tail = [...th.tail, { key: nextKey(), kind: 'note', text, tone: 'error', code: ev.error_code || null, detail: ev.error_detail || null }];
        } else if (ev.status === 'stopped') {
          th.tail = [...th.tail, { key: nextKey(), kind: 'note', text: { key: 'chat.turn_stopped' }, tone: 'stopped' }];
        }
      });
      loadMessages(id);
      loadConversations(); // exact usage and status
      break;
    case 'model_switched':
      // The answer broke off and another model starts it over: drop the text shown
      // so far for this answer, and say which model continues.
      flushDeltas(id);
      updateThread(id, (th) => {
        withTurn(th, (turn) => {
          const last = turn.items[turn.items.length - 1];
          if (last && last.role === 'assistant' && !(last.tool_calls || []).length) turn.items.pop();
        });
        th.tail = [...th.tail, { key: nextKey(), kind: 'note', text: { key: 'chat.model_switched', vars: { model: ev.model } }, tone: 'info', detail: ev.reason || null }];
      });
      break;
    case 'compacted':
      addNote(id, { key: 'chat.compacted', vars: { dropped: ev.dropped, kept: ev.kept } }, 'info');
      loadMessages(id);
      break;
    default:
      break;
  }
}

// The server echoes every message when it is queued, to all the member's
// clients; a queued message has no place in the history yet (seq 0).
// Trap: a tab that opens the conversation just after the echo reads a history
// without that message and gets no second echo, so echoes for conversations not
// open here are kept (a few each) for loadMessages to start the thread with.
const early = new Map(); // conversation id -> [item] echoed before the thread existed
const EARLY_KEEP = 10;

function onUserMessage(msg) {
  const id = msg.conversation_id;
  if (!id || !msg.item) return;
  const item = { ...msg.item, seq: msg.item.seq ? msg.item.seq : null };
  if (!chat.threads[id]) {
    early.set(id, [...(early.get(id) || []), item].slice(-EARLY_KEEP));
    return;
  }
  updateThread(id, (th) => {
    if (item.seq !== null) {
      if ((th.items || []).some((it) => it.seq === item.seq)) return;
      if (th.tail.some((e) => e.kind === 'user' && e.item.seq === item.seq)) return;
    }
    // Our own message comes back: same text, or else the oldest one sent.
    const mine = th.tail.filter((e) => e.kind === 'user' && e.pending);
    const pending = mine.find((e) => e.item.text === item.text) || mine[0];
    if (pending) {
      th.tail = th.tail.map((e) => (e === pending ? { ...e, pending: false, item } : e));
    } else {
      th.tail = [...th.tail, { key: nextKey(), kind: 'user', pending: false, item }];
    }
  });
}

ws.onMessage((msg) => {
  if (!getAppState().me) return;
  if (msg.type === 'chat') onChatEvent(msg.event);
  else if (msg.type === 'user_message') onUserMessage(msg);
  else if (msg.type === 'conversation_updated' && msg.conversation) {
    live.record(msg.conversation.id, msg.conversation);
    if (!chat.loaded) return;
    updateConversation(msg.conversation);
    // A tab closed on another device goes away here too.
    if (!msg.conversation.open && chat.activeId === msg.conversation.id) {
      const next = chat.conversations.find((c) => c.open);
      setChat({ activeId: next ? next.id : null });
      if (next) activate(next.id);
    }
  }
});

// The list may have been read before the server counted this socket in (a conversation
// made in between, on another device or by a task, came in no event): read it again.
ws.onHello(() => {
  if (getAppState().me && (chat.loaded || listPromise)) reloadConversations();
});

ws.onStatus((status, { reconnected }) => {
  if (status === 'closed' && getAppState().me) {
    if (!chat.offline) setChat({ offline: true });
  } else if (status === 'open') {
    if (chat.offline) setChat({ offline: false });
    if (reconnected && chat.loaded) {
      // Events sent while we were away are lost: read the truth again.
      flushDeltas();
      const active = chat.activeId;
      const threads = active && chat.threads[active] ? { [active]: chat.threads[active] } : {};
      setChat({ threads });
      if (active) loadMessages(active, { dropRunning: true });
    } else if (!reconnected && chat.activeId && chat.threads[chat.activeId]) {
      // The open conversation may have been read before the server counted this socket
      // in (a turn that ended in between came in no event): read it again.
      const active = chat.activeId;
      readAfter(reading.get(active), () => loadMessages(active));
    }
  }
});

// Logging out (or in as somebody else) forgets everything.
let lastUser = null;
subscribeApp((state) => {
  const uid = state.me ? state.me.id : null;
  if (uid !== lastUser) {
    lastUser = uid;
    for (const k of Object.keys(deltas)) delete deltas[k];
    for (const k of Object.keys(childOf)) delete childOf[k];
    early.clear();
    drafts.clear();
    chat = emptyChat();
    notify();
  }
});
