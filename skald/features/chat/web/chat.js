// #/ — the chat with the household assistant, the home page for everyone.
// Conversations are tabs (the open ones; they follow the member to every
// device), the current one is in the address (#/?c=<id>) so a reload stays put.
// Children (ui_mode simple) get the same chat, friendlier and with fewer
// controls: no model picker, no cost, no "share what I'm looking at".
import { html, useEffect, useLayoutEffect, useRef, useState } from '../../js/lib.js';
import { t } from '../../js/i18n.js';
import { api } from '../../js/api.js';
import { getState, viewDescription } from '../../js/store.js';
import { parseHash, redirect } from '../../js/router.js';
import { Icon } from '../../js/components/icons.js';
import { useDismiss } from '../../js/components/dismiss.js';
import { ErrorNotice, errorText } from '../../js/components/form.js';
import { Conversation, ScrollArea, formatSize } from '../../js/components/chat-items.js';
import { SecurityGroupControl } from '../../js/components/security-group.js';
import { MicButton } from '../../js/components/voice.js';
import { TaskStrip } from '../../js/components/task-strip.js';
import {
  useChat,
  loadConversations,
  loadModels,
  loadMessages,
  activate,
  newConversation,
  renameConversation,
  closeConversation,
  reopenConversation,
  setConversationModel,
  sendMessage,
  resendMessage,
  chatCommands,
  stopConversation,
  decide,
  drafts,
} from '../../js/chat.js';

const SHARE_KEY = 'skald.chat.share_view';

// A slash command from the server's list (GET /api/chat/commands), as the hints show it:
// described in the member's language when we have words for it, else as the server says.
function commandHint(c) {
  const key = `chat.cmd_${c.name}`;
  const label = t(key);
  // What follows the name: ours to word when we have words for it, else the server's usage.
  const argKey = `chat.cmd_${c.name}_arg`;
  const argText = t(argKey);
  const arg = !c.usage.includes(' ') ? '' : argText === argKey ? c.usage.slice(c.usage.indexOf(' ') + 1) : argText;
  return { name: `/${c.name}`, arg, label: label === key ? c.description : label };
}

function greetingKey(date = new Date()) {
  const hour = date.getHours();
  if (hour < 5 || hour >= 18) return 'home.greeting_evening';
  return hour < 12 ? 'home.greeting_morning' : 'home.greeting_afternoon';
}

const titleOf = (conv) => (conv && conv.title && conv.title.trim()) || t('chat.untitled');

function byRecent(a, b) {
  return String(b.updated_at || '').localeCompare(String(a.updated_at || ''));
}

// The passage the member highlighted outside the composer (a file on the Files page, a
// chat message), kept when they click into the message box, sent once with the next
// message. In the Files viewer's code view it carries its line numbers (the numbers
// read_file shows), counted from the start of the file's text.
let highlighted = null;

function lineNumbered(code, range, text) {
  const before = document.createRange();
  before.setStart(code, 0);
  before.setEnd(range.startContainer, range.startOffset);
  const first = before.toString().split('\n').length;
  const lines = text.replace(/\n$/, '').split('\n');
  const numbered = lines.map((line, i) => `${String(first + i).padStart(6)}\t${line}`).join('\n');
  return { label: `selection (lines ${first}-${first + lines.length - 1})`, value: numbered };
}

document.addEventListener('selectionchange', () => {
  const sel = document.getSelection();
  if (!sel || sel.isCollapsed || !sel.rangeCount) return;
  const range = sel.getRangeAt(0);
  const node = range.commonAncestorContainer;
  const el = node.nodeType === 1 ? node : node.parentElement;
  if (!el || el.closest('textarea, input, select')) return;
  const text = sel.toString();
  if (!text.trim()) return;
  const code = el.closest('.code-view__code');
  highlighted = code ? lineNumbered(code, range, text) : { label: 'selection', value: text };
});

function readShare() {
  try {
    // On unless the member turned it off (issue 31): the eye is shown on the composer.
    return localStorage.getItem(SHARE_KEY) !== '0';
  } catch (e) {
    return false;
  }
}

function writeShare(on) {
  try {
    localStorage.setItem(SHARE_KEY, on ? '1' : '0');
  } catch (e) {
    /* storage disabled: the toggle lasts for this page only */
  }
}

