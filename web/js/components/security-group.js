// The shield in the chat composer: which security group the conversation runs
// under (it decides which tool calls need an approval). Only shown when the
// member's role allows more than one group. Other tabs and devices follow
// through the conversation_updated event the server sends after the change.
import { html, useEffect, useState } from '../lib.js';
import { t, groupLabel } from '../i18n.js';
import { api } from '../api.js';
import { Icon } from './icons.js';
import { errorText } from './form.js';
import { setConversationSecurityGroup } from '../chat.js';

let cached = null; // promise of {allowed, default}

export function mySecurityGroups({ fresh = false } = {}) {
  if (!cached || fresh) {
    cached = api.mySecurityGroups().catch((e) => {
      cached = null;
      throw e;
    });
  }
  return cached;
}

export function SecurityGroupControl({ conv }) {
  const [groups, setGroups] = useState(null);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);

  useEffect(() => {
    let live = true;
    mySecurityGroups().then(
      (g) => live && setGroups(g),
      () => live && setGroups(null),
    );
    return () => {
      live = false;
    };
  }, []);

  const allowed = (groups && groups.allowed) || [];
  if (!conv || allowed.length < 2) return null;
  const value = conv.security_group || groups.default || allowed[0].name;
  const current = allowed.find((g) => g.name === value);
  const onChange = async (e) => {
    const next = e.target.value;
    setBusy(true);
    setError(null);
    try {
      await setConversationSecurityGroup(conv.id, next);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return html`<span class="shield-picker" title=${error ? errorText(error) : t('chat.security_group_hint')}
      data-testid="chat-security-group" data-value=${value} data-error=${error ? 'true' : undefined}>
    <span class=${`shield-picker__icon${error ? ' is-error' : ''}`} aria-hidden="true">${Icon.shield()}</span>
    <label class="visually-hidden" for="chat-security-group">${t('chat.security_group')}</label>
    <select id="chat-security-group" class="select shield-picker__select" value=${value} disabled=${busy}
        onChange=${onChange} data-testid="chat-security-group-select"
        aria-description=${current ? groupLabel(current) : undefined}>
      ${allowed.map((g) => html`<option value=${g.name}>${groupLabel(g)}</option>`)}
      ${!current && html`<option value=${value}>${value}</option>`}
    </select>
  </span>`;
}
