// Hash routing: "#/admin/users" -> { path: "/admin/users", query }.
// Hash routes need no server-side rewrite rules: the server only ever serves
// index.html at "/", and a reload keeps the page the user was on.
import { setState } from './store.js';

export function parseHash(hash) {
  const raw = (hash || '').replace(/^#/, '') || '/';
  const q = raw.indexOf('?');
  const path = (q === -1 ? raw : raw.slice(0, q)) || '/';
  const query = new URLSearchParams(q === -1 ? '' : raw.slice(q + 1));
  return { path: path.startsWith('/') ? path : `/${path}`, query };
}

// Go to a route, adding a history entry (the back button works).
export function navigate(path) {
  if (location.hash !== `#${path}`) location.hash = path;
}

// Go to a route without a history entry: used for redirects (e.g. to the
// login page) so "back" does not bounce the user into the redirect again.
export function redirect(path) {
  if (location.hash !== `#${path}`) {
    location.replace(`#${path}`);
  }
}

export function startRouter() {
  const update = () => setState({ route: parseHash(location.hash) });
  window.addEventListener('hashchange', update);
  update();
}
