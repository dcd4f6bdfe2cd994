// One JSON call to Flarebot's API, shared by the pages. The contract's error shape
// {"error": {"code", "message"}} becomes an ApiError; a 401 (the session ended) sends the
// page to sign-in, once, and comes back here afterwards. A network failure or an abort
// rejects as fetch does, so callers can tell "unreachable" from "refused". No call waits
// forever: one the server has not answered within its time bound (20 s unless the caller
// says otherwise) is abandoned, its late answer never read, and it fails as `timeout`.

export const ANSWER_WITHIN_MS = 20_000;

let leaving = false;

// Every page carries Django's token in its sign-out form.
const csrfToken = () => document.querySelector("input[name=csrfmiddlewaretoken]")?.value || "";

export class ApiError extends Error {
  // `details`: the whole error object, with any fields beyond code and message (a 409's `current`).
  constructor(status, code, message, details = {}) {
    super(message);
    this.status = status;
    this.code = code;
    this.details = details;
  }
}

/** Go to the sign-in page, coming back to this page afterwards. */
export function toSignIn() {
  if (leaving) return;
  leaving = true;
  location.assign(`/login/?next=${encodeURIComponent(location.pathname + location.search)}`);
}

export async function api(path, { method = "GET", body, signal, keepalive = false, within = ANSWER_WITHIN_MS } = {}) {
  const headers = { Accept: "application/json" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (method !== "GET") headers["X-CSRFToken"] = csrfToken();
  const bound = AbortSignal.timeout(within);
  try {
    return await answered(
      await fetch(path, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: signal ? AbortSignal.any([signal, bound]) : bound,
        keepalive,
        credentials: "same-origin",
        cache: "no-store",
      }),
    );
  } catch (error) {
    if (error && error.name === "TimeoutError") {
      throw new ApiError(0, "timeout", `The server did not answer within ${within / 1000} s. Try again.`);
    }
    throw error;
  }
}

// A body that is not JSON reads as null; one cut off by the time bound or an abort fails.
function unreadableBody(error) {
  if (error && (error.name === "TimeoutError" || error.name === "AbortError")) throw error;
  return null;
}

async function answered(response) {
  if (response.status === 401) {
    toSignIn();
    throw new ApiError(401, "session_expired", "Your session has ended. Sign in again.");
  }
  const data = response.status === 204 ? null : await response.json().catch(unreadableBody);
  if (!response.ok) {
    const details = data?.error || {};
    const { code, message } = details;
    throw new ApiError(response.status, code, message || `The server answered with status ${response.status}.`, details);
  }
  return data;
}

/** A settings-style call: (method, path, body), with a network failure said in the pages' words. */
export async function call(method, path, body, options = {}) {
  try {
    return await api(path, { method, body, ...options });
  } catch (error) {
    if (error instanceof ApiError) throw error;
    throw new ApiError(0, "unreachable", "Flarebot could not be reached. Check the connection and try again.");
  }
}

/** Show a message in an element; `kind` ("error", "ok", ...) styles it. */
export function say(element, text, kind) {
  element.textContent = text;
  element.dataset.kind = kind || "";
}
