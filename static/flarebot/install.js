// Every page: register the service worker (webroot/sw.js) that makes Flarebot installable
// and keeps its shell available offline. Browsers without one, or on an insecure origin,
// simply go without.

if ("serviceWorker" in navigator && window.isSecureContext) {
  navigator.serviceWorker.register("/sw.js", { scope: "/" }).catch(() => {});
}
