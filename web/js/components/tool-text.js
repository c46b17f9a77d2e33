// What a tool card says to a person: a plain, translated title for the tool and,
// when it failed or did not run, a sentence about what happened. The model-facing
// text (the raw tool id, the error as the model was told it) stays on the card
// behind "Technical details".
//
// Rule: a built-in tool has its own title (`tool.title.<id>`); a connector's tool
// (`mcp__<server>__<tool>`) is titled from its two names made readable ("Get
// forecast · Weather station"); anything else shows its id as words, never a
// missing-key placeholder. A failure's sentence comes from the start of the text
// the server wrote for the model (skald/agent/loop.py CUT_CALL, recovery.py,
// calls.py); an unknown text gets the general "did not work" sentence.
//
// Trap: the prefixes below copy the server's texts; when one is reworded there the
// card falls back to the general sentence. tests/test_tool_text.py checks each
// prefix still starts one of the server's constants.

import { t } from '../i18n.js';

const BUILT_IN = new Set([
  'activate_tools',
  'ask_user',
  'background_task',
  'connector_call',
  'edit_file',
  'execute_cmd',
  'execute_task',
  'generate_image',
  'glob',
  'grep',
  'install_packages',
  'list_files',
  'memory_search',
  'notify',
  'read_file',
  'schedule',
  'show_file',
  'write_file',
  'append_file',
  'insert_at_line',
  'replace_lines',
  'search_file',
  'get_outline',
]);

// (start of the model-facing text, key of the person-facing sentence)
export const SAID = [
  ['Not run: your answer reached the output limit', 'tool.said_cut'],
  ['Not run: the user stopped the turn', 'tool.said_stopped'],
  ['Not run: the approval request was still open', 'tool.said_superseded'],
  ['Not run: the turn ended before', 'tool.said_not_started'],
  ['The command was interrupted by a restart', 'tool.said_restart'],
  ['The call was interrupted by a restart', 'tool.said_restart'],
];

// "get_forecast" / "weather-station" / "getForecast" -> "Get forecast".
function words(id) {
  const text = String(id)
    .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
    .replace(/[_\-.]+/g, ' ')
    .trim()
    .toLowerCase();
  return text ? text.charAt(0).toUpperCase() + text.slice(1) : String(id);
}

export function toolTitle(name) {
  if (BUILT_IN.has(name)) return t(`tool.title.${name}`);
  const connector = /^mcp__(.+?)__(.+)$/.exec(name || '');
  if (connector) return t('tool.title_connector', { tool: words(connector[2]), server: words(connector[1]) });
  return words(name || t('chat.tool'));
}

// The sentence for a failed call's result, or null for a call that worked.
export function resultSaid(result) {
  if (!result || !result.is_error) return null;
  const text = String(result.text || '');
  const known = SAID.find(([start]) => text.startsWith(start));
  return t(known ? known[1] : 'tool.said_failed');
}
