// The pages of the app and their navigation entries come from the server
// (GET /api/pages: the pages hook of every feature and plugin, already filtered
// by the member's capabilities and the simple shell). Each entry says all the
// browser needs: its ES module (loaded with import(), built-in or a plugin's),
// the export that is its component, icon, test id and layout flags. Nothing here
// lists the built-in pages (docs/dev/plugins.md, "Pages").
//
// Rule: a path the server did not list is never shown — one of the pages it
// says are hidden from this member (GET /api/pages/hidden: the built-in ones)
// gets the "not allowed" view, anything else "not found". Hiding is a courtesy:
// the server refuses the data anyway.
// Trap: the list is refreshed with /api/auth/me (session.js setMe), so a role
// change shows the new entries at once; never cache it across members.
import { html, useEffect, useRef, useState } from './lib.js';
import { t } from './i18n.js';
import { getState } from './store.js';
import { Icon } from './components/icons.js';

// The label of a page: its i18n key translated; a key nobody translated (a
// plugin's) shows its last dot-separated segment, so a plugin gives a plain
// title such as "Widgets" (or "sample.Widgets").
export function pageTitle(page) {
  const text = t(page.title);
  if (text !== page.title) return text;
  const parts = page.title.split('.');
  return parts[parts.length - 1];
}

// "/sample/widgets" -> "nav-page-sample-widgets": a stable test id for a plugin entry.
function slug(path) {
  return path.replace(/[^A-Za-z0-9]+/g, '-').replace(/^-|-$/g, '');
}

// An entry's icon: a name of the app's icon set, or an image under the web root.
function entryIcon(icon) {
  if (icon && Icon[icon]) return Icon[icon];
  const url = icon && sameOriginUrl(icon);
  if (url) return () => html`<img class="icon nav__image" src=${url} alt="" width="20" height="20" />`;
  return Icon.sparkle;
}

// The navigation entries for the pages the server listed, in its order.
// Paths under /admin/ go to the "Household" section.
export function navItems(pages) {
  return (pages || []).map((p) => ({
    path: p.path,
    label: pageTitle(p),
    icon: entryIcon(p.icon),
    testid: p.testid || `nav-page-${slug(p.path)}`,
    badge: !!p.badge,
    count: typeof p.count === 'string' && p.count.startsWith('/api/') ? p.count : null,
    admin: p.path.startsWith('/admin/'),
  }));
}

// What to show at `path` for a signed-in member: { page, title, props, flush },
// { redirect } or a refusal. Only pages the server listed are ever shown.
export function matchPage(path, pages, simple, { NotAllowedPage, NotFoundPage }, hidden) {
  const listed = pages || [];
  const exact = listed.find((p) => p.path === path);
  if (exact) {
    return { page: PageView, titleText: pageTitle(exact), flush: !!exact.flush, dock: !!exact.dock, props: { entry: exact } };
  }
  // A sub-path of a listed page that has sub-routes (#/admin/roles/<name>).
  for (const p of listed) {
    if (p.sub && path.startsWith(`${p.path}/`) && path.length > p.path.length + 1) {
      const rest = path.slice(p.path.length + 1);
      if (!rest.includes('/')) {
        const props = { [p.sub]: decodeURIComponent(rest) };
        return { page: PageView, titleText: pageTitle(p), props: { entry: p, props } };
      }
    }
  }
  const refused = (hidden || []).find((h) => path === h.path || (h.path !== '/' && path.startsWith(`${h.path}/`)));
  if (refused) {
    if (simple && refused.full_only) return { redirect: '/' };
    return { page: NotAllowedPage, title: 'status.not_allowed_title' };
  }
  return { page: NotFoundPage, title: 'status.not_found_title' };
}