// What "share what I'm looking at" sends: label/value items (shown as chips,
// never mixed into the typed text; the server bounds them): the page and its
// address, the folder and file the Files page shows, and what the page says about
// itself (a request detail page: that request's time, model, outcome and id).
function viewContext() {
  const route = location.hash || '#/';
  const items = [{ label: 'page', value: document.title.replace(/ · Skald$/, '').slice(0, 200) }];
  const query = new URLSearchParams(route.split('?')[1] || '');
  if (query.get('path')) items.push({ label: 'folder', value: query.get('path').slice(0, 500) });
  if (query.get('file')) items.push({ label: 'file', value: query.get('file').slice(0, 500) });
  items.push({ label: 'address', value: route.slice(0, 500) });
  // What the page says about itself (store.js useViewDescription), e.g. the request shown.
  for (const d of viewDescription()) items.push({ label: String(d.label).slice(0, 120), value: String(d.value).slice(0, 500) });
  // The server trims what is too long, with a note; it is sent once.
  if (highlighted) items.push(highlighted);
  highlighted = null;
  return items;
}

// What was last shared in each conversation: the same view is not sent again (issue 31;
// agents/common/view-context.md tells the model it comes only when the view changes).
const lastShared = new Map();

function freshView(conversationId) {
  const items = viewContext();
  const passage = items.some((i) => i.label.startsWith('selection'));
  const key = JSON.stringify(items.filter((i) => !i.label.startsWith('selection')));
  if (!passage && lastShared.get(conversationId) === key) return null;
  lastShared.set(conversationId, key);
  return items;
}

function formatUsage(usage, locale) {
  const nf = new Intl.NumberFormat(locale, { notation: 'compact', maximumFractionDigits: 1 });
  const u = usage || { input_tokens: 0, output_tokens: 0, cost_usd: null };
  const tokens = t('chat.usage_tokens', { input: nf.format(u.input_tokens || 0), output: nf.format(u.output_tokens || 0) });
  if (u.cost_usd === null || u.cost_usd === undefined) return { tokens, cost: null };
  const digits = u.cost_usd < 0.01 ? 4 : 2;
  const cost = new Intl.NumberFormat(locale, { style: 'currency', currency: 'USD', minimumFractionDigits: 2, maximumFractionDigits: digits }).format(u.cost_usd);
  return { tokens, cost };
}

// ------------------------------------------------------------ tabs

// A conversation's title edited in place (a tab, a row of the list): whether the input
// is open, its text, the last rename's error, and the input, which takes the focus with
// its text selected when it opens.
function useRenaming() {
  const [editing, setEditing] = useState(false);
  const [value, setValue] = useState('');
  const [error, setError] = useState(null);
  const input = useRef(null);
  // Before the first paint, so keys typed at once land in the input (`NameDialog` too).
  useLayoutEffect(() => {
    if (editing && input.current) {
      input.current.focus();
      input.current.select();
    }
  }, [editing]);
  return { editing, setEditing, value, setValue, error, setError, input };
}

// The keys of that input: Enter saves, Escape closes it unsaved (`cancel` gets the event).
function renameKeys(save, cancel) {
  return (e) => {
    if (e.key === 'Enter') {
      e.preventDefault();
      save();
    } else if (e.key === 'Escape') {
      e.preventDefault();
      cancel(e);
    }
  };
}

function Tab({ conv, active, onSelect, onClose }) {
  const { editing, setEditing, value, setValue, error, setError, input } = useRenaming();
  const ref = useRef(null);

  useEffect(() => {
    if (active && ref.current && ref.current.scrollIntoView) ref.current.scrollIntoView({ block: 'nearest', inline: 'nearest' });
  }, [active]);

  const startEdit = () => {
    setValue(conv.title || '');
    setError(null);
    setEditing(true);
  };
  const save = async () => {
    if (!editing) return;
    const title = value.trim();
    setEditing(false);
    if (!title || title === conv.title) return;
    try {
      await renameConversation(conv.id, title);
    } catch (e) {
      setError(e);
    }
  };
  const busy = conv.status === 'running' || conv.status === 'awaiting_approval';
  const title = titleOf(conv);

  return html`<div ref=${ref} class=${`tab${active ? ' is-active' : ''}`} data-testid="chat-tab"
      data-conversation-id=${conv.id} data-status=${conv.status} data-active=${active ? 'true' : 'false'}>
    ${editing
      ? html`<input ref=${input} class="tab__input" value=${value} maxlength="200" data-testid="chat-tab-rename-input"
          aria-label=${t('chat.rename_label')}
          onInput=${(e) => setValue(e.target.value)} onBlur=${save}
          onKeyDown=${renameKeys(save, () => setEditing(false))} />`
      : html`<button type="button" class="tab__button" aria-current=${active ? 'true' : undefined}
          title=${error ? errorText(error) : t('chat.tab_hint', { title })} data-testid="chat-tab-select"
          onClick=${() => onSelect(conv.id)} onDblClick=${startEdit}
          onKeyDown=${(e) => e.key === 'F2' && startEdit()}>
          ${busy && html`<span class=${`tab__dot tab__dot--${conv.status}`} data-testid="chat-tab-busy"
            aria-label=${conv.status === 'running' ? t('chat.tab_running') : t('chat.tab_waiting')}></span>`}
          <span class="tab__title">${title}</span>
        </button>`}
    <button type="button" class="tab__close" aria-label=${t('chat.close_tab', { title })} title=${t('chat.close_tab', { title })}
      data-testid="chat-tab-close" onClick=${() => onClose(conv.id)}>${Icon.close()}</button>
  </div>`;
}

