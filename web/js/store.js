// A tiny observable store for the few pieces of state the whole app shares
// (who is logged in, whether first-run setup is needed, the current route,
// the locale, a one-shot notice for the login page).
// Page-local state stays in component hooks; only cross-page state lives here.
import { useEffect, useRef, useState } from './lib.js';

const state = {
  booted: false, // true once /api/setup and /api/auth/me have been asked
  setupNeeded: false,
  me: null, // the Me object from the server, or null when logged out
  pages: null, // GET /api/pages for that member (nav.js), fetched with me
  hiddenPages: null, // GET /api/pages/hidden: the pages refused as 'not allowed' (nav.js)
  route: { path: '/', query: new URLSearchParams() },
  locale: 'en',
  health: null, // last /api/health answer (public), used for the version label
  notice: null, // { key, vars, kind } shown once on the login page
};

const listeners = new Set();
let version = 0; // bumped on every change; lets late subscribers catch up

export function getState() {
  return state;
}

export function setState(patch) {
  Object.assign(state, patch);
  version += 1;
  for (const fn of [...listeners]) fn(state);
}

export function subscribe(fn) {
  listeners.add(fn);
  return () => listeners.delete(fn);
}

// A shared model of a feature's own (the inbox, the notifications), outside the app
// state: `set(patch)` merges and tells the views, `use()` re-renders the calling
// component at each change. Trap: a change can land between render and subscription,
// so `use` re-renders once as it subscribes to catch up.
export function sharedModel(model) {
  const views = new Set();
  const set = (patch) => {
    Object.assign(model, patch);
    for (const fn of [...views]) fn(model);
  };
  const use = () => {
    const [, bump] = useState(0);
    useEffect(() => {
      const fn = () => bump((n) => n + 1);
      views.add(fn);
      fn();
      return () => views.delete(fn);
    }, []);
    return model;
  };
  return { set, use };
}

// Reads of one thing may be on their way at once (an event, a hello, a timer, a click)
// and answer in any order; only the newest read's answer may land. `newestRead()` gives
// `begin()`, called as a read starts, which returns `current()`: whether that read is
// still the newest when its answer (or its error) comes.
export function newestRead() {
  let newest = 0;
  return function begin() {
    const mine = ++newest;
    return () => mine === newest;
  };
}

// Trap: a read is answered as the server saw things when the request arrived; what the
// socket says while it is on its way may be newer (every change sends its event), and
// must not be undone by the older answer. `record(key, value)` notes each live value,
// `begin()` opens a read and returns the values recorded since (key -> last value),
// which win over its answer; `end(seen)` closes it.
export function liveSinceRead() {
  const reading = new Set();
  return {
    begin() {
      const seen = new Map();
      reading.add(seen);
      return seen;
    },
    end(seen) {
      reading.delete(seen);
    },
    record(key, value) {
      for (const seen of reading) seen.set(key, value);
    },
  };
}

// Re-render the calling component whenever the shared state changes.
// Effects run after paint, so a change can land between this component's
// render and its subscription (e.g. the boot requests answering quickly);
// the version check re-renders in that case instead of missing the change.
export function useStore() {
  const [, bump] = useState(0);
  const seen = useRef(version);
  seen.current = version;
  useEffect(() => {
    const unsubscribe = subscribe(() => bump((n) => n + 1));
    if (seen.current !== version) bump((n) => n + 1);
    return unsubscribe;
  }, []);
  return state;
}

// What the open page says about itself to the eye ("share what I'm looking at"): a
// page calls `useViewDescription(items)` with label/value items (counts and metadata,
// never content the member did not highlight), the chat's view context adds
// `viewDescription()` after the page and its address. Cleared when the page goes, so
// a page that says nothing never carries over another's words.
let described = null;

export function useViewDescription(items) {
  const key = items ? JSON.stringify(items) : '';
  useEffect(() => {
    if (!items) return undefined;
    const mine = items;
    described = mine;
    return () => {
      if (described === mine) described = null;
    };
  }, [key]);
}

export function viewDescription() {
  return described || [];
}
