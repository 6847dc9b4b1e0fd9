// Injected before any page script: logs every change of the live regions, in order, and any
// Content-Security-Policy violation. Tests read window.__anuncios and window.__violacoes, and
// window.__regioes / window.__regioesNoInicio (the region nodes, their text at load): what a
// screen reader cannot tell (e2e/spoken.py hears the rest).
(function () {
  window.__anuncios = [];
  window.__violacoes = [];
  window.__regioes = {};
  document.addEventListener("securitypolicyviolation", function (e) {
    window.__violacoes.push(e.violatedDirective + " " + e.blockedURI);
  });
  function regionOf(node) {
    var el = node.nodeType === 1 ? node : node.parentElement;
    return el && el.closest ? el.closest("#anuncio, #alerta") : null;
  }
  new MutationObserver(function (records) {
    var changed = [];
    records.forEach(function (record) {
      var region = regionOf(record.target);
      if (region && changed.indexOf(region) < 0) changed.push(region);
    });
    changed.forEach(function (region) {
      // The region node must stay the one the page was born with.
      if (!window.__regioes[region.id]) window.__regioes[region.id] = region;
      var text = region.textContent.trim();
      if (text) window.__anuncios.push([region.id === "alerta" ? "alert" : "status", text]);
    });
  }).observe(document, { childList: true, characterData: true, subtree: true });
  document.addEventListener("DOMContentLoaded", function () {
    window.__regioesNoInicio = {};
    ["anuncio", "alerta"].forEach(function (id) {
      var region = document.getElementById(id);
      window.__regioesNoInicio[id] = region ? region.textContent : null;
      window.__regioes[id] = window.__regioes[id] || region;
    });
  });
})();