// When a conversation was last used: the time today, else the date.
function lastUsed(iso) {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return '';
  const locale = getState().locale;
  if (d.toDateString() === new Date().toDateString()) {
    return d.toLocaleTimeString(locale, { hour: '2-digit', minute: '2-digit' });
  }
  return d.toLocaleDateString(locale, { month: 'short', day: 'numeric' });
}

// One conversation of the list: open it, or rename it (the tabs' double-click
// does not exist on a phone; this pencil does).
function HistoryRow({ conv, onPick }) {
  const { editing, setEditing, value, setValue, error, setError, input } = useRenaming();
  const save = async () => {
    const title = value.trim();
    setEditing(false);
    if (!title || title === conv.title) return;
    try {
      await renameConversation(conv.id, title);
      setError(null);
    } catch (e) {
      setError(e);
    }
  };
  const title = titleOf(conv);
  return html`<div class="history__row" data-testid="chat-history-item" data-conversation-id=${conv.id}
      data-open=${conv.open ? 'true' : 'false'}>
    ${editing
      ? html`<input ref=${input} class="input history__rename" value=${value} maxlength="200"
          aria-label=${t('chat.rename_label')} data-testid="chat-history-rename-input"
          onInput=${(e) => setValue(e.target.value)} onBlur=${save}
          onClick=${(e) => e.stopPropagation()}
          onKeyDown=${renameKeys(save, (e) => {
            e.stopPropagation(); // the list itself closes at an Escape that reaches the page
            setEditing(false);
          })} />`
      : html`<button type="button" class="history__item" onClick=${() => onPick(conv.id)} data-testid="chat-history-pick">
          <span class="history__name">${title}</span>
          <span class="muted small history__when">${conv.open && html`<span class="badge badge--plain" data-testid="chat-history-open">${t('chat.history_open')}</span>`}
            ${lastUsed(conv.updated_at)}</span>
        </button>
        <button type="button" class="icon-btn history__edit" aria-label=${t('chat.rename_named', { title })}
          title=${t('chat.rename_named', { title })} data-testid="chat-history-rename"
          onClick=${() => {
            setValue(conv.title || '');
            setEditing(true);
          }}>${Icon.edit()}</button>`}
    ${error && html`<p class="small history__empty" role="alert">${errorText(error)}</p>`}
  </div>`;
}

