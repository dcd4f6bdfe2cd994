// The offline page: go back to the page the owner wanted as soon as Flarebot answers again
// (the network returning, or the server; `/status/` is public and never kept by the worker).

const RETRY_MS = 5000;
const retry = document.getElementById("offline-retry");
retry.href = location.pathname + location.search + location.hash;

async function backWhenReachable() {
  try {
    const answer = await fetch("/status/", { cache: "no-store" });
    if (answer.ok) location.reload();
  } catch {
    // still unreachable: the next try, or the `online` event, asks again
  }
}

window.addEventListener("online", backWhenReachable);
setInterval(backWhenReachable, RETRY_MS);
