// The logged-in frame: header, navigation, main area.
// Two flavours, chosen by me.ui_mode (a role attribute):
//  - full: sidebar with every page the server lists for the member
//    (GET /api/pages, see nav.js; /admin/ paths under "Household");
//  - simple (children): a calmer frame with only the pages marked for it
//    (Chat, Inbox, Profile), bigger targets, no admin links at all.
// `flush` (the chat) makes the frame exactly one screen tall, with the page
// scrolling inside its own areas instead of the whole document.
// The sidebar turns into a slide-in menu below 860 px (phones, small tablets).
import { html, useState, useEffect, useRef } from '../lib.js';
import { t } from '../i18n.js';
import { getState } from '../store.js';
import { logout } from '../session.js';
import { Icon, Logo } from './icons.js';
import { ThemeToggle, LocalePicker } from './controls.js';
import { useDismiss } from './dismiss.js';
import { useInbox } from '../inbox.js';
import { navItems } from '../nav.js';
import { Bell } from './bell.js';
import { get } from '../api.js';

// The number of inbox items waiting, as a small pill; nothing when none.
function InboxBadge({ count, testid }) {
  if (!count) return null;
  return html`<span class="badge-count" data-testid=${testid} data-count=${count}
    aria-label=${t('inbox.badge_label', { count })}>${count > 99 ? '99+' : count}</span>`;
}

// A page's own count (Page.count: an API path answering {count}), read when the route
// changes and when a page says its counts changed (the `skald:counts` event).
function CountBadge({ url, route, testid }) {
  const [count, setCount] = useState(0);
  useEffect(() => {
    let gone = false;
    const read = () => get(url).then((r) => !gone && setCount(r.count || 0), () => {});
    read();
    window.addEventListener('skald:counts', read);
    return () => {
      gone = true;
      window.removeEventListener('skald:counts', read);
    };
  }, [url, route]);
  if (!count) return null;
  return html`<span class="badge-count" data-testid=${testid} data-count=${count}>${count > 99 ? '99+' : count}</span>`;
}

function isActive(itemPath, current) {
  if (itemPath === '/') return current === '/';
  return current === itemPath || current.startsWith(`${itemPath}/`);
}

function initials(me) {
  const name = (me.display_name || me.username || '?').trim();
  const parts = name.split(/\s+/).filter(Boolean);
  const s = parts.length > 1 ? parts[0][0] + parts[parts.length - 1][0] : name.slice(0, 2);
  return s.toUpperCase();
}

function UserMenu({ me }) {
  const [open, setOpen] = useState(false);
  const root = useRef(null);

  useDismiss(open, () => setOpen(false), root);

  return html`<div class="user-menu" ref=${root}>
    <button type="button" class="user-menu__button" aria-expanded=${open ? 'true' : 'false'}
      aria-controls="user-menu" aria-label=${t('user_menu.open', { name: me.display_name || me.username })}
      onClick=${() => setOpen(!open)} data-testid="user-menu-button">
      <span class="avatar" aria-hidden="true">${initials(me)}</span>
      <span class="user-menu__name">${me.display_name || me.username}</span>
      ${Icon.chevron()}
    </button>
    ${open &&
    html`<div class="user-menu__panel" id="user-menu" data-testid="user-menu">
      <div class="user-menu__who">
        <strong>${me.display_name || me.username}</strong>
        <span class="muted small">@${me.username}</span>
      </div>
      <a class="user-menu__item" href="#/profile" onClick=${() => setOpen(false)} data-testid="user-menu-profile">
        ${Icon.user()}<span>${t('nav.profile')}</span>
      </a>
      <button type="button" class="user-menu__item" onClick=${() => logout()} data-testid="user-menu-logout">
        ${Icon.logout()}<span>${t('auth.logout')}</span>
      </button>
    </div>`}
  </div>`;
}

// Above every page: the connection to Skald is lost (reconnecting by itself), or Skald
// restarted and the page is connected again.
function ConnectionBanner({ offline, restarted }) {
  if (offline) {
    return html`<div class="notice notice--warning conn-banner" role="status" data-testid="connection-lost">
      ${Icon.alert()}<span>${t('conn.lost')}</span></div>`;
  }
  if (restarted) {
    return html`<div class="notice notice--info conn-banner" role="status" data-testid="restart-banner">
      ${Icon.info()}<span>${t('conn.restarted')}</span></div>`;
  }
  return null;
}