// The conversation list: every conversation, newest first, with when it was last
// used (the open ones marked: they are the tabs), renamable; and a search over the
// titles and messages of all the member's conversations (GET /api/chat/search,
// the full-text index of their own database). A panel under the tabs on a wide
// screen, the whole width on a phone.
function HistoryMenu({ conversations, onReopen }) {
  const [open, setOpen] = useState(false);
  const [query, setQuery] = useState('');
  const [hits, setHits] = useState(null);
  const [error, setError] = useState(null);
  const root = useRef(null);
  const input = useRef(null);
  useDismiss(open, () => setOpen(false), root);
  useEffect(() => {
    if (open && input.current) input.current.focus();
  }, [open]);
  useEffect(() => {
    const q = query.trim();
    if (!q) {
      setHits(null);
      return undefined;
    }
    let live = true;
    const timer = setTimeout(() => {
      api.searchChats(q).then(
        (found) => live && (setHits(found), setError(null)),
        (e) => live && setError(e),
      );
    }, 200);
    return () => {
      live = false;
      clearTimeout(timer);
    };
  }, [query]);
  const pick = (id) => {
    setOpen(false);
    setQuery('');
    onReopen(id);
  };
  const list = [...conversations].sort(byRecent).slice(0, 50);
  return html`<div class="history" ref=${root}>
    <button type="button" class="icon-btn" aria-expanded=${open ? 'true' : 'false'} aria-label=${t('chat.history')}
      title=${t('chat.history')} onClick=${() => setOpen(!open)} data-testid="chat-history-toggle">${Icon.clock()}</button>
    ${open &&
    html`<div class="history__panel" data-testid="chat-history">
      <label class="visually-hidden" for="chat-search">${t('chat.search_label')}</label>
      <input id="chat-search" ref=${input} class="input history__search" type="search" value=${query}
        placeholder=${t('chat.search_placeholder')} autocomplete="off" data-testid="chat-search"
        onInput=${(e) => setQuery(e.target.value)} />
      ${error && html`<p class="small history__empty" role="alert">${errorText(error)}</p>`}
      ${hits !== null
        ? html`<p class="history__title">${t('chat.search_results')}</p>
          ${hits.length === 0 && html`<p class="muted small history__empty" data-testid="chat-search-empty">${t('chat.search_empty')}</p>`}
          ${hits.map(
            (h) => html`<button type="button" class="history__item history__item--hit" data-testid="chat-search-hit"
                data-conversation-id=${h.conversation_id} onClick=${() => pick(h.conversation_id)}>
              <span class="history__name">${h.title || t('chat.untitled')}</span>
              <span class="muted small">${lastUsed(h.updated_at)}</span>
              ${h.snippet && html`<span class="history__snippet small muted">${h.snippet}</span>`}
            </button>`,
          )}`
        : html`<p class="history__title">${t('chat.history_title')}</p>
          ${list.length === 0 && html`<p class="muted small history__empty">${t('chat.history_empty')}</p>`}
          ${list.map((c) => html`<${HistoryRow} key=${c.id} conv=${c} onPick=${pick} />`)}`}
    </div>`}
  </div>`;
}

function Tabs({ conversations, activeId, onSelect, onNew, onClose, onReopen }) {
  const open = conversations.filter((c) => c.open);
  return html`<div class="tabs-bar">
    <nav class="tabs" aria-label=${t('chat.tabs_label')} data-testid="chat-tabs">
      ${open.map((c) => html`<${Tab} key=${c.id} conv=${c} active=${c.id === activeId} onSelect=${onSelect} onClose=${onClose} />`)}
    </nav>
    <button type="button" class="icon-btn tabs-bar__new" onClick=${onNew} aria-label=${t('chat.new_tab')} title=${t('chat.new_tab')}
      data-testid="chat-new-tab">${Icon.plus()}</button>
    <${HistoryMenu} conversations=${conversations} onReopen=${onReopen} />
  </div>`;
}

// ------------------------------------------------------------ composer

function FileChip({ file, onRemove }) {
  const image = String(file.mime || '').startsWith('image/');
  return html`<li class=${`upload upload--${file.status}`} data-testid="chat-attachment" data-status=${file.status}
      data-name=${file.name}>
    ${image && file.preview
      ? html`<img class="upload__preview" src=${file.preview} alt="" data-testid="chat-attachment-preview" />`
      : html`<span class="upload__icon">${image ? Icon.image() : Icon.file()}</span>`}
    <span class="upload__text">
      <span class="upload__name">${file.name}</span>
      <span class="upload__meta" data-testid=${file.status === 'error' ? 'chat-attachment-error' : undefined}>
        ${file.status === 'uploading' ? t('chat.uploading') : file.status === 'error' ? file.error : formatSize(file.size)}
      </span>
    </span>
    <button type="button" class="upload__remove" onClick=${() => onRemove(file.key)} data-testid="chat-attachment-remove"
      aria-label=${t('chat.remove_attachment', { name: file.name })}>${Icon.close()}</button>
  </li>`;
}

let fileSeq = 0;

function uploadError(e) {
  if (e && e.status === 413 && !e.serverMessage) return t('chat.upload_too_big');
  return errorText(e);
}

// The turn goes to a model that cannot use tools (skald/core/model_profile.py): the
// chosen one, or under AUTO every model there is. Say so before the member asks for a
// reminder it cannot set.
function withoutTools(conv, models) {
  if (!Array.isArray(models) || models.length === 0) return false;
  const lacks = (m) => !(m.capabilities || []).includes('tools');
  const chosen = conv && conv.model_id ? models.find((m) => m.id === conv.model_id) : null;
  return chosen ? lacks(chosen) : models.every(lacks);
}

