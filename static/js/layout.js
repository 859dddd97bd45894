// Layout helpers that need no framework (docs/pages.md).
// 1. The nav menu is sent open (so it works without script); on a phone it starts closed.
// 2. Every table sits in its own scroll box: a labelled region a keyboard can reach (tabindex=0), so a
//    wide table scrolls inside itself instead of widening the page. Tables already in .table-wrap only
//    get the label and the tab stop; the label is the table's caption, else the nearest heading above.
(function () {
  "use strict";

  function labelFor(table) {
    var cap = table.querySelector("caption");
    if (cap && cap.textContent.trim()) return cap.textContent.trim();
    if (table.getAttribute("aria-label")) return table.getAttribute("aria-label");
    var node = table;
    while (node && node !== document.body) {
      var prev = node.previousElementSibling;
      while (prev) {
        if (/^H[1-6]$/.test(prev.tagName)) return prev.textContent.trim();
        var h = prev.querySelector && prev.querySelector("h1,h2,h3,h4,h5,h6");
        if (h) return h.textContent.trim();
        prev = prev.previousElementSibling;
      }
      node = node.parentElement;
    }
    return "Table";
  }

  function boxTables(root) {
    var tables = (root.querySelectorAll ? root : document).querySelectorAll("main table");
    if (root.tagName === "TABLE") tables = [root];
    Array.prototype.forEach.call(tables, function (table) {
      var box = table.parentElement;
      if (!box.classList.contains("table-wrap")) {
        box = document.createElement("div");
        box.className = "table-wrap";
        table.parentNode.insertBefore(box, table);
        box.appendChild(table);
      }
      if (!box.hasAttribute("tabindex")) box.setAttribute("tabindex", "0");
      if (!box.hasAttribute("role")) box.setAttribute("role", "region");
      if (!box.hasAttribute("aria-label")) box.setAttribute("aria-label", labelFor(table) + " (scrolls sideways)");
    });
  }

  function start() {
    var menu = document.querySelector("details.nav-menu");
    if (menu && window.matchMedia("(max-width: 767.98px)").matches) menu.removeAttribute("open");
    boxTables(document);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
  // htmx swaps in fresh tables (polled panels, the intake sizing panel).
  document.addEventListener("htmx:load", function (e) { boxTables(e.target); });
})();
