// Renders every <script type="application/json" class="plotly-fig" data-target="ID"> into the
// element with that id. Figures are built server-side (portal/charts/); this file only draws.
(function () {
  "use strict";

  function render(root) {
    if (typeof Plotly === "undefined") return;
    (root || document).querySelectorAll('script.plotly-fig[type="application/json"]').forEach(function (el) {
      var target = document.getElementById(el.dataset.target);
      if (!target) return;
      var fig;
      try {
        fig = JSON.parse(el.textContent);
      } catch (err) {
        console.error("plotly-fig: bad JSON for #" + el.dataset.target, err);
        return;
      }
      Plotly.react(target, fig.data || [], fig.layout || {}, { displayModeBar: false, responsive: true });
    });
  }

  document.addEventListener("DOMContentLoaded", function () { render(document); });
  // htmx swaps replace chart containers (inner or outer swaps): redraw; Plotly.react only diffs.
  document.addEventListener("htmx:afterSettle", function () { render(document); });
  window.headroomCharts = { render: render };
})();
