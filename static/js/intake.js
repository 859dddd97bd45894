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
