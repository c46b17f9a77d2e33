// Entry point (loaded by index.html as a module).
// Order at start: theme (before anything paints) -> language -> router ->
// ask the server about setup and session -> render. The route guard below is
// the single place that decides which page a given state may see.
import { html, render, useEffect, useLayoutEffect, useState } from './lib.js';
import { useStore, setState } from './store.js';
import { initTheme } from './theme.js';
import { setLocale, initialLocale, t } from './i18n.js';
import { startRouter, redirect } from './router.js';
import { boot, watchVisibility, noteHealth } from './session.js';
import { api } from './api.js';
import { Shell } from './components/shell.js';
import { LoginPage } from './pages/login.js';
import { SetupPage } from './pages/setup.js';
import { matchPage, PageView, preloadLanding } from './nav.js';
import { NotAllowedPage, NotFoundPage } from './pages/status.js';
import { Icon } from './components/icons.js';

// The chat docked beside any page but the chat itself on a wide screen, so a member can say
// "summarise this file" while looking at it. Chosen per browser; "share what I'm
// looking at" then describes the page beside the chat.
const DOCK_KEY = 'skald.chat.docked';
const WIDE = '(min-width: 1200px)';

function readDock() {
  try {
    return localStorage.getItem(DOCK_KEY) === '1';
  } catch (e) {
    return false;
  }
}

function useWide() {
  const [wide, setWide] = useState(() => window.matchMedia(WIDE).matches);
  useEffect(() => {
    const mq = window.matchMedia(WIDE);
    const on = () => setWide(mq.matches);
    mq.addEventListener('change', on);
    return () => mq.removeEventListener('change', on);
  }, []);
  return wide;
}

// The docked chat's width: dragged on its left edge (or arrow keys on it), kept per
// browser, between 320 pixels and 60 % of the window.
const DOCK_WIDTH_KEY = 'skald.chat.dock_width';

function clampWidth(px) {
  return Math.round(Math.max(320, Math.min(px, window.innerWidth * 0.6)));
}

function readWidth() {
  try {
    const px = Number(localStorage.getItem(DOCK_WIDTH_KEY));
    return px > 0 ? clampWidth(px) : null;
  } catch (e) {
    return null;
  }
}

function DockHandle({ width, onWidth }) {
  const save = (px) => {
    const w = clampWidth(px);
    onWidth(w);
    try {
      localStorage.setItem(DOCK_WIDTH_KEY, String(w));
    } catch (e) {
      /* storage disabled: the width lasts for this page only */
    }
  };
  const onPointerDown = (e) => {
    e.preventDefault();
    const move = (ev) => save(window.innerWidth - ev.clientX);
    const up = () => {
      window.removeEventListener('pointermove', move);
      window.removeEventListener('pointerup', up);
    };
    window.addEventListener('pointermove', move);
    window.addEventListener('pointerup', up);
  };
  const onKeyDown = (e) => {
    const now = width || 420;
    if (e.key === 'ArrowLeft') save(now + 24);
    else if (e.key === 'ArrowRight') save(now - 24);
  };
  return html`<div class="docked__handle" role="separator" aria-orientation="vertical" tabindex="0"
      aria-label=${t('chat.dock_resize')} data-testid="dock-handle" onPointerDown=${onPointerDown} onKeyDown=${onKeyDown}></div>`;
}

function DockToggle({ docked, onToggle }) {
  return html`<button type="button" class=${`btn btn--secondary btn--small dock-toggle${docked ? ' is-on' : ''}`}
      aria-pressed=${docked ? 'true' : 'false'} data-testid="dock-toggle" onClick=${onToggle}>
    ${docked ? Icon.close() : Icon.chat()}<span>${docked ? t('chat.undock') : t('chat.dock')}</span>
  </button>`;
}

// Decide what to show for the current state: either a redirect or a page.
function resolve(state) {
  const { path } = state.route;
  if (state.setupNeeded) {
    return path === '/setup' ? { public: SetupPage, title: 'setup.title' } : { redirect: '/setup' };
  }
  if (!state.me) {
    if (path === '/login') return { public: LoginPage, title: 'login.title' };
    return { redirect: '/login' };
  }
  if (path === '/login' || path === '/setup') return { redirect: '/' };
  // Only the pages the server listed for this member (GET /api/pages, see nav.js).
  return matchPage(path, state.pages, state.me.ui_mode === 'simple', { NotAllowedPage, NotFoundPage }, state.hiddenPages);
}

