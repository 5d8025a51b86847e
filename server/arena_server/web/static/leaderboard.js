// Live leaderboard: when the pool's results or its fit change (an event from /leaderboard/<pool>/events),
// fetch the rows again, in the same order and page, and swap them in. Sorting works without this (links).
(function () {
  "use strict";
  const table = document.getElementById("leaderboard");
  const status = document.getElementById("live-status");
  if (!table || !window.EventSource) return;
  const pool = encodeURIComponent(table.dataset.pool);
  const query = "?sort=" + table.dataset.sort + "&order=" + table.dataset.order + "&page=" + table.dataset.page + "&per=" + table.dataset.per;
  let busy = false;
  async function refresh(info) {
    if (busy) return;
    busy = true;
    try {
      const response = await fetch("/leaderboard/" + pool + "/rows" + query);
      if (!response.ok) return;
      const holder = document.createElement("table");
      holder.innerHTML = await response.text();
      const rows = holder.querySelector("tbody");
      document.getElementById("leader-rows").replaceWith(rows);
      status.textContent = "live: updated " + new Date().toLocaleTimeString() + " (" + info.matches + " rated matches)";
      if (info.fitted_at) document.getElementById("fitted").textContent = info.fitted_at.slice(0, 19);
    } finally {
      busy = false;
    }
  }
  const source = new EventSource("/leaderboard/" + pool + "/events");
  source.addEventListener("hello", () => { status.textContent = "live"; });
  source.addEventListener("changed", (e) => refresh(JSON.parse(e.data)));
  source.onerror = () => { status.textContent = "live updates paused (reconnecting)"; };
})();
