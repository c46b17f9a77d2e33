// #/agents: the agents this member can talk to (their own assistant) and the helpers
// it may hand work to, each with an icon and a friendly description. The built-in
// agents are described in the member's language (agent.<id>.name / .description in
// web/i18n); an agent installed later shows the words of its own meta.json.
import { html, useState, useEffect } from '../../js/lib.js';
import { t, hasText } from '../../js/i18n.js';
import { getState } from '../../js/store.js';
import { api } from '../../js/api.js';
import { Icon } from '../../js/components/icons.js';
import { ErrorNotice, PageHead } from '../../js/components/form.js';

const ICONS = {
  assistant: 'sparkle',
  kid: 'sparkle',
  researcher: 'eye',
  worker: 'tool',
  'project-coordinator': 'users',
};

// An agent's own friendly words (meta.json `about`, issue 31) in the member's language,
// else in English, else the built-in translation, else its technical description.
function agentText(agent) {
  const key = `agent.${agent.id}`;
  const about = agent.about || {};
  const own = about[getState().locale] || about.en;
  return {
    name: hasText(`${key}.name`) ? t(`${key}.name`) : agent.name,
    description: own || (hasText(`${key}.description`) ? t(`${key}.description`) : agent.description),
  };
}

function AgentCard({ agent }) {
  const text = agentText(agent);
  const icon = Icon[ICONS[agent.id] || 'sparkle'];
  return html`<li class="card agent-card" data-testid="agent-card" data-agent=${agent.id} data-role=${agent.role}
      data-added=${agent.added ? 'true' : undefined}>
    <span class="agent-card__icon" aria-hidden="true" data-testid="agent-icon">${agent.icon || icon()}</span>
    <div class="stack">
      <h2 class="card__title">${text.name}</h2>
      <p class="muted" data-testid="agent-description">${text.description}</p>
    </div>
  </li>`;
}

export function AgentsPage() {
  const [agents, setAgents] = useState(null);
  const [error, setError] = useState(null);
  useEffect(() => {
    api.agents().then(setAgents, setError);
  }, []);
  let body;
  if (error) body = html`<${ErrorNotice} error=${error} testid="agents-error" />`;
  else if (!agents) body = html`<p class="muted">${t('common.loading')}</p>`;
  else {
    const chat = agents.filter((a) => a.role === 'chat');
    const helpers = agents.filter((a) => a.role === 'helper');
    body = html`<div class="stack stack--lg">
      <section class="stack">
        <h2 class="card__title">${t('agents.yours')}</h2>
        <ul class="agent-list" data-testid="agents-chat">${chat.map((a) => html`<${AgentCard} agent=${a} />`)}</ul>
      </section>
      ${helpers.length > 0 &&
      html`<section class="stack">
        <h2 class="card__title">${t('agents.helpers')}</h2>
        <p class="muted">${t('agents.helpers_lead')}</p>
        <ul class="agent-list" data-testid="agents-helpers">${helpers.map((a) => html`<${AgentCard} agent=${a} />`)}</ul>
      </section>`}
    </div>`;
  }
  return html`<div class="page" data-testid="agents-page">
    <${PageHead} title=${t('agents.title')} lead=${t('agents.lead')} />
    ${body}
  </div>`;
}
