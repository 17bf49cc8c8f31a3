// Draws every chart whose figure JSON the server embedded (<script type="application/json">).
// Pages are complete without this file: the tables carry the same numbers.
(function () {
  function draw() {
    if (!window.Plotly) return;
    document.querySelectorAll("[data-figure]").forEach(function (el) {
      var src = document.getElementById(el.getAttribute("data-figure"));
      if (!src) return;
      var fig = JSON.parse(src.textContent);
      window.Plotly.newPlot(el, fig.data, fig.layout, {responsive: true, displaylogo: false});
    });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", draw);
  else draw();
})();
