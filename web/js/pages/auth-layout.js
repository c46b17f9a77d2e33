// The frame for pages shown before anyone is logged in (login, first-run
// setup): a single centred card, with theme and language still reachable.
import { html } from '../lib.js';
import { Logo } from '../components/icons.js';
import { ThemeToggle, LocalePicker } from '../components/controls.js';

export function AuthLayout({ title, subtitle, testid, wide = false, children }) {
  return html`<div class="auth" data-testid=${testid}>
    <div class="auth__tools">
      <${ThemeToggle} />
      <${LocalePicker} />
    </div>
    <main id="main" class=${`auth__card card${wide ? ' auth__card--wide' : ''}`} tabindex="-1">
      <div class="auth__brand"><${Logo} size=${44} /><span class="auth__name">Skald</span></div>
      <h1 class="auth__title">${title}</h1>
      ${subtitle && html`<p class="auth__subtitle muted">${subtitle}</p>`}
      ${children}
    </main>
  </div>`;
}