function Composer({ conv, simple, running, models, onEnsure, inputRef, composerRef }) {
  const convId = conv ? conv.id : null;
  const [text, setText] = useState(() => drafts.get(convId || '') || '');
  const [commands, setCommands] = useState([]);
  useEffect(() => {
    if (simple) return undefined;
    let live = true;
    chatCommands()
      .then((list) => live && setCommands(list.map(commandHint)))
      .catch(() => {}); // no hints then; sending a command still works
    return () => {
      live = false;
    };
  }, [simple]);
  const [files, setFiles] = useState([]);
  const [sending, setSending] = useState(false);
  const [error, setError] = useState(null);
  const [share, setShare] = useState(readShare);
  const [dragging, setDragging] = useState(false);
  const [stopping, setStopping] = useState(false);
  const fileInput = useRef(null);
  const prevId = useRef(convId);
  const adopting = useRef(false); // true while we create the conversation ourselves
  const filesRef = useRef(files);
  filesRef.current = files;

  const textRef = useRef(text);
  textRef.current = text;

  const dropPreviews = (list) => list.forEach((f) => f.preview && URL.revokeObjectURL(f.preview));
  useEffect(
    () => () => {
      dropPreviews(filesRef.current);
      // Keep the draft for when the chat is opened again (not after a logout).
      if (getState().me) drafts.set(prevId.current || '', textRef.current);
    },
    [],
  );

  // Each conversation keeps its own draft; attachments belong to the
  // conversation they were uploaded to, so they are dropped on a switch.
  // Leaving `fromId` files its draft and shows `shown` in the input.
  const leave = (fromId, shown) => {
    drafts.set(fromId || '', textRef.current);
    setText(shown);
    dropPreviews(filesRef.current);
    setFiles([]);
    setError(null);
  };

  // A layout effect: it runs before the browser handles any more input, so
  // text typed right after a switch is never replaced by the stored draft.
  useLayoutEffect(() => {
    if (prevId.current === convId) return;
    if (!adopting.current) leave(prevId.current, drafts.get(convId || '') || '');
    adopting.current = false;
    prevId.current = convId;
  }, [convId]);

  useEffect(() => {
    if (!running) setStopping(false);
  }, [running]);

  const uploading = files.some((f) => f.status === 'uploading');
  const ready = files.filter((f) => f.status === 'ready');
  const canSend = !sending && !uploading && (text.trim().length > 0 || ready.length > 0);

  const targetId = async () => {
    if (convId) return convId;
    adopting.current = true;
    try {
      return (await onEnsure()).id;
    } catch (e) {
      adopting.current = false;
      throw e;
    }
  };

  const addFiles = async (list) => {
    const picked = [...list];
    if (!picked.length) return;
    setError(null);
    let id;
    try {
      id = await targetId();
    } catch (e) {
      setError(e);
      return;
    }
    for (const file of picked) {
      const key = `f${++fileSeq}`;
      const image = (file.type || '').startsWith('image/');
      const entry = {
        key,
        name: file.name,
        size: file.size,
        mime: file.type,
        status: 'uploading',
        preview: image ? URL.createObjectURL(file) : null,
      };
      setFiles((fs) => [...fs, entry]);
      api.upload(id, file).then(
        (res) => setFiles((fs) => fs.map((f) => (f.key === key ? { ...f, ...res, status: 'ready' } : f))),
        (e) => setFiles((fs) => fs.map((f) => (f.key === key ? { ...f, status: 'error', error: uploadError(e) } : f))),
      );
    }
  };

  const removeFile = (key) => {
    setFiles((fs) => {
      dropPreviews(fs.filter((f) => f.key === key));
      return fs.filter((f) => f.key !== key);
    });
  };

  // `spoken`: a transcript from the microphone, sent as it is (the input shows it).
  const submit = async (spoken) => {
    const said = typeof spoken === 'string' ? spoken.trim() : null;
    if (said === null ? !canSend : !said || sending || uploading) return;
    setSending(true);
    setError(null);
    try {
      const id = await targetId();
      await sendMessage(id, {
        text: said === null ? text.trim() : said,
        attachments: ready.map(({ name, path, mime, size }) => ({ name, path, mime, size })),
        viewContext: share && !simple ? freshView(id) : null,
      });
      setText('');
      drafts.delete(id);
      drafts.delete('');
      dropPreviews(files);
      setFiles([]);
    } catch (e) {
      setError(e);
    } finally {
      setSending(false);
      if (inputRef.current) inputRef.current.focus();
    }
  };

  // "+" (a new tab). The input empties at the click, not when the new conversation
  // arrives: what is typed while it is being made belongs to it. (Switching at arrival
  // filed that text away as the old tab's draft, and the input came back empty.)
  const startNew = async () => {
    if (!adopting.current) leave(convId, '');
    adopting.current = true;
    try {
      return await onEnsure();
    } catch (e) {
      adopting.current = false;
      if (!textRef.current) setText(drafts.get(convId || '') || '');
      throw e;
    }
  };

  // The page's suggestions send through here (with the model, files and sharing as set),
  // and its "+" makes the new conversation here.
  if (composerRef) composerRef.current = { submit, startNew };

  const onKeyDown = (e) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing && e.keyCode !== 229) {
      e.preventDefault();
      submit();
    }
  };

  const onStop = async () => {
    if (!convId) return;
    setStopping(true);
    try {
      await stopConversation(convId);
    } catch (e) {
      setError(e);
      setStopping(false);
    }
  };

  const onModel = async (e) => {
    const value = e.target.value;
    setError(null);
    try {
      await setConversationModel(convId, value === 'auto' ? null : value);
    } catch (err) {
      setError(err);
    }
  };

  const toggleShare = () => {
    writeShare(!share);
    setShare(!share);
  };

  // Slash commands: a short list while the first word is being typed.
  const slash = !simple && /^\/\S*$/.test(text) ? commands.filter((c) => c.name.startsWith(text)) : [];
  const { locale } = getState();
  const usage = conv && !simple ? formatUsage(conv.usage, locale) : null;
  const modelList = models || [];
  const modelValue = conv && conv.model_id ? conv.model_id : 'auto';

  return html`<form class=${`composer${dragging ? ' is-dragging' : ''}`} data-testid="chat-composer"
      onSubmit=${(e) => {
        e.preventDefault();
        submit();
      }}
      onDragOver=${(e) => {
        if (e.dataTransfer && [...e.dataTransfer.types].includes('Files')) {
          e.preventDefault();
          setDragging(true);
        }
      }}
      onDragLeave=${() => setDragging(false)}
      onDrop=${(e) => {
        if (e.dataTransfer && e.dataTransfer.files.length) {
          e.preventDefault();
          setDragging(false);
          addFiles(e.dataTransfer.files);
        }
      }}>
    ${slash.length > 0 &&
    html`<ul class="slash" data-testid="chat-slash-hints">
      ${slash.map(
        (c) => html`<li><button type="button" class="slash__item" data-testid="chat-slash-hint" data-command=${c.name}
          onClick=${() => {
            setText(c.arg ? `${c.name} ` : c.name);
            if (inputRef.current) inputRef.current.focus();
          }}>
          <code>${c.name}${c.arg ? ` ${c.arg}` : ''}</code><span class="muted">${c.label}</span>
        </button></li>`,
      )}
    </ul>`}
    <${ErrorNotice} error=${error} testid="chat-send-error" />
    ${withoutTools(conv, models) &&
    html`<p class="composer__notice muted small" role="note" data-testid="chat-no-tools">${t('chat.no_tools')}
      <a href="#/tasks">${t('chat.no_tools_tasks')}</a></p>`}
    <div class="composer__box">
      ${files.length > 0 && html`<ul class="composer__files" data-testid="chat-attachments">
        ${files.map((f) => html`<${FileChip} key=${f.key} file=${f} onRemove=${removeFile} />`)}
      </ul>`}
      <label class="visually-hidden" for="chat-input">${t('chat.input_label')}</label>
      <textarea id="chat-input" ref=${inputRef} class="composer__input" rows=${simple ? 2 : 1} value=${text}
        placeholder=${simple ? t('chat.placeholder_simple') : t('chat.placeholder')} title=${t('chat.input_hint')}
        data-testid="chat-input"
        onInput=${(e) => setText(e.target.value)} onKeyDown=${onKeyDown}
        onPaste=${(e) => {
          const pasted = e.clipboardData && e.clipboardData.files;
          if (pasted && pasted.length) {
            e.preventDefault();
            addFiles(pasted);
          }
        }}></textarea>
      <div class="composer__bar">
        <input ref=${fileInput} type="file" multiple class="visually-hidden" tabindex="-1" aria-hidden="true"
          data-testid="chat-file-input" onChange=${(e) => {
            addFiles(e.target.files);
            e.target.value = '';
          }} />
        <button type="button" class="icon-btn" onClick=${() => fileInput.current.click()} aria-label=${t('chat.attach')}
          title=${t('chat.attach')} data-testid="chat-attach">${Icon.attach()}</button>
        <${MicButton} disabled=${sending} onText=${setText} onSend=${submit} />
        <${SecurityGroupControl} conv=${conv} />
        ${!simple &&
        html`<label class="visually-hidden" for="chat-model">${t('chat.model')}</label>
          <select id="chat-model" class="select composer__model" value=${modelValue} onChange=${onModel}
            disabled=${!conv} title=${t('chat.model_hint')} data-testid="chat-model-picker">
            <option value="auto">${t('chat.model_auto')}</option>
            ${modelList.map((m) => html`<option value=${m.id}>${m.name}</option>`)}
            ${conv && conv.model_id && !modelList.some((m) => m.id === conv.model_id) &&
            html`<option value=${conv.model_id}>${t('chat.model_unavailable')}</option>`}
          </select>
          <button type="button" class=${`toggle-btn${share ? ' is-on' : ''}`} aria-pressed=${share ? 'true' : 'false'}
            onClick=${toggleShare} title=${t('chat.share_view_hint')} aria-label=${t('chat.share_view')}
            data-testid="chat-share-view">
            ${Icon.eye()}<span class="toggle-btn__label">${t('chat.share_view')}</span>
          </button>`}
        <span class="composer__spacer"></span>
        ${usage &&
        html`<span class="composer__usage muted small" data-testid="chat-usage" title=${t('chat.usage_hint')}>
          <span data-testid="chat-usage-tokens">${usage.tokens}</span>
          ${usage.cost && html`<span class="composer__cost" data-testid="chat-usage-cost">${usage.cost}</span>`}
        </span>`}
        ${running &&
        html`<button type="button" class="btn btn--secondary btn--small composer__stop" onClick=${onStop} disabled=${stopping}
          aria-label=${stopping ? t('chat.stopping') : t('chat.stop')} data-testid="chat-stop">
          ${Icon.stop()}<span class="composer__stop-label">${stopping ? t('chat.stopping') : t('chat.stop')}</span></button>`}
        <button type="submit" class="btn btn--primary composer__send" disabled=${!canSend} aria-label=${t('chat.send')}
          title=${t('chat.send_hint')} data-testid="chat-send">
          ${Icon.send()}<span class="composer__send-label">${t('chat.send')}</span>
        </button>
      </div>
    </div>
  </form>`;
}

