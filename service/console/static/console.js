// QingLong console: refresh the page's <main> in place every data-refresh-s
// seconds (no full reload, no flash); paused while the tab is hidden. Read-only:
// it only GETs the page it is on.
(function () {
  "use strict";
  var seconds = parseInt(document.body.getAttribute("data-refresh-s") || "0", 10);
  if (!(seconds > 0) || !window.fetch || !window.DOMParser) { return; }
  var busy = false;
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
  }
  function refresh() {
    if (busy || document.hidden) { return; }
    var active = document.activeElement;
    if (active && (active.tagName === "INPUT" || active.tagName === "SELECT")) { return; }
    busy = true;
    fetch(window.location.href, { credentials: "same-origin", cache: "no-store" })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) { if (html) { swap(html); } })
      .catch(function () { /* keep the last page; try again next tick */ })
      .then(function () { busy = false; });
  }
  window.setInterval(refresh, seconds * 1000);
}());
