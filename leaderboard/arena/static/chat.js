// Live arena: send the prompt, read both models' replies from the server-sent event stream as
// they come (fetch + ReadableStream: EventSource cannot POST), vote, show the reveal. All text is
// put in with textContent: prompts and replies are untrusted. A failed reply disables the vote (the
// server refuses it too) and offers to regenerate it or to send the prompt to a new pair.
(function () {
  var form = document.getElementById("chat-form");
  if (!form) return;
  var maxTurns = parseInt(form.getAttribute("data-max-turns"), 10) || 3;
  var maxRetries = parseInt(form.getAttribute("data-max-retries"), 10) || 0;
  var actions = document.getElementById("failed-actions");
  var retryBtn = document.getElementById("retry");
  var failed = {}, firstPrompt = null;
  var promptEl = document.getElementById("prompt");
  var imageEl = document.getElementById("image");
  var kindEl = document.getElementById("kind");
  var sendBtn = document.getElementById("send");
  var message = document.getElementById("arena-message");
  var voteBtns = Array.prototype.slice.call(document.querySelectorAll("#votes button"));
  var battle = null, token = null, busy = false, voted = false, turns = 0, withImage = false;
  var imageBox = document.getElementById("prompt-image");
  var replyEls = {};

  function say(text) { message.textContent = text; message.hidden = !text; }
  function setVotes(on) { voteBtns.forEach(function (b) { b.disabled = !on; }); }
  function side(name) { return document.getElementById("side-" + name); }

  function setState(n, text, bad) {
    var el = side(n).querySelector(".state");
    el.textContent = text; el.classList.toggle("failed", !!bad);
  }
  function anyFailed() { return !!(failed.a || failed.b); }
  function showActions(canRetry) {
    actions.hidden = false; retryBtn.disabled = !canRetry;
    retryBtn.title = canRetry ? "Ask the failed model again (same prompt, same pair)"
                              : "Regenerated " + maxRetries + " times already: start a new pair";
  }

  function reset(keepImage) {
    battle = token = null; busy = voted = false; turns = 0; failed = {}; firstPrompt = null;
    ["a", "b"].forEach(function (n) {
      side(n).querySelector(".turns").textContent = "";
      side(n).querySelector(".renders").textContent = "";
      side(n).querySelector(".idle").hidden = false;
      setState(n, "");
    });
    document.getElementById("reveal").hidden = true; actions.hidden = true;
    imageBox.textContent = ""; imageBox.hidden = true; if (imageEl && !keepImage) imageEl.value = "";
    setVotes(false); sendBtn.disabled = false; promptEl.disabled = false; say("");
    promptEl.placeholder = "Ask anything (Ctrl+Enter sends)";
  }

  function addTurn(prompt) {
    failed = {}; actions.hidden = true;
    if (firstPrompt === null) firstPrompt = prompt;
    ["a", "b"].forEach(function (n) {
      side(n).querySelector(".idle").hidden = true;
      var box = side(n).querySelector(".turns");
      var u = document.createElement("div"); u.className = "user"; u.textContent = prompt; box.appendChild(u);
      var r = document.createElement("div"); r.className = "reply"; box.appendChild(r);
      replyEls[n] = r;
      setState(n, "answering…");
    });
  }

  function handle(ev) {
    if (ev.type === "battle") {
      battle = ev.battle; token = ev.token;
      if (withImage) {  // the server's copy (metadata stripped), by the battle's opaque id
        var img = document.createElement("img"); img.src = "/arena/media/" + battle + "/p0"; img.alt = "your image";
        imageBox.appendChild(img); imageBox.hidden = false;
      }
    }
    else if (ev.type === "retry") {  // the failed sides start again: their last reply is cleared
      (ev.sides || []).forEach(function (n) {
        replyEls[n].textContent = ""; replyEls[n].classList.remove("failed");
        side(n).querySelector(".renders").textContent = "";
        failed[n] = false; setState(n, "answering again…");
      });
    }
    else if (ev.type === "delta") { replyEls[ev.side].appendChild(document.createTextNode(ev.text)); }
    else if (ev.type === "done") {
      failed[ev.side] = !!ev.failed;
      setState(ev.side, ev.failed ? "failed" : "done", ev.failed);
      if (ev.failed && !replyEls[ev.side].textContent) {
        replyEls[ev.side].textContent = "No output: this model's attempt failed.";
        replyEls[ev.side].classList.add("failed");
      }
    } else if (ev.type === "failed") {  // the server's word: no vote, no next turn until regenerated
      (ev.sides || []).forEach(function (n) { failed[n] = true; });
      showActions(!!ev.can_retry);
    } else if (ev.type === "render") {
      var box = side(ev.side).querySelector(".renders"); box.textContent = "";
      if (ev.failed) {
        var p = document.createElement("p"); p.className = "failed";
        p.textContent = "The code did not run (" + ev.status + "): nothing to render."; box.appendChild(p);
      }
      (ev.images || []).forEach(function (src) { var i = document.createElement("img"); i.src = src; i.alt = "render"; box.appendChild(i); });
    } else if (ev.type === "end") {
      turns = ev.turn; busy = false;
      var votable = !anyFailed();
      setVotes(votable && !voted);
      if (!votable && actions.hidden) showActions(false);
      var more = ev.can_continue && !voted && votable;
      sendBtn.disabled = !more; promptEl.disabled = !more;
      promptEl.placeholder = !votable ? "A reply failed: regenerate it or start a new pair"
        : more ? "Continue the conversation, or vote" : "Vote now (" + maxTurns + " turns at most)";
    }
  }

  function readStream(resp) {
    var reader = resp.body.getReader(), decoder = new TextDecoder(), buf = "";
    function pump() {
      return reader.read().then(function (r) {
        if (r.done) { busy = false; return; }
        buf += decoder.decode(r.value, {stream: true});
        var cut;
        while ((cut = buf.indexOf("\n\n")) >= 0) {
          var block = buf.slice(0, cut); buf = buf.slice(cut + 2);
          block.split("\n").forEach(function (line) { if (line.indexOf("data:") === 0) handle(JSON.parse(line.slice(5))); });
        }
        return pump();
      });
    }
    return pump();
  }

  function problem(resp) {
    return resp.json().then(function (p) { busy = false; say(p.detail || p.error || ("error " + resp.status)); },
                            function () { busy = false; say("error " + resp.status); });
  }

  function post(url, body) {
    return fetch(url, {method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify(body),
                       credentials: "same-origin"});
  }

  function readImage() {
    return new Promise(function (resolve) {
      var f = imageEl && imageEl.files && imageEl.files[0];
      if (!f || battle) { resolve(null); return; }
      var fr = new FileReader(); fr.onload = function () { resolve(fr.result); }; fr.readAsDataURL(f);
    });
  }

  function send() {
    var text = promptEl.value.trim();
    if (!text || busy || voted) return;
    busy = true; say(""); setVotes(false); sendBtn.disabled = true;
    readImage().then(function (image) {
      withImage = !battle && !!image;
      var req = battle ? post("/api/arena/chat/" + battle + "/turn", {token: token, prompt: text})
                       : post("/api/arena/chat", {prompt: text, image: image, kind: kindEl ? kindEl.value : "chat"});
      return req.then(function (resp) {
        if (!resp.ok) { sendBtn.disabled = false; return problem(resp); }
        promptEl.value = ""; addTurn(text);
        return readStream(resp);
      });
    }).catch(function (e) { busy = false; sendBtn.disabled = false; say("connection lost: " + e); });
  }

  function retry() {
    if (!battle || busy || voted || retryBtn.disabled) return;
    busy = true; say(""); setVotes(false); actions.hidden = true;
    post("/api/arena/chat/" + battle + "/retry", {token: token}).then(function (resp) {
      if (!resp.ok) { actions.hidden = false; return problem(resp); }
      return readStream(resp);
    }).catch(function (e) { busy = false; actions.hidden = false; say("connection lost: " + e); });
  }

  function newPair() {  // the conversation's first prompt (and image) to another pair of models
    if (busy) return;
    var text = firstPrompt;
    reset(true);
    if (text) { promptEl.value = text; send(); }
  }

  function vote(outcome) {
    if (!battle || busy || voted || anyFailed()) return;
    setVotes(false);
    post("/api/arena/chat/" + battle + "/vote", {token: token, outcome: outcome}).then(function (resp) {
      if (!resp.ok) { setVotes(!anyFailed()); return problem(resp); }
      return resp.json().then(function (r) {
        voted = true; sendBtn.disabled = true; promptEl.disabled = true;
        ["a", "b"].forEach(function (n) {
          var el = document.getElementById("reveal-" + n), info = r[n];
          el.querySelector(".name").textContent = info.model;
          el.querySelector(".meta").textContent = info.output_tokens + " tokens · " + info.latency_s + " s"
            + (info.first_token_s !== null && info.first_token_s !== undefined
               ? " · first token after " + info.first_token_s + " s" : "")
            + " · $" + info.cost
            + ((outcome === "left" && n === "a") || (outcome === "right" && n === "b") ? " · your pick" : "");
        });
        var words = {left: "A is better", right: "B is better", tie: "Tie", both_bad: "Both are bad"};
        document.getElementById("your-vote").textContent = "Your vote: " + words[outcome]
          + (r.counted ? "" : " (not counted: a reply named its model)") + ". Press N for a new battle.";
        document.getElementById("reveal").hidden = false;
      });
    });
  }

  form.addEventListener("submit", function (e) { e.preventDefault(); send(); });
  voteBtns.forEach(function (b) { b.addEventListener("click", function () { vote(b.getAttribute("data-outcome")); }); });
  document.getElementById("skip").addEventListener("click", function () { reset(false); });
  retryBtn.addEventListener("click", retry);
  document.getElementById("new-pair").addEventListener("click", newPair);
  document.addEventListener("keydown", function (e) {
    if (e.target === promptEl) {
      if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); send(); }
      return;
    }
    var map = {"1": "left", "2": "right", "3": "tie", "4": "both_bad"};
    if (map[e.key] && !voteBtns[0].disabled) { e.preventDefault(); vote(map[e.key]); }
    else if ((e.key === "r" || e.key === "R") && !actions.hidden) { e.preventDefault(); retry(); }
    else if (e.key === "n" || e.key === "N") { e.preventDefault(); reset(false); promptEl.focus(); }
  });
})();
