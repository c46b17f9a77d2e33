// Modal dialog built on the native <dialog> element: showModal() gives us the
// focus trap, the inert background and Escape handling for free, which is
// both less code and more accessible than a hand-made overlay.
import { html, useLayoutEffect, useRef } from '../lib.js';
import { Icon } from './icons.js';
import { t } from '../i18n.js';

// Props: title, onClose, testid, dismissable (default true: Escape and the
// close button work; false for dialogs the user must answer explicitly, such
// as the one-time recovery code), wide, children.
export function Dialog({ title, onClose, testid, dismissable = true, wide = false, children }) {
  const ref = useRef(null);
  // The latest props, read by the listener below: the effect must run only
  // once, because closing and re-opening the dialog on every re-render would
  // move the focus away from the field the user is typing in.
  const latest = useRef({ onClose, dismissable });
  latest.current = { onClose, dismissable };

  // Layout effect: open before the first paint, so there is no flash of a
  // closed dialog.
  useLayoutEffect(() => {
    const el = ref.current;
    let mounted = true;
    if (!el.open) el.showModal();
    const onCancel = (ev) => {
      ev.preventDefault(); // we close through state, never behind Preact's back
      const { dismissable: canDismiss, onClose: close } = latest.current;
      if (canDismiss && close) close();
    };
    // Browsers may still close a modal natively (e.g. a second Escape in a
    // row ignores preventDefault). Keep state and screen in agreement: a
    // dismissable dialog reports it, a must-answer one opens again.
    const onNativeClose = () => {
      if (!mounted) return;
      const { dismissable: canDismiss, onClose: close } = latest.current;
      if (canDismiss) {
        if (close) close();
      } else {
        el.showModal();
      }
    };
    el.addEventListener('cancel', onCancel);
    el.addEventListener('close', onNativeClose);
    return () => {
      mounted = false;
      el.removeEventListener('cancel', onCancel);
      el.removeEventListener('close', onNativeClose);
      if (el.open) el.close();
    };
  }, []);

  const titleId = `dlg-${testid || 'x'}-title`;
  return html`<dialog ref=${ref} class=${`dialog${wide ? ' dialog--wide' : ''}`} data-testid=${testid}
      aria-labelledby=${titleId}>
    <div class="dialog__head">
      <h2 id=${titleId} class="dialog__title">${title}</h2>
      ${dismissable &&
      html`<button type="button" class="icon-btn" aria-label=${t('common.close')} onClick=${onClose}
        data-testid="dialog-close">${Icon.close()}</button>`}
    </div>
    <div class="dialog__body">${children}</div>
  </dialog>`;
}

// "Are you sure?" for destructive actions. `danger` paints the confirm button red.
export function ConfirmDialog({ title, message, confirmLabel, onConfirm, onCancel, danger, busy, error }) {
  return html`<${Dialog} title=${title} onClose=${onCancel} testid="confirm-dialog">
    <div class="stack">
      ${message}
      ${error && html`<p class="notice notice--error" role="alert" data-testid="confirm-error">${error}</p>`}
      <div class="actions">
        <button type="button" class="btn btn--ghost" onClick=${onCancel} data-testid="confirm-cancel">
          ${t('common.cancel')}
        </button>
        <button type="button" class=${`btn ${danger ? 'btn--danger' : 'btn--primary'}`} disabled=${busy}
          onClick=${onConfirm} data-testid="confirm-ok">${confirmLabel}</button>
      </div>
    </div>
  <//>`;
}
