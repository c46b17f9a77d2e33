// Translations. Strings live in web/i18n/<locale>.json (flat "area.name" keys)
// so translators edit data, not code. English is always loaded as the
// fallback, so a key missing from another language shows English, never a raw key.
import { getState, setState } from './store.js';

export const LOCALES = ['en', 'it', 'fr'];

// Language names are shown in their own language (an Italian looking for
// "Italiano" should not have to read it in French), so they are not translated.
export const LOCALE_NAMES = { en: 'English', it: 'Italiano', fr: 'Français' };

const STORAGE_KEY = 'skald.locale';
const dictionaries = {};

async function loadDictionary(locale) {
  if (!dictionaries[locale]) {
    const res = await fetch(`i18n/${locale}.json`, { credentials: 'same-origin' });
    if (!res.ok) throw new Error(`cannot load i18n/${locale}.json`);
    dictionaries[locale] = await res.json();
  }
  return dictionaries[locale];
}

export function normaliseLocale(value) {
  const base = String(value || '').toLowerCase().slice(0, 2);
  return LOCALES.includes(base) ? base : null;
}

// Before anybody logs in we only know what this browser chose last time or
// what the OS language is; after login me.locale wins.
export function initialLocale() {
  let saved = null;
  try {
    saved = localStorage.getItem(STORAGE_KEY);
  } catch (e) {
    saved = null; // storage can be disabled (private mode); not fatal
  }
  if (normaliseLocale(saved)) return normaliseLocale(saved);
  for (const lang of navigator.languages || [navigator.language]) {
    const loc = normaliseLocale(lang);
    if (loc) return loc;
  }
  return 'en';
}

// Switch the UI language. Only touches the browser; saving it to the account
// (PATCH /api/auth/me) is the caller's job because it needs a session.
export async function setLocale(locale) {
  const loc = normaliseLocale(locale) || 'en';
  await loadDictionary('en');
  try {
    await loadDictionary(loc);
  } catch (e) {
    console.warn(e); // fall back to English rather than leave the UI blank
  }
  try {
    localStorage.setItem(STORAGE_KEY, loc);
  } catch (e) {
    /* storage disabled: the choice lasts for this tab only */
  }
  document.documentElement.lang = loc;
  setState({ locale: loc });
}

// t('home.greeting', {name: 'Anna'}) -> "Hello, Anna". Placeholders are {name}.
export function t(key, vars) {
  const loc = getState().locale;
  const dict = dictionaries[loc] || {};
  let text = dict[key];
  if (text === undefined) text = (dictionaries.en || {})[key];
  if (text === undefined) return key;
  if (vars) {
    text = text.replace(/\{(\w+)\}/g, (m, name) => (name in vars ? String(vars[name]) : m));
  }
  return text;
}

// Whether the loaded dictionaries hold `key` (English counts: it is the fallback).
export function hasText(key) {
  const loc = getState().locale;
  return key in (dictionaries[loc] || {}) || key in (dictionaries.en || {});
}

// A role as people read it. A built-in role whose display name is still the English
// default shows in the member's language; a name an administrator chose is theirs.
// A built-in security group's name and description in the reader's language, as long
// as they are still the seeded English (a renamed group keeps the household's words).
function seeded(kind, item, field) {
  const key = `${kind}.${item.name}`;
  const english = (dictionaries.en || {})[key];
  return english !== undefined && (!item[field] || item[field] === english) ? t(key) : null;
}

export function groupLabel(group) {
  if (!group) return '';
  return seeded('group_name', group, 'display_name') || group.display_name || group.name;
}

export function groupDescription(group) {
  if (!group) return '';
  return seeded('group_description', group, 'description') || group.description || '';
}

export function roleLabel(role) {
  if (!role) return '';
  const key = `role_name.${role.name}`;
  const english = (dictionaries.en || {})[key];
  if (role.builtin !== false && english !== undefined && (!role.display_name || role.display_name === english)) {
    return t(key);
  }
  return role.display_name || role.name;
}

// A capability as people read it: its label and one-line description in the member's
// language; a capability the UI does not know (a plugin's) shows the server's text.
export function capabilityText(cap) {
  const key = `capability.${cap.name}`;
  if (hasText(key)) return { label: t(key), description: hasText(`${key}.hint`) ? t(`${key}.hint`) : '' };
  return { label: cap.description || cap.name, description: '' };
}

// Dates from the server are ISO strings; show them in the user's language.
export function formatDate(iso) {
  if (!iso) return '';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return String(iso);
  return d.toLocaleDateString(getState().locale, { year: 'numeric', month: 'short', day: 'numeric' });
}
