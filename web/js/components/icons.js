// Small line icons drawn inline as SVG (no icon font, no extra requests, and
// they inherit currentColor so they follow the theme). Decorative: every icon
// is aria-hidden; the button that holds it carries the accessible name.
import { html } from '../lib.js';

function svg(children, size = 20) {
  return html`<svg class="icon" width=${size} height=${size} viewBox="0 0 24 24" fill="none"
    stroke="currentColor" stroke-width="1.8" stroke-linecap="round" stroke-linejoin="round"
    aria-hidden="true" focusable="false">${children}</svg>`;
}

export const Icon = {
  menu: () => svg(html`<path d="M4 7h16M4 12h16M4 17h16" />`),
  close: () => svg(html`<path d="M6 6l12 12M18 6L6 18" />`),
  sun: () =>
    svg(html`<circle cx="12" cy="12" r="4" /><path
        d="M12 2.5v2M12 19.5v2M4.6 4.6l1.4 1.4M18 18l1.4 1.4M2.5 12h2M19.5 12h2M4.6 19.4L6 18M18 6l1.4-1.4" />`),
  moon: () => svg(html`<path d="M20 14.5A8 8 0 0 1 9.5 4a8 8 0 1 0 10.5 10.5z" />`),
  globe: () =>
    svg(html`<circle cx="12" cy="12" r="9" /><path d="M3 12h18M12 3c2.5 2.6 3.8 5.6 3.8 9s-1.3 6.4-3.8 9c-2.5-2.6-3.8-5.6-3.8-9S9.5 5.6 12 3z" />`),
  home: () => svg(html`<path d="M4 11l8-6.5 8 6.5" /><path d="M6 10v9.5h12V10" /><path d="M10 19.5v-5h4v5" />`),
  user: () => svg(html`<circle cx="12" cy="8.5" r="3.7" /><path d="M4.5 20c1.2-3.6 4-5.3 7.5-5.3s6.3 1.7 7.5 5.3" />`),
  users: () =>
    svg(html`<circle cx="9" cy="9" r="3.3" /><path d="M3 19.5c.9-3.2 3.2-4.8 6-4.8s5.1 1.6 6 4.8" /><path
        d="M15.5 5.9a3.3 3.3 0 0 1 0 6.3M17.5 14.9c1.7.6 2.9 2 3.5 4.6" />`),
  shield: () => svg(html`<path d="M12 3l7.5 3v5.5c0 4.6-3.2 8.2-7.5 9.5-4.3-1.3-7.5-4.9-7.5-9.5V6z" /><path d="M9 12l2.2 2.2L15.5 10" />`),
  logout: () => svg(html`<path d="M14 4.5h4.5v15H14" /><path d="M10 8l-4 4 4 4M6 12h9.5" />`),
  lock: () => svg(html`<rect x="5" y="10.5" width="14" height="10" rx="2" /><path d="M8.5 10.5V7.5a3.5 3.5 0 0 1 7 0v3" />`),
  unlock: () => svg(html`<rect x="5" y="10.5" width="14" height="10" rx="2" /><path d="M8.5 10.5V7.5a3.5 3.5 0 0 1 6.7-1.4" />`),
  copy: () => svg(html`<rect x="8.5" y="8.5" width="11" height="11" rx="2" /><path d="M15.5 8.5V6a1.5 1.5 0 0 0-1.5-1.5H6A1.5 1.5 0 0 0 4.5 6v8A1.5 1.5 0 0 0 6 15.5h2.5" />`),
  check: () => svg(html`<path d="M5 12.5l4.5 4.5L19 7.5" />`),
  alert: () => svg(html`<path d="M12 4l9 16H3z" /><path d="M12 10v4.5M12 17.3v.2" />`),
  info: () => svg(html`<circle cx="12" cy="12" r="9" /><path d="M12 11v5.5M12 7.7v.2" />`),
  chevron: () => svg(html`<path d="M8 10l4 4 4-4" />`, 16),
  plus: () => svg(html`<path d="M12 5v14M5 12h14" />`),
  edit: () => svg(html`<path d="M4.5 19.5l1-4L16 5a2 2 0 0 1 3 3L8.5 18.5z" />`, 18),
  chat: () => svg(html`<path d="M5 5.5h14a1.5 1.5 0 0 1 1.5 1.5v8.5A1.5 1.5 0 0 1 19 17h-8l-4.5 3.5V17H5a1.5 1.5 0 0 1-1.5-1.5V7A1.5 1.5 0 0 1 5 5.5z" />`),
};

// The product mark: the same monogram as icons/icon.svg, drawn inline.
export function Logo({ size = 28 }) {
  return html`<svg class="logo" width=${size} height=${size} viewBox="0 0 64 64" aria-hidden="true" focusable="false">
    <rect x="2" y="2" width="60" height="60" rx="16" class="logo-bg" />
    <path d="M41.5 20.5c-2.4-2.7-5.8-4-9.6-4-5.6 0-9.6 3.1-9.6 7.6 0 4.3 3.3 6.4 9.4 7.8 6.3 1.4 9.6 3.6 9.6 8.1 0 4.7-4.2 7.9-10 7.9-4.2 0-7.9-1.6-10.3-4.5"
      class="logo-s" fill="none" stroke-width="5.5" stroke-linecap="round" stroke-linejoin="round" />
    <circle cx="49.25" cy="46.75" r="2" class="logo-dot" />
  </svg>`;
}
