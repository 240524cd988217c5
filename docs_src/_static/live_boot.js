/* Loads the in-page models' module (_static/live/live.js) on the pages that have a live box, and only over http:
 * browsers refuse ES modules on pages opened from disk, so there the boxes say how to serve the site instead. */
(function () {
  "use strict";
  const BOXES = ".live-translate, .live-parse, .live-explorer";
  function boot() {
    const boxes = document.querySelectorAll(BOXES);
    if (!boxes.length) return;
    if (location.protocol === "file:") {
      boxes.forEach(e => {
        e.textContent = "The in-page models need the site served over http: for example `python -m http.server` in docs/, " +
          "then open http://127.0.0.1:8000/. Pages opened from disk cannot load them.";
      });
      return;
    }
    const me = document.querySelector('script[src*="live_boot.js"]');
    const s = document.createElement("script");
    s.type = "module";
    s.src = new URL("live/live.js", me ? me.src : location.href).href;
    document.head.appendChild(s);
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", boot); else boot();
})();
