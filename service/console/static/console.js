// QingLong console: refresh the page's <main> in place every data-refresh-s
// seconds (no full reload, no flash); paused while the tab is hidden. Read-only:
// it only GETs the page it is on. A refresh that fails (an error answer or no
// answer) keeps the last page and shows "stale since HH:MM:SS" (UTC, the time
// of the last good refresh) until one succeeds again.
(function () {
  "use strict";
  var seconds = parseInt(document.body.getAttribute("data-refresh-s") || "0", 10);
  if (!(seconds > 0) || !window.fetch || !window.DOMParser) { return; }
  var busy = false;
  var lastGood = new Date();
  function hhmmss(date) { return date.toISOString().substring(11, 19) + " UTC"; }
  function markStale(stale) {
    var marker = document.getElementById("stale");
    if (!marker) { return; }
    marker.textContent = stale ? "stale since " + hhmmss(lastGood) : "";
    marker.hidden = !stale;
    document.body.setAttribute("data-stale", stale ? "true" : "false");
  }
  function swap(html) {
    var doc = new DOMParser().parseFromString(html, "text/html");
    var fresh = doc.getElementById("main");
    var current = document.getElementById("main");
    if (!fresh || !current) { return; }
    current.replaceWith(document.importNode(fresh, true));
    var stamp = doc.getElementById("generated");
    var here = document.getElementById("generated");
    if (stamp && here) { here.textContent = stamp.textContent; }
    document.body.setAttribute("data-refreshed", String(Date.now()));
    lastGood = new Date();
    markStale(false);
  }
  function refresh() {
    if (busy || document.hidden) { return; }
    var active = document.activeElement;
    if (active && (active.tagName === "INPUT" || active.tagName === "SELECT")) { return; }
    busy = true;
    fetch(window.location.href, { credentials: "same-origin", cache: "no-store" })
      .then(function (r) {
        if (!r.ok) { throw new Error("HTTP " + r.status); }
        return r.text();
      })
      .then(swap)
      .catch(function () { markStale(true); /* keep the last page; retry next tick */ })
      .then(function () { busy = false; });
  }
  window.setInterval(refresh, seconds * 1000);
}());
