// The launch request's edit page (templates/portal/intake/edit.html).
(function () {
  "use strict";

  // The first autosave of a new request created its draft: the form now sizes, submits and deletes it.
  document.addEventListener("lr-created", function (e) {
    var form = document.getElementById("lr-form");
    if (!form) return;
    form.setAttribute("hx-post", e.detail.sizing);
    form.setAttribute("action", e.detail.submit);
    var del = document.getElementById("delete-draft");
    if (del) {
      del.setAttribute("formaction", e.detail.delete);
      del.hidden = false;
    }
    htmx.process(form);
    // The availability now follows the live sizing's answers (its `sized` event), not every keystroke.
    var rows = document.getElementById("availability");
    if (rows) {
      rows.setAttribute("hx-trigger", "sized from:body");
      htmx.process(rows);
    }
    htmx.trigger(form, "change");
  });

  // The heading follows the title as it is typed (the draft saves it a moment later).
  function start() {
    var title = document.getElementById("id_title");
    var heading = document.getElementById("lr-heading");
    if (!title || !heading) return;
    title.addEventListener("input", function (e) {
      heading.textContent = e.target.value.trim() || "Untitled launch";
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();

// "Ask in <region> instead" and "File against <pool>" (templates/portal/intake/_availability.html): the
// request moves to the alternative's region (a pool named: filed against that pool, another accelerator
// there; a region only: the pool rule picks), and to the first date it fits there when that is later than
// the launch date; the change autosaves and re-sizes like any edit.
document.addEventListener("click", function (e) {
  var btn = e.target.closest ? e.target.closest("button.alt-region, button.alt-pool") : null;
  if (!btn) return;
  var form = document.getElementById("lr-form");
  if (!form) return;
  form.querySelectorAll("input[name=regions]").forEach(function (box) {
    box.checked = box.value === btn.dataset.region;
  });
  var pool = form.querySelector("input[name=proposed_pool]");
  if (pool) pool.value = btn.dataset.pool || "";
  var launch = document.getElementById("id_launch_date");
  var from = btn.dataset.from;
  if (launch && from && (!launch.value || launch.value < from)) {
    var end = document.getElementById("id_end_date");
    if (end && end.value && launch.value) {
      // Keep the window's length: the end moves with the start.
      var days = (Date.parse(end.value) - Date.parse(launch.value)) / 86400000;
      end.value = new Date(Date.parse(from) + days * 86400000).toISOString().slice(0, 10);
    }
    launch.value = from;
  }
  htmx.trigger(form, "change"); // re-size and re-read the rows
  var save = document.getElementById("autosave");
  if (save) htmx.trigger(save, "save-now");
});
