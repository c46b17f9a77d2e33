// HTTP client for the Skald server.
// Why a wrapper: every write must carry the CSRF token, every call must send the
// session cookie, errors arrive as {"error": {code, message}} and a 401 anywhere
// means "the session is gone" — all of that is handled once, here.

let csrfToken = null;
let unauthorizedHandler = null;

// The token comes from the login/setup/me responses; it is kept in memory only
// (never in localStorage) so it dies with the tab, like the session it protects.
export function setCsrfToken(token) {
  csrfToken = token || null;
}

// Called with the ApiError when any call (except those that opt out, such as
// the login form itself) gets a 401.
export function onUnauthorized(fn) {
  unauthorizedHandler = fn;
}

export class ApiError extends Error {
  constructor(status, code, serverMessage, retryAfter) {
    super(serverMessage || code);
    this.status = status; // 0 when the server could not be reached
    this.code = code;
    this.serverMessage = serverMessage; // human-readable text from the server
    this.retryAfter = retryAfter; // seconds, from the Retry-After header (429, 503)
  }
}

const WRITE_METHODS = new Set(['POST', 'PATCH', 'PUT', 'DELETE']);

// Paths are relative ("api/...") so the UI also works behind a reverse proxy
// that mounts Skald under a sub-path.
export async function request(method, path, body, { handle401 = true } = {}) {
  const headers = { Accept: 'application/json' };
  // FormData (file uploads) sets its own multipart Content-Type with the boundary.
  // A Blob (a File) goes as it is, with its own type: a skill's ZIP.
  const isForm = (typeof FormData !== 'undefined' && body instanceof FormData)
    || (typeof Blob !== 'undefined' && body instanceof Blob);
  if (body !== undefined && !isForm) headers['Content-Type'] = 'application/json';
  if (WRITE_METHODS.has(method) && csrfToken) headers['X-CSRF-Token'] = csrfToken;

  let res;
  try {
    res = await fetch(path, {
      method,
      headers,
      body: body === undefined || isForm ? body : JSON.stringify(body),
      credentials: 'same-origin',
      cache: 'no-store',
    });
  } catch (e) {
    throw new ApiError(0, 'network', null, null);
  }

  let data = null;
  if (res.status !== 204) {
    const text = await res.text();
    if (text) {
      try {
        data = JSON.parse(text);
      } catch (e) {
        data = null; // e.g. an HTML error page from a proxy
      }
    }
  }

  if (!res.ok) {
    const err = (data && data.error) || {};
    const retry = parseRetryAfter(res.headers.get('Retry-After'));
    const error = new ApiError(res.status, err.code || `http_${res.status}`, err.message || null, retry);
    if (res.status === 401 && handle401 && unauthorizedHandler) unauthorizedHandler(error);
    throw error;
  }
  return data;
}

// A raw fetch's answer: JSON (json) or a Blob, or the ApiError its error body names.
async function readOrThrow(res, json) {
  if (!res.ok) {
    let err = {};
    try {
      err = (await res.json()).error || {};
    } catch (e) {
      err = {};
    }
    throw new ApiError(res.status, err.code || `http_${res.status}`, err.message || null, null);
  }
  return json ? res.json() : res.blob();
}

// Retry-After is either a number of seconds or an HTTP date.
function parseRetryAfter(value) {
  if (!value) return null;
  const n = Number(value);
  if (Number.isFinite(n)) return Math.max(0, Math.ceil(n));
  const when = Date.parse(value);
  return Number.isNaN(when) ? null : Math.max(0, Math.ceil((when - Date.now()) / 1000));
}

export const get = (path, opts) => request('GET', path, undefined, opts);
export const post = (path, body, opts) => request('POST', path, body, opts);
export const patch = (path, body, opts) => request('PATCH', path, body, opts);
export const del = (path, opts) => request('DELETE', path, undefined, opts);

