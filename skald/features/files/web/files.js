// #/files — the member's files (capability `files`): the places the server
// lets them reach (their home, the manual, their notes), a folder listing,
// a viewer for what a browser can show safely, and the usual actions where
// the place is writable (upload, new folder, rename, delete, download, ZIP).
//
// The address holds the state worth keeping: #/files?path=<folder>&file=<file>,
// so a reload stays put and the back button closes the viewer.
// The server decides what is writable (`writable` of the listing); the page
// only hides what would be refused anyway.
import { html, h, useState, useEffect, useLayoutEffect, useRef, useCallback, useMemo } from '../../js/lib.js';
import * as ws from '../../js/ws.js';
import { t } from '../../js/i18n.js';
import { api, fetchFile, fileUrl, zipUrl } from '../../js/api.js';
import { getState, newestRead } from '../../js/store.js';
import { navigate } from '../../js/router.js';
import { Icon } from '../../js/components/icons.js';
import { Markdown, highlight } from '../../js/components/markdown.js';
import { PdfView } from '../../js/components/pdf-view.js';
import { Field, ErrorNotice, FormActions, Notice, useAction, useFlash, useId, errorText } from '../../js/components/form.js';
import { Dialog, ConfirmDialog } from '../../js/components/dialog.js';

const HOME = '~';
const TEXT_PREVIEW_MAX = 2 * 1024 * 1024; // larger text files are offered as a download
const PLACE_KEYS = {
  home: 'files.place_home',
  docs: 'files.place_docs',
  'user-memory': 'files.place_user_memory',
  'shared-memory': 'files.place_shared_memory',
};
const MARKDOWN_EXT = new Set(['md', 'markdown', 'mdown', 'mkd']);
const IMAGE_TYPES = new Set(['image/png', 'image/jpeg', 'image/gif', 'image/webp', 'image/avif', 'image/bmp', 'image/x-icon', 'image/vnd.microsoft.icon']);
// Extensions whose name is not the highlighter's language name.
const LANG_ALIASES = { mjs: 'js', cjs: 'js', pyw: 'py', hpp: 'cpp', hh: 'cpp', cxx: 'cpp', htm: 'html', jsonl: 'json' };

// ------------------------------------------------------------ paths

function extOf(name) {
  const dot = name.lastIndexOf('.');
  return dot > 0 ? name.slice(dot + 1).toLowerCase() : '';
}

function parentOf(path) {
  const slash = path.lastIndexOf('/');
  return slash === -1 ? path : path.slice(0, slash);
}

function joinPath(dir, name) {
  return `${dir.replace(/\/+$/, '')}/${name}`;
}

function placeOf(places, path) {
  let best = null;
  for (const p of places) {
    if ((path === p.path || path.startsWith(`${p.path}/`)) && (!best || p.path.length > best.path.length)) best = p;
  }
  return best;
}

function placeLabel(place) {
  return PLACE_KEYS[place.name] ? t(PLACE_KEYS[place.name]) : place.label;
}

// A name typed by the member: one component, nothing the router would refuse.
function nameProblem(name) {
  if (!name) return t('files.name_empty');
  if (name === '.' || name === '..' || /[/\\]/.test(name)) return t('files.name_invalid');
  return null;
}

function go(dir, file) {
  navigate(`/files?path=${encodeURIComponent(dir)}${file ? `&file=${encodeURIComponent(file)}` : ''}`);
}

// ------------------------------------------------------------ formatting

export function formatSize(bytes) {
  const n = Number(bytes) || 0;
  const fmt = (v) => new Intl.NumberFormat(getState().locale, { maximumFractionDigits: v < 10 ? 1 : 0 }).format(v);
  if (n < 1024) return t('files.size_b', { n: String(n) });
  if (n < 1024 * 1024) return t('files.size_kb', { n: fmt(n / 1024) });
  if (n < 1024 * 1024 * 1024) return t('files.size_mb', { n: fmt(n / (1024 * 1024)) });
  return t('files.size_gb', { n: fmt(n / (1024 * 1024 * 1024)) });
}

function formatTime(iso) {
  if (!iso) return '';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return String(iso);
  return d.toLocaleString(getState().locale, { dateStyle: 'medium', timeStyle: 'short' });
}

