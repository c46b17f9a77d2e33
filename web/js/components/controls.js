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
// `locale` "" (the profile's "household's language"): the account keeps none of its own
// and follows the household's; the server answers which one that is (me.locale).
export async function changeLocale(locale) {
  if (locale) await setLocale(locale);
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
  const { locale, me } = getState();
  // The profile's picker also offers "the household's language" (issue 31).
  const follows = !compact && me && me.locale_own === false;
  return html`<div class=${`locale-picker${compact ? ' locale-picker--compact' : ''}`}>
    <label for=${id} class=${compact ? 'visually-hidden' : 'field__label'}>${t('common.language')}</label>
    ${compact && html`<span class="locale-picker__icon">${Icon.globe()}</span>`}
    <select id=${id} class="select" value=${follows ? '' : locale} data-testid=${testid}
      onChange=${(e) => changeLocale(e.target.value)}>
      ${!compact && me && html`<option value="" data-testid="locale-household">${t('common.language_household')}</option>`}
      ${LOCALES.map((l) => html`<option value=${l} lang=${l}>${LOCALE_NAMES[l]}</option>`)}
    </select>
  </div>`;
}
