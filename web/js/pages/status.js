// Pages for routes the user cannot use or that do not exist. Reaching an
// admin page without the capability is possible by typing the URL; we say so
// instead of showing a half-empty page (the server refuses the data anyway).
import { html } from '../lib.js';
import { t } from '../i18n.js';
import { Icon } from '../components/icons.js';

export function NotAllowedPage() {
  return html`<div class="page status-page" data-testid="not-allowed">
    <span class="status-page__icon">${Icon.shield()}</span>
    <h1 class="page__title">${t('status.not_allowed_title')}</h1>
    <p class="muted">${t('status.not_allowed_body')}</p>
    <a class="btn btn--primary" href="#/">${t('status.go_home')}</a>
  </div>`;
}

export function NotFoundPage() {
  return html`<div class="page status-page" data-testid="not-found">
    <span class="status-page__icon">${Icon.info()}</span>
    <h1 class="page__title">${t('status.not_found_title')}</h1>
    <p class="muted">${t('status.not_found_body')}</p>
    <a class="btn btn--primary" href="#/">${t('status.go_home')}</a>
  </div>`;
}
