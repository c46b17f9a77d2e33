// The two controls every screen has, logged in or not: theme and language.
import { html, useState, useEffect } from '../lib.js';
import { t, LOCALES, LOCALE_NAMES, setLocale } from '../i18n.js';
import { effectiveTheme, toggleTheme, onThemeChange } from '../theme.js';
import { getState } from '../store.js';
import { api } from '../api.js';
import { setMe } from '../session.js';
import { Icon } from './icons.js';
import { useId } from './form.js';

export function ThemeToggle() {
  const [theme, setTheme] = useState(effectiveTheme());
  useEffect(() => onThemeChange(setTheme), []);
  const label = theme === 'dark' ? t('theme.to_light') : t('theme.to_dark');
  return html`<button type="button" class="icon-btn" onClick=${toggleTheme} aria-label=${label} title=${label}
    data-testid="theme-toggle" data-theme=${theme}>
    ${theme === 'dark' ? Icon.sun() : Icon.moon()}
  </button>`;
}

// Changing the language while logged in saves it on the account, so the next
// device the user logs in on speaks the same language.
export async function changeLocale(locale) {
  await setLocale(locale);
  if (getState().me) {
    try {
      const me = await api.updateMe({ locale });
      await setMe(me);
    } catch (e) {
      console.warn('could not save the language on the account', e);
    }
  }
}

export function LocalePicker({ testid = 'locale-picker', compact = true }) {
  const id = useId('locale');
  const { locale } = getState();
  return html`<div class=${`locale-picker${compact ? ' locale-picker--compact' : ''}`}>
    <label for=${id} class=${compact ? 'visually-hidden' : 'field__label'}>${t('common.language')}</label>
    ${compact && html`<span class="locale-picker__icon">${Icon.globe()}</span>`}
    <select id=${id} class="select" value=${locale} data-testid=${testid}
      onChange=${(e) => changeLocale(e.target.value)}>
      ${LOCALES.map((l) => html`<option value=${l} lang=${l}>${LOCALE_NAMES[l]}</option>`)}
    </select>
  </div>`;
}
