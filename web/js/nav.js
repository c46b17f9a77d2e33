// The pages of the app and their navigation entries come from the server
// (GET /api/pages: the pages hook of every feature and plugin, already filtered
// by the member's capabilities and the simple shell). This module only adds
// what the browser needs to show them: the component, icon and test id of
// each built-in path, and the loader of a plugin page's ES module.
//
// Rule: a path the server did not list is never shown — a built-in one gets
// the "not allowed" view, anything else "not found". Hiding is a courtesy:
// the server refuses the data anyway.
// Trap: the list is refreshed with /api/auth/me (session.js setMe), so a role
// change shows the new entries at once; never cache it across members.
import { html, useEffect, useRef, useState } from './lib.js';
import { t } from './i18n.js';
import { getState } from './store.js';
import { Icon } from './components/icons.js';
import { ChatPage } from './pages/chat.js';
import { HomePage } from './pages/home.js';
import { InboxPage } from './pages/inbox.js';
import { FilesPage } from './pages/files.js';
import { TasksPage } from './pages/tasks.js';
import { ProfilePage } from './pages/profile.js';
import { AdminUsersPage } from './pages/admin-users.js';
import { AdminRolesPage } from './pages/admin-roles.js';
import { AdminApprovalsPage } from './pages/admin-approvals.js';
import { AdminModelsPage } from './pages/admin-models.js';
import { AdminSettingsPage } from './pages/admin-settings.js';
import { WelcomePage } from './pages/welcome.js';
import { AdminBackupsPage } from './pages/admin-backups.js';
import { AgentsPage } from './pages/agents.js';
import { ConnectorsPage, MarketplacePage } from './pages/connectors.js';

// Built-in paths -> how to show them. `flush` pages (the chat) fill the main
// area and scroll inside it; `fullOnly` pages send the simple shell home
// instead of refusing; `sub` maps a sub-path to the page's props.
const BUILTIN = {
  '/': { page: ChatPage, icon: 'chat', testid: 'nav-home', flush: true },
  '/inbox': { page: InboxPage, icon: 'inbox', testid: 'nav-inbox', badge: true, dock: true },
  '/overview': { page: HomePage, icon: 'home', testid: 'nav-overview', fullOnly: true },
  '/files': { page: FilesPage, icon: 'folder', testid: 'nav-files', dock: true },
  '/tasks': { page: TasksPage, icon: 'clock', testid: 'nav-tasks' },
  '/agents': { page: AgentsPage, icon: 'sparkle', testid: 'nav-agents' },
  '/profile': { page: ProfilePage, icon: 'user', testid: 'nav-profile' },
  '/admin/users': { page: AdminUsersPage, icon: 'users', testid: 'nav-admin-users' },
  '/admin/roles': {
    page: AdminRolesPage,
    icon: 'shield',
    testid: 'nav-admin-roles',
    sub: (rest) => ({ roleName: decodeURIComponent(rest) }),
  },
  '/admin/approvals': { page: AdminApprovalsPage, icon: 'list', testid: 'nav-admin-approvals' },
  '/admin/models': { page: AdminModelsPage, icon: 'cpu', testid: 'nav-admin-models' },
  '/admin/settings': { page: AdminSettingsPage, icon: 'home', testid: 'nav-admin-settings' },
  '/welcome': { page: WelcomePage, icon: 'sparkle', testid: 'nav-welcome', fullOnly: true },
  '/admin/backups': { page: AdminBackupsPage, icon: 'archive', testid: 'nav-admin-backups' },
  '/connectors': { page: ConnectorsPage, icon: 'tool', testid: 'nav-connectors' },
  '/admin/marketplace': { page: MarketplacePage, icon: 'archive', testid: 'nav-admin-marketplace' },
};

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

// The navigation entries for the pages the server listed, in its order.
// Paths under /admin/ go to the "Household" section.
export function navItems(pages) {
  return (pages || []).map((p) => {
    const b = p.module ? null : BUILTIN[p.path];
    return {
      path: p.path,
      label: pageTitle(p),
      icon: Icon[b ? b.icon : 'sparkle'],
      testid: b ? b.testid : `nav-page-${slug(p.path)}`,
      badge: !!(b && b.badge),
      admin: p.path.startsWith('/admin/'),
    };
  });
}

// What to show at `path` for a signed-in member: { page, title, props, flush },
// { redirect } or a refusal. Only pages the server listed are ever shown.
export function matchPage(path, pages, simple, { NotAllowedPage, NotFoundPage }) {
  const listed = pages || [];
  const exact = listed.find((p) => p.path === path);
  if (exact) {
    const b = !exact.module && BUILTIN[exact.path];
    if (b) return { page: b.page, titleText: pageTitle(exact), flush: !!b.flush, dock: !!b.dock };
    // A plugin's page (one without a module says it could not be loaded).
    return { page: PluginPage, titleText: pageTitle(exact), props: { entry: exact } };
  }
  // A sub-path of a listed built-in page that has sub-routes (#/admin/roles/<name>).
  for (const p of listed) {
    const b = !p.module && BUILTIN[p.path];
    if (b && b.sub && path.startsWith(`${p.path}/`) && path.length > p.path.length + 1) {
      const rest = path.slice(p.path.length + 1);
      if (!rest.includes('/')) return { page: b.page, titleText: pageTitle(p), props: b.sub(rest) };
    }
  }
  const base = Object.keys(BUILTIN).find((k) => path === k || (k !== '/' && path.startsWith(`${k}/`)));
  if (base) {
    if (simple && BUILTIN[base].fullOnly) return { redirect: '/' };
    return { page: NotAllowedPage, title: 'status.not_allowed_title' };
  }
  return { page: NotFoundPage, title: 'status.not_found_title' };
}

// A plugin page's module is a URL relative to the web root ("api/sample/page.js");
// anything that would leave this origin is refused before import().
function moduleUrl(module) {
  if (typeof module !== 'string' || !module || /^[a-z][a-z0-9+.-]*:|^\/\//i.test(module)) return null;
  const url = new URL(module.replace(/^\/+/, ''), document.baseURI);
  return url.origin === location.origin ? url.href : null;
}

// A plugin page. Its module must export `render(root, ctx)`: `root` is an empty
// element the page owns, `ctx` is { path, query, me, locale, t, request } where
// `request(method, path, body)` is the app's API client (cookie, CSRF token,
// error shape). `render` may return a function called when the page goes away.
// A module that cannot be loaded, or has no `render`, shows a clear message.
function PluginPage({ entry }) {
  const root = useRef(null);
  const [failed, setFailed] = useState(false);
  useEffect(() => {
    let gone = false;
    let cleanup = null;
    setFailed(false);
    // The same component shows every plugin page: nothing of the last one stays.
    root.current.textContent = '';
    const url = moduleUrl(entry.module);
    const fail = (e) => {
      console.warn(`page ${entry.path}: module ${entry.module} could not be loaded`, e);
      if (!gone) setFailed(true);
    };
    if (!url) {
      fail(new Error('the page has no module, or not one under the web root'));
      return undefined;
    }
    Promise.all([import(url), import('./api.js')])
      .then(async ([mod, api]) => {
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
  }, [entry.path, entry.module]);
  return html`<div class="page" data-testid="plugin-page" data-path=${entry.path}>
    <h1 class="page__title">${pageTitle(entry)}</h1>
    ${failed &&
    html`<div class="notice notice--error" role="alert" data-testid="plugin-page-error">${t('status.page_failed')}</div>`}
    <div ref=${root} data-testid="plugin-page-root"></div>
  </div>`;
}
