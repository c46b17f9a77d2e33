// The conversation review's plain lines, on the member's Profile (both sides: the
// person whose conversations are reviewed, and the people who receive the reviews) and
// on the System agents page: for whom, whether an encrypted adult opted in, and every
// read of the member's messages (who, which stretch, when). Never any content.
import { html, useEffect, useState } from '../../js/lib.js';
import { t, formatDate } from '../../js/i18n.js';
import { get } from '../../js/api.js';
import { getState } from '../../js/store.js';

export function when(iso) {
  if (!iso) return t('reports.beginning');
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  return `${formatDate(iso)} ${d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' })}`;
}

export function ReviewLines({ lines }) {
  const who = (people) => people.map((p) => p.name).join(', ');
  return html`<section class="stack" data-testid="review-lines">
    <h2 class="card__title">${t('sysagents.privacy')}</h2>
    ${lines.reviewed_for.length > 0 && html`<p data-testid="review-reviewed-for">${lines.reviewed
      ? t('sysagents.reviewed_for', { names: who(lines.reviewed_for) })
      : t('sysagents.not_reviewed_encrypted', { names: who(lines.reviewed_for) })}</p>`}
    ${lines.receives.map((p) => html`<p data-testid="review-receives">${p.reviewed
      ? t('sysagents.receives', { name: p.name })
      : t('sysagents.receives_not_opted_in', { name: p.name })}</p>`)}
    ${lines.reviewed_for.length === 0 && lines.receives.length === 0 && html`<p class="muted">${t('sysagents.no_review')}</p>`}
    <ul class="stack" data-testid="review-audit">${lines.audit.map((a) => html`<li class="muted small" data-testid="review-audit-line">
      ${t(a.subject_id === getState().me.id ? 'sysagents.audit_yours' : 'sysagents.audit_line', { name: a.subject_name, from: when(a.window_start), to: when(a.window_end), reader: a.reader_name, at: when(a.at) })}
    </li>`)}</ul>
  </section>`;
}

// For the Profile page: loads the lines itself; nothing when the review concerns nobody.
export function MyReview() {
  const [lines, setLines] = useState(null);
  useEffect(() => {
    get('/api/review/lines').then(setLines, () => setLines(null));
  }, []);
  if (!lines || (lines.reviewed_for.length === 0 && lines.receives.length === 0 && lines.audit.length === 0)) return null;
  return html`<div class="card stack"><${ReviewLines} lines=${lines} /></div>`;
}
