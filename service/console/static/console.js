// QingLong console: refresh the page's <main> in place every data-refresh-s
// seconds (no full reload, no flash); paused while the tab is hidden. Read-only:
// it only GETs the page it is on. A refresh that fails (an error answer or no
// answer) keeps the last page and shows "stale since HH:MM:SS" (UTC, the time
// of the last good refresh) until one succeeds again.
//
// The run page's live log (#log with data-follow="true"): about once a second it
// asks /runs/<id>/log?attempt=N&offset=K (same origin, same access as the
// page) for what was stored since, and appends it as text (never as markup: it
// is the command's output). When the attempt ended and all was read it shows
// the truncated/incomplete line, if any, and stops.
(function () {
  "use strict";
  if (!window.fetch) { return; }
  var busy = false;
  function attr(node, name) { return node.getAttribute(name) || ""; }
  function follow() {
    var log = document.getElementById("log");
    if (busy || document.hidden || !log || attr(log, "data-follow") !== "true") { return; }
    var offset = attr(log, "data-next-offset");
    var attempt = attr(log, "data-attempt");
    var url = "/runs/" + encodeURIComponent(attr(log, "data-run")) + "/log?attempt=" +
      encodeURIComponent(attempt) + "&offset=" + encodeURIComponent(offset);
    busy = true;
    fetch(url, { credentials: "same-origin", cache: "no-store" })
      .then(function (r) {
        if (!r.ok) { throw new Error("HTTP " + r.status); }
        return r.json();
      })
      .then(function (page) {
        var now = document.getElementById("log");
        // The page was refreshed meanwhile with another state: skip this answer.
        if (!now || attr(now, "data-next-offset") !== offset ||
            attr(now, "data-attempt") !== attempt) { return; }
        if (page.text) { now.appendChild(document.createTextNode(page.text)); }
        now.setAttribute("data-next-offset", String(page.nextOffset));
        var state = document.getElementById("log-state");
        if (state) {
          state.textContent = page.storedBytes + " bytes stored · " + (page.ended ?
            "the attempt ended" : "running: new output appears here as it is stored");
        }
        if (page.ended && page.nextOffset >= page.storedBytes) {
          now.setAttribute("data-follow", "false");
          var trailer = document.getElementById("log-trailer");
          if (trailer && page.trailer) {
            trailer.textContent = page.trailer;
            trailer.hidden = false;
          }
        } else if (page.nextOffset < page.storedBytes) {
          window.setTimeout(follow, 0);
        }
      })
      .catch(function () { /* keep what is shown; the next tick asks again */ })
      .then(function () { busy = false; });
  }
  window.setInterval(follow, 1000);
}());

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
