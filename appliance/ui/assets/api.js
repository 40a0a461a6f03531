// Calls to the appliance's API: JSON in and out, the token on a 401, RFC 9457 problems as errors.
// The token (asked for once, kept in sessionStorage for this tab) goes out as `Authorization: Bearer`, never in a URL.

const TOKEN_KEY = "kumiho-ce.token";
let asking = null; // one token dialog at a time, whatever number of calls answered 401

export class ApiError extends Error {
  constructor(status, detail, problem) {
    super(detail);
    this.status = status;
    this.problem = problem || null;
  }
}

// The API's paths from its OpenAPI document, read once: a 404 on a path the document does not describe means the
// route is missing (an appliance without that part), not that the memory asked for is.
let described = null;

function describedPaths() {
  if (!described) {
    described = fetch("/api/schema/openapi.json", { headers: authHeaders() })
      .then((response) => (response.ok ? response.json() : null))
      .then((spec) => (spec && spec.paths ? Object.keys(spec.paths).map((template) => new RegExp(
        `^${template.replace(/[.*+?^$()|[\]\\]/g, "\\$&").replace(/\{[^}]+\}/g, "[^/]+")}/?$`)) : null))
      .catch(() => null);
  }
  return described;
}

export async function isDescribed(pathname) {
  const patterns = await describedPaths();
  return patterns === null ? null : patterns.some((pattern) => pattern.test(pathname));
}

export function token() {
  return window.sessionStorage.getItem(TOKEN_KEY);
}

export function authHeaders(extra = {}) {
  const headers = { Accept: "application/json", ...extra };
  const value = token();
  if (value) headers.Authorization = `Bearer ${value}`;
  return headers;
}

function askToken() {
  if (asking) return asking;
  const dialog = document.getElementById("token-dialog");
  const input = document.getElementById("token-input");
  asking = new Promise((resolve) => {
    const cancel = document.getElementById("token-cancel");
    const done = (value) => {
      dialog.removeEventListener("close", onClose);
      cancel.removeEventListener("click", onCancel);
      asking = null;
      resolve(value);
    };
    const onClose = () => done(dialog.returnValue === "ok" && input.value.trim() ? input.value.trim() : null);
    const onCancel = () => { dialog.returnValue = "cancel"; dialog.close(); };
    dialog.addEventListener("close", onClose);
    cancel.addEventListener("click", onCancel);
    input.value = "";
    dialog.returnValue = "";
    dialog.showModal();
    input.focus();
  });
  return asking;
}

// `fetch` with the token; on 401 asks for it once and tries again. Returns the Response.
export async function authorizedFetch(path, init = {}) {
  let response = await fetch(path, { ...init, headers: authHeaders(init.headers || {}) });
  if (response.status === 401) {
    window.sessionStorage.removeItem(TOKEN_KEY);
    const given = await askToken();
    if (!given) throw new ApiError(401, "this appliance needs its token; reload the page to enter it");
    window.sessionStorage.setItem(TOKEN_KEY, given);
    response = await fetch(path, { ...init, headers: authHeaders(init.headers || {}) });
    if (response.status === 401) {
      window.sessionStorage.removeItem(TOKEN_KEY);
      throw new ApiError(401, "the appliance refused that token");
    }
  }
  return response;
}

async function problemOf(response) {
  let body = null;
  try { body = await response.json(); } catch { /* not JSON: say the status */ }
  if (body && typeof body.detail === "string") return new ApiError(response.status, body.detail, body);
  if (body && body.error && typeof body.error.message === "string") {
    return new ApiError(response.status, body.error.message, { code: body.error.code, field: body.error.field });
  }
  return new ApiError(response.status, `HTTP ${response.status}`);
}

// The first of `paths` the appliance serves (a route moved in a newer version keeps working against an older one).
export async function apiFirst(paths, options) {
  for (const [index, path] of paths.entries()) {
    try {
      return await api(path, options);
    } catch (error) {
      if (!error.missingRoute || index === paths.length - 1) throw error;
    }
  }
  return null;
}

// GET (or `method`) `path` with `query` (undefined/empty values left out); the parsed JSON or an ApiError.
export async function api(path, { query, method = "GET", body } = {}) {
  const url = new URL(path, window.location.origin);
  for (const [key, value] of Object.entries(query || {})) {
    if (value === undefined || value === null || value === "") continue;
    for (const one of Array.isArray(value) ? value : [value]) url.searchParams.append(key, String(one));
  }
  const init = { method };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers = { "Content-Type": "application/json" };
  }
  const response = await authorizedFetch(url.pathname + url.search, init);
  if (!response.ok) {
    const error = await problemOf(response);
    const known = response.status === 404 ? await isDescribed(url.pathname) : true;
    error.missingRoute = response.status === 405 || response.status === 501 || known === false;
    throw error;
  }
  if (response.status === 204) return null;
  return response.json();
}
