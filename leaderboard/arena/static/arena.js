// Arena pages: draw the plotly figures the server embedded as JSON, and submit the task picker on
// change. Served from /arena/assets (the leaderboard's CSP allows scripts from 'self' only).
(function () {
  function draw() {
    document.querySelectorAll("select[data-autosubmit]").forEach(function (el) {
      el.addEventListener("change", function () { el.form.submit(); });
    });
    document.querySelectorAll("button[data-mesh]").forEach(function (btn) {
      btn.addEventListener("click", function () {
        var view = btn.nextElementSibling;
        btn.disabled = true;
        fetch(btn.getAttribute("data-mesh")).then(function (r) { return r.json(); }).then(function (fig) {
          if (!window.Plotly || !fig.data) { btn.textContent = fig.error || "3D view unavailable"; return; }
          btn.style.display = "none";
          window.Plotly.newPlot(view, fig.data, fig.layout, {displaylogo: false, responsive: true});
        });
      });
    });
    var form = document.getElementById("vote-form");
    if (form) {
      document.addEventListener("keydown", function (e) {
        if (e.ctrlKey || e.metaKey || e.altKey || /INPUT|TEXTAREA|SELECT/.test(e.target.tagName)) return;
        var ids = {"1": "vote-left", "2": "vote-right", "3": "vote-tie", "4": "vote-both-bad"};
        if (ids[e.key]) { e.preventDefault(); document.getElementById(ids[e.key]).click(); }
        else if (e.key === "s" || e.key === "S") { e.preventDefault(); document.getElementById("skip").click(); }
      });
    }
    if (!window.Plotly) return;
    document.querySelectorAll("[data-arena-figure]").forEach(function (el) {
      var src = document.getElementById(el.getAttribute("data-arena-figure"));
      if (!src) return;
      var fig = JSON.parse(src.textContent);
      window.Plotly.newPlot(el, fig.data, fig.layout, {responsive: true, displaylogo: false});
    });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", draw);
  else draw();
})();