// ------------------------------------------------------------ page

function EmptyState({ simple, name, onPick, noModel }) {
  const keys = simple
    ? ['chat.suggest_simple_1', 'chat.suggest_simple_2', 'chat.suggest_simple_3']
    : ['chat.suggest_1', 'chat.suggest_2', 'chat.suggest_3'];
  return html`<div class="chat-empty" data-testid="chat-empty">
    <span class="chat-empty__icon">${Icon.sparkle()}</span>
    <h1 class="chat-empty__title" data-testid="chat-greeting">${t(greetingKey(), { name })}</h1>
    ${noModel
      ? html`<p class="muted chat-empty__lead" data-testid="chat-no-model">${t('chat.no_model')}</p>`
      : html`<p class="muted chat-empty__lead">${simple ? t('chat.empty_simple') : t('chat.empty')}</p>`}
    ${!noModel && html`<div class="chat-empty__suggestions">
      ${keys.map(
        (k) => html`<button type="button" class="suggestion" data-testid="chat-suggestion" onClick=${() => onPick(t(k))}>${t(k)}</button>`,
      )}
    </div>`}
  </div>`;
}

export function ChatPage({ docked = false }) {
  const { me, route } = getState();
  const simple = me.ui_mode === 'simple';
  const c = useChat();
  const inputRef = useRef(null);
  const composerRef = useRef(null);
  const [tabError, setTabError] = useState(null);
  // Docked beside another page, the address belongs to that page: never read or set it.
  const wanted = docked ? null : route.query.get('c');

  useEffect(() => {
    loadConversations();
    loadModels(); // also tells whether any model exists (no suggestions without one)
  }, []);

  // On arrival, the address picks the conversation (a reload stays put);
  // without one, the tab in use before, else the most recently used one.
  // After that the chat model decides and the address only follows it
  // (reading it back on every change would race with our own redirects).
  useEffect(() => {
    if (!c.loaded) return;
    const open = c.conversations.filter((x) => x.open);
    const valid = (id) => id && open.some((x) => x.id === id);
    let id = valid(wanted) ? wanted : valid(c.activeId) ? c.activeId : null;
    if (!id && open.length) id = [...open].sort(byRecent)[0].id;
    if (id !== c.activeId || (id && !c.threads[id])) activate(id);
  }, [c.loaded]);

  useEffect(() => {
    // Trap: this runs after the render; the member may have left for another page in
    // between (a link clicked as the chat settles). The address then is theirs to keep.
    if (docked || parseHash(location.hash).path !== '/') return;
    if (c.activeId && c.activeId !== wanted) redirect(`/?c=${encodeURIComponent(c.activeId)}`);
    if (!c.activeId && wanted && c.loaded) redirect('/');
  }, [c.activeId]);

  const conv = c.conversations.find((x) => x.id === c.activeId) || null;
  const thread = conv ? c.threads[conv.id] : null;
  const running = !!conv && (conv.status === 'running' || conv.status === 'awaiting_approval');

  const guard = async (fn) => {
    setTabError(null);
    try {
      await fn();
    } catch (e) {
      setTabError(e);
    }
  };
  const onSelect = (id) => activate(id);
  const onNew = () =>
    guard(async () => {
      await composerRef.current.startNew();
      if (inputRef.current) inputRef.current.focus();
    });

  // A suggestion tapped is sent at once, as if typed and sent (the input shows it).
  const pickSuggestion = (text) => {
    if (composerRef.current) composerRef.current.submit(text);
  };

  const name = me.display_name || me.username;
  let body;
  if (!c.loaded) {
    body = html`<div class="chat__thread chat__center" data-testid="chat-loading"><span class="spinner" aria-hidden="true"></span>
      <span class="visually-hidden">${t('common.loading')}</span></div>`;
  } else if (c.loadError) {
    body = html`<div class="chat__thread chat__center"><div class="chat__error">
      <${ErrorNotice} error=${c.loadError.status === 403 ? t('chat.not_allowed') : c.loadError} testid="chat-load-error" />
      <button type="button" class="btn btn--secondary" onClick=${() => loadConversations()}>${t('chat.retry')}</button>
    </div></div>`;
  } else if (!conv || (thread && thread.items && thread.items.length === 0 && thread.tail.length === 0 && !running)) {
    body = html`<div class="chat__thread chat__center"><${EmptyState} simple=${simple} name=${name} onPick=${pickSuggestion}
      noModel=${Array.isArray(c.models) && c.models.length === 0} /></div>`;
  } else if (!thread || (thread.items === null && !thread.error)) {
    body = html`<div class="chat__thread chat__center" data-testid="chat-thread-loading"><span class="spinner" aria-hidden="true"></span></div>`;
  } else if (thread.error && thread.items === null) {
    body = html`<div class="chat__thread chat__center"><div class="chat__error">
      <${ErrorNotice} error=${thread.error} testid="chat-thread-error" />
      <button type="button" class="btn btn--secondary" onClick=${() => loadMessages(conv.id)}>${t('chat.retry')}</button>
    </div></div>`;
  } else {
    body = html`<${ScrollArea} resetKey=${`${conv.id}:${thread.sent || 0}`} busy=${running}
        label=${t('chat.messages_label', { title: titleOf(conv) })}>
      <${Conversation} thread=${thread} running=${conv.status === 'running'} simple=${simple}
        canSpeak=${!!(c.voice && c.voice.speech)}
        conversationId=${conv.id} onDecide=${(callId, decision, bypass) => decide(conv.id, callId, decision, bypass)}
        idle=${conv.status === 'idle'} onResend=${(seq, text) => guard(() => resendMessage(conv.id, seq, text ?? null))} />
    <//>`;
  }

  return html`<div class=${`chat${simple ? ' chat--simple' : ''}${docked ? ' chat--docked' : ''}`} data-testid="chat-page"
      data-conversation-id=${conv ? conv.id : undefined} data-status=${conv ? conv.status : undefined}>
    ${docked ? html`<h2 class="visually-hidden">${t('nav.chat')}</h2>` : html`<h1 class="visually-hidden">${t('nav.chat')}</h1>`}
    ${c.loaded && !c.loadError &&
    html`<${Tabs} conversations=${c.conversations} activeId=${c.activeId} onSelect=${onSelect} onNew=${onNew}
      onClose=${(id) => guard(() => closeConversation(id))} onReopen=${(id) => guard(() => reopenConversation(id))} />`}
    ${tabError && html`<div class="chat__banner chat__banner--error" role="alert" data-testid="chat-tab-error">
      ${Icon.alert()}<span>${errorText(tabError)}</span>
      <button type="button" class="icon-btn" aria-label=${t('common.close')} onClick=${() => setTabError(null)}>${Icon.close()}</button>
    </div>`}
    ${c.offline &&
    html`<div class="chat__banner" role="status" data-testid="chat-reconnecting">
      <span class="chip__spin" aria-hidden="true"></span><span>${t('chat.reconnecting')}</span>
    </div>`}
    ${body}
    ${conv && html`<${TaskStrip} conversationId=${conv.id} />`}
    ${!c.loadError &&
    html`<${Composer} conv=${conv} simple=${simple} running=${running} models=${c.models} inputRef=${inputRef}
      composerRef=${composerRef} onEnsure=${() => newConversation()} />`}
  </div>`;
}