// What the viewer will do with a file, judged from the listing before any
// download: images and PDFs by type, Markdown by name, the rest by what the
// server answers (text or not).
function viewKind(entry) {
  const mime = (entry.mime || '').toLowerCase();
  const ext = extOf(entry.name);
  if (IMAGE_TYPES.has(mime)) return 'image';
  if (mime === 'application/pdf' || ext === 'pdf') return 'pdf';
  if (MARKDOWN_EXT.has(ext) || mime === 'text/markdown') return 'markdown';
  return 'text';
}

// ------------------------------------------------------------ viewer

function CodeView({ text, lang }) {
  const tokens = useMemo(() => highlight(text, lang), [text, lang]);
  const lines = useMemo(() => {
    const count = text.split('\n').length - (text.endsWith('\n') ? 1 : 0);
    return Array.from({ length: Math.max(count, 1) }, (_, i) => i + 1).join('\n');
  }, [text]);
  return html`<div class="code-view" data-testid="files-viewer-code" data-lang=${lang || undefined}>
    <pre class="code-view__gutter" aria-hidden="true">${lines}</pre>
    <pre class="code-view__code"><code>${tokens.map(([cls, s]) => (cls ? h('span', { class: cls }, s) : s))}</code></pre>
  </div>`;
}

function Viewer({ entry, path, onClose }) {
  const name = entry ? entry.name : path.slice(path.lastIndexOf('/') + 1);
  const kind = entry ? viewKind(entry) : viewKind({ name, mime: null });
  const tooBig = entry && entry.size > TEXT_PREVIEW_MAX && (kind === 'text' || kind === 'markdown');
  const [content, setContent] = useState(null); // { type, text }
  const [error, setError] = useState(null);
  const [shown, setShown] = useState(kind);

  useEffect(() => {
    let alive = true;
    setContent(null);
    setError(null);
    setShown(kind);
    if ((kind === 'text' || kind === 'markdown') && !tooBig) {
      fetchFile(path).then(
        (res) => {
          if (!alive) return;
          const isText = res.type.startsWith('text/') || res.type === 'application/json';
          setShown(isText ? kind : 'binary');
          setContent(res);
        },
        (e) => alive && setError(e),
      );
    }
    return () => {
      alive = false;
    };
  }, [path]);

  let body;
  if (error) {
    body = html`<${ErrorNotice} error=${error} testid="files-viewer-error" />`;
  } else if (tooBig) {
    body = html`<${Notice} testid="files-viewer-none">${t('files.too_big_to_view')}<//>`;
  } else if (kind === 'image') {
    body = html`<div class="file-viewer__image"><img src=${fileUrl(path)} alt=${name} data-testid="files-viewer-image" /></div>`;
  } else if (kind === 'pdf') {
    body = html`<${PdfView} url=${fileUrl(path)} size=${entry ? entry.size : null} />`;
  } else if (!content) {
    body = html`<p class="muted" data-testid="files-viewer-loading" role="status">${t('common.loading')}</p>`;
  } else if (shown === 'binary') {
    body = html`<${Notice} testid="files-viewer-none">${t('files.no_preview')}<//>`;
  } else if (shown === 'markdown') {
    body = html`<div class="file-viewer__md" data-testid="files-viewer-markdown"><${Markdown} text=${content.text} /></div>`;
  } else {
    const ext = extOf(name);
    body = html`<${CodeView} text=${content.text} lang=${LANG_ALIASES[ext] || ext} />`;
  }

  return html`<section class="card card--flush file-viewer" data-testid="files-viewer" data-kind=${shown}
      data-path=${path} aria-label=${name}>
    <div class="file-viewer__bar">
      <button type="button" class="btn btn--small btn--ghost" onClick=${onClose} data-testid="files-viewer-close">
        ${Icon.back()}<span>${t('files.back_to_folder')}</span>
      </button>
      <strong class="file-viewer__name" data-testid="files-viewer-name">${name}</strong>
      <a class="btn btn--small btn--secondary" href=${fileUrl(path, { download: true })} download=${name}
        data-testid="files-viewer-download">${Icon.download()}<span>${t('files.download')}</span></a>
    </div>
    <div class="file-viewer__body">${body}</div>
  </section>`;
}

// ------------------------------------------------------------ dialogs

