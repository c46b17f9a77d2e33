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

// Web Push (docs/dev/notifications.md). The server sends, encrypted, the JSON
// {count, unread, items: [{id, title, body, link}]} (newest first). One batch
// is one system notification; a newer one replaces it (same tag).
self.addEventListener('push', (event) => {
  let data = null;
  try {
    data = event.data ? event.data.json() : null;
  } catch (e) {
    data = null;
  }
  const items = (data && Array.isArray(data.items) && data.items) || [];
  const first = items[0] || { title: 'Skald', body: '' };
  const count = (data && data.count) || items.length || 1;
  const title = count > 1 ? `Skald (${count})` : first.title;
  const body = count > 1 ? items.map((i) => `• ${i.title}`).join('\n') : first.body || '';
  event.waitUntil(
    self.registration.showNotification(title, {
      body,
      tag: 'skald-notifications',
      renotify: true,
      icon: 'icons/icon-192.png',
      badge: 'icons/icon-192.png',
      data: { link: typeof first.link === 'string' && first.link.startsWith('/') && !first.link.startsWith('//') ? first.link : '/' },
    }),
  );
});

// A tap opens the app (an open window if there is one) at the notification's page.
self.addEventListener('notificationclick', (event) => {
  event.notification.close();
  const link = (event.notification.data && event.notification.data.link) || '/';
  const url = new URL(`#${link}`, self.registration.scope).href;
  event.waitUntil(
    self.clients.matchAll({ type: 'window', includeUncontrolled: true }).then((wins) => {
      const win = wins.find((w) => w.url.startsWith(self.registration.scope));
      if (win) return win.navigate(url).then((w) => (w || win).focus());
      return self.clients.openWindow(url);
    }),
  );
});