function App() {
  const state = useStore();
  const view = state.booted ? resolve(state) : null;
  const wide = useWide();
  const [dock, setDock] = useState(readDock);
  const [dockWidth, setDockWidth] = useState(readWidth);

  // Redirects change the hash, which re-renders through the router.
  useLayoutEffect(() => {
    if (view && view.redirect) redirect(view.redirect);
  });

  useEffect(() => {
    const title = view && (view.titleText || (view.title && t(view.title)));
    if (title) document.title = `${title} · Skald`;
  });

  // After navigating, move focus to the new page so keyboard and screen
  // reader users start at its top (and the phone menu's focus is not lost).
  useEffect(() => {
    const main = document.getElementById('main');
    if (main && document.activeElement && document.activeElement !== document.body && !main.contains(document.activeElement)) {
      main.focus({ preventScroll: true });
    }
    window.scrollTo(0, 0);
  }, [state.route.path]);

  if (!view) {
    return html`<div class="boot" data-testid="boot-loading" role="status"><span class="spinner" aria-hidden="true"></span>
      <span class="visually-hidden">${t('common.loading')}</span></div>`;
  }
  if (view.redirect) return null;
  if (view.public) return html`<${view.public} />`;
  const Page = view.page;
  // The chat page (the '/' entry) docks beside every other page of the app (issue 31);
  // the conversation and the draft live in chat.js's module state, so they survive
  // moving from page to page.
  const chat = (state.pages || []).find((p) => p.path === '/');
  const canChat = !!chat && state.me.ui_mode !== 'simple';
  const entry = view.props && view.props.entry;
  const dockable = view.dock || (!!entry && entry.path !== '/');
  if (dockable && wide && canChat) {
    const toggle = () => {
      try {
        localStorage.setItem(DOCK_KEY, dock ? '0' : '1');
      } catch (e) {
        /* storage disabled: the choice lasts for this page only */
      }
      setDock(!dock);
    };
    if (dock) {
      return html`<${Shell} flush=${true}><div class="docked" data-testid="docked-layout">
        <div class="docked__page"><${DockToggle} docked=${true} onToggle=${toggle} /><${Page} ...${view.props || {}} /></div>
        <${DockHandle} width=${dockWidth} onWidth=${setDockWidth} />
        <aside class="docked__chat" data-testid="docked-chat" aria-label=${t('nav.chat')}
          style=${dockWidth ? { width: `${dockWidth}px` } : undefined}><${PageView} entry=${chat} props=${{ docked: true }} /></aside>
      </div><//>`;
    }
    return html`<${Shell}><${DockToggle} docked=${false} onToggle=${toggle} /><${Page} ...${view.props || {}} /><//>`;
  }
  // The empty first child keeps the page where the branch above puts it (after the dock
  // toggle): crossing the wide breakpoint (a resized window, a full-page screenshot)
  // must not remount the page and lose its state (an open dialog, the recovery code).
  return html`<${Shell} flush=${!!view.flush}>${null}<${Page} ...${view.props || {}} /><//>`;
}

async function start() {
  // The landing page's modules could not be loaded: js/boot-check.js says so; starting
  // would replace its message with a page that cannot be shown.
  if (!(await preloadLanding())) return;
  initTheme();
  await setLocale(initialLocale());
  startRouter();
  watchVisibility();
  const root = document.getElementById('app');
  root.textContent = '';
  render(html`<${App} />`, root);
  // The scripts loaded and run: js/boot-check.js stops waiting for them.
  document.documentElement.dataset.started = 'true';
  // The version label is public information; fetch it once, never block on it.
  api.health().then(
    (health) => {
      noteHealth(health);
      setState({ health });
    },
    () => {},
  );
  await boot();
  registerServiceWorker();
}

// The service worker only exists to make the app installable and to show the
// shell offline; it never caches /api/ (see sw.js).
function registerServiceWorker() {
  if ('serviceWorker' in navigator && window.isSecureContext) {
    navigator.serviceWorker.register('sw.js').catch((e) => console.warn('service worker not registered', e));
  }
}

start().catch((e) => {
  console.error(e);
  const root = document.getElementById('app');
  root.textContent = 'Skald could not start. Please reload the page.';
});
