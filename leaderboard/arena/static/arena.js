// Arena pages: draw the plotly figures the server embedded as JSON, and submit the task picker on
// change. Served from /arena/assets (the leaderboard's CSP allows scripts from 'self' only).
(function () {
  function draw() {
    document.querySelectorAll("select[data-autosubmit]").forEach(function (el) {
      el.addEventListener("change", function () { el.form.submit(); });
    });
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