export function Shell({ children, flush = false }) {
  const { me, route, health, pages, offline, restarted } = getState();
  const [navOpen, setNavOpen] = useState(false);
  const simple = me.ui_mode === 'simple';
  const items = navItems(pages);
  const { count } = useInbox();
  const canInbox = (pages || []).some((p) => p.path === '/inbox');

  // A route change (link tapped) closes the phone menu.
  useEffect(() => setNavOpen(false), [route.path]);
  useEffect(() => {
    if (!navOpen) return undefined;
    const onKey = (e) => e.key === 'Escape' && setNavOpen(false);
    document.addEventListener('keydown', onKey);
    return () => document.removeEventListener('keydown', onKey);
  }, [navOpen]);

  const mainItems = items.filter((i) => !i.admin);
  const adminItems = items.filter((i) => i.admin);
  const link = (item) => html`<li>
    <a href=${`#${item.path}`} class=${`nav__link${isActive(item.path, route.path) ? ' is-active' : ''}`}
      aria-current=${isActive(item.path, route.path) ? 'page' : undefined} data-testid=${item.testid}>
      ${item.icon()}<span>${item.label}</span>
      ${item.badge && html`<${InboxBadge} count=${count} testid="nav-inbox-badge" />`}
      ${item.count && html`<${CountBadge} url=${item.count} route=${route.path} testid=${`${item.testid}-count`} />`}
    </a>
  </li>`;

  return html`<div class=${`shell${simple ? ' shell--simple' : ''}${flush ? ' shell--flush' : ''}${navOpen ? ' nav-open' : ''}`}
      data-testid="app-shell" data-ui-mode=${simple ? 'simple' : 'full'}>
    <a class="skip-link" href="#main" onClick=${(e) => {
      e.preventDefault();
      document.getElementById('main').focus();
    }}>${t('common.skip_to_content')}</a>
    <header class="header" data-testid="app-header">
      <button type="button" class="icon-btn header__menu" aria-label=${navOpen ? t('nav.close_menu') : t('nav.open_menu')}
        aria-expanded=${navOpen ? 'true' : 'false'} aria-controls="sidebar" onClick=${() => setNavOpen(!navOpen)}
        data-testid="nav-toggle">${navOpen ? Icon.close() : Icon.menu()}</button>
      <a href="#/" class="brand" data-testid="app-name"><${Logo} size=${30} /><span>Skald</span></a>
      <div class="header__tools">
        ${canInbox &&
        html`<a href="#/inbox" class="icon-btn header__inbox" aria-label=${t('nav.inbox')} title=${t('nav.inbox')}
          data-testid="header-inbox">${Icon.inbox()}<${InboxBadge} count=${count} testid="header-inbox-badge" /></a>`}
        <${Bell} />
        <${ThemeToggle} />
        <${LocalePicker} />
        <${UserMenu} me=${me} />
      </div>
    </header>
    <div class="shell__body">
      <nav id="sidebar" class="sidebar" aria-label=${t('nav.label')} data-testid="sidebar">
        <ul class="nav">${mainItems.map(link)}</ul>
        ${adminItems.length > 0 &&
        html`<p class="nav__section">${t('nav.household')}</p>
          <ul class="nav">${adminItems.map(link)}</ul>`}
        <div class="sidebar__foot">
          <button type="button" class="nav__link nav__link--quiet" onClick=${() => logout()} data-testid="nav-logout">
            ${Icon.logout()}<span>${t('auth.logout')}</span>
          </button>
          ${health && health.version &&
          html`<p class="muted small sidebar__version" data-testid="app-version">Skald ${health.version}</p>`}
        </div>
      </nav>
      <div class="scrim" onClick=${() => setNavOpen(false)} aria-hidden="true"></div>
      <main id="main" class=${`main${flush ? ' main--flush' : ''}`} tabindex="-1">
        <${ConnectionBanner} offline=${offline} restarted=${restarted} />${children}</main>
    </div>
  </div>`;
}
