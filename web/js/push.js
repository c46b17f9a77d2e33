// Web Push for this browser: ask the browser for a push subscription made
// with the server's VAPID key and hand it to the server, or take it back.
// Rule: the subscription belongs to this browser profile; the server keeps
// one device row per endpoint and answers only for the signed-in member.
// Trap: push needs a secure context (https, or localhost) and a service
// worker; an installed PWA on a phone is the usual place.
import { api } from './api.js';

export function pushSupported() {
  return window.isSecureContext && 'serviceWorker' in navigator && 'PushManager' in window && 'Notification' in window;
}

function keyBytes(b64url) {
  const pad = '='.repeat((4 - (b64url.length % 4)) % 4);
  const raw = atob((b64url + pad).replace(/-/g, '+').replace(/_/g, '/'));
  return Uint8Array.from(raw, (c) => c.charCodeAt(0));
}

async function registration() {
  return navigator.serviceWorker.ready;
}

// This browser's subscription, or null.
export async function currentSubscription() {
  if (!pushSupported()) return null;
  const reg = await registration();
  return reg.pushManager.getSubscription();
}

function deviceLabel() {
  const ua = navigator.userAgent;
  const os = /Android/.test(ua) ? 'Android' : /iPhone|iPad/.test(ua) ? 'iOS' : /Mac/.test(ua) ? 'macOS' : /Windows/.test(ua) ? 'Windows' : /Linux/.test(ua) ? 'Linux' : '';
  const browser = /Firefox\//.test(ua) ? 'Firefox' : /Edg\//.test(ua) ? 'Edge' : /Chrome\//.test(ua) ? 'Chrome' : /Safari\//.test(ua) ? 'Safari' : 'Browser';
  return os ? `${browser} · ${os}` : browser;
}

// Ask for permission, subscribe with the server's key, register the device.
// Returns 'on', or 'denied' when the person (or the browser) said no.
export async function enablePush() {
  const permission = await Notification.requestPermission();
  if (permission !== 'granted') return 'denied';
  const { public_key: key } = await api.pushKey();
  const reg = await registration();
  let sub = await reg.pushManager.getSubscription();
  // A subscription made with another key (a restored instance) cannot be used.
  if (sub && sub.options && sub.options.applicationServerKey) {
    const have = new Uint8Array(sub.options.applicationServerKey);
    const want = keyBytes(key);
    if (have.length !== want.length || have.some((b, i) => b !== want[i])) {
      await sub.unsubscribe();
      sub = null;
    }
  }
  if (!sub) sub = await reg.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: keyBytes(key) });
  await api.pushSubscribe({ ...sub.toJSON(), label: deviceLabel() });
  return 'on';
}

// Stop push here: forget the server's device row and the browser's subscription.
export async function disablePush(devices) {
  const sub = await currentSubscription();
  if (!sub) return;
  const mine = (devices || []).find((d) => d.endpoint === sub.endpoint);
  if (mine) await api.pushRemove(mine.id);
  await sub.unsubscribe();
}
