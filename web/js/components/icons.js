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
  attach: () => svg(html`<path d="M20 11.5l-7.8 7.8a5 5 0 0 1-7.1-7.1l8.2-8.2a3.3 3.3 0 0 1 4.7 4.7l-8.1 8.1a1.6 1.6 0 0 1-2.3-2.3l7.4-7.4" />`),
  mic: () => svg(html`<rect x="9" y="3.5" width="6" height="11" rx="3" /><path d="M5.5 11a6.5 6.5 0 0 0 13 0M12 17.5v3" />`),
  speaker: () => svg(html`<path d="M4.5 9.5h3l4.5-4v13l-4.5-4h-3z" /><path d="M15.5 9a4 4 0 0 1 0 6M18 6.5a7.5 7.5 0 0 1 0 11" />`),
  send: () => svg(html`<path d="M4.5 12L19.5 4.5 15 19.5l-3.2-6.3z" /><path d="M11.8 13.2L19.5 4.5" />`),
  stop: () => svg(html`<rect x="6.5" y="6.5" width="11" height="11" rx="2" />`),
  eye: () => svg(html`<path d="M2.5 12S6 5.5 12 5.5 21.5 12 21.5 12 18 18.5 12 18.5 2.5 12 2.5 12z" /><circle cx="12" cy="12" r="3" />`),
  tool: () => svg(html`<path d="M14.5 6.5a4 4 0 0 0 5 5l-8.5 8.5a2.1 2.1 0 0 1-3-3z" /><path d="M14.5 6.5l2-2 3 3-2 2" />`, 18),
  clock: () => svg(html`<circle cx="12" cy="12" r="8.5" /><path d="M12 7.5V12l3 2" />`),
  file: () => svg(html`<path d="M6.5 3.5h7l4 4v13h-11z" /><path d="M13.5 3.5v4h4" />`, 16),
  image: () => svg(html`<rect x="3.5" y="5" width="17" height="14" rx="2" /><circle cx="9" cy="10" r="1.8" /><path d="M20.5 16l-5-5-8.5 8" />`, 16),
  up: () => svg(html`<path d="M12 19V5M6 11l6-6 6 6" />`, 18),
  down: () => svg(html`<path d="M12 5v14M6 13l6 6 6-6" />`, 18),
  cpu: () => svg(html`<rect x="6" y="6" width="12" height="12" rx="2" /><path d="M9.5 9.5h5v5h-5zM9 3v3M15 3v3M9 18v3M15 18v3M3 9h3M3 15h3M18 9h3M18 15h3" />`),
  key: () => svg(html`<circle cx="8" cy="15" r="4" /><path d="M11 12l8.5-8.5M16.5 6.5l2.5 2.5M14.5 8.5l2 2" />`, 16),
  sparkle: () => svg(html`<path d="M12 3.5l1.9 5.6 5.6 1.9-5.6 1.9L12 18.5l-1.9-5.6L4.5 11l5.6-1.9z" /><path d="M18.5 16.5l.7 2 2 .7-2 .7-.7 2-.7-2-2-.7 2-.7z" />`),
  trash: () => svg(html`<path d="M5 7h14M10 7V4.5h4V7M7 7l1 13h8l1-13" />`, 18),
  folder: () => svg(html`<path d="M3.5 7V18a1.5 1.5 0 0 0 1.5 1.5h14a1.5 1.5 0 0 0 1.5-1.5V9a1.5 1.5 0 0 0-1.5-1.5h-7L10 5H5A1.5 1.5 0 0 0 3.5 6.5z" />`),
  folderPlus: () => svg(html`<path d="M3.5 7V18a1.5 1.5 0 0 0 1.5 1.5h14a1.5 1.5 0 0 0 1.5-1.5V9a1.5 1.5 0 0 0-1.5-1.5h-7L10 5H5A1.5 1.5 0 0 0 3.5 6.5z" /><path d="M12 10.5v6M9 13.5h6" />`, 18),
  download: () => svg(html`<path d="M12 4v11M7 10.5l5 5 5-5" /><path d="M5 19.5h14" />`, 18),
  upload: () => svg(html`<path d="M12 15.5v-11M7 9l5-5 5 5" /><path d="M5 19.5h14" />`, 18),
  archive: () => svg(html`<rect x="4" y="4.5" width="16" height="15" rx="2" /><path d="M12 4.5v2M12 8.5v2M12 12.5v2" /><rect x="10.5" y="14.5" width="3" height="3" rx="0.8" />`, 18),
  back: () => svg(html`<path d="M19 12H5.5M11 6l-6 6 6 6" />`, 18),
  bell: () => svg(html`<path d="M6 16.5V11a6 6 0 0 1 12 0v5.5l1.5 2h-15z" /><path d="M10 20.5a2 2 0 0 0 4 0" />`),
  inbox: () => svg(html`<path d="M4 13.5l2.5-8h11l2.5 8v5a1.5 1.5 0 0 1-1.5 1.5h-13A1.5 1.5 0 0 1 4 18.5z" /><path d="M4 13.5h4.5l1 2h5l1-2H20" />`),
  list: () => svg(html`<path d="M9 7h11M9 12h11M9 17h11M4.5 7h.01M4.5 12h.01M4.5 17h.01" />`),
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