// A page's module (or icon) is a URL relative to the web root
// ("plugins/files/files.js"); anything that would leave this origin is refused
// before import().
function sameOriginUrl(module) {
  if (typeof module !== 'string' || !module || /^[a-z][a-z0-9+.-]*:|^\/\//i.test(module)) return null;
  const url = new URL(module.replace(/^\/+/, ''), document.baseURI);
  return url.origin === location.origin ? url.href : null;
}

// Modules already imported, by URL: a page shown again renders at once, without a
// frame of "Loading…" (the browser keeps the module itself; this keeps our handle).
const loaded = new Map();

function importPage(entry) {
  const url = sameOriginUrl(entry.module);
  if (!url) return Promise.reject(new Error('the page has no module, or not one under the web root'));
  return import(url).then((mod) => {
    loaded.set(url, mod);
    return mod;
  });
}

// The landing page's module is a <script type="module" data-page> of index.html: it
// loads with the app's own modules, in parallel (and a failure to fetch it or its
// imports says so like any of the app's scripts, js/boot-check.js). Keep its handle,
// so the chat renders at once when the list of pages arrives. Resolves false when it
// failed: module scripts run in document order, so it has already failed (and
// boot-check shown its message, which starting the app would wipe) by now.
export function preloadLanding() {
  const scripts = [...document.querySelectorAll('script[type="module"][data-page]')];
  return Promise.all(
    scripts.map((script) => import(script.src).then((mod) => loaded.set(script.src, mod))),
  ).then(
    () => true,
    () => false,
  );
}

// A page the server listed. A module naming `component` renders that Preact
// component with the sub-path props; otherwise it must export `render(root, ctx)`.
// A module that cannot be loaded, or lacks what the entry names, shows a clear
// message where the page would be; the rest of the app goes on.
export function PageView({ entry, props }) {
  const url = sameOriginUrl(entry.module);
  const key = `${entry.path} ${entry.module}`;
  // Read from `loaded` on every render, so a new entry never meets the last one's module.
  const mod = (url && loaded.get(url)) || null;
  const [, setLoadedKey] = useState(null);
  const [failedKey, setFailedKey] = useState(null);
  const failed = failedKey === key;
  useEffect(() => {
    let gone = false;
    if (!mod) {
      importPage(entry)
        .then(() => !gone && setLoadedKey(key))
        .catch((e) => {
          console.warn(`page ${entry.path}: module ${entry.module} could not be loaded`, e);
          if (!gone) setFailedKey(key);
        });
    }
    return () => {
      gone = true;
    };
  }, [key]);
  const Component = entry.component && mod ? mod[entry.component] : null;
  if (entry.component && !failed && (!mod || typeof Component === 'function')) {
    if (!mod) {
      return html`<div class="page" role="status" data-testid="page-loading" data-path=${entry.path}>
        <span class="visually-hidden">${t('common.loading')}</span></div>`;
    }
    return html`<${Component} ...${props || {}} />`;
  }
  if (entry.component || failed) {
    if (mod) console.warn(`page ${entry.path}: module ${entry.module} exports no ${entry.component}`);
    return html`<div class="page" data-testid="plugin-page" data-path=${entry.path}>
      <h1 class="page__title">${pageTitle(entry)}</h1>
      <div class="notice notice--error" role="alert" data-testid="plugin-page-error">${t('status.page_failed')}</div>
    </div>`;
  }
  return html`<${RenderPage} entry=${entry} mod=${mod} />`;
}

// A page whose module exports `render(root, ctx)`: `root` is an empty element the
// page owns, `ctx` is { path, query, me, locale, t, request } where
// `request(method, path, body)` is the app's API client (cookie, CSRF token, error
// shape). `render` may return a function called when the page goes away.
function RenderPage({ entry, mod }) {
  const root = useRef(null);
  const [failed, setFailed] = useState(false);
  useEffect(() => {
    let gone = false;
    let cleanup = null;
    setFailed(false);
    // The same component shows every such page: nothing of the last one stays.
    root.current.textContent = '';
    if (!mod) return undefined;
    const fail = (e) => {
      console.warn(`page ${entry.path}: module ${entry.module} could not be loaded`, e);
      if (!gone) setFailed(true);
    };
    import('./api.js')
      .then(async (api) => {
        if (gone) return;
        if (typeof mod.render !== 'function') throw new Error('the module exports no render(root, ctx)');
        const { me, route, locale } = getState();
        root.current.textContent = '';
        const ctx = { path: route.path, query: route.query, me, locale, t, request: api.request };
        const out = await mod.render(root.current, ctx);
        if (typeof out === 'function') {
          if (gone) out();
          else cleanup = out;
        }
      })
      .catch(fail);
    return () => {
      gone = true;
      if (cleanup) cleanup();
    };
  }, [entry.path, entry.module, mod]);
  return html`<div class="page" data-testid="plugin-page" data-path=${entry.path}>
    <h1 class="page__title">${pageTitle(entry)}</h1>
    ${failed &&
    html`<div class="notice notice--error" role="alert" data-testid="plugin-page-error">${t('status.page_failed')}</div>`}
    <div ref=${root} data-testid="plugin-page-root"></div>
  </div>`;
}
