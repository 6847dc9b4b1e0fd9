// Convites: the page's live behaviour on top of htmx and its SSE extension.
//
// Every row arrives as server-rendered HTML (_invite_row.html) — from the page, a POST
// response, a slow re-check or an SSE event — and goes through placeRow(). Its data-* attributes
// carry the event id, the status and the sentence to announce, so no wording is built here.
//
// Announcements: each (invite, event id, sentence) is spoken once. The tab remembers what it
// spoke; localStorage remembers across reloads and tabs, so a reconnect, a reload or a second
// tab never repeats an old announcement. Background updates never move focus.
(function () {
  "use strict";

  var STORE_PREFIX = "convites:anunciado:";
  var STORE_LIMIT = 200;
  var spokenHere = new Map();
  var slowTimers = new Map();

  function byId(id) {
    return document.getElementById(id);
  }

  // --- announcing -------------------------------------------------------------------------

  // One region speaks at a time: the other is emptied, so the page never shows an old
  // message next to a new one (emptying a region is silent).
  function speak(regionName, text) {
    var region = byId(regionName === "alert" ? "alerta" : "anuncio");
    var other = byId(regionName === "alert" ? "anuncio" : "alerta");
    if (!region) return;
    if (other) other.textContent = "";
    region.textContent = text;
  }

  // Sentences are spoken in order, with a pause between them. Two changes of a live region in
  // the same moment reach a screen reader as one (the last): the person's own "Recebemos,
  // enviando…" and a stream message held during the request (the paused notice) used to land
  // in one task, and only the notice was heard.
  var SAY_GAP_MILLISECONDS = 400;
  var sayQueue = [];
  var sayTimer = null;
  var quietAt = 0;

  function say(regionName, text) {
    if (!text) return;
    sayQueue.push([regionName, text]);
    if (sayTimer === null) sayTimer = setTimeout(sayNext, Math.max(0, quietAt - Date.now()));
  }

  function sayNext() {
    sayTimer = null;
    var next = sayQueue.shift();
    if (!next) return;
    speak(next[0], next[1]);
    quietAt = Date.now() + SAY_GAP_MILLISECONDS;
    if (sayQueue.length) sayTimer = setTimeout(sayNext, SAY_GAP_MILLISECONDS);
  }

  function stored(key) {
    try {
      return JSON.parse(window.localStorage.getItem(STORE_PREFIX + key) || "null");
    } catch (error) {
      return null;
    }
  }

  function remember(key, mark) {
    try {
      window.localStorage.setItem(STORE_PREFIX + key, JSON.stringify(mark));
      pruneStore();
    } catch (error) {
      // Storage full or denied: this tab still remembers, other tabs may repeat once.
    }
  }

  function pruneStore() {
    var keys = [];
    for (var i = 0; i < window.localStorage.length; i++) {
      var name = window.localStorage.key(i);
      if (name && name.indexOf(STORE_PREFIX) === 0) keys.push(name);
    }
    if (keys.length <= STORE_LIMIT) return;
    keys.sort(function (a, b) {
      return (JSON.parse(window.localStorage.getItem(a)).at || 0) -
        (JSON.parse(window.localStorage.getItem(b)).at || 0);
    });
    keys.slice(0, keys.length - STORE_LIMIT).forEach(function (name) {
      window.localStorage.removeItem(name);
    });
  }

  // A row is heard when what it says changes: an older event, or a newer one of the same round
  // that says the same (a reminder's outcome on an answered invite), adds nothing to hear. A new
  // round (Reenviar) may say the same again and is heard: a batch row's answers are its only
  // sentences, so "recusou" after "recusou" is news.
  function alreadySaid(mark, event, text, round) {
    if (!mark) return false;
    // A mark stored before rounds were remembered has none: its round is taken as this one.
    var sameRound = mark.rodada === undefined || mark.rodada === round;
    return mark.evento > event || (mark.texto === text && sameRound);
  }

  // A row new to this tab may be another tab's own action: the stream can reach this tab a
  // moment before that tab has its answer and claims the sentence. Wait that moment first; a
  // newer event for the row in the meantime makes the old sentence moot.
  var NEW_ROW_GRACE_MILLISECONDS = 500;

  // ownAction: the person just pressed a button in this tab; say it even if another tab did.
  // isNew: the row was not on this page until now.
  function sendingPaused() {
    return document.body.dataset.envio === "pausado";
  }

  // A batch's row is silent (its summary speaks) but for the person's own press on it, and
  // for what that press sent: a press that put the row back in the queue (Reenviar, Tentar de
  // novo, Corrigir) is followed in this tab to where it ends, so it is heard to its "enviado"
  // (or why not) even when the batch's end repeats its last sentence and is not said again.
  // key → the round the press started; let go once its end is said.
  var followedRounds = new Map();

  function announceRow(row, ownAction, isNew) {
    var key = row.dataset.convite;
    var event = Number(row.dataset.evento || 0);
    var round = Number(row.dataset.rodada || 0);
    // A pendente row says what the person sees: while sending is paused, that it waits.
    var text = (sendingPaused() && row.dataset.anuncioPausado) || row.dataset.anuncio;
    var region = row.dataset.anuncioEm;
    var followed = !ownAction && followedRounds.get(key) === round;
    if (ownAction && row.dataset.status === "pendente") followedRounds.set(key, round);
    else if (ownAction || followedRounds.get(key) !== round) followedRounds.delete(key);
    if (!text && row.dataset.anuncioProprio && (ownAction || followed)) {
      text = (sendingPaused() && row.dataset.anuncioProprioPausado) || row.dataset.anuncioProprio;
      region = row.dataset.anuncioProprioEm;
    }
    // Followed to where the press ends: the send (enviando) or a retry on its way (pendente
    // again) is not its end.
    var underWay = row.dataset.status === "pendente" || row.dataset.status === "enviando";
    if (followed && !underWay) followedRounds.delete(key);
    if (!text) return;
    if (alreadySaid(spokenHere.get(key), event, text, round)) return;
    var mark = { evento: event, texto: text, rodada: round, at: Date.now() };
    spokenHere.set(key, mark);
    // A tab in the background says nothing (and leaves the sentence to the tab in front).
    if (!ownAction && document.visibilityState === "hidden") return;
    var claim = key + ":" + event + ":" + text;
    if (ownAction) {
      // The person just acted here: acknowledge it here, and keep other tabs from repeating it.
      remember(key, mark);
      say(region, text);
      exclusively(claim, null);
      return;
    }
    function sayOnce() {
      exclusively(claim, function () {
        if (alreadySaid(stored(key), event, text, round)) return;
        remember(key, mark);
        say(region, text);
      });
    }
    if (!isNew) {
      sayOnce();
      return;
    }
    setTimeout(function () {
      if (spokenHere.get(key) === mark) sayOnce();
    }, NEW_ROW_GRACE_MILLISECONDS);
  }

  // Two tabs get the same event at the same moment, and localStorage does not reach the other
  // tab at once. A Web Lock named for the sentence is granted to one tab only; it holds it a
  // while, until the localStorage mark has certainly arrived everywhere. Without Web Locks
  // (old browsers, plain-http hosts) two tabs in front may both speak a new event.
  var CLAIM_MILLISECONDS = 10000;

  function exclusively(name, step) {
    if (!(navigator.locks && navigator.locks.request)) {
      if (step) step();
      return;
    }
    navigator.locks.request("convites:" + name, { ifAvailable: true }, function (lock) {
      if (!lock) return null;
      if (step) step();
      return new Promise(function (resolve) { setTimeout(resolve, CLAIM_MILLISECONDS); });
    });
  }

  // --- rows -------------------------------------------------------------------------------

  function parseRow(html) {
    var template = document.createElement("template");
    template.innerHTML = html;
    return template.content.querySelector("li.convite");
  }

  function isNewer(incoming, existing) {
    var now = Number(incoming.dataset.evento || 0);
    var before = Number(existing.dataset.evento || 0);
    if (now !== before) return now > before;
    // Same event, new words: a pendente row that became slow.
    return incoming.dataset.anuncio !== existing.dataset.anuncio;
  }

  function replaceKeepingFocus(existing, incoming) {
    var active = document.activeElement;
    var hadFocus = active && existing.contains(active);
    var focusKey = hadFocus ? active.getAttribute("data-foco") : null;
    existing.replaceWith(incoming);
    if (!hadFocus) return;
    // The focused control may be gone (a pressed "Tentar de novo") or hidden (in a panel that
    // closed: "Mudar horário" done), and focusing one does nothing: keep focus in the same row.
    var targets = [
      focusKey && incoming.querySelector('[data-foco="' + focusKey + '"]'),
      incoming.querySelector('[data-foco="link"]'),
    ];
    for (var i = 0; i < targets.length; i++) {
      if (!targets[i]) continue;
      targets[i].focus({ preventScroll: true });
      if (document.activeElement === targets[i]) return;
    }
  }

  // A filtered list ("?estado=aceitos") takes in new rows of its states only; a row already
  // shown stays and changes in place.
  function fitsFilter(list, row) {
    var only = list.dataset.estados;
    return !only || only.split(" ").indexOf(row.dataset.status) !== -1;
  }

  // The summary line above the list is read again after rows change: silently (it is not a
  // live region), once for a burst of changes, and a failed read just leaves the old line (the
  // next change reads it again). A plain fetch: an htmx request would hold the stream's
  // messages and speak its errors.
  var summaryTimer = null;

  function rowsChanged() {
    if (!byId("resumo-convites")) return;
    clearTimeout(summaryTimer);
    summaryTimer = setTimeout(refreshSummary, 700);
  }

  function refreshSummary() {
    fetch("/convites/resumo", {
      headers: { "Accept": "text/html" },
      credentials: "same-origin",
    }).then(function (response) {
      if (!response.ok) throw new Error("status " + response.status);
      return response.text();
    }).then(function (html) {
      var template = document.createElement("template");
      template.innerHTML = html;
      var incoming = template.content.querySelector("#resumo-convites");
      var existing = byId("resumo-convites");
      if (incoming && existing) existing.replaceWith(incoming);
    }).catch(function () {});
  }

  function placeRow(html, ownAction) {
    var incoming = parseRow(html);
    var list = byId("lista-convites");
    if (!incoming || !list) return null;
    // The row's next placement answers a press on it, whichever way it comes (pressedRows).
    if (pressedRows.delete(incoming.dataset.convite)) ownAction = true;
    var existing = byId(incoming.id);
    var isNew = !existing;
    if (existing) {
      if (!isNewer(incoming, existing)) return existing;
      replaceKeepingFocus(existing, incoming);
    } else if (list.dataset.novosNoTopo === "sim" && !fitsFilter(list, incoming)) {
      // Not shown under this filter, but still news: heard once, and counted in the summary.
      announceRow(incoming, ownAction, true);
      rowsChanged();
      return null;
    } else if (list.dataset.novosNoTopo === "sim") {
      list.prepend(incoming);
      var empty = byId("lista-vazia");
      if (empty) empty.hidden = true;
    } else {
      return null;
    }
    htmx.process(incoming);
    watchSlow(incoming);
    announceRow(incoming, ownAction, isNew);
    rowsChanged();
    return incoming;
  }

  // A pendente row turns "Ainda enviando" after SLOW_AFTER_SECONDS even if no event arrives:
  // a timer from data-lento-em asks the server for the row again (the server words it).
  function watchSlow(row) {
    var key = row.dataset.convite;
    clearTimeout(slowTimers.get(key));
    slowTimers.delete(key);
    if (row.dataset.lentoEm === undefined) return;
    var delay = Number(row.dataset.lentoEm) * 1000 + 300;
    slowTimers.set(key, setTimeout(function () { recheck(key); }, delay));
  }

  function recheck(key) {
    // While sending is paused the row's words do not age ("Pausado" is the truth however long
    // it waits), and a row fetched here must not overtake the stream, which says "O envio
    // voltou" before the rows a returning worker sent.
    if (sendingPaused()) {
      slowTimers.set(key, setTimeout(function () { recheck(key); }, 2000));
      return;
    }
    fetch("/convites/" + encodeURIComponent(key), {
      headers: { "HX-Request": "true", "Accept": "text/html" },
      credentials: "same-origin",
    }).then(function (response) {
      if (!response.ok) throw new Error("status " + response.status);
      return response.text();
    }).then(function (html) {
      placeRow(html, false);
    }).catch(function () {
      // Offline: the stream's reconnect brings the truth; try again a little later.
      slowTimers.set(key, setTimeout(function () { recheck(key); }, 2000));
    });
  }

  // --- htmx wiring ------------------------------------------------------------------------

  // While the person's own request is in flight, stream messages wait for its answer: the
  // worker can finish before the 202 arrives, and "Recebemos" must not come after "enviado".
  var held = null;
  var holdTimer = null;

  function hold() {
    held = held || [];
    clearTimeout(holdTimer);
    holdTimer = setTimeout(release, 10000);
  }

  function release() {
    clearTimeout(holdTimer);
    var waiting = held || [];
    held = null;
    waiting.forEach(handleMessage);
  }

  document.addEventListener("htmx:beforeRequest", hold);
  ["htmx:responseError", "htmx:sendError", "htmx:timeout"].forEach(function (name) {
    document.addEventListener(name, release);
  });

  // SSE: rows and the paused notice are placed here, not swapped blindly by the extension.
  document.addEventListener("htmx:sseBeforeMessage", function (evt) {
    evt.preventDefault();
    var message = { type: evt.detail.type, data: evt.detail.data, lastEventId: evt.detail.lastEventId };
    if (held) held.push(message);
    else handleMessage(message);
  });

  function handleMessage(message) {
    if (message.lastEventId) {
      // A fresh EventSource (after the extension gives up on one) sends no Last-Event-ID:
      // resume from the last id we saw through the URL instead.
      var source = document.querySelector("[sse-connect]");
      if (source) {
        var path = source.getAttribute("sse-connect").split("?")[0];
        source.setAttribute("sse-connect", path + "?depois=" + message.lastEventId);
      }
    }
    if (message.type === "convite") placeRow(message.data, false);
    if (message.type === "aviso") placeNotice(message.data);
    if (message.type === "lote") placeBatchSummary(message.data);
  }

  // --- batches ----------------------------------------------------------------------------

  // A batch's rows are silent; its summary (#lote-resumo, computed from the database) is the
  // only speech: progress at most every data-intervalo seconds in any tab, failures summed up
  // through the alert region, one summary at the end. What was said is remembered per batch in
  // localStorage, so a reload or another tab repeats nothing.
  function batchMark(batch) {
    return stored("lote:" + batch) || { at: 0 };
  }

  function sayBatch(summary, ownMark) {
    var batch = summary.dataset.lote;
    var key = summary.dataset.chave;
    var failures = Number(summary.dataset.falhasN || 0);
    var mark = ownMark || batchMark(batch);
    var gap = Number(summary.dataset.intervalo || 10) * 1000;
    var now = Date.now();
    var spoken = [];
    if (summary.dataset.final === "sim") {
      // The end is said once: an answer after it changes the counts, not the sentence, and
      // its own "… recusou o convite." is what is heard. A bounce changes the sentence: news.
      if (mark.fim !== key && mark.fimTexto !== summary.dataset.progresso) {
        spoken.push(["status", summary.dataset.progresso]);
      }
      mark.fim = key;
      mark.fimTexto = summary.dataset.progresso;
      mark.falhas = failures;
    } else {
      // Once its end was said, a batch sent again in part (a row's Reenviar, an operator's
      // retry) is heard through those rows and its next end, not as progress again.
      if (!mark.fim && mark.chave !== key && now - (mark.at || 0) >= gap - 250) {
        spoken.push(["status", summary.dataset.progresso]);
        mark.chave = key;
        mark.at = now;
      }
      if (failures > (mark.falhas || 0) && summary.dataset.falhas) {
        spoken.push(["alert", summary.dataset.falhas]);
        mark.falhas = failures;
      }
    }
    remember("lote:" + batch, mark);
    spoken.forEach(function (item) { say(item[0], item[1]); });
  }

  function placeBatchSummary(html) {
    var template = document.createElement("template");
    template.innerHTML = html;
    var incoming = template.content.querySelector("#lote-resumo");
    var existing = byId("lote-resumo");
    if (!incoming || !existing) return;
    existing.replaceWith(incoming);
    if (document.visibilityState === "hidden") return;
    exclusively("lote:" + incoming.dataset.lote + ":" + incoming.dataset.chave, function () {
      sayBatch(incoming, null);
    });
  }

  // On load the page's own summary is what the person sees, not news: mark it as said. The
  // first visit after sending ("?novo=1") says "Recebemos N convites, enviando…" once, and when
  // the batch already ended before the page came (a small batch, an idle worker), its end
  // right after: the stream has nothing newer to say it with.
  function loadBatchPage() {
    var summary = byId("lote-resumo");
    if (!summary) return;
    var batch = summary.dataset.lote;
    var mark = batchMark(batch);
    var received = byId("lote-recebido");
    var first = received && received.dataset.falar && !mark.recebido;
    var endedAlready = first && summary.dataset.final === "sim";
    if (summary.dataset.final === "sim") {
      mark.fim = summary.dataset.chave;
      mark.fimTexto = summary.dataset.progresso;
    }
    mark.falhas = Math.max(mark.falhas || 0, Number(summary.dataset.falhasN || 0));
    if (first) {
      mark.recebido = true;
      mark.at = Date.now();
    }
    mark.chave = mark.chave || summary.dataset.chave;
    remember("lote:" + batch, mark);
    if (first) say("status", received.dataset.falar);
    if (endedAlready) say("status", summary.dataset.progresso);
  }

  function placeNotice(html) {
    var template = document.createElement("template");
    template.innerHTML = html;
    var incoming = template.content.querySelector("#aviso-envio");
    var existing = byId("aviso-envio");
    if (!incoming || !existing) return;
    var was = existing.dataset.pausado === "sim" ? existing.dataset.motivo : "";
    var paused = incoming.dataset.pausado === "sim";
    existing.replaceWith(incoming);
    // The rows' words follow in the same task (app.css reads data-envio): never a paused
    // notice above a row that says it is sending, nor the other way round.
    if (paused) document.body.dataset.envio = "pausado";
    else delete document.body.dataset.envio;
    // Spoken when sending becomes paused, when the reason changes (the team paused it), and
    // once when it comes back.
    if (paused && incoming.dataset.motivo !== was) {
      say("status", incoming.textContent.trim());
    } else if (!paused && was) {
      say("status", incoming.dataset.voltou);
    }
  }

  document.addEventListener("htmx:sseOpen", function () {
    var note = byId("conexao");
    if (note) note.hidden = true;
  });

  document.addEventListener("htmx:sseError", function () {
    var note = byId("conexao");
    if (note) note.hidden = false;
  });

  // A press on a row's button (Reenviar, Cancelar…) is answered by the row's next placement.
  // Usually that is the press's own answer; but the stream may bring the row's new state
  // first, and then the old row, its button and htmx's events from it are detached: they no
  // longer reach this document, and the press would go unanswered.
  var pressedRows = new Set();
  function pressedRow(evt) {
    var row = evt.target && evt.target.closest ? evt.target.closest("li.convite") : null;
    return row ? row.dataset.convite : null;
  }
  document.addEventListener("htmx:beforeRequest", function (evt) {
    var key = pressedRow(evt);
    if (key) pressedRows.add(key);
  });
  // Answered without a new row (a 409, a 422, no connection): nothing to wait for. A 404: the
  // invite is gone (its invitee had their data erased, say), and so goes its row.
  document.addEventListener("htmx:afterRequest", function (evt) {
    var key = pressedRow(evt);
    if (!key) return;
    pressedRows.delete(key);
    if (evt.detail.xhr && evt.detail.xhr.status === 404) removeRow(key);
  });

  // Focus on the row goes to the list's heading, so it is not lost with the row.
  function removeRow(key) {
    var gone = byId("convite-" + key);
    if (!gone) return;
    var hadFocus = gone.contains(document.activeElement);
    gone.remove();
    var list = byId("lista-convites");
    var empty = byId("lista-vazia");
    if (list && empty && !list.querySelector("li.convite")) empty.hidden = false;
    var heading = byId("meus-convites-titulo");
    if (hadFocus && heading) {
      heading.setAttribute("tabindex", "-1");
      heading.focus();
    }
    rowsChanged();
  }

  // A 202 from the form or a "Tentar de novo"/"Reenviar", or a 200 from "Cancelar convite":
  // the row goes to the list (a response without a row places nothing).
  document.addEventListener("htmx:beforeSwap", function (evt) {
    var detail = evt.detail;
    var done = detail.xhr.status === 202 ||
      (detail.xhr.status === 200 && detail.requestConfig && detail.requestConfig.verb === "post");
    if (done) placeRow(detail.serverResponse, true);
    release();
  });

  // A row's own form refused (422: Corrigir e reenviar, Mudar horário): the row came back with
  // that form open and the message next to its field.
  document.addEventListener("htmx:load", function (evt) {
    var row = evt.detail.elt;
    if (!row || !row.classList || !row.classList.contains("convite")) return;
    var invalid = row.querySelector('.convite-acao [aria-invalid="true"]');
    if (!invalid) return;
    invalid.focus();
    var message = row.querySelector(".convite-acao .erro-campo");
    if (message) say("alert", message.textContent.trim());
  });

  // A form swapped in: after a 422, focus the first invalid field and say what is wrong;
  // after a 202, the clean form takes focus back to E-mail for the next invite.
  //
  // This runs on htmx:afterSwap, in the same task as the swap itself, never on htmx:load:
  // htmx fires load only when it settles the new content (20 ms later, much more on a busy
  // machine), and by then its own focus restore had already put the caret in the new E-mail,
  // the person may have tabbed on, and a late focus() yanked them back to E-mail. Each form
  // element is handled once.
  var formsPlaced = new WeakSet();
  document.addEventListener("htmx:afterSwap", function (evt) {
    var form = evt.target;
    if (!form || (form.id !== "form-convite" && form.id !== "form-entrar")) return;
    if (formsPlaced.has(form)) return;
    formsPlaced.add(form);
    if (form.dataset.estado === "erro") {
      var invalid = form.querySelector('[aria-invalid="true"]');
      if (invalid) invalid.focus();
      say("alert", form.dataset.anuncio);
    } else if (form.dataset.estado === "limpo") {
      var email = form.querySelector("#email");
      if (email) email.focus();
    }
  });

  document.addEventListener("htmx:sendError", function () {
    say("alert", byId("alerta").dataset.semConexao);
  });

  document.addEventListener("htmx:responseError", function (evt) {
    var template = document.createElement("template");
    template.innerHTML = evt.detail.xhr.responseText || "";
    var text = template.content.textContent.trim();
    say("alert", text || byId("alerta").dataset.semConexao);
  });

  // A notice about one occasion (webhooks disabled at given moments): the page shows it on
  // every load, the status region speaks it the first time this browser shows that occasion.
  function announceOnce(element) {
    var key = element.dataset.anuncioUmaVez;
    if (stored(key)) return;
    remember(key, { at: Date.now() });
    say("status", element.dataset.anuncio);
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("[data-anuncio-uma-vez]").forEach(announceOnce);
    // What an action just did, on the page it came back to (Webhook excluído, Sessão
    // encerrada): a screen reader hears it, not only an eye that finds it. The address loses
    // the query that asked for it, so a reload or Back does not say it again.
    var notices = document.querySelectorAll("[data-anuncio-ao-abrir]");
    notices.forEach(function (element) {
      say("status", element.textContent.trim());
    });
    if (notices.length) {
      history.replaceState(history.state, "", location.pathname + location.hash);
    }
    document.querySelectorAll("li.convite").forEach(watchSlow);
    loadBatchPage();
    // GOV.UK's error summary takes focus, so the person hears what to fix first.
    var problems = document.querySelector("[data-foco-ao-carregar]");
    if (problems) problems.focus();
  });
})();