// Thin, named helpers so pages read like the API contract.
export const api = {
  health: () => get('api/health'),
  setupStatus: () => get('api/setup'),
  setup: (body) => post('api/setup', body, { handle401: false }),
  login: (username, password) => post('api/auth/login', { username, password }, { handle401: false }),
  me: () => get('api/auth/me'),
  pages: () => get('api/pages'),
  hiddenPages: () => get('api/pages/hidden'),
  updateMe: (body) => patch('api/auth/me', body),
  logout: () => post('api/auth/logout', undefined, { handle401: false }),
  logoutAll: () => post('api/auth/logout-all'),
  changePassword: (current_password, new_password) =>
    post('api/auth/password', { current_password, new_password }),
  users: () => get('api/users'),
  createUser: (body) => post('api/users', body),
  updateUser: (id, body) => patch(`api/users/${encodeURIComponent(id)}`, body),
  deactivateUser: (id) => post(`api/users/${encodeURIComponent(id)}/deactivate`),
  activateUser: (id) => post(`api/users/${encodeURIComponent(id)}/activate`),
  deleteUser: (id) => del(`api/users/${encodeURIComponent(id)}`),
  roles: () => get('api/roles'),
  // Storage: {used, quota, disk_low} in bytes (quota 0: no limit); the admin list is counts only.
  storage: () => get('api/storage'),
  membersStorage: () => get('api/storage/members'),
  capabilities: () => get('api/capabilities'),
  createRole: (body) => post('api/roles', body),
  updateRole: (name, body) => patch(`api/roles/${encodeURIComponent(name)}`, body),

  // Chat
  conversations: () => get('api/conversations'),
  createConversation: (body = {}) => post('api/conversations', body),
  updateConversation: (id, body) => patch(`api/conversations/${encodeURIComponent(id)}`, body),
  messages: (id) => get(`api/conversations/${encodeURIComponent(id)}/messages`),
  // 202 {accepted: true} for a message, 200 {command, result} for a slash command.
  sendMessage: (id, body) => post(`api/conversations/${encodeURIComponent(id)}/messages`, body),
  resendMessage: (id, seq, body = {}) =>
    post(`api/conversations/${encodeURIComponent(id)}/messages/${encodeURIComponent(seq)}/resend`, body),
  searchChats: (q) => get(`api/chat/search?q=${encodeURIComponent(q)}`),
  stopConversation: (id) => post(`api/conversations/${encodeURIComponent(id)}/stop`),
  decideApproval: (callId, decision) => post(`api/approvals/${encodeURIComponent(callId)}`, { decision }),
  // Voice: a recorded clip (a Blob) to its transcript; text to an audio Blob.
  transcribe: async (clip) => {
    const res = await fetch('api/voice/transcribe', {
      method: 'POST',
      headers: { 'Content-Type': clip.type || 'audio/wav', Accept: 'application/json', 'X-CSRF-Token': csrfToken || '' },
      body: clip,
      credentials: 'same-origin',
    });
    return readOrThrow(res, true);
  },
  speech: async (text) => {
    const res = await fetch('api/voice/speech', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'X-CSRF-Token': csrfToken || '' },
      body: JSON.stringify({ text: text.slice(0, 4000) }),
      credentials: 'same-origin',
    });
    return readOrThrow(res, false);
  },
  upload: (conversationId, file) => {
    const form = new FormData();
    form.append('file', file, file.name);
    return post(`api/uploads?conversation_id=${encodeURIComponent(conversationId)}`, form);
  },
  chatModels: () => get('api/models'),
  voiceOffer: () => get('api/voice'),
  chatCommands: () => get('api/chat/commands'),

  // Inbox: approvals and questions waiting for this member (id == the tool call id).
  inbox: () => get('api/inbox'),
  notifications: () => get('api/notifications'),
  notificationsRead: (ids) => post('api/notifications/read', { ids }),
  notificationsReadAll: () => post('api/notifications/read-all'),
  notificationDelete: (id) => del(`api/notifications/${encodeURIComponent(id)}`),
  notificationSettings: () => get('api/notifications/settings'),
  saveNotificationSettings: (body) => request('PUT', 'api/notifications/settings', body),
  notificationTest: () => post('api/notifications/test'),
  pushKey: () => get('api/notifications/push/key'),
  pushDevices: () => get('api/notifications/push/devices'),
  pushSubscribe: (body) => post('api/notifications/push/devices', body),
  pushDevice: (id, enabled) => patch(`api/notifications/push/devices/${encodeURIComponent(id)}`, { enabled }),
  pushRemove: (id) => del(`api/notifications/push/devices/${encodeURIComponent(id)}`),
  inboxApprove: (id, bypass) =>
    post(`api/inbox/${encodeURIComponent(id)}/approve`, bypass ? { bypass } : {}),
  inboxReject: (id) => post(`api/inbox/${encodeURIComponent(id)}/reject`),
  inboxAnswer: (id, answer) => post(`api/inbox/${encodeURIComponent(id)}/answer`, { answer }),
  mySecurityGroups: () => get('api/my/security-groups'),

  // Approval rules and security groups (admin.roles)
  approvalGroups: () => get('api/approvals/groups'),
  createApprovalGroup: (body) => post('api/approvals/groups', body),
  updateApprovalGroup: (name, body) => patch(`api/approvals/groups/${encodeURIComponent(name)}`, body),
  deleteApprovalGroup: (name) => del(`api/approvals/groups/${encodeURIComponent(name)}`),
  approvalRules: () => get('api/approvals/rules'),
  createApprovalRule: (body) => post('api/approvals/rules', body),
  updateApprovalRule: (id, body) => patch(`api/approvals/rules/${encodeURIComponent(id)}`, body),
  deleteApprovalRule: (id) => del(`api/approvals/rules/${encodeURIComponent(id)}`),
  testApproval: (body) => post('api/approvals/test', body),

  // Scheduled jobs and their runs (schedule.use); admins see counts only.
  jobs: () => get('api/schedule/jobs'),
  createJob: (body) => post('api/schedule/jobs', body),
  previewSchedule: (body) => post('api/schedule/preview', body),
  jobRuns: () => get('api/schedule/runs'),
  updateJob: (id, body) => patch(`api/schedule/jobs/${encodeURIComponent(id)}`, body),
  runJob: (id) => post(`api/schedule/jobs/${encodeURIComponent(id)}/run`),
  deleteJob: (id) => del(`api/schedule/jobs/${encodeURIComponent(id)}`),
  tasks: () => get('api/schedule/tasks'),
  cancelTask: (id) => post(`api/schedule/tasks/${encodeURIComponent(id)}/cancel`),
  scheduleCounts: () => get('api/admin/schedule'),
  tokenCounts: () => get('api/admin/tokens'), // API tokens per member: counts only
  keepKey: () => get('api/schedule/keep-key'),
  setKeepKey: (enabled) => request('PUT', 'api/schedule/keep-key', { enabled }),

  // Files (capability files). Paths are agent paths: "~/notes/a.md", "docs/…".
  filePlaces: () => get('api/files/places'),
  listDir: (path) => get(`api/files/dir?path=${encodeURIComponent(path)}`),
  makeDir: (path) => post('api/file', { path, mkdir: true }),
  moveFile: (from, to) => patch('api/file', { from, to }),
  deleteFile: (path, recursive = false) =>
    del(`api/file?path=${encodeURIComponent(path)}${recursive ? '&recursive=1' : ''}`),
  uploadFiles: (dir, files) => {
    const form = new FormData();
    for (const file of files) form.append('file', file, file.name);
    return post(`api/file/upload?path=${encodeURIComponent(dir)}`, form);
  },

  // The agents this member can talk to, and their helpers (chat).
  agents: () => get('api/agents'),

  // Backups (admin.system): the schedule, the last results, the two buttons.
  // Every time zone name the server accepts (old names too), for the searchable field.
  timeZones: () => get('api/instance/timezones'),
  backups: () => get('api/backups'),
  saveBackupSettings: (body) => request('PUT', 'api/backups/settings', body),
  runBackup: () => post('api/backups/run'),
  runDrill: () => post('api/backups/drill'),
  // The guided restore: what an archive holds, then the restart into it.
  backupContents: (name) => get(`api/backups/archives/${encodeURIComponent(name)}`),
  restoreBackup: (name) => post(`api/backups/archives/${encodeURIComponent(name)}/restore`, { confirm: true }),

  // Providers and models (admin.models)
  llmKinds: () => get('api/llm/kinds'),
  checkConnection: (body) => post('api/llm/check', body),
  testProvider: (id, body = {}) => post(`api/llm/providers/${encodeURIComponent(id)}/test`, body),
  instance: () => get('api/instance'),
  updateInstance: (body) => patch('api/instance', body),
  checklist: () => get('api/setup/checklist'),
  providers: () => get('api/llm/providers'),
  createProvider: (body) => post('api/llm/providers', body),
  updateProvider: (id, body) => patch(`api/llm/providers/${encodeURIComponent(id)}`, body),
  deleteProvider: (id) => del(`api/llm/providers/${encodeURIComponent(id)}`),
  llmModels: () => get('api/llm/models'),
  createModel: (body) => post('api/llm/models', body),
  providerModels: (id) => get(`api/llm/providers/${encodeURIComponent(id)}/models`),
  updateModel: (id, body) => patch(`api/llm/models/${encodeURIComponent(id)}`, body),
  deleteModel: (id) => del(`api/llm/models/${encodeURIComponent(id)}`),
};

// Addresses the browser loads by itself (<img src>, download links): same origin,
// so the session cookie goes along and no token is needed for a GET.
export function fileUrl(path, { download = false } = {}) {
  return `api/file?path=${encodeURIComponent(path)}${download ? '&download=1' : ''}`;
}

export function zipUrl(path) {
  return `api/files/zip?path=${encodeURIComponent(path)}`;
}

// A file's content as text plus the type the server gave it. Not through
// request(): the body is the file itself, JSON only when something went wrong.
export async function fetchFile(path) {
  let res;
  try {
    res = await fetch(fileUrl(path), { credentials: 'same-origin', cache: 'no-store' });
  } catch (e) {
    throw new ApiError(0, 'network', null, null);
  }
  if (!res.ok) {
    let err = {};
    try {
      err = ((await res.json()) || {}).error || {};
    } catch (e) {
      err = {};
    }
    const error = new ApiError(res.status, err.code || `http_${res.status}`, err.message || null, null);
    if (res.status === 401 && unauthorizedHandler) unauthorizedHandler(error);
    throw error;
  }
  const type = (res.headers.get('Content-Type') || '').split(';')[0].trim().toLowerCase();
  return { type, text: await res.text() };
}
