// Usage charts drawn with uPlot (web/vendor/uplot/: the library's own minified build,
// loaded once from our origin, no CDN). Why uPlot: about 50 kB, no dependencies, canvas
// drawing that stays fast on a phone, MIT, and kept up to date by its author.
// Counts only: every figure comes from GET /api/usage/stats (never any message text).
import { html, useEffect, useRef } from '../../js/lib.js';
import { t } from '../../js/i18n.js';

let loading = null;

// The library is an IIFE that sets window.uPlot: loaded by a <script> of our origin
// (the CSP allows 'self' only), with its stylesheet, once per page life.
export function loadUplot() {
  if (window.uPlot) return Promise.resolve(window.uPlot);
  if (!loading) {
    loading = new Promise((resolve, reject) => {
      const css = document.createElement('link');
      css.rel = 'stylesheet';
      css.href = 'vendor/uplot/uPlot.min.css';
      document.head.appendChild(css);
      const own = document.createElement('link');
      own.rel = 'stylesheet';
      own.href = 'plugins/usage/usage.css';
      document.head.appendChild(own);
      const s = document.createElement('script');
      s.src = 'vendor/uplot/uPlot.iife.min.js';
      s.onload = () => resolve(window.uPlot);
      s.onerror = () => {
        loading = null;
        reject(new Error('uPlot did not load'));
      };
      document.head.appendChild(s);
    });
  }
  return loading;
}

const COLOURS = ['#2f6fde', '#d9480f', '#2b8a3e', '#9c36b5', '#e8590c', '#1098ad', '#5c940d', '#c2255c'];

// One chart: a series per member or model, the buckets' starts on the x axis.
export function Chart({ stats, of, measure, testid }) {
  const box = useRef(null);
  useEffect(() => {
    let plot = null;
    let gone = false;
    if (box.current) {
      // Drawn again for these figures: the old marks go until the new drawing is up.
      delete box.current.dataset.drawn;
      delete box.current.dataset.step;
    }
    const list = stats[of];
    const draw = (uPlot) => {
      if (gone || !box.current) return;
      const width = Math.max(240, box.current.clientWidth || 300);
      const day = stats.step === 'day';
      const opts = {
        width,
        height: 200,
        legend: { show: true },
        cursor: { drag: { x: false, y: false } },
        scales: { x: { time: true } },
        axes: [
          { values: (u, ticks) => ticks.map((s) => {
            const d = new Date(s * 1000);
            return day ? `${d.getDate()}/${d.getMonth() + 1}` : `${d.getHours()}:00`;
          }) },
          { size: 56 },
        ],
        series: [
          {},
          ...list.map((s, i) => ({
            label: s.name,
            stroke: COLOURS[i % COLOURS.length],
            fill: `${COLOURS[i % COLOURS.length]}22`,
            width: 2,
            points: { show: day },
          })),
        ],
      };
      const data = [stats.starts, ...list.map((s) => s[measure])];
      box.current.replaceChildren();
      plot = new uPlot(opts, data, box.current);
      box.current.dataset.step = stats.step; // which figures: hours of a day, days of a month
      box.current.dataset.drawn = String(list.length);
    };
    loadUplot().then(draw, () => {
      if (box.current) box.current.textContent = t('usage.chart_failed');
    });
    const resize = () => plot && box.current && plot.setSize({ width: Math.max(240, box.current.clientWidth), height: 200 });
    window.addEventListener('resize', resize);
    return () => {
      gone = true;
      window.removeEventListener('resize', resize);
      if (plot) plot.destroy();
    };
  }, [stats, of, measure]);
  if (stats[of].length === 0) {
    return html`<p class="muted" data-testid=${`${testid}-empty`}>${t('usage.nothing_yet')}</p>`;
  }
  return html`<div class="usage-chart" ref=${box} data-testid=${testid}></div>`;
}
