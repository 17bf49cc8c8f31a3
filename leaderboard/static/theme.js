// The colour theme: the system's (prefers-color-scheme) unless the toggle chose one, remembered in
// the "theme" cookie for a year. Loaded in <head> so a remembered dark theme never flashes light.
// Without JavaScript the pages still follow the system theme (pure CSS).
(function () {
  var root = document.documentElement;
  if (root.hasAttribute("data-theme-lock")) return;  // a page not yet styled for dark (see base.html)
  var saved = document.cookie.match(/(?:^|;\s*)theme=(dark|light)(?:;|$)/);
  if (saved) root.setAttribute("data-theme", saved[1]);
  var query = window.matchMedia ? window.matchMedia("(prefers-color-scheme: dark)") : null;

  function current() {
    return root.getAttribute("data-theme") || (query && query.matches ? "dark" : "light");
  }
  function changed() {
    document.dispatchEvent(new CustomEvent("harness:theme", {detail: current()}));
  }
  window.harnessTheme = current;
  if (query && query.addEventListener) query.addEventListener("change", changed);

  function wire() {
    var button = document.getElementById("theme-toggle");
    if (!button) return;
    button.hidden = false;
    button.addEventListener("click", function () {
      var next = current() === "dark" ? "light" : "dark";
      root.setAttribute("data-theme", next);
      document.cookie = "theme=" + next + "; path=/; max-age=31536000; SameSite=Lax";
      changed();
    });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", wire);
  else wire();
})();
