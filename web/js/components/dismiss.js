// useDismiss: close an open menu or panel on a press outside it or on Escape,
// the way every menu people know behaves.
// Trap: a panel whose buttons re-render themselves away (mark read) must listen on
// 'pointerdown', not 'click': by the time the click reaches the document the target
// is no longer inside the panel, and the panel would close under the user's finger.
// The event's path, not contains(): a click that swaps its own button (rename) has a
// target no longer in the document by the time this runs.
// A layout effect, so the listeners are there as soon as the panel is: Preact runs a
// plain effect after the next frame (up to 100 ms later in a busy or headless browser),
// and an Escape pressed in between was lost (the phone-screen browser test caught it).
// The click that opened the panel may reach the new document listener on its way up:
// `root` holds the toggle too, so that click is inside and closes nothing.
import { useLayoutEffect } from '../lib.js';

export function useDismiss(open, close, root, event = 'click') {
  useLayoutEffect(() => {
    if (!open) return undefined;
    const onDoc = (e) => root.current && !e.composedPath().includes(root.current) && close();
    const onKey = (e) => e.key === 'Escape' && close();
    document.addEventListener(event, onDoc);
    document.addEventListener('keydown', onKey);
    return () => {
      document.removeEventListener(event, onDoc);
      document.removeEventListener('keydown', onKey);
    };
  }, [open]);
}
