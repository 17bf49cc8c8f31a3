// A running run's page updates itself: every few seconds it reads /api/runs/{id}/progress (counts
// straight from the store) and fills the elements marked data-live; when the run stops running the
// page reloads once to show its final metrics. Without JavaScript a <noscript> refresh does the same.
(function () {
  var box = document.querySelector("[data-progress]");
  if (!box) return;
  var url = box.getAttribute("data-progress");
  var delay = 2000;

  function num(v, digits) {
    if (v === null || v === undefined) return "–";
    if (Number.isInteger(v)) return v.toLocaleString("en-US");
    return v.toFixed(digits === undefined ? 3 : digits);
  }
  function fixed(v) { return v === null || v === undefined ? "–" : v.toFixed(3); }
  function duration(s) {
    if (s === null || s === undefined) return "–";
    if (s < 90) return Math.round(s) + " s";
    if (s < 5400) return Math.round(s / 60) + " min";
    return (s / 3600).toFixed(1) + " h";
  }
  function set(name, text) {
    document.querySelectorAll('[data-live="' + name + '"]').forEach(function (el) { el.textContent = text; });
  }

  function show(p) {
    set("done", num(p.done));
    set("n_samples", num(p.n_samples));
    set("errors", num(p.errors));
    set("leased", num(p.leased));
    set("pending", num(p.pending));
    set("scored", num(p.n_scored));
    set("value", fixed(p.value));  // a mean: always three decimals, as the server writes it (1.000, not 1)
    set("ci", p.ci_low === null ? "" : "[" + fixed(p.ci_low) + ", " + fixed(p.ci_high) + "]");
    set("rate", p.rate_per_s === null ? "–" : num(p.rate_per_s, 2) + " / s");
    set("eta", duration(p.eta_s));
    set("status", p.status);
    var bar = document.querySelector("[data-live-bar]");
    if (bar && p.n_samples) bar.style.width = Math.min(100, 100 * p.done / p.n_samples) + "%";
  }

  function tick() {
    fetch(url, {cache: "no-store"}).then(function (r) {
      if (!r.ok) throw new Error(r.status);
      return r.json();
    }).then(function (p) {
      show(p);
      delay = 2000;
      if (p.status !== "running") { setTimeout(function () { window.location.reload(); }, 1500); return; }
      setTimeout(tick, delay);
    }).catch(function () {
      delay = Math.min(delay * 2, 30000);  // the server is away: back off, keep trying
      setTimeout(tick, delay);
    });
  }
  setTimeout(tick, delay);
})();
