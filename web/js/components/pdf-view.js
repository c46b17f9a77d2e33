// PDF pages drawn on canvases by the vendored pdf.js (web/vendor/pdfjs/, see
// vendor/README.md). The library is only loaded when a PDF is opened: it is
// large, and no other page needs it.
//
// Under the strict CSP: the module and its worker come from our own origin
// ('self'), `isEvalSupported: false` keeps pdf.js from compiling font glyphs
// with `new Function`, and only canvases are used (no text or annotation
// layers, which would bring their own style sheets and links from the file).
import { html, useEffect, useRef, useState } from '../lib.js';
import { t } from '../i18n.js';
import { ApiError } from '../api.js';

const MAX_PAGES = 60; // a very long document is better read after a download
const MAX_BYTES = 40 * 1024 * 1024;

let library = null;

function loadLibrary() {
  if (!library) {
    library = import('../../vendor/pdfjs/pdf.min.mjs').then((pdfjs) => {
      pdfjs.GlobalWorkerOptions.workerSrc = new URL('../../vendor/pdfjs/pdf.worker.min.mjs', import.meta.url).href;
      return pdfjs;
    });
    library.catch(() => {
      library = null; // let a later attempt try again
    });
  }
  return library;
}

async function fetchBytes(url) {
  let res;
  try {
    res = await fetch(url, { credentials: 'same-origin', cache: 'no-store' });
  } catch (e) {
    throw new ApiError(0, 'network', null, null);
  }
  if (!res.ok) throw new ApiError(res.status, `http_${res.status}`, null, null);
  return new Uint8Array(await res.arrayBuffer());
}

// Props: url (same-origin address of the PDF), size (bytes, if known). When the
// document cannot be shown, a notice says so (the viewer's Download stays there).
export function PdfView({ url, size }) {
  const box = useRef(null);
  const [state, setState] = useState({ status: 'loading', pages: 0, shown: 0 });

  useEffect(() => {
    let cancelled = false;
    let task = null;
    const container = box.current;
    container.textContent = '';

    (async () => {
      if (size && size > MAX_BYTES) throw new Error('too large');
      const [pdfjs, data] = await Promise.all([loadLibrary(), fetchBytes(url)]);
      if (cancelled) return;
      task = pdfjs.getDocument({ data, isEvalSupported: false, enableXfa: false });
      const doc = await task.promise;
      if (cancelled) return;
      const count = Math.min(doc.numPages, MAX_PAGES);
      setState({ status: 'loading', pages: doc.numPages, shown: 0 });
      const ratio = window.devicePixelRatio || 1;
      for (let n = 1; n <= count; n += 1) {
        const page = await doc.getPage(n);
        if (cancelled) return;
        const base = page.getViewport({ scale: 1 });
        const width = Math.max(200, Math.min(container.clientWidth || base.width, 1200));
        const viewport = page.getViewport({ scale: width / base.width });
        const canvas = document.createElement('canvas');
        canvas.className = 'pdf-view__page';
        canvas.width = Math.floor(viewport.width * ratio);
        canvas.height = Math.floor(viewport.height * ratio);
        // CSSOM, not a style attribute: allowed by the CSP (style-src 'self').
        canvas.style.width = `${Math.floor(viewport.width)}px`;
        canvas.setAttribute('role', 'img');
        canvas.setAttribute('aria-label', t('files.pdf_page', { n: String(n), count: String(doc.numPages) }));
        canvas.dataset.testid = 'files-pdf-page';
        container.appendChild(canvas);
        await page.render({
          canvasContext: canvas.getContext('2d'),
          viewport,
          transform: ratio !== 1 ? [ratio, 0, 0, ratio, 0, 0] : undefined,
        }).promise;
        page.cleanup();
        if (cancelled) return;
        setState({ status: n === count ? 'ready' : 'loading', pages: doc.numPages, shown: n });
      }
    })().catch((e) => {
      if (!cancelled) {
        console.warn('PDF not shown', e);
        setState({ status: 'error', pages: 0, shown: 0 });
      }
    });

    return () => {
      cancelled = true;
      // The loading task owns the document and its worker; destroying it frees both.
      if (task) task.destroy().catch(() => {});
    };
  }, [url]);

  return html`<div class="pdf-view" data-testid="files-viewer-pdf" data-status=${state.status}
      data-pages=${String(state.pages)}>
    ${state.status === 'loading' && state.shown === 0 &&
    html`<p class="muted" role="status" data-testid="files-viewer-loading">${t('common.loading')}</p>`}
    ${state.status === 'error' &&
    html`<p class="notice notice--warning" data-testid="files-pdf-error">${t('files.pdf_failed')}</p>`}
    <div class="pdf-view__pages" ref=${box}></div>
    ${state.pages > MAX_PAGES && state.status === 'ready' &&
    html`<p class="muted small">${t('files.pdf_more', { count: String(state.pages - MAX_PAGES) })}</p>`}
  </div>`;
}
