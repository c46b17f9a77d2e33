// Minimal service worker: makes Skald installable as an app and lets the
// shell (HTML, JS, CSS, translations, icons) open when the box is briefly
// unreachable. Network first, always: an update of the server is picked up on
// the next load, and the cache is only a fallback.
// API responses are NEVER cached: they are private, per-user data and must
// not outlive a logout on a shared family device.
const CACHE = 'skald-shell-v1';

self.addEventListener('install', () => self.skipWaiting());

self.addEventListener('activate', (event) => {
  event.waitUntil(
    caches
      .keys()
      .then((keys) => Promise.all(keys.filter((k) => k !== CACHE).map((k) => caches.delete(k))))
      .then(() => self.clients.claim()),
  );
});

self.addEventListener('fetch', (event) => {
  const req = event.request;
  if (req.method !== 'GET') return;
  const url = new URL(req.url);
  if (url.origin !== self.location.origin) return;
  const scope = new URL(self.registration.scope);
  const rel = url.pathname.slice(scope.pathname.length);
  if (rel.startsWith('api/') || rel === 'api') return; // let the browser handle it, uncached

  event.respondWith(
    fetch(req)
      .then((res) => {
        if (res.ok && res.type === 'basic') {
          const copy = res.clone();
          caches.open(CACHE).then((c) => c.put(req, copy));
        }
        return res;
      })
      .catch(() => caches.match(req).then((hit) => hit || caches.match(scope.href))),
  );
});
