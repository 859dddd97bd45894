// Small page actions named by data-* attributes, so that no template needs inline script or
// on*= handlers (the Content-Security-Policy runs only this site's files: config/csp.py).
//   data-confirm="question"  on a button or link: asks first, cancels the click on "Cancel";
//                            on a form: asks before it submits.
//   data-print               on a link or button: opens the print dialog.
//   data-htmx-trigger="#target event"  on a button: sends htmx `event` to `#target`.
(function () {
  "use strict";

  document.addEventListener("click", function (e) {
    var el = e.target.closest && e.target.closest("[data-confirm], [data-print], [data-htmx-trigger]");
    if (!el || el.tagName === "FORM") return;
    if (el.hasAttribute("data-confirm") && !window.confirm(el.getAttribute("data-confirm"))) {
      e.preventDefault();
      e.stopImmediatePropagation();
      return;
    }
    if (el.hasAttribute("data-print")) {
      e.preventDefault();
      window.print();
    }
    var trigger = el.getAttribute("data-htmx-trigger");
    if (trigger && typeof htmx !== "undefined") {
      var parts = trigger.trim().split(/\s+/);
      htmx.trigger(parts[0], parts[1]);
    }
  }, true);

  document.addEventListener("submit", function (e) {
    var form = e.target;
    if (form.hasAttribute && form.hasAttribute("data-confirm") && !window.confirm(form.getAttribute("data-confirm"))) {
      e.preventDefault();
      e.stopImmediatePropagation();
    }
  }, true);
})();
