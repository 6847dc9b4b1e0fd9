// Injected (after the vendored Virtual Screen Reader) before any page script: a virtual screen
// reader listens to the page from DOMContentLoaded on, and window.__ouvinte.heard() returns what
// a person hears, in order: the phrase read when focus moves ("textbox, E-mail, required") and
// each live-region announcement ("polite: …" for role=status, "assertive: …" for role=alert).
//
// The library logs one phrase per DOM mutation inside a live region, reading the region's text
// when it gets to it. A screen reader hears the accessibility tree after the page is done with a
// task: a region written twice in one task is read once, with its last text, and a region
// emptied is silent. So the phrases logged while one task runs are one moment: in it each region
// keeps only its last phrase (in the place of that last write), and an empty one is dropped.
// Focus phrases are kept as they are. The library's own reading of the page's first node, when
// it starts, is not something a person asked to hear and is left out.
(function () {
  "use strict";
  if (window.__ouvinte) return;
  var LIVE = /^(polite|assertive): ?/;
  var heard = [];
  var moment = null;
  var raw = [];

  function endMoment() {
    var phrases = moment;
    moment = null;
    phrases.forEach(function (item) {
      var live = LIVE.exec(item);
      if (live && item.slice(live[0].length).trim() === "") return;
      heard.push(item);
    });
  }

  function note(phrase) {
    raw.push(phrase);
    if (moment === null) {
      moment = [];
      setTimeout(endMoment, 0);
    }
    var live = LIVE.exec(phrase);
    if (live) {
      var region = live[1];
      moment = moment.filter(function (item) {
        var earlier = LIVE.exec(item);
        return !(earlier && earlier[1] === region);
      });
    }
    moment.push(phrase);
  }

  var state = { started: false, heard: function () { return heard.slice(); } };
  // Everything the library logged, one entry per mutation, before the moments are applied.
  state.raw = function () { return raw.slice(); };
  window.__ouvinte = state;

  // Reading order: a second reader walks the element from its first node, one "next" at a time
  // (what a person hears reading on with the arrow key), until it comes round again. It does
  // not move focus and leaves the listening log alone.
  state.readThrough = async function (selector) {
    var container = document.querySelector(selector);
    if (!container) throw new Error("nothing matches " + selector);
    var reader = new VirtualScreenReader.Virtual();
    await reader.start({ container: container });
    var first = reader.activeNode;
    for (var step = 0; step < 5000; step++) {
      await reader.next();
      if (reader.activeNode === first) break;
    }
    var phrases = (await reader.spokenPhraseLog()).slice(0, -1); // the last is the first again
    await reader.stop();
    return phrases;
  };

  async function start() {
    var reader = VirtualScreenReader.virtual; // the vendored file, just above
    await reader.start({ container: document.body });
    // spokenPhraseLog() hands back the library's own array: every later phrase is pushed there.
    var log = await reader.spokenPhraseLog();
    log.push = function () {
      for (var i = 0; i < arguments.length; i++) note(String(arguments[i]));
      return Array.prototype.push.apply(this, arguments);
    };
    state.started = true;
  }

  if (document.body) start();
  else document.addEventListener("DOMContentLoaded", start);
})();
