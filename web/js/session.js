// Who is logged in, and the transitions between "logged in" and "logged out".
// Kept apart from the pages so every way of losing a session (logout button,
// "log out everywhere", a 401 from any call, a revocation pushed over the
// WebSocket) ends in exactly the same place: state cleared, socket closed,
// login page with an explanation.
import { api, setCsrfToken, onUnauthorized } from './api.js';
import { getState, setState } from './store.js';
import { setLocale, normaliseLocale } from './i18n.js';
import { redirect } from './router.js';
import * as ws from './ws.js';

// Accept a Me object from login/setup/me/PATCH me, with the pages that member
// may see (GET /api/pages): both change with the role, so they are fetched
// together and set at once (no flash of the old navigation).
export async function setMe(me) {
  setCsrfToken(me.csrf_token);
  const prev = getState().me;
  let pages;
  let hiddenPages;
  try {
    [pages, hiddenPages] = await Promise.all([api.pages(), api.hiddenPages()]);
  } catch (e) {
    if (e.status === 401) throw e; // the session is gone; onUnauthorized handles it
    // Unreachable for a moment: keep the list we had (none at first sign-in:
    // the navigation is empty and every page says "not allowed" until a reload).
    console.warn('the list of pages could not be loaded', e);
    pages = getState().pages || [];
    hiddenPages = getState().hiddenPages || [];
  }
  setState({ me, pages, hiddenPages, notice: null });
  const loc = normaliseLocale(me.locale);
  if (loc && loc !== getState().locale) await setLocale(loc);
  if (!prev) startSocket();
}

// Restarts. The server says when it started (`started_at` of GET /api/health, its own
// clock); a different value after a reconnect means Skald restarted (a systemd restart,
// an update, a crash), which the page says (docs/web-ui.md). Trap: do not derive it
// from the page's clock minus `uptime_s`: that needed a slack, and a restart within the
// slack went unseen. An encrypted member's session does not survive it (the key lived in
// memory): the login page then says why.
const RESTART_BANNER_MS = 10000;
let serverStarted = null;
let restartedAt = 0;
let bannerTimer = null;

function startedFrom(health) {
  return Number(health.started_at);
}

export function noteHealth(health) {
  if (health && serverStarted === null) {
    serverStarted = startedFrom(health);
    // When the page first saw this server start (a later start is a restart).
    document.documentElement.dataset.serverStarted = String(serverStarted);
  }
}

async function checkRestart() {
  let health;
  try {
    health = await api.health();
  } catch (e) {
    return false; // still unreachable
  }
  const started = startedFrom(health);
  const restarted = serverStarted !== null && started !== serverStarted;
  serverStarted = started;
  if (restarted) {
    restartedAt = Date.now();
    // Kept after the banner goes (10 s): when the page last saw Skald restart.
    document.documentElement.dataset.restartedAt = String(restartedAt);
    setState({ health, restarted: true });
    clearTimeout(bannerTimer);
    bannerTimer = setTimeout(() => setState({ restarted: false }), RESTART_BANNER_MS);
  }
  return restarted;
}

function restartedRecently() {
  return Date.now() - restartedAt < 60000;
}

ws.onStatus((status) => {
  if (!getState().me) return;
  // The banner says "reconnecting" only after the first connection of this sign-in.
  if (status === 'closed' && ws.everConnected()) setState({ offline: true });
  if (status === 'open') setState({ offline: false });
});

function startSocket() {
  ws.connect({
    // The server sends a code; the sentence is ours, so it is in the user's language.
    onRevoked: (code) => (code ? signedOut({ key: `auth.revoked.${code}` }) : sessionEnded()),
    onMessage: (msg) => {
      // Our own account changed (role, name, language): take the new menus at once.
      if (msg.type === 'user_updated') api.me().then(setMe, () => {});
    },
    // Before reconnecting after a drop, make sure the session still exists;
    // a 401 here triggers signedOut through the api module.
    beforeReconnect: async () => {
      await checkRestart();
      try {
        await api.me();
        return true;
      } catch (e) {
        return e.status !== 401;
      }
    },
  });
}

// The session is over (for whatever reason): forget it and show the login page.
export function signedOut(notice) {
  ws.stop();
  setCsrfToken(null);
  setState({ me: null, pages: null, hiddenPages: null, notice: notice || null, offline: false, restarted: false });
  redirect('/login');
}

// The session is gone with no reason given (a 401, a socket refused as revoked): a restart
// is the likely why, so ask /api/health before saying which. Trap: the page can meet the
// new server first through any call (a reconnect's health check that failed a moment
// before the server came up, then its 401): deciding from what the page last saw said
// "your session has ended" after a restart the page had not noticed yet.
// Several calls meet the end at once (a page loads a few things together): one check.
let ending = null;
function sessionEnded() {
  ending ??= checkRestart().then(() => {
    ending = null;
    if (!getState().me) return; // another path signed out meanwhile
    signedOut({ key: restartedRecently() ? 'auth.restarted' : 'auth.expired', kind: 'info' });
  });
}

// Any 401 from a normal API call means the cookie is no longer valid.
onUnauthorized(() => {
  if (getState().me) sessionEnded();
  else redirect('/login');
});

export async function logout() {
  try {
    await api.logout();
  } catch (e) {
    // Already logged out on the server (401) or unreachable: either way the
    // user asked to leave, so leave.
  }
  signedOut({ key: 'auth.logged_out', kind: 'success' });
}

// First thing at start: is this a fresh install, and is somebody logged in?
export async function boot() {
  try {
    const setup = await api.setupStatus();
    if (setup && setup.needed) {
      setState({ setupNeeded: true, booted: true });
      return;
    }
  } catch (e) {
    // The server is unreachable or old; carry on and let /me decide.
  }
  try {
    const me = await api.me();
    await setMe(me);
  } catch (e) {
    setState({ me: null });
  }
  setState({ booted: true });
}

// Refresh Me when the tab comes back to the foreground: a session that was
// revoked while the laptop slept is noticed at once, not at the next click.
export function watchVisibility() {
  document.addEventListener('visibilitychange', () => {
    if (document.visibilityState === 'visible' && getState().me) {
      api.me().then(
        (me) => setMe(me),
        () => {
          /* 401 is handled by onUnauthorized; network errors are transient */
        },
      );
    }
  });
}
