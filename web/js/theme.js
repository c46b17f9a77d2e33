// Light/dark theme. By default the page follows the OS (CSS media query, so
// there is no flash before JS runs); an explicit choice is stored in
// localStorage and applied as <html data-theme="light|dark">.
const KEY = 'skald.theme';
const media = window.matchMedia('(prefers-color-scheme: dark)');
const listeners = new Set();

export function storedTheme() {
  try {
    const v = localStorage.getItem(KEY);
    return v === 'light' || v === 'dark' ? v : 'system';
  } catch (e) {
    return 'system';
  }
}

export function effectiveTheme() {
  const s = storedTheme();
  if (s !== 'system') return s;
  return media.matches ? 'dark' : 'light';
}

function apply() {
  const s = storedTheme();
  if (s === 'system') delete document.documentElement.dataset.theme;
  else document.documentElement.dataset.theme = s;
  // Keep the browser chrome (phone address bar, installed PWA title bar) in tune.
  const color = effectiveTheme() === 'dark' ? '#15191c' : '#f5f3ef';
  for (const meta of document.querySelectorAll('meta[name="theme-color"]')) {
    meta.setAttribute('content', color);
  }
  for (const fn of listeners) fn(effectiveTheme());
}

// 'light' | 'dark' | 'system'
export function setTheme(choice) {
  try {
    if (choice === 'system') localStorage.removeItem(KEY);
    else localStorage.setItem(KEY, choice);
  } catch (e) {
    /* storage disabled: applies to this tab only */
  }
  apply();
}

export function toggleTheme() {
  setTheme(effectiveTheme() === 'dark' ? 'light' : 'dark');
}

export function onThemeChange(fn) {
  listeners.add(fn);
  return () => listeners.delete(fn);
}

export function initTheme() {
  media.addEventListener('change', apply);
  apply();
}
