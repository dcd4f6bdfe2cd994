// Flarebot's service worker (served from the site's root, so its scope is every page).
//
// It keeps the shell available offline and nothing private: the static assets (network
// first, the last copy kept for when the network is gone) and one offline page, shown for
// a page that cannot be reached. Pages themselves are never stored (they carry the
// owner's session and form tokens), and neither is anything under /api/ or /ws/: those go
// to the network untouched, so an answer is always the server's own.

const CACHE = "flarebot-shell-v1";
const OFFLINE_PAGE = "/offline.html";
const SHELL = [
  OFFLINE_PAGE,
  "/static/flarebot/base.css",
  "/static/flarebot/offline.css",
  "/static/flarebot/offline.js",
  "/static/flarebot/icons/icon-192.png",
  "/manifest.webmanifest",
  "/favicon.ico",
];
// Never answered from here: the API, sockets, the admin and everything that signs in or out.
const PASSED_THROUGH = ["/api/", "/ws/", "/admin/", "/login/", "/logout/", "/setup/", "/status/"];

self.addEventListener("install", (event) => {
  // What is passed through never wakes this worker: the browser sends it straight to the
  // network (the static routing API, where the browser has it). This also keeps a request
  // a leaving page sends with `keepalive` (a deletion after its Undo) from being lost with
  // the page.
  if (event.addRoutes) {
    event.addRoutes(
      PASSED_THROUGH.map((prefix) => ({
        condition: { urlPattern: new URLPattern({ pathname: `${prefix}*` }) },
        source: "network",
      })),
    );
  }
  event.waitUntil(
    caches
      .open(CACHE)
      .then((cache) => cache.addAll(SHELL.map((url) => new Request(url, { cache: "reload" }))))
      .then(() => self.skipWaiting()),
  );
});

self.addEventListener("activate", (event) => {
  event.waitUntil(
    caches
      .keys()
      .then((names) => Promise.all(names.filter((name) => name !== CACHE).map((name) => caches.delete(name))))
      .then(() => self.clients.claim()),
  );
});

self.addEventListener("fetch", (event) => {
  const request = event.request;
  if (request.method !== "GET") return;
  const url = new URL(request.url);
  if (url.origin !== self.location.origin) return;
  if (PASSED_THROUGH.some((prefix) => url.pathname.startsWith(prefix))) return;
  if (request.mode === "navigate") {
    // A page: always the network's; the offline page only when the network is gone.
    event.respondWith(fetch(request).catch(() => caches.match(OFFLINE_PAGE)));
    return;
  }
  if (url.pathname.startsWith("/static/") || SHELL.includes(url.pathname)) {
    event.respondWith(networkFirst(request));
  }
});

async function networkFirst(request) {
  const cache = await caches.open(CACHE);
  try {
    const response = await fetch(request);
    if (response.ok) cache.put(request, response.clone());
    return response;
  } catch (error) {
    const kept = await cache.match(request, { ignoreSearch: true });
    if (kept) return kept;
    throw error;
  }
}