function NameDialog({ title, label, initial, submitLabel, testid, onClose, onSubmit }) {
  const [name, setName] = useState(initial || '');
  const [localError, setLocalError] = useState(null);
  const [run, busy, error] = useAction();
  const id = useId('file-name');
  const input = useRef(null);

  // A layout effect, before the first paint: a plain effect ran a frame later, and its
  // selection could land between a fast typist's select-all and their text ("x.py.py").
  useLayoutEffect(() => {
    const el = input.current;
    if (!el) return;
    el.focus();
    // Select the name without its extension, as file managers do.
    const dot = initial ? initial.lastIndexOf('.') : -1;
    el.setSelectionRange(0, dot > 0 ? dot : (initial || '').length);
  }, []);

  const submit = (e) => {
    e.preventDefault();
    const value = name.trim();
    const problem = nameProblem(value);
    setLocalError(problem);
    if (problem) return;
    run(() => onSubmit(value));
  };

  return html`<${Dialog} title=${title} onClose=${onClose} testid=${`${testid}-dialog`}>
    <form class="stack" onSubmit=${submit} novalidate>
      <${Field} label=${label} id=${id}>
        <input id=${id} ref=${input} class="input" required maxlength="255" autocomplete="off" spellcheck="false"
          value=${name} onInput=${(e) => setName(e.target.value)} data-testid=${`${testid}-input`} />
      <//>
      <${FormActions} error=${localError || error} errorTestid=${`${testid}-error`} onCancel=${onClose} busy=${busy}
        disabled=${busy || !name.trim()} testid=${`${testid}-save`} label=${submitLabel} />
    </form>
  <//>`;
}

// ------------------------------------------------------------ listing

function Row({ entry, writable, zippable, onOpen, onRename, onDelete }) {
  const isDir = entry.type === 'dir';
  const canOpen = isDir || entry.type === 'file';
  return html`<li class="file-row" data-testid="files-row" data-name=${entry.name} data-type=${entry.type}
      data-path=${entry.path}>
    <button type="button" class="file-row__open" onClick=${() => onOpen(entry)} disabled=${!canOpen}
      data-testid="files-open">
      <span class=${`file-row__icon${isDir ? ' file-row__icon--dir' : ''}`}>${isDir ? Icon.folder() : Icon.file()}</span>
      <span class="file-row__name">${entry.name}</span>
    </button>
    <span class="file-row__size muted small" data-testid="files-size">${isDir ? '' : formatSize(entry.size)}</span>
    <span class="file-row__time muted small" data-testid="files-mtime">${formatTime(entry.mtime)}</span>
    <span class="file-row__actions">
      ${isDir
        ? zippable &&
          html`<a class="icon-btn" href=${zipUrl(entry.path)} download=${`${entry.name}.zip`} data-testid="files-row-zip"
            aria-label=${t('files.zip_aria', { name: entry.name })} title=${t('files.download_zip')}>${Icon.archive()}</a>`
        : entry.type === 'file' &&
          html`<a class="icon-btn" href=${fileUrl(entry.path, { download: true })} download=${entry.name}
            data-testid="files-download" aria-label=${t('files.download_aria', { name: entry.name })}
            title=${t('files.download')}>${Icon.download()}</a>`}
      ${writable &&
      html`<button type="button" class="icon-btn" onClick=${() => onRename(entry)} data-testid="files-rename"
          aria-label=${t('files.rename_aria', { name: entry.name })} title=${t('files.rename')}>${Icon.edit()}</button>
        <button type="button" class="icon-btn icon-btn--danger" onClick=${() => onDelete(entry)} data-testid="files-delete"
          aria-label=${t('files.delete_aria', { name: entry.name })} title=${t('common.delete')}>${Icon.trash()}</button>`}
    </span>
  </li>`;
}

