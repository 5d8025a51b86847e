// Arena replay viewer and live match viewer: one renderer per game, fed by frames.
// A frame is {ply, moves: [[seat, label], ...], obs: <the spectator's view after them>}; stored matches load
// them from /match/<id>/frames.json, running ones receive them from /match/<id>/events (Server-Sent Events).
(function () {
  "use strict";
  const data = JSON.parse(document.getElementById("match-data").textContent);
  let header = data.header;
  const frames = [];
  const rps = { rounds: [], ends: [], counts: [] }; // per frame: rounds so far, sign counts by seat
  let index = 0;
  let follow = true;
  let timer = null;
  const $ = (id) => document.getElementById(id);
  const board = $("board");
  const slider = $("step");
  const esc = (s) => String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
  const botName = (seat) => {
    const s = header.seats[seat];
    if (!s) return "seat " + seat;
    const twice = header.seats.filter((o) => o.bot === s.bot).length > 1;
    return twice ? s.bot + " (seat " + seat + ")" : s.bot;
  };

  function push(frame) {
    frames.push(frame);
    if (header.game === "rps") {
      const prev = rps.counts.length ? rps.counts[rps.counts.length - 1] : [{}, {}];
      const counts = [Object.assign({}, prev[0]), Object.assign({}, prev[1])];
      let pair = [];
      for (const [seat, label] of frame.moves) {
        pair[seat] = label;
        counts[seat][label] = (counts[seat][label] || 0) + 1;
        if (pair[0] !== undefined && pair[1] !== undefined) { rps.rounds.push(pair); pair = []; }
      }
      rps.ends.push(rps.rounds.length);
      rps.counts.push(counts);
    }
  }

  function setHeader(h) {
    header = h;
    $("status").textContent = h.status + (h.termination ? " (" + h.termination + ")" : "") + (h.rated ? " · rated" : "");
    $("result").textContent = (h.returns.length ? h.returns.join(" : ") : "-") + (h.reason ? " · " + h.reason : "");
    if (h.seed) $("seed").textContent = h.seed;
    else if (h.status !== "running") $("seed").textContent = "not revealed yet (a duplicate set still running)";
  }

  // -- renderers --------------------------------------------------------------------------------
  const SIGNS = ["rock", "paper", "scissors", "lizard", "spock"];
  const SHORT = { rock: "R", paper: "P", scissors: "S", lizard: "L", spock: "K" };
  const short = (s) => SHORT[s] || String(s).slice(0, 2);

  function renderRps(i, obs) {
    const end = rps.ends[i];
    const counts = rps.counts[i];
    const signs = SIGNS.slice(0, obs.signs).concat(Object.keys(Object.assign({}, counts[0], counts[1])).filter((s) => !SIGNS.includes(s)));
    const shown = rps.rounds.slice(Math.max(0, end - 30), end);
    let html = '<p class="score">Round <b id="round">' + obs.round + "</b> of " + obs.rounds +
      ' · score <b id="score">' + obs.wins[0] + " : " + obs.wins[1] + "</b></p>";
    html += '<table class="timeline"><tr><th>' + esc(botName(0)) + "</th>" +
      shown.map((p) => '<td class="sign ' + esc(p[0]) + '">' + esc(short(p[0])) + "</td>").join("") + "</tr>";
    html += "<tr><th>" + esc(botName(1)) + "</th>" +
      shown.map((p) => '<td class="sign ' + esc(p[1]) + '">' + esc(short(p[1])) + "</td>").join("") + "</tr></table>";
    html += '<p class="muted">Last ' + shown.length + " of " + end + " rounds (R rock, P paper, S scissors, L lizard, K spock).</p>";
    html += '<div class="dists">';
    for (const seat of [0, 1]) {
      const total = signs.reduce((a, s) => a + (counts[seat][s] || 0), 0) || 1;
      html += '<div class="dist"><h3>' + esc(botName(seat)) + "</h3>" + signs.map((s) => {
        const n = counts[seat][s] || 0;
        return '<div class="distrow"><span>' + esc(s) + '</span><svg width="160" height="12"><rect width="' +
          Math.round((160 * n) / total) + '" height="12" class="sign ' + esc(s) + '"></rect></svg> ' + n + "</div>";
      }).join("") + "</div>";
    }
    board.innerHTML = html + "</div>";
  }

  function renderTicTacToe(i, obs) {
    const before = i > 0 ? frames[i - 1].obs.board : null;
    let html = '<table class="ttt">';
    for (let r = 0; r < obs.rows; r++) {
      html += "<tr>";
      for (let c = 0; c < obs.cols; c++) {
        const v = obs.board[r * obs.cols + c];
        const fresh = before && before[r * obs.cols + c] !== v ? " last" : "";
        html += '<td class="cell' + (v >= 0 ? " seat" + v : "") + fresh + '">' + (v === 0 ? "X" : v === 1 ? "O" : "") + "</td>";
      }
      html += "</tr>";
    }
    html += "</table><p>" + obs.rows + "×" + obs.cols + ", " + obs.k + " in a row · " +
      (obs.to_move >= 0 ? "to move: " + esc(botName(obs.to_move)) + (obs.to_move === 0 ? " (X)" : " (O)") : "game over") + "</p>";
    board.innerHTML = html;
  }

  function renderDots(i, obs) {
    const S = 48, pad = 16, W = 2 * obs.cols + 1;
    const before = i > 0 ? frames[i - 1].obs.edges : null;
    const w = obs.cols * S + 2 * pad, h = obs.rows * S + 2 * pad;
    let svg = '<svg class="dots" width="' + w + '" height="' + h + '" viewBox="0 0 ' + w + " " + h + '">';
    obs.box_owners.forEach((owner, b) => {
      if (owner < 0) return;
      const r = Math.floor(b / obs.cols), c = b % obs.cols;
      svg += '<rect class="box seat' + owner + '" x="' + (pad + c * S + 3) + '" y="' + (pad + r * S + 3) + '" width="' + (S - 6) +
        '" height="' + (S - 6) + '"></rect><text x="' + (pad + c * S + S / 2) + '" y="' + (pad + r * S + S / 2 + 5) +
        '" text-anchor="middle">' + owner + "</text>";
    });
    obs.edges.forEach((drawn, e) => {
      const r = Math.floor(e / W), off = e % W;
      const horizontal = off < obs.cols;
      const c = horizontal ? off : off - obs.cols;
      const x1 = pad + c * S, y1 = pad + r * S;
      const x2 = horizontal ? x1 + S : x1, y2 = horizontal ? y1 : y1 + S;
      const fresh = drawn && before && !before[e] ? " last" : "";
      svg += '<line class="edge' + (drawn ? " drawn" : "") + fresh + '" x1="' + x1 + '" y1="' + y1 + '" x2="' + x2 + '" y2="' + y2 + '"></line>';
    });
    for (let r = 0; r <= obs.rows; r++) for (let c = 0; c <= obs.cols; c++) svg += '<circle class="dot" cx="' + (pad + c * S) + '" cy="' + (pad + r * S) + '" r="3"></circle>';
    svg += "</svg>";
    board.innerHTML = svg + '<p>Boxes <b id="score">' + obs.scores.join(" : ") + "</b> · " +
      (obs.to_move >= 0 ? "to move: " + esc(botName(obs.to_move)) : "game over") + "</p>";
  }

  function dice(values) {
    return values.map((v) => '<span class="die">' + v + "</span>").join("");
  }

  function bidText(b) {
    return esc(botName(b.seat)) + ": " + b.quantity + " × " + b.face;
  }

  function renderLiarsDice(i, obs) {
    let html = '<p>Round <b id="round">' + (obs.round + 1) + "</b> · dice left: " +
      obs.dice_counts.map((n, s) => esc(botName(s)) + " " + n).join(", ") + "</p>";
    html += '<div class="current"><h3>Bids this round</h3><ol class="bids">' + obs.bids.map((b) => "<li>" + bidText(b) + "</li>").join("") + "</ol>";
    html += '<p class="muted hidden-dice">The dice of this round are hidden until it ends.</p></div>';
    html += '<h3>Finished rounds (dice revealed)</h3><table class="rounds"><thead><tr><th>#</th>' +
      header.seats.map((s) => "<th>" + esc(botName(s.seat)) + "</th>").join("") + "<th>Challenged bid</th><th>Call</th><th>Actual</th><th>Lost a die</th></tr></thead><tbody>";
    obs.past_rounds.forEach((r, n) => {
      const loser = r.dice_lost.findIndex((d) => d > 0);
      html += '<tr class="round"><td>' + (n + 1) + "</td>" + r.hands.map((h) => "<td>" + dice(h.dice) + "</td>").join("") +
        "<td>" + bidText(r.bid) + "</td><td>" + esc(botName(r.challenger)) + (r.spot_on ? " (spot on)" : " (liar)") + "</td><td>" + r.actual +
        "</td><td>" + (loser >= 0 ? esc(botName(loser)) : "-") + "</td></tr>";
    });
    board.innerHTML = html + "</tbody></table>";
  }

  const RENDER = { rps: renderRps, tic_tac_toe: renderTicTacToe, dots_and_boxes: renderDots, liars_dice: renderLiarsDice };

  function show() {
    const last = frames.length - 1;
    index = Math.max(0, Math.min(index, last));
    slider.max = String(last);
    slider.value = String(index);
    $("position").textContent = index + " / " + last;
    const frame = frames[index];
    const render = RENDER[header.game];
    if (render && frame.obs) render(index, frame.obs);
    else board.textContent = JSON.stringify(frame.obs);
    $("moves").innerHTML = frame.moves.length
      ? "<p>Step " + index + ": " + frame.moves.slice(-12).map(([seat, label]) => (seat >= 0 ? esc(botName(seat)) : "chance") + " " + esc(label)).join(", ") +
        (frame.moves.length > 12 ? " (last 12 of " + frame.moves.length + ")" : "") + "</p>"
      : '<p class="muted">Start position.</p>';
  }

  function step(kind) {
    if (kind === "play") {
      if (timer) { clearInterval(timer); timer = null; return; }
      if (index >= frames.length - 1) index = 0;
      timer = setInterval(() => { if (index >= frames.length - 1) { clearInterval(timer); timer = null; } else { index++; show(); } }, 300);
      return;
    }
    index = kind === "first" ? 0 : kind === "prev" ? index - 1 : kind === "next" ? index + 1 : frames.length - 1;
    follow = index >= frames.length - 1;
    show();
  }

  document.querySelectorAll("[data-step]").forEach((b) => b.addEventListener("click", () => step(b.dataset.step)));
  slider.addEventListener("input", () => { index = Number(slider.value); follow = index >= frames.length - 1; show(); });
  document.addEventListener("keydown", (e) => { if (e.key === "ArrowLeft") step("prev"); if (e.key === "ArrowRight") step("next"); });

  async function loadStored(offset) {
    const response = await fetch("/match/" + encodeURIComponent(header.match_id) + "/frames.json?offset=" + offset);
    const page = await response.json();
    if (!response.ok) { board.textContent = page.error; return; }
    setHeader(page.header);
    page.frames.forEach(push);
    if (page.more) {
      const more = document.createElement("button");
      more.type = "button";
      more.textContent = "load the next steps";
      more.addEventListener("click", () => { more.remove(); loadStored(offset + page.frames.length); });
      $("moves").after(more);
    }
    show();
  }

  function watchLive() {
    $("live").hidden = false;
    const source = new EventSource("/match/" + encodeURIComponent(header.match_id) + "/events");
    source.addEventListener("header", (e) => setHeader(JSON.parse(e.data)));
    source.addEventListener("frame", (e) => {
      push(JSON.parse(e.data));
      if (follow) index = frames.length - 1;
      show();
    });
    source.addEventListener("end", (e) => {
      source.close();
      setHeader(JSON.parse(e.data));
      $("live").hidden = true;
      show();
    });
    source.addEventListener("dropped", (e) => {
      source.close();
      $("live").textContent = "stopped: " + JSON.parse(e.data).reason;
    });
  }

  push(data.initial);
  show();
  if (header.status === "running") watchLive();
  else loadStored(0);
})();
