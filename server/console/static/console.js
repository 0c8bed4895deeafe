// agentd console. Vanilla JavaScript, no dependencies, no network beyond
// this origin: the snapshot stream (GET /ui/events, server-sent events) and
// the JSON-RPC endpoint (POST /: the a2a.* operator methods and tasks/get).
// Every value from the server reaches the page as text (textContent), never
// as markup.
"use strict";

(() => {
  const $ = (id) => document.getElementById(id);
  const RPC = "/";
  const REASON = "operator console";

  let snap = null; // the last snapshot
  let skew = 0; // the server's clock minus ours, in ms
  let detailID = ""; // the task shown in the detail panel
  let detailTimer = 0;
  const lastStatus = new Map(); // task id -> status seen, to mark changes

  // el builds an element: attrs are properties or attributes ("text" is
  // textContent, "class" className, "aria-*" and "data-*" attributes).
  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null) continue;
      if (k === "text") e.textContent = v;
      else if (k === "class") e.className = v;
      else if (k.startsWith("aria-") || k.startsWith("data-")) e.setAttribute(k, v);
      else e[k] = v;
    }
    for (const kid of kids) {
      if (kid === null || kid === undefined) continue;
      e.append(typeof kid === "string" ? document.createTextNode(kid) : kid);
    }
    return e;
  }

  // ---- JSON-RPC on the same origin ----
  let rpcSeq = 0;
  async function rpc(method, params) {
    const req = { jsonrpc: "2.0", id: ++rpcSeq, method };
    if (params !== undefined) req.params = params;
    const resp = await fetch(RPC, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(req),
      credentials: "same-origin",
      cache: "no-store",
    });
    if (!resp.ok) {
      const text = (await resp.text()).trim();
      throw new Error(`${method}: HTTP ${resp.status}${text ? ": " + text : ""}`);
    }
    const r = await resp.json();
    if (r.error) {
      throw new Error(`${method}: ${r.error.message} (${r.error.code})`);
    }
    return r.result;
  }

  // ---- messages ----
  let infoTimer = 0;
  function info(text) {
    const p = $("info");
    p.textContent = text;
    p.hidden = false;
    clearTimeout(infoTimer);
    infoTimer = setTimeout(() => { p.hidden = true; }, 6000);
  }
  function fail(err) {
    const p = $("notice");
    p.textContent = String(err && err.message ? err.message : err);
    p.hidden = false;
    setTimeout(() => { p.hidden = true; }, 10000);
  }

  // ---- confirmation ----
  function confirmAction(title, text, okLabel) {
    const dlg = $("confirm");
    const back = document.activeElement;
    $("confirm-title").textContent = title;
    $("confirm-text").textContent = text;
    $("confirm-ok").textContent = okLabel;
    return new Promise((resolve) => {
      const ok = $("confirm-ok");
      const keep = $("confirm-keep");
      const done = (yes) => {
        ok.onclick = keep.onclick = null;
        dlg.onclose = null;
        if (dlg.open) dlg.close();
        if (back && back.isConnected) back.focus();
        resolve(yes);
      };
      ok.onclick = () => done(true);
      keep.onclick = () => done(false);
      // Escape. A dialog's close event comes a task after its close: one
      // still on its way from the confirmation before finds this one open,
      // and is not this one's.
      dlg.onclose = () => { if (!dlg.open) done(false); };
      dlg.showModal();
      keep.focus();
    });
  }

  async function act(title, text, okLabel, method, params, describe) {
    if (!(await confirmAction(title, text, okLabel))) return;
    try {
      const res = await rpc(method, params);
      info(describe(res));
    } catch (err) {
      fail(err);
    }
  }

  // ---- formatting ----
  function short(id) { return id ? id.slice(-12) : ""; }
  function duration(ms) {
    if (ms <= 0) return "passed";
    const s = Math.round(ms / 1000);
    if (s < 60) return `${s}s`;
    const m = Math.floor(s / 60);
    if (m < 60) return `${m}m ${s % 60}s`;
    return `${Math.floor(m / 60)}h ${m % 60}m`;
  }
  function ago(iso) {
    if (!iso) return "";
    const ms = Date.now() + skew - Date.parse(iso);
    return ms < 1000 ? "just now" : `${duration(ms)} ago`;
  }
  function tokens(usage) { return (usage ? (usage.tokens_in || 0) + (usage.tokens_out || 0) : 0); }
  function badge(cls, text) { return el("span", { class: `badge ${cls}`, text }); }
  function tokenCell(td, usage, grant) {
    const used = tokens(usage);
    td.replaceChildren();
    if (grant > 0) {
      td.append(el("meter", { min: 0, max: grant, value: Math.min(used, grant), "aria-label": `${used} of ${grant} tokens` }), " ");
    }
    td.append(el("span", { text: grant > 0 ? `${used} / ${grant}` : String(used) }));
    if (usage && usage.steps) td.append(el("span", { class: "sub", text: usage.steps === 1 ? "1 step" : `${usage.steps} steps` }));
  }

  // renderRows keeps one row per key: rows are updated in place, so a focused
  // button keeps its focus while the tree changes around it.
  function renderRows(tbody, items, key, create, update) {
    const rows = tbody.rows_ || (tbody.rows_ = new Map());
    const seen = new Set();
    items.forEach((it, i) => {
      const k = key(it);
      seen.add(k);
      let tr = rows.get(k);
      if (!tr) {
        tr = create(it);
        rows.set(k, tr);
      }
      update(tr, it);
      if (tbody.children[i] !== tr) tbody.insertBefore(tr, tbody.children[i] || null);
    });
    for (const [k, tr] of rows) {
      if (seen.has(k)) continue;
      if (tr.contains(document.activeElement)) $("trees-h").focus();
      tr.remove();
      rows.delete(k);
    }
  }

  function markChange(tr, id, status) {
    const before = lastStatus.get(id);
    lastStatus.set(id, status);
    tr.dataset.status = status;
    if (before !== undefined && before !== status) {
      tr.classList.remove("changed");
      void tr.offsetWidth; // restart the animation
      tr.classList.add("changed");
    }
  }

  // ---- the live trees ----
  function nodeRow(n) {
    const tr = el("tr", { "data-task-id": n.task_id });
    for (let i = 0; i < 10; i++) tr.append(el("td"));
    tr.cells[7].className = "num";
    tr.cells[4].className = "num";
    tr.cells[5].className = "nowrap";
    tr.cells[6].className = "nowrap";
    tr.cells[8].className = "id";
    const details = el("button", { type: "button", text: "Details", "data-action": "details" });
    details.addEventListener("click", () => showDetail(tr.dataset.taskId));
    const cancel = el("button", { type: "button", text: "Cancel subtree", class: "danger", "data-action": "cancel" });
    cancel.addEventListener("click", () => {
      const path = tr.dataset.path;
      act(`Cancel the subtree of ${path}?`,
        `The kill ladder runs on ${path} (task ${tr.dataset.taskId}) and every subagent below it. The service keeps running.`,
        "Cancel subtree", "a2a.Cancel", { handle: tr.dataset.taskId, reason: REASON },
        (r) => r.cancelled ? `Cancelled the subtree of ${path}: ${r.subtree_size} subagents.` : `${path} had already ended.`);
    });
    tr.cells[9].append(details, " ", cancel);
    tr.details_ = details;
    tr.cancel_ = cancel;
    return tr;
  }

  function fillNode(tr, n) {
    tr.dataset.path = n.agent_path;
    const c = tr.cells;
    const path = el("span", { class: `path d${Math.min(n.depth, 8)}` }, el("span", { class: "mono", text: n.agent_path }));
    if (n.kind === "exec") path.append(" ", badge("kind", "exec"));
    if (n.objective) path.append(el("span", { class: "objective", text: n.objective }));
    c[0].replaceChildren(path);
    c[1].replaceChildren(badge(`s-${n.status}`, n.status));
    const det = [];
    if (n.health) det.push(badge(`h-${n.health}`, n.health === "busy_healthy" ? "busy" : n.health));
    if (n.last_progress) det.push(el("span", { class: "sub", "data-ago": n.last_progress, text: `last event ${ago(n.last_progress)}` }));
    if (n.missed_pings) det.push(el("span", { class: "sub", text: `${n.missed_pings} pings unanswered` }));
    if (!det.length) det.push(el("span", { class: "sub", text: n.pid ? "starting" : "no process" }));
    c[2].replaceChildren(...det);
    c[3].textContent = n.provider + (n.disposition ? ` · ${n.disposition}` : "");
    c[4].textContent = String(n.depth);
    tokenCell(c[5], n.usage, n.max_tokens || 0);
    c[6].dataset.deadline = n.deadline;
    c[6].textContent = deadlineLeft(n.deadline);
    c[7].textContent = n.pid > 0 ? String(n.pid) : "–";
    c[8].textContent = short(n.task_id);
    c[8].title = n.task_id;
    tr.details_.setAttribute("aria-label", `Details of ${n.agent_path}`);
    tr.cancel_.setAttribute("aria-label", `Cancel the subtree of ${n.agent_path}`);
    tr.cancel_.disabled = n.status === "stopping";
    markChange(tr, n.task_id, n.status);
  }

  function deadlineLeft(iso) {
    if (!iso) return "";
    return duration(Date.parse(iso) - (Date.now() + skew));
  }

  // ---- ended lately ----
  function endedRow(e) {
    const tr = el("tr", { "data-task-id": e.task_id });
    for (let i = 0; i < 7; i++) tr.append(el("td"));
    tr.cells[5].className = "id";
    const details = el("button", { type: "button", text: "Details", "data-action": "details" });
    details.addEventListener("click", () => showDetail(tr.dataset.taskId));
    tr.cells[6].append(details);
    tr.details_ = details;
    return tr;
  }
  function fillEnded(tr, e) {
    const c = tr.cells;
    const path = el("span", { class: `path d${Math.min(e.depth, 8)}` }, el("span", { class: "mono", text: e.agent_path }));
    if (e.kind === "exec") path.append(" ", badge("kind", "exec"));
    if (e.objective) path.append(el("span", { class: "objective", text: e.objective }));
    c[0].replaceChildren(path);
    c[1].replaceChildren(badge(`s-${e.status}`, e.status), e.cause ? el("span", { class: "sub", text: e.cause }) : "");
    c[2].textContent = e.provider;
    tokenCell(c[3], e.usage, e.max_tokens || 0);
    c[4].dataset.ago = e.ended_at;
    c[4].textContent = ago(e.ended_at);
    c[5].textContent = short(e.task_id);
    c[5].title = e.task_id;
    tr.dataset.status = e.status;
    tr.details_.setAttribute("aria-label", `Details of ${e.agent_path} (ended)`);
  }

  // ---- gauges and breakers ----
  function gauges(s) {
    const out = [];
    const a = s.admission;
    if (a) {
      out.push({ name: "live runs", value: a.runs, max: a.max_live_runs, help: "runs (live trees) holding a slot, against --max-live-runs" });
      out.push({ name: "live processes", value: a.live_processes, max: a.max_live_subagents, help: "subagent processes alive, against --max-live-subagents" });
      out.push({ name: "process slots", value: a.slots, max: a.max_live_subagents, help: "process slots taken (one per run, one per nested local subagent)" });
      out.push({ name: "admission queue", value: a.queued, max: a.queue_capacity, help: "runs waiting for a slot, against --queue-capacity" });
      if (a.shed) {
        const shed = Object.values(a.shed).reduce((x, y) => x + y, 0);
        out.push({ name: "shed (429)", value: shed, help: "requests turned away since start" });
      }
    }
    for (const g of s.gauges || []) out.push(g);
    const open = (s.breakers || []).filter((b) => b.open).length;
    out.push({ name: "breakers open", value: open, max: (s.breakers || []).length || 0 });
    return out;
  }
  function renderGauges(s) {
    const dl = $("gauges");
    const items = gauges(s);
    dl.replaceChildren(...items.map((g) => {
      const dd = el("dd", { text: g.max ? `${g.value} / ${g.max}` : String(g.value) });
      if (g.max) dd.append(el("meter", { min: 0, max: g.max, value: Math.min(g.value, g.max), "aria-label": `${g.name}: ${g.value} of ${g.max}` }));
      return el("div", { title: g.help || "" }, el("dt", { text: g.name }), dd);
    }));
  }
  function breakerRow(b) {
    const tr = el("tr", { "data-key": b.key });
    for (let i = 0; i < 7; i++) tr.append(el("td"));
    const close = el("button", { type: "button", text: "Close breaker" });
    close.addEventListener("click", () => {
      const key = tr.dataset.key;
      act(`Close the breaker ${key}?`, `Restarts under ${key} may start again at once.`, "Close breaker",
        "a2a.CloseBreaker", { key }, (r) => r.was_open ? `Closed ${key}.` : `${key} was not open.`);
    });
    tr.cells[6].append(close);
    tr.close_ = close;
    return tr;
  }
  function fillBreaker(tr, b) {
    const state = b.state || (b.open ? "open" : "closed");
    const c = tr.cells;
    c[0].textContent = b.key;
    c[0].className = "mono";
    c[1].replaceChildren(badge(state === "closed" ? "s-running" : "s-crashed", state));
    c[2].textContent = String(b.failures);
    c[3].textContent = String(b.consecutive);
    c[4].textContent = b.last_outcome || "";
    c[5].textContent = b.next_trial ? `trial ${ago(b.next_trial)}` : (b.next_start ? new Date(b.next_start).toLocaleTimeString() : "");
    tr.close_.disabled = !b.open;
    tr.close_.setAttribute("aria-label", `Close the breaker ${b.key}`);
  }

  function intelRow(b) {
    const tr = el("tr");
    for (let i = 0; i < 6; i++) tr.append(el("td"));
    return tr;
  }
  function fillIntel(tr, b) {
    const c = tr.cells;
    c[0].textContent = b.endpoint;
    c[0].className = "mono";
    c[1].textContent = b.model || "";
    c[2].replaceChildren(badge(b.state === "closed" ? "s-running" : "s-crashed", b.state));
    c[3].textContent = String(b.failures || 0);
    c[4].textContent = b.state === "open" && b.until ? new Date(b.until).toLocaleTimeString() : "";
    c[5].textContent = b.last_error || "";
  }

  // ---- the whole page ----
  function render(s) {
    snap = s;
    const nodes = s.nodes || [];
    const ended = s.ended || [];
    const breakers = s.breakers || [];
    const states = [s.draining ? "draining" : (s.paused ? "paused" : "running")];
    if (s.service) {
      states.push(s.service.ready ? "ready" : "lame duck (not ready)");
      states.push(`${s.service.in_flight} tasks in flight`);
    }
    states.push(`${nodes.length} live subagents`);
    $("state").textContent = states.join(" · ");
    $("act-pause").hidden = !!s.paused;
    $("act-resume").hidden = !s.paused;
    const ready = !s.service || s.service.ready;
    $("act-lameduck").hidden = !ready;
    $("act-ready").hidden = ready;
    $("act-drain").disabled = !!s.draining;

    renderRows($("trees").tBodies[0], nodes, (n) => n.task_id, nodeRow, fillNode);
    $("trees").hidden = nodes.length === 0;
    $("trees-empty").hidden = nodes.length > 0;
    renderRows($("ended").tBodies[0], ended, (e) => e.task_id, endedRow, fillEnded);
    $("ended").hidden = ended.length === 0;
    $("ended-empty").hidden = ended.length > 0;
    renderGauges(s);
    renderRows($("breakers").tBodies[0], breakers, (b) => b.key, breakerRow, fillBreaker);
    $("breakers").hidden = breakers.length === 0;
    $("breakers-empty").hidden = breakers.length > 0;
    const intel = s.intelligence_breakers || [];
    renderRows($("intel").tBodies[0], intel, (b) => `${b.endpoint} ${b.model || ""}`, intelRow, fillIntel);
    $("intel").hidden = intel.length === 0;
    $("intel-empty").hidden = intel.length > 0;

    if (detailID) {
      const live = nodes.find((n) => n.task_id === detailID);
      const gone = ended.find((e) => e.task_id === detailID);
      const key = live ? `${live.status}/${tokens(live.usage)}` : (gone ? `ended/${gone.status}` : "");
      if (key && key !== $("detail").dataset.key) {
        $("detail").dataset.key = key;
        clearTimeout(detailTimer);
        detailTimer = setTimeout(() => loadDetail(false), 150);
      }
    }
  }

  // tick redraws what depends on the clock only (deadlines, ages).
  function tick() {
    for (const td of document.querySelectorAll("[data-deadline]")) td.textContent = deadlineLeft(td.dataset.deadline);
    for (const e of document.querySelectorAll("[data-ago]")) {
      const prefix = e.classList.contains("sub") ? "last event " : "";
      e.textContent = prefix + ago(e.dataset.ago);
    }
  }

  // ---- a task's detail ----
  function showDetail(id) {
    detailID = id;
    $("detail").dataset.key = "";
    $("detail").hidden = false;
    loadDetail(true);
  }
  async function loadDetail(focus) {
    const id = detailID;
    if (!id) return;
    try {
      const t = await rpc("tasks/get", { id, historyLength: 50 });
      if (id === detailID) fillDetail(t);
      if (focus) $("detail-h").focus();
    } catch (err) {
      fail(err);
    }
  }
  function partNodes(p) {
    if (p.kind === "text") return [el("pre", { text: p.text })];
    if (p.kind === "data") return [el("pre", { text: JSON.stringify(p.data, null, 2) })];
    if (p.kind === "file" && p.file) {
      const uri = p.file.uri || "";
      let local = "";
      try {
        const u = new URL(uri, location.href);
        if (u.pathname.startsWith("/blobs/")) local = u.pathname;
      } catch (_) { /* not a URL */ }
      if (local) {
        return [el("p", {}, el("a", { href: local, text: `stored distillate ${local.slice(7)}`, target: "_blank", rel: "noopener noreferrer" }),
          el("span", { class: "sub", text: p.file.mimeType || "" }))];
      }
      return [el("p", { class: "mono", text: uri || "(file without a URI)" })];
    }
    return [el("pre", { text: JSON.stringify(p) })];
  }
  function usageText(u) {
    if (!u || typeof u !== "object") return undefined;
    const steps = u.steps === 1 ? "1 step" : `${u.steps || 0} steps`;
    return `${(u.tokens_in || 0) + (u.tokens_out || 0)} tokens (${u.tokens_in || 0} in, ${u.tokens_out || 0} out), ${steps}`;
  }
  function fillDetail(t) {
    const meta = t.metadata || {};
    $("detail-h").textContent = `Task ${meta["agentd/agent_path"] || ""} ${t.id}`.replace("  ", " ");
    const fields = [
      ["Task id", t.id],
      ["Context", t.contextId],
      ["State", t.status && t.status.state],
      ["Updated", t.status && t.status.timestamp],
      ["Status", meta["agentd/status"]],
      ["Cause", meta["agentd/cause"]],
      ["Agent path", meta["agentd/agent_path"]],
      ["Parent task", meta["agentd/parent_task"]],
      ["Provider", meta["agentd/provider"]],
      ["Disposition", meta["agentd/disposition"]],
      ["Caller", meta["agentd/caller"]],
      ["Usage", usageText(meta["agentd/usage"])],
    ];
    if (t.status && t.status.message) fields.push(["Status message", (t.status.message.parts || []).map((p) => p.text || "").join(" ")]);
    const dl = $("detail-fields");
    dl.replaceChildren();
    for (const [k, v] of fields) {
      if (v === undefined || v === null || v === "") continue;
      dl.append(el("dt", { text: k }), el("dd", { text: String(v), class: k.includes("id") || k.includes("task") ? "mono" : "" }));
    }
    const arts = $("detail-artifacts");
    arts.replaceChildren();
    for (const a of t.artifacts || []) {
      arts.append(el("h4", { text: a.name || a.artifactId }));
      for (const p of a.parts || []) arts.append(...partNodes(p));
    }
    if (!(t.artifacts || []).length) arts.append(el("p", { class: "empty", text: "No artifact yet." }));
    const hist = $("detail-history");
    hist.replaceChildren(...(t.history || []).map((m) => el("li", {},
      el("strong", { text: `${m.role}: ` }), ...(m.parts || []).flatMap((p) => p.kind === "text" ? [p.text] : partNodes(p)))));
  }

  // ---- the stream ----
  function connect() {
    const conn = $("conn");
    const es = new EventSource("events");
    es.addEventListener("snapshot", (e) => {
      const ev = JSON.parse(e.data);
      skew = Date.parse(ev.at) - Date.now();
      conn.textContent = "Live";
      conn.className = "conn live";
      render(ev.snapshot);
    });
    es.addEventListener("error", () => {
      conn.className = "conn down";
      if (es.readyState === EventSource.CLOSED) {
        conn.textContent = "Refused: the console is for operators (docs/security.md). Reload to try again.";
      } else {
        conn.textContent = "Reconnecting…";
      }
    });
  }

  function wire() {
    $("act-pause").addEventListener("click", () => act("Pause the service?",
      "New spawns are held and running subagents hold before their next model call. Nothing is killed; deadlines keep running.",
      "Pause", "a2a.Pause", undefined, (r) => `Paused: ${r.affected} subagents told.`));
    $("act-resume").addEventListener("click", () => act("Resume the service?",
      "Held spawns start and paused subagents go on.", "Resume", "a2a.Resume", undefined,
      (r) => `Resumed: ${r.affected} subagents released.`));
    $("act-lameduck").addEventListener("click", () => act("Put the service in lame duck?",
      "/readyz reports not ready, so load balancers stop sending new work; everything else keeps working.",
      "Lame duck", "a2a.LameDuck", { ready: false }, () => "The service reports not ready."));
    $("act-ready").addEventListener("click", () => act("Make the service ready again?",
      "/readyz reports ready again.", "Ready again", "a2a.LameDuck", { ready: true }, () => "The service reports ready."));
    $("act-cancel-all").addEventListener("click", () => act("Cancel every tree?",
      "The kill ladder runs on every live tree. The service keeps running and takes new work.",
      "Cancel every tree", "a2a.Cancel", { handle: "0", reason: REASON },
      (r) => r.cancelled ? `Cancelled ${r.subtree_size} subagents.` : "Nothing was running."));
    $("act-drain").addEventListener("click", () => act("Drain the service?",
      "New work is refused at once, every tree is stopped, and the process exits. This page loses its server.",
      "Drain", "a2a.Drain", undefined, (r) => `Draining: ${r.in_flight} tasks in flight, budget ${Math.round(r.drain_timeout_ms / 1000)}s.`));
    $("detail-close").addEventListener("click", () => {
      detailID = "";
      $("detail").hidden = true;
      $("trees-h").focus();
    });
    $("detail-refresh").addEventListener("click", () => loadDetail(false));
  }

  wire();
  connect();
  setInterval(tick, 1000);
})();
