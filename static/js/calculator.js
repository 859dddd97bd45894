// The sizing calculator: the accelerator list follows the model, offering only accelerators with a
// measured point for it (the map is the page's json_script "accelerators-by-model").
(function () {
  "use strict";

  function start() {
    var source = document.getElementById("accelerators-by-model");
    var model = document.getElementById("id_model");
    var acc = document.getElementById("id_accelerator");
    if (!source || !model || !acc) return;
    var byModel = JSON.parse(source.textContent);
    var follow = function () {
      var ok = new Set(byModel[model.value] || []);
      Array.prototype.forEach.call(acc.options, function (o) {
        var show = o.value === "" || ok.has(o.value);
        o.hidden = !show;
        o.disabled = !show;
      });
      if (acc.selectedOptions[0] && acc.selectedOptions[0].disabled) acc.value = "";
    };
    model.addEventListener("change", follow);
    follow();
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
