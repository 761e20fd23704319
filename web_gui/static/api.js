// The operator API over the session cookie: JSON requests with the CSRF header, and SSE
// streams read from fetch (POST bodies and Last-Event-ID need more than EventSource offers).

const auth = { csrf: null, onSignedOut: () => {} };
const UNREACHABLE = "the service cannot be reached: check that it is running";
const OFFLINE = "the service cannot be reached: check your connection, then try again";

export class ApiError extends Error {
  constructor(status, body) {
    super(body?.error || `request failed (${status})`);
    this.status = status;
    this.body = body || {};
  }
}

// A gateway's refusal (502, 503, 504) that is not the service's own error JSON (`{"error":
// ...}`, docs/api.md "Errors") comes from a proxy in front of it: the service behind it is
// stopped or cannot be reached, and a request answered so fails as one with no answer
// (status 0). The service's own 503 (its database or Redis away) says so in JSON: it is there.
export function proxyAway(status, body) {
  return [502, 503, 504].includes(status) && typeof body?.error !== "string";
}

export function setCsrf(token) {
  auth.csrf = token;
}

export function onSignedOut(callback) {
  auth.onSignedOut = callback;
}

function headers(method, extra = {}) {
  // X-Steelframe-Client labels what the GUI files `steelframe:from-gui` (bot/filing_source.py).
  const result = { Accept: "application/json", "X-Steelframe-Client": "gui", ...extra };
  if (!["GET", "HEAD"].includes(method) && auth.csrf) result["X-CSRF-Token"] = auth.csrf;
  return result;
}

export async function request(method, path, body) {
  const init = { method, headers: headers(method), credentials: "same-origin" };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers["Content-Type"] = "application/json";
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch {
    throw new ApiError(0, { error: UNREACHABLE });
  }
  const data = await response.json().catch(() => ({}));
  if (proxyAway(response.status, data)) throw new ApiError(0, { error: UNREACHABLE });
  if (!response.ok) {
    if (response.status === 401 && path.startsWith("/api/")) auth.onSignedOut();
    throw new ApiError(response.status, data);
  }
  return data;
}

export const api = {
  get: (path) => request("GET", path),
  post: (path, body) => request("POST", path, body),
  del: (path) => request("DELETE", path),
};

// Read an SSE response: onFrame(frame, id) for each `data:` frame; returns the last id seen.
export async function readSse(response, onFrame) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let lastId = 0;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      let data = null;
      for (const line of block.split("\n")) {
        if (line.startsWith("id: ")) lastId = Number(line.slice(4)) || lastId;
        else if (line.startsWith("data: ")) data = line.slice(6);
      }
      if (data !== null) {
        let frame;
        try {
          frame = JSON.parse(data);
        } catch {
          continue;
        }
        if (onFrame(frame, lastId) === false) return lastId;
      }
    }
  }
  return lastId;
}

// A new idempotency key: one per message sent, the same when that message is sent again
// (docs/api.md, "One turn per key"). getRandomValues, not randomUUID: a page served over
// plain HTTP (a LAN address) has no randomUUID.
export function newKey() {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

export async function openStream(method, path, { body, lastEventId, signal, key } = {}) {
  const extra = { Accept: "text/event-stream" };
  if (lastEventId) extra["Last-Event-ID"] = String(lastEventId);
  if (key) extra["Idempotency-Key"] = key;
  const init = { method, headers: headers(method, extra), credentials: "same-origin", signal };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers["Content-Type"] = "application/json";
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch (err) {
    if (err?.name === "AbortError") throw err;
    throw new ApiError(0, { error: OFFLINE });
  }
  if (!response.ok) {
    const data = await response.json().catch(() => ({}));
    if (proxyAway(response.status, data)) throw new ApiError(0, { error: OFFLINE });
    // A session that ended goes back to sign-in, not to an API message in the chat.
    if (response.status === 401) auth.onSignedOut();
    throw new ApiError(response.status, data);
  }
  return response;
}
