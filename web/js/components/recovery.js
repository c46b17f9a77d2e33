// Shows a recovery code exactly once, with a copy button.
// The code is the only way back into an encrypted account whose password is
// forgotten, and the server never shows it again, so the wording is blunt and
// the user has to press an explicit button to move on.
import { html, useState, useRef } from '../lib.js';
import { t } from '../i18n.js';
import { Icon } from './icons.js';

// Select the code on screen, so it can be copied by hand if all else fails.
function selectElement(el) {
  const range = document.createRange();
  range.selectNodeContents(el);
  const sel = window.getSelection();
  sel.removeAllRanges();
  sel.addRange(range);
}

export async function copyText(text, el) {
  // navigator.clipboard only exists in secure contexts (https or localhost);
  // a household box is often reached over plain http on the LAN, so fall back
  // to selecting the text and the legacy copy command.
  if (navigator.clipboard && window.isSecureContext) {
    try {
      await navigator.clipboard.writeText(text);
      return true;
    } catch (e) {
      /* permission refused: try the fallback */
    }
  }
  if (el) {
    selectElement(el);
    return document.execCommand('copy');
  }
  return false;
}

export function RecoveryCode({ code, warning, confirmLabel, onConfirm }) {
  const [copied, setCopied] = useState(null); // null | 'ok' | 'failed'
  const codeRef = useRef(null);

  const onCopy = async () => {
    try {
      setCopied((await copyText(code, codeRef.current)) ? 'ok' : 'failed');
    } catch (e) {
      setCopied('failed');
    }
  };

  return html`<div class="recovery stack">
    <div class="notice notice--warning" role="note">${Icon.alert()}<span>${warning}</span></div>
    <div class="recovery__code-row">
      <code ref=${codeRef} class="recovery__code" aria-label=${t('recovery.code_label')} data-testid="recovery-code"
        onClick=${(e) => selectElement(e.currentTarget)}>${code}</code>
      <button type="button" class="btn btn--secondary" onClick=${onCopy} data-testid="recovery-copy">
        ${copied === 'ok' ? Icon.check() : Icon.copy()}
        <span>${copied === 'ok' ? t('recovery.copied') : t('recovery.copy')}</span>
      </button>
    </div>
    <p class="muted small recovery__status" aria-live="polite">${copied === 'failed' ? t('recovery.copy_failed') : ''}</p>
    <div class="actions">
      <button type="button" class="btn btn--primary" onClick=${onConfirm} data-testid="recovery-saved">${confirmLabel}</button>
    </div>
  </div>`;
}
