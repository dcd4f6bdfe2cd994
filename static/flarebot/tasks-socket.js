// The Tasks section's socket (PROTOCOL.md "The Tasks socket"): `tasks_changed` says a task or a
// run may have changed (a run started or ended, a fire armed the next occurrence, a change made
// elsewhere), and the section reads its tasks again. Nothing is replayed, so a socket that comes
// back after a drop reads them again too. It reconnects with a growing pause; a session that
// ended (4001 twice in a row) or a refusal (4003) stops it, and the page's next call says so.

const RETRY_MIN_MS = 500;
const RETRY_MAX_MS = 10000;
const SETTLED_MS = 500; // a refused socket is closed at once; one open this long was admitted
const CLOSE_SESSION_EXPIRED = 4001;
const CLOSE_REFUSED = 4003;

/** Follow the owner's tasks: `changed()` whenever they may have changed. */
export function followTasks(changed) {
  let attempt = 0;
  let ended = 0; // 4001s in a row: one is a re-keyed session (a password change here), two a sign-out
  let dropped = false;

  function connect() {
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    const socket = new WebSocket(`${scheme}//${location.host}/ws/tasks/`);
    let settled = 0;
    socket.onopen = () => {
      settled = setTimeout(() => {
        attempt = 0;
        ended = 0;
        if (dropped) changed(); // what happened while it was away
        dropped = false;
      }, SETTLED_MS);
    };
    socket.onmessage = (message) => {
      let frame;
      try {
        frame = JSON.parse(message.data);
      } catch {
        return;
      }
      if (frame.type === "tasks_changed") changed();
    };
    socket.onclose = (event) => {
      clearTimeout(settled);
      dropped = true;
      if (event.code === CLOSE_REFUSED) return;
      if (event.code === CLOSE_SESSION_EXPIRED && ++ended > 1) return;
      const pause = Math.min(RETRY_MAX_MS, RETRY_MIN_MS * 2 ** attempt) * (0.75 + Math.random() * 0.5);
      attempt += 1;
      setTimeout(connect, pause);
    };
  }

  connect();
}