function Breadcrumb({ place, path }) {
  if (!place) return html`<nav class="crumbs" data-testid="files-breadcrumb"><span>${path}</span></nav>`;
  const rest = path === place.path ? [] : path.slice(place.path.length + 1).split('/').filter(Boolean);
  const crumbs = [{ label: placeLabel(place), path: place.path }];
  rest.forEach((part, i) => crumbs.push({ label: part, path: `${place.path}/${rest.slice(0, i + 1).join('/')}` }));
  return html`<nav class="crumbs" aria-label=${t('files.breadcrumb')} data-testid="files-breadcrumb">
    <ol class="crumbs__list">
      ${crumbs.map((c, i) => {
        const last = i === crumbs.length - 1;
        return html`<li class="crumbs__item">
          ${last
            ? html`<span class="crumbs__current" aria-current="page" data-testid="files-crumb" data-path=${c.path}>${c.label}</span>`
            : html`<a href=${`#/files?path=${encodeURIComponent(c.path)}`} data-testid="files-crumb" data-path=${c.path}>${c.label}</a>`}
        </li>`;
      })}
    </ol>
  </nav>`;
}

function Places({ places, current, path }) {
  const id = useId('files-place');
  return html`<div class="files__places">
    <ul class="files__place-list" data-testid="files-places">
      ${places.map((p) => {
        const active = current && current.name === p.name;
        return html`<li>
          <a href=${`#/files?path=${encodeURIComponent(p.path)}`} class=${`nav__link${active ? ' is-active' : ''}`}
            aria-current=${active ? 'page' : undefined} data-testid="files-place" data-place=${p.name}
            data-active=${active ? 'true' : 'false'}>
            ${p.name === 'home' ? Icon.home() : p.virtual ? Icon.edit() : Icon.folder()}
            <span>${placeLabel(p)}</span>
            ${!p.writable && html`<span class="files__place-ro">${Icon.lock()}</span>`}
          </a>
        </li>`;
      })}
    </ul>
    <div class="files__place-select">
      <label class="visually-hidden" for=${id}>${t('files.places')}</label>
      <select id=${id} class="select" value=${current ? current.path : path} data-testid="files-place-select"
        onChange=${(e) => go(e.target.value)}>
        ${places.map((p) => html`<option value=${p.path}>${placeLabel(p)}</option>`)}
      </select>
    </div>
  </div>`;
}

// ------------------------------------------------------------ storage

// The member's usage against their quota (home, uploads and their database), and a
// warning when the server's disk is nearly full (every write is refused then).
function StorageMeter({ usage }) {
  if (!usage) return null;
  const full = usage.quota > 0 && usage.used >= usage.quota;
  const text = usage.quota > 0
    ? t('files.usage', { used: formatSize(usage.used), quota: formatSize(usage.quota) })
    : t('files.usage_unlimited', { used: formatSize(usage.used) });
  return html`<div class="files__usage stack" data-testid="files-usage" data-used=${usage.used} data-quota=${usage.quota}>
    <p class="muted small">${text}</p>
    ${usage.quota > 0 &&
    html`<progress class="files__usage-bar" max=${usage.quota} value=${Math.min(usage.used, usage.quota)}
      aria-label=${text}></progress>`}
    ${full && html`<${Notice} kind="warning" testid="files-quota-full">${t('files.quota_full')}<//>`}
    ${usage.disk_low && html`<${Notice} kind="warning" testid="files-disk-low">${t('files.disk_low')}<//>`}
  </div>`;
}

// ------------------------------------------------------------ page

export function FilesPage() {
  const { route } = getState();
  const path = route.query.get('path') || HOME;
  const openPath = route.query.get('file');

  const [places, setPlaces] = useState(null);
  const [placesError, setPlacesError] = useState(null);
  const [usage, setUsage] = useState(null); // {used, quota, disk_low}
  const [listing, setListing] = useState(null); // the DirListing of `path`
  const [loadError, setLoadError] = useState(null);
  const [dialog, setDialog] = useState(null); // { kind: 'folder' | 'rename' | 'delete', entry? }
  const [dragging, setDragging] = useState(false);
  const [uploading, setUploading] = useState(null); // number of files on their way
  const [run, , actionError, setActionError] = useAction();
  const [flash, setFlash] = useFlash();
  const fileInput = useRef(null);
  const dragDepth = useRef(0);
  const newest = useMemo(newestRead, []);

  useEffect(() => {
    api.filePlaces().then(setPlaces, setPlacesError);
  }, []);

  const load = useCallback(
    (target) => {
      const current = newest();
      setLoadError(null);
      return api.listDir(target).then(
        (res) => {
          if (current()) setListing(res);
        },
        (e) => {
          if (!current()) return;
          setListing(null);
          setLoadError(e);
        },
      );
    },
    [],
  );

  // Every new listing (after an upload, a delete, the assistant's writes) refreshes the
  // usage; the meter is information only, so a failed look just leaves it out.
  useEffect(() => {
    api.storage().then(setUsage, () => setUsage(null));
  }, [listing]);

  useEffect(() => {
    setListing(null);
    setActionError(null);
    setFlash(null);
    load(path);
  }, [path]);

  // Live: the assistant (or another device) changing this folder refreshes the list.
  useEffect(() => {
    const unwatch = ws.watchDir(path);
    const unlisten = ws.onMessage((msg) => {
      if (msg.type === 'dir_changed' && msg.path === path) load(path);
    });
    return () => {
      unlisten();
      unwatch();
    };
  }, [path]);

  const place = places ? placeOf(places, path) : null;
  const writable = !!(listing && listing.writable && listing.path === path);
  const readOnly = !!(listing && !listing.writable);
  const openEntry = openPath && listing ? listing.entries.find((e) => e.path === openPath) : null;

  const onOpen = (entry) => (entry.type === 'dir' ? go(entry.path) : go(path, entry.path));

  const upload = (files) => {
    const list = Array.from(files || []);
    if (!list.length || !writable) return;
    setUploading(list.length);
    run(async () => {
      try {
        const res = await api.uploadFiles(path, list);
        const names = (res.files || []).map((f) => f.name).join(', ');
        setFlash(t('files.uploaded', { names }));
        await load(path);
      } finally {
        setUploading(null);
      }
    });
  };

  // Drag and drop: dragenter/leave fire for every child, so a depth counter
  // tells when the pointer really left the area.
  const dragHandlers = writable
    ? {
        onDragEnter: (e) => {
          if (!Array.from(e.dataTransfer ? e.dataTransfer.types : []).includes('Files')) return;
          e.preventDefault();
          dragDepth.current += 1;
          setDragging(true);
        },
        onDragOver: (e) => {
          if (!Array.from(e.dataTransfer ? e.dataTransfer.types : []).includes('Files')) return;
          e.preventDefault();
          e.dataTransfer.dropEffect = 'copy';
        },
        onDragLeave: () => {
          dragDepth.current = Math.max(0, dragDepth.current - 1);
          if (dragDepth.current === 0) setDragging(false);
        },
        onDrop: (e) => {
          e.preventDefault();
          dragDepth.current = 0;
          setDragging(false);
          upload(e.dataTransfer && e.dataTransfer.files);
        },
      }
    : {};

  const makeFolder = async (name) => {
    await api.makeDir(joinPath(path, name));
    setDialog(null);
    setFlash(t('files.folder_created', { name }));
    await load(path);
  };

  const rename = async (entry, name) => {
    if (name !== entry.name) await api.moveFile(entry.path, joinPath(parentOf(entry.path), name));
    setDialog(null);
    setFlash(t('files.renamed', { name }));
    await load(path);
  };

  const [runDelete, deleting, deleteError] = useAction();
  const remove = (entry) =>
    runDelete(async () => {
      await api.deleteFile(entry.path, entry.type === 'dir');
      setDialog(null);
      setFlash(t('files.deleted', { name: entry.name }));
      if (openPath === entry.path) go(path);
      await load(path);
    });

  const toolbar = html`<div class="files__toolbar" data-testid="files-toolbar">
    ${readOnly && html`<span class="badge badge--off" data-testid="files-readonly">${Icon.lock()}${t('files.read_only')}</span>`}
    <span class="files__spacer"></span>
    ${writable &&
    html`<button type="button" class="btn btn--small btn--secondary" onClick=${() => setDialog({ kind: 'folder' })}
        data-testid="files-new-folder">${Icon.folderPlus()}<span>${t('files.new_folder')}</span></button>
      <button type="button" class="btn btn--small btn--primary" onClick=${() => fileInput.current && fileInput.current.click()}
        disabled=${uploading !== null} data-testid="files-upload">${Icon.upload()}<span>${t('files.upload')}</span></button>
      <input ref=${fileInput} type="file" multiple class="visually-hidden" tabindex="-1" aria-hidden="true"
        data-testid="files-upload-input" onChange=${(e) => {
          upload(e.target.files);
          e.target.value = '';
        }} />`}
    ${listing && !listing.virtual &&
    html`<a class="btn btn--small btn--ghost" href=${zipUrl(path)} data-testid="files-zip"
      download=${`${(place && path === place.path ? placeLabel(place) : path.slice(path.lastIndexOf('/') + 1)) || 'files'}.zip`}>
      ${Icon.archive()}<span>${t('files.download_zip')}</span></a>`}
  </div>`;

  let main;
  if (loadError) {
    main = html`<div class="stack">
      <${ErrorNotice} error=${loadError} testid="files-error" />
      ${path !== HOME && html`<div><a class="btn btn--secondary" href="#/files">${t('files.go_home')}</a></div>`}
    </div>`;
  } else if (!listing) {
    main = html`<p class="muted" data-testid="files-loading" role="status">${t('common.loading')}</p>`;
  } else if (openPath) {
    main = html`<${Viewer} entry=${openEntry} path=${openPath} onClose=${() => go(path)} />`;
  } else {
    main = html`<section class=${`card card--flush files__listing${dragging ? ' is-dragging' : ''}`}
        data-testid="files-listing" data-path=${listing.path} data-writable=${writable ? 'true' : 'false'}
        aria-label=${t('files.listing')} ...${dragHandlers}>
      ${toolbar}
      ${uploading !== null &&
      html`<p class="files__uploading" role="status" data-testid="files-uploading">
        <span class="spinner" aria-hidden="true"></span>${t('files.uploading', { count: String(uploading) })}</p>`}
      ${listing.entries.length === 0
        ? html`<div class="files__empty muted" data-testid="files-empty">
            ${Icon.folder()}<span>${writable ? t('files.empty_writable') : t('files.empty')}</span></div>`
        : html`<ul class="files__rows">
            <li class="file-row file-row--head" aria-hidden="true">
              <span class="file-row__name">${t('files.col_name')}</span>
              <span class="file-row__size">${t('files.col_size')}</span>
              <span class="file-row__time">${t('files.col_modified')}</span>
              <span class="file-row__actions"></span>
            </li>
            ${listing.entries.map(
              (entry) => html`<${Row} key=${entry.path} entry=${entry} writable=${writable}
                zippable=${!listing.virtual} onOpen=${onOpen}
                onRename=${(en) => setDialog({ kind: 'rename', entry: en })}
                onDelete=${(en) => setDialog({ kind: 'delete', entry: en })} />`,
            )}
          </ul>`}
      ${listing.truncated && html`<p class="muted small files__note">${t('files.truncated')}</p>`}
      ${writable && html`<p class="files__drop muted small" data-testid="files-drop">${Icon.upload()}<span>${
        dragging ? t('files.drop_now') : t('files.drop_hint')}</span></p>`}
    </section>`;
  }

  return html`<div class="page files" data-testid="files-page" data-path=${path}>
    <header class="page__head">
      <h1 class="page__title">${t('files.title')}</h1>
    </header>
    <${ErrorNotice} error=${placesError} testid="files-places-error" />
    <div class="files__layout">
      <div class="files__side stack">
        ${places && html`<${Places} places=${places} current=${place} path=${path} />`}
        <${StorageMeter} usage=${usage} />
      </div>
      <div class="files__main">
        <div class="files__where">
          <${Breadcrumb} place=${place} path=${path} />
          ${readOnly && openPath && html`<span class="badge badge--off">${Icon.lock()}${t('files.read_only')}</span>`}
        </div>
        ${flash && html`<${Notice} kind="success" testid="files-flash">${flash}<//>`}
        <${ErrorNotice} error=${actionError} testid="files-action-error" />
        ${main}
      </div>
    </div>
    ${dialog && dialog.kind === 'folder' &&
    html`<${NameDialog} title=${t('files.new_folder')} label=${t('files.folder_name')} submitLabel=${t('files.create')}
      testid="files-folder" onClose=${() => setDialog(null)} onSubmit=${makeFolder} />`}
    ${dialog && dialog.kind === 'rename' &&
    html`<${NameDialog} title=${t('files.rename_title', { name: dialog.entry.name })} label=${t('files.new_name')}
      initial=${dialog.entry.name} submitLabel=${t('files.rename')} testid="files-rename"
      onClose=${() => setDialog(null)} onSubmit=${(name) => rename(dialog.entry, name)} />`}
    ${dialog && dialog.kind === 'delete' &&
    html`<${ConfirmDialog} title=${t('files.delete_title', { name: dialog.entry.name })}
      message=${html`<p>${dialog.entry.type === 'dir' ? t('files.delete_folder_warning') : t('files.delete_warning')}</p>`}
      confirmLabel=${t('common.delete')} danger=${true} busy=${deleting}
      error=${deleteError ? errorText(deleteError) : null}
      onConfirm=${() => remove(dialog.entry)} onCancel=${() => setDialog(null)} />`}
  </div>`;
}
