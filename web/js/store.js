// A tiny observable store for the few pieces of state the whole app shares
// (who is logged in, whether first-run setup is needed, the current route,
// the locale, a one-shot notice for the login page).
// Page-local state stays in component hooks; only cross-page state lives here.
import { useEffect, useState } from './lib.js';

const state = {
  booted: false, // true once /api/setup and /api/auth/me have been asked
  setupNeeded: false,
  me: null, // the Me object from the server, or null when logged out
  route: { path: '/', query: new URLSearchParams() },
  locale: 'en',
  health: null, // last /api/health answer (public), used for the version label
  notice: null, // { key, vars, kind } shown once on the login page
};

const listeners = new Set();

export function getState() {
  return state;
}

export function setState(patch) {
  Object.assign(state, patch);
  for (const fn of [...listeners]) fn(state);
}

export function subscribe(fn) {
  listeners.add(fn);
  return () => listeners.delete(fn);
}

// Re-render the calling component whenever the shared state changes.
export function useStore() {
  const [, bump] = useState(0);
  useEffect(() => subscribe(() => bump((n) => n + 1)), []);
  return state;
}
