// The live connection to the server (/api/ws).
// It carries keep-alives, the "your session was revoked" signal and the chat's
// live events. session.js owns the connection; pages listen through
// onMessage()/onStatus() below. Rules from the server contract:
//  - answer every {"type":"ping","t":X} with {"type":"pong","t":X};
//  - send {"type":"subscribe"} after every (re)connect;
//  - {"type":"session_revoked"} or close code 4401 => signed out, never reconnect;
//  - any other disconnect => reconnect with backoff 1 s, 2 s, 4 s ... 30 s.

const MIN_DELAY = 1000;
const MAX_DELAY = 30000;
const REVOKED_CODE = 4401;

let socket = null;
let wanted = false; // true while the app wants a connection (user logged in)
let delay = MIN_DELAY;
let timer = null;
let handlers = {};
let status = 'closed'; // 'connecting' | 'open' | 'closed'
const messageListeners = new Set();
const statusListeners = new Set();

// Pages subscribe to server messages (anything but ping and revocation) and to
// connection changes; both return an unsubscribe function. A listener that
// throws is logged and does not stop the others.
export function onMessage(fn) {
  messageListeners.add(fn);
  return () => messageListeners.delete(fn);
}

// fn(status, { reconnected }) — `reconnected` is true when the socket is open again
// after a drop (the server's hello: events reach it from then on), the moment to
// re-read what may have been missed.
export function onStatus(fn) {
  statusListeners.add(fn);
  return () => statusListeners.delete(fn);
}

// fn() at every hello, the first included: events reach this page from then on, so what
// it read before (at sign-in, or before a drop) may lack a change made in between. The
// moment for a page that keeps a live copy of server state to read it (again).
export function onHello(fn) {
  return onStatus((next) => {
    if (next === 'open') fn();
  });
}

// Folders whose changes the server should report (`dir_changed`), e.g. the one the
// Files page shows. The server allows a few per connection.
const watched = new Set();

export function watchDir(path) {
  watched.add(path);
  send({ type: 'watch', path });
  return () => {
    watched.delete(path);
    send({ type: 'unwatch', path });
  };
}

export function connectionStatus() {
  return status;
}

let everOpened = false;

// Whether this sign-in's socket was open at least once (a drop after that is a
// "reconnecting", not a first connection still being made).
export function everConnected() {
  return everOpened;
}

function setStatus(next) {
  if (next === status) return;
  const reconnected = next === 'open' && everOpened;
  if (next === 'open') everOpened = true;
  status = next;
  for (const fn of [...statusListeners]) {
    try {
      fn(next, { reconnected });
    } catch (e) {
      console.error(e);
    }
  }
}

function url() {
  const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
  // Resolve relative to the page so a sub-path deployment works too.
  const base = new URL('api/ws', location.href);
  return `${proto}//${base.host}${base.pathname}`;
}

function send(obj) {
  if (socket && socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify(obj));
}

function open() {
  clearTimeout(timer);
  timer = null;
  if (!wanted) return;
  let revoked = false;
  const ws = new WebSocket(url());
  socket = ws;
  setStatus('connecting');

  ws.addEventListener('open', () => {
    delay = MIN_DELAY; // a good connection resets the backoff
    send({ type: 'subscribe' });
    // Watches live with a connection: ask again for every folder after a reconnect.
    for (const path of watched) send({ type: 'watch', path });
  });

  ws.addEventListener('message', (ev) => {
    let msg;
    try {
      msg = JSON.parse(ev.data);
    } catch (e) {
      return; // not ours to interpret
    }
    if (!msg || typeof msg !== 'object') return;
    if (msg.type === 'ping') {
      send({ type: 'pong', t: msg.t });
    } else if (msg.type === 'session_revoked') {
      revoked = true;
      stop();
      if (handlers.onRevoked) handlers.onRevoked(msg.code || null);
    } else {
      // Trap: the server counts a socket in (events reach it from then on) a moment after
      // it opens, and says so with its hello. A page that re-read at `open` could miss
      // what happened in between for good, so `open` is the hello.
      if (msg.type === 'hello' && status !== 'open') {
        if (handlers.onStatus) handlers.onStatus('open');
        setStatus('open');
      }
      if (handlers.onMessage) handlers.onMessage(msg);
      for (const fn of [...messageListeners]) {
        try {
          fn(msg);
        } catch (e) {
          console.error(e);
        }
      }
    }
  });

  ws.addEventListener('close', (ev) => {
    if (socket === ws) socket = null;
    if (handlers.onStatus) handlers.onStatus('closed');
    setStatus('closed');
    if (revoked) return;
    if (ev.code === REVOKED_CODE) {
      // Closed as revoked without the message (e.g. it was lost, or the
      // upgrade was refused because the session is gone): same outcome, but
      // with no server-given reason to show.
      stop();
      if (handlers.onRevoked) handlers.onRevoked(null);
      return;
    }
    if (!wanted) return;
    const wait = delay;
    delay = Math.min(delay * 2, MAX_DELAY);
    timer = setTimeout(() => {
      // A failed reconnect may mean the session expired; the owner checks
      // /api/auth/me (which routes to the login page on 401) before we retry.
      Promise.resolve(handlers.beforeReconnect ? handlers.beforeReconnect() : true).then(
        (ok) => ok !== false && open(),
        () => open(),
      );
    }, wait);
  });
}

// Start (or keep) the connection for a logged-in user.
export function connect(opts) {
  handlers = opts || {};
  if (wanted && socket) return;
  wanted = true;
  delay = MIN_DELAY;
  open();
}

// Stop for good (logout, revocation). Closing with 1000 tells the server it
// was intentional.
export function stop() {
  wanted = false;
  everOpened = false; // the next login starts a fresh connection, not a "reconnect"
  setStatus('closed');
  clearTimeout(timer);
  timer = null;
  if (socket) {
    const s = socket;
    socket = null;
    try {
      s.close(1000);
    } catch (e) {
      /* already closed */
    }
  }
}
