// #/overview — a quiet page of shortcuts for full-mode accounts: the chat,
// the profile, the household pages the account may use and, for admins, the
// server's health. (The home page itself, #/, is the chat.)
import { html, useEffect, useState } from '../../js/lib.js';
import { hasText, t } from '../../js/i18n.js';
import { api } from '../../js/api.js';
import { getState } from '../../js/store.js';
import { Icon } from '../../js/components/icons.js';
import { DoctorWords } from '../../js/components/form.js';

function greetingKey(date = new Date()) {
  const h = date.getHours();
  if (h < 5) return 'home.greeting_evening';
  if (h < 12) return 'home.greeting_morning';
  if (h < 18) return 'home.greeting_afternoon';
  return 'home.greeting_evening';
}

// What an administrator still has to do before the household can use Skald,
// from the same checks as `skald doctor` (GET /api/setup/checklist). Each item
// says what is missing and how to fix it (a link to the page that does it, else the
// command); the list goes away when it is empty.
const CHECK_LINKS = { models: '#/admin/models', backup: '#/admin/backups' };

function Checklist({ list }) {
  if (!list || list.items.length === 0) return null;
  return html`<section class="card checklist" data-testid="setup-checklist" aria-labelledby="checklist-title">
    <h2 class="card__title" id="checklist-title">${t('checklist.title')}</h2>
    <p class="muted">${t('checklist.lead')}</p>
    <ul class="checklist__items">
      ${list.items.map(
        (i) => html`<li class=${`checklist__item checklist__item--${i.status}`} data-testid="setup-checklist-item" data-name=${i.name}>
          <strong>${t(`checklist.item_${i.name}`)}</strong>
          <span class="muted small" data-testid="setup-checklist-why">${hasText(`checklist.why_${i.name}`) ? t(`checklist.why_${i.name}`) : i.finding}</span>
          ${hasText(`checklist.why_${i.name}`) &&
          html`<${DoctorWords} text=${i.finding} />`}
          ${CHECK_LINKS[i.name]
            ? html`<a class="small" href=${CHECK_LINKS[i.name]} data-testid="setup-checklist-open">${t('checklist.open')}</a>`
            : i.fix && html`<span class="small">${t('checklist.fix')} <code>${i.fix}</code></span>`}
        </li>`,
      )}
    </ul>
    <a class="btn btn--secondary btn--small" href="#/welcome" data-testid="setup-checklist-wizard">${t('setup.resume')}</a>
  </section>`;
}

// Admins see whether the server is healthy; everyone else does not need to.
// "Everything is working" only when the chat can work (a model is set up).
function HealthCard({ list }) {
  const [health, setHealth] = useState(getState().health);
  useEffect(() => {
    api.health().then(setHealth, () => setHealth({ status: 'unreachable', reasons: [] }));
  }, []);
  if (!health) return null;
  const ok = health.status === 'ok' && (!list || list.chat_ready);
  return html`<section class=${`card health ${ok ? 'health--ok' : 'health--bad'}`} data-testid="home-health"
      data-status=${health.status}>
    <h2 class="card__title">${t('home.health_title')}</h2>
    <p class="health__status">
      <span class="dot" aria-hidden="true"></span>
      ${ok
        ? t('home.health_ok')
        : health.status === 'ok'
          ? t('checklist.not_ready')
          : health.status === 'degraded'
            ? t('home.health_degraded')
            : t('error.network')}
    </p>
    ${health.reasons && health.reasons.length > 0 &&
    html`<ul class="health__reasons">${health.reasons.map((r) => html`<li>${r}</li>`)}</ul>`}
    ${health.version && html`<p class="muted small">${t('home.version', { version: health.version })}</p>`}
  </section>`;
}

// The usage feature's dashboard (health, charts, what waits, the first steps), when
// its module loads; a module that fails leaves the Overview as it was.
function FeatureDashboard() {
  const [Dash, setDash] = useState(null);
  useEffect(() => {
    import('../usage/dashboard.js').then((m) => setDash(() => m.Dashboard), () => setDash(null));
  }, []);
  return Dash ? html`<${Dash} />` : null;
}

// One shortcut card of the Overview: an icon, the page's name and a line about it.
function LinkCard({ href, testid, icon, title, line }) {
  return html`<a class="card card--link" href=${href} data-testid=${testid}>
    <span class="card__icon">${icon}</span>
    <span class="card__title">${title}</span>
    <span class="muted">${line}</span>
  </a>`;
}

// The administration pages the Overview leads to, each shown to a role with its
// capability (and any of them makes the member an administrator here):
// [capability, address, test id, icon, title key, line key].
const ADMIN_LINKS = [
  ['admin.users', '#/admin/users', 'home-link-users', Icon.users, 'nav.users', 'home.users_body'],
  ['admin.roles', '#/admin/roles', 'home-link-roles', Icon.shield, 'nav.roles', 'home.roles_body'],
  ['admin.models', '#/admin/models', 'home-link-models', Icon.cpu, 'nav.models', 'home.models_body'],
];

export function HomePage() {
  const { me } = getState();
  const simple = me.ui_mode === 'simple';
  const caps = new Set(me.capabilities || []);
  const name = me.display_name || me.username;
  const isAdmin = !simple && ADMIN_LINKS.some(([cap]) => caps.has(cap));
  const [list, setList] = useState(null);
  useEffect(() => {
    if (!simple && caps.has('admin.system')) api.checklist().then(setList, () => setList(null));
  }, []);

  return html`<div class="page" data-testid="home-page" data-checklist=${list ? 'loaded' : 'none'}>
    <header class="page__head">
      <h1 class="page__title" data-testid="home-greeting">${t(greetingKey(), { name })}</h1>
      <p class="page__lead muted">${simple ? t('home.lead_simple') : t('home.lead')}</p>
    </header>

    <${Checklist} list=${list} />
    <${FeatureDashboard} />

    <a class="card card--accent card--link-row coming" href="#/" data-testid="home-link-chat">
      <span class="coming__icon">${Icon.chat()}</span>
      <div>
        <h2 class="card__title">${t('home.chat_title')}</h2>
        <p>${t('home.chat_body')}</p>
      </div>
    </a>

    <div class="cards">
      <${LinkCard} href="#/profile" testid="home-link-profile" icon=${me.encrypted ? Icon.lock() : Icon.user()} title=${t('nav.profile')}
        line=${simple ? t('home.profile_simple') : me.encrypted ? t('home.profile_encrypted') : t('home.profile_plain')} />
      ${!simple &&
      ADMIN_LINKS.filter(([cap]) => caps.has(cap)).map(
        ([, href, testid, icon, title, line]) => html`<${LinkCard} key=${href} href=${href} testid=${testid} icon=${icon()}
          title=${t(title)} line=${t(line)} />`,
      )}
    </div>

    ${isAdmin && html`<${HealthCard} list=${list} />`}
  </div>`;
}
