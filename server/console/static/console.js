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
  let live = false; // the stream is up and a snapshot came on it
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
    const pageLink = el("a", { href: taskURL(n.task_id), text: "Page", "data-route": "task" });
    const cancel = el("button", { type: "button", text: "Cancel subtree", class: "danger", "data-action": "cancel" });
    cancel.addEventListener("click", () => {
      const path = tr.dataset.path;
      act(`Cancel the subtree of ${path}?`,
        `The kill ladder runs on ${path} (task ${tr.dataset.taskId}) and every subagent below it. The service keeps running.`,
        "Cancel subtree", "a2a.Cancel", { handle: tr.dataset.taskId, reason: REASON },
        (r) => r.cancelled ? `Cancelled the subtree of ${path}: ${r.subtree_size} subagents.` : `${path} had already ended.`);
    });
    tr.cells[9].append(pageLink, " ", details, " ", cancel);
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
    const said = snap && snap.texts && snap.texts[n.task_id];
    if (said) path.append(el("span", { class: "said", text: said }));
    c[0].replaceChildren(path);
    c[1].replaceChildren(badge(`s-${n.status}`, n.status));
    const w = waiting.get(n.task_id);
    if (w) {
      c[1].append(" ", el("a", { href: "/ui/#waiting", "data-route": "waiting", class: `badge s-${w}`, text: w === "asking" ? "asks" : "input-required",
        title: w === "asking" ? "this subagent waits for an answer" : "the task waits for its caller's answer" }));
    }
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
    tr.cells[6].append(el("a", { href: taskURL(e.task_id), text: "Page", "data-route": "task" }), " ", details);
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

  // ---- the waiting tasks (a2a.Questions in the snapshot, a2a.Answer) ----
  // waiting marks the live tree's nodes: the asker ("asking") and the task
  // that waits for its caller ("input-required").
  const waiting = new Map();
  function noteWaiting(qs) {
    waiting.clear();
    for (const q of qs) {
      waiting.set(q.task_id, "input-required");
      if (q.handle && q.handle !== q.task_id) waiting.set(q.handle, "asking");
    }
    const n = $("waiting-count");
    n.textContent = String(qs.length);
    n.hidden = qs.length === 0;
    $("nav-waiting").setAttribute("aria-label", qs.length ? `Waiting: ${qs.length} tasks wait for an answer` : "Waiting");
  }
  async function answerTask(id, text, done) {
    try {
      const r = await rpc("a2a.Answer", { task_id: id, answer: text });
      info(`${done}: task ${short(id)} is ${r.state} again (answered by ${r.answered_by}).`);
      return true;
    } catch (err) {
      fail(err);
      return false;
    }
  }
  // questionCard is one waiting task: who asks, the question (or the call
  // to approve and its arguments), and the form that answers it. Cards are
  // kept while their question waits, so an answer being typed survives the
  // stream's updates.
  let cardSeq = 0;
  function questionCard(q) {
    const id = q.task_id;
    const hid = `question-${++cardSeq}`;
    const card = el("article", { class: "question", "data-task-id": id, "data-kind": q.tool ? "approval" : "question", "aria-labelledby": hid });
    const title = q.tool ? `Subagent ${q.agent_path} wants to call ${q.tool}` : `Subagent ${q.agent_path} asks`;
    card.append(el("h3", { id: hid, text: title }));
    const meta = el("p", { class: "meta" },
      el("span", {}, "task ", el("a", { href: taskURL(id), text: short(id), title: id, "data-route": "task", class: "mono" })),
      el("span", {}, "caller ", el("span", { class: "mono", text: q.caller })),
      el("span", {}, "asked ", el("span", { "data-ago": q.since, text: ago(q.since) })));
    if (q.deadline) meta.append(el("span", {}, "fails in ", el("span", { "data-deadline": q.deadline, text: deadlineLeft(q.deadline) })));
    card.append(meta, el("pre", { class: "text", text: q.text }));
    if (q.tool) {
      let args = "";
      try { args = JSON.stringify(q.arguments, null, 2); } catch (_) { args = String(q.arguments); }
      card.append(el("p", { class: "sub", text: "arguments" }), el("pre", { class: "text mono", text: args || "(none)" }));
      const reason = el("input", { type: "text", maxLength: 4096, placeholder: "why not (the model sees it)", "aria-label": `Reason to deny ${q.tool} for task ${id}` });
      const approve = el("button", { type: "button", text: "Approve", "data-action": "approve" });
      const deny = el("button", { type: "button", text: "Deny", class: "danger", "data-action": "deny" });
      approve.addEventListener("click", () => act(`Approve ${q.tool}?`,
        `Subagent ${q.agent_path} of task ${id} runs ${q.tool} with the arguments shown, on its caller's behalf.`, "Approve",
        "a2a.Answer", { task_id: id, answer: "yes" }, (r) => `Approved: task ${short(id)} is ${r.state} again.`));
      deny.addEventListener("click", () => {
        const why = reason.value.trim();
        act(`Deny ${q.tool}?`, `The call is not run; the model of ${q.agent_path} is told it was not approved${why ? `: ${why}` : ""}.`, "Deny",
          "a2a.Answer", { task_id: id, answer: why ? `no: ${why}` : "no" }, (r) => `Denied: task ${short(id)} is ${r.state} again.`);
      });
      const decide = el("form", { class: "decide", "aria-label": `Decide ${q.tool} for task ${id}` }, approve, reason, deny);
      decide.addEventListener("submit", (e) => e.preventDefault()); // Enter in the reason decides nothing
      card.append(decide);
      return card;
    }
    const input = el("textarea", { rows: 2, maxLength: 65536, required: true, name: "answer", "aria-label": `Answer to task ${id}` });
    const send = el("button", { type: "submit", text: "Answer", "data-action": "answer" });
    const form = el("form", { class: "answer", "aria-label": `Answer task ${id}` });
    if (q.choices && q.choices.length) {
      const choices = el("p", { class: "choices" }, el("span", { class: "sub", text: "choices " }));
      for (const c of q.choices) {
        const b = el("button", { type: "button", text: c, "data-action": "choice" });
        b.addEventListener("click", () => { input.value = c; input.focus(); });
        choices.append(b, " ");
      }
      card.append(choices);
    }
    form.append(input, send);
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      const text = input.value;
      if (!text.trim()) { fail("The answer has no text."); return; }
      send.disabled = true;
      if (await answerTask(id, text, "Answered")) input.value = "";
      send.disabled = !live;
    });
    card.append(form);
    return card;
  }
  function renderQuestions(qs) {
    const box = $("questions");
    const cards = box.cards_ || (box.cards_ = new Map());
    const seen = new Set();
    qs.forEach((q, i) => {
      // A task asks one question at a time; its next one is another card.
      const key = `${q.task_id} ${q.since}`;
      seen.add(key);
      let card = cards.get(key);
      if (!card) {
        card = questionCard(q);
        cards.set(key, card);
      }
      if (box.children[i] !== card) box.insertBefore(card, box.children[i] || null);
    });
    for (const [k, card] of cards) {
      if (seen.has(k)) continue;
      if (card.contains(document.activeElement)) $("waiting-h").focus();
      card.remove();
      cards.delete(k);
    }
    $("waiting-empty").hidden = qs.length > 0;
  }

  // ---- the whole page ----
  function render(s) {
    snap = s;
    for (const p of document.querySelectorAll("[data-when-live]")) p.textContent = p.dataset.whenLive;
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
    for (const id of ["act-pause", "act-resume", "act-lameduck", "act-ready", "act-cancel-all"]) $(id).disabled = false;

    noteWaiting(s.questions || []);
    renderQuestions(s.questions || []);
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
    liveChanged();
    taskSnapshot(s);
  }

  // liveChanged disables every action while the page has no live stream:
  // what it shows may be stale, so it acts on nothing.
  function liveChanged() {
    document.body.classList.toggle("stale", !live);
    for (const b of document.querySelectorAll(".actions button, #trees button[data-action=cancel], #breakers button, #questions button")) {
      if (!live) b.disabled = true;
    }
    if (live) for (const b of document.querySelectorAll("#questions button")) b.disabled = false;
    if (live && snap) {
      $("act-drain").disabled = !!snap.draining;
      for (const id of ["act-pause", "act-resume", "act-lameduck", "act-ready", "act-cancel-all"]) $(id).disabled = false;
      for (const tr of $("trees").tBodies[0].rows) if (tr.cancel_) tr.cancel_.disabled = tr.dataset.status === "stopping";
      for (const tr of $("breakers").tBodies[0].rows) if (tr.close_) tr.close_.disabled = !(snap.breakers || []).some((b) => b.key === tr.dataset.key && b.open);
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
  // Until the first snapshot the page says it is connecting and acts on
  // nothing; a lost stream says so, and EventSource reconnects by itself.
  function connect() {
    const conn = $("conn");
    const es = new EventSource("/ui/events");
    es.addEventListener("snapshot", (e) => {
      const ev = JSON.parse(e.data);
      skew = Date.parse(ev.at) - Date.now();
      live = true;
      conn.textContent = "Live";
      conn.className = "conn live";
      render(ev.snapshot);
    });
    es.addEventListener("error", () => {
      live = false;
      conn.className = "conn down";
      if (es.readyState === EventSource.CLOSED) {
        conn.textContent = "Refused: the console is for operators (docs/security.md). Reload to try again.";
      } else {
        conn.textContent = snap ? "Connection lost: reconnecting… (what is shown may be stale)" : "Connecting…";
      }
      liveChanged();
    });
  }

  // ---- views and routes ----
  // The page is one document: /ui/ (the live view), /ui/#history,
  // /ui/#audit, and a task's own page /ui/tasks/{id}, which the server
  // answers with this page too, so a link or a reload lands on it.
  const TASKS = "/ui/tasks/";
  function taskURL(id) { return TASKS + encodeURIComponent(id); }
  let view = "";
  function route() {
    let v = "live";
    let id = "";
    if (location.pathname.startsWith(TASKS) && location.pathname.length > TASKS.length) {
      v = "task";
      try { id = decodeURIComponent(location.pathname.slice(TASKS.length)); } catch (_) { id = ""; }
    } else if (location.hash === "#history") v = "history";
    else if (location.hash === "#audit") v = "audit";
    else if (location.hash === "#waiting") v = "waiting";
    for (const name of ["live", "waiting", "history", "task", "audit"]) $(`view-${name}`).hidden = name !== v;
    for (const a of document.querySelectorAll(".views a")) {
      if (a.dataset.route === v) a.setAttribute("aria-current", "page");
      else a.removeAttribute("aria-current");
    }
    view = v;
    document.title = { live: "agentd console", history: "Task history · agentd", audit: "Audit · agentd", waiting: "Waiting · agentd", task: `Task ${id} · agentd` }[v];
    if (v === "history") loadHistory(false);
    if (v === "audit") loadAudit(false);
    if (v === "task") openTask(id);
    else {
      // Leaving the task's page: a reload taskSnapshot scheduled for it
      // must not run with no task (it asked for /ui/api/task?id=, a 400).
      task.id = "";
      clearTimeout(task.timer);
    }
  }
  function go(href) {
    history.pushState(null, "", href);
    route();
  }
  // Links inside the page route without a reload (a middle click or a
  // modified click opens a new tab as usual).
  document.addEventListener("click", (e) => {
    const a = e.target.closest && e.target.closest("a[data-route]");
    if (!a || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
    e.preventDefault();
    go(a.getAttribute("href"));
  });
  window.addEventListener("popstate", route);

  async function getJSON(url) {
    const resp = await fetch(url, { credentials: "same-origin", cache: "no-store" });
    let body = null;
    try { body = await resp.json(); } catch (_) { /* not JSON */ }
    if (!resp.ok) {
      const err = new Error((body && body.error) || `HTTP ${resp.status}`);
      err.status = resp.status;
      throw err;
    }
    return body;
  }
  function when(iso) {
    if (!iso) return "";
    const d = new Date(iso);
    return isNaN(d) ? "" : d.toLocaleString();
  }
  function span(ms) {
    if (!ms || ms < 0) return "";
    if (ms < 1000) return `${ms} ms`;
    return duration(ms);
  }
  function statusBadge(t) {
    const st = t.status || t.state;
    return badge(`s-${st}`, st);
  }

  // ---- the history ----
  // Pages are read from the server a page at a time (a position token, not
  // an offset); the page keeps the tokens of the pages before, to go back.
  const hist = { tokens: [""], at: 0, seq: 0 };
  function historyParams() {
    const p = new URLSearchParams();
    const f = (id) => $(id).value.trim();
    if (f("f-q")) p.set("q", f("f-q"));
    if (f("f-state")) p.set("state", f("f-state"));
    if (f("f-caller")) p.set("caller", f("f-caller"));
    if (f("f-context")) p.set("context", f("f-context"));
    for (const [id, key] of [["f-after", "after"], ["f-before", "before"]]) {
      const v = f(id);
      if (v) {
        const d = new Date(v); // local time, as the control shows it
        if (!isNaN(d)) p.set(key, d.toISOString().replace(/\.\d+Z$/, "Z"));
      }
    }
    p.set("size", f("f-size") || "25");
    return p;
  }
  async function loadHistory(keepPage) {
    if (!keepPage) { hist.tokens = [""]; hist.at = 0; }
    const p = historyParams();
    const token = hist.tokens[hist.at];
    if (token) p.set("page", token);
    const seq = ++hist.seq;
    const status = $("history-status");
    status.textContent = "Loading…";
    try {
      const page = await getJSON("/ui/api/tasks?" + p.toString());
      if (seq !== hist.seq) return; // a later request answers
      renderHistory(page);
    } catch (err) {
      if (seq !== hist.seq) return;
      $("history").hidden = true;
      status.textContent = `The history could not be read: ${err.message}`;
      $("history-older").disabled = true;
    }
  }
  function renderHistory(page) {
    const tbody = $("history").tBodies[0];
    tbody.replaceChildren(...page.tasks.map((t) => {
      const idCell = el("td", { class: "id" },
        el("a", { href: taskURL(t.id), text: short(t.id), title: t.id, "data-route": "task", "aria-label": `Task ${t.id}` }));
      if (t.agent_path) idCell.append(el("span", { class: "sub", text: `path ${t.agent_path}` }));
      if (t.parent_task) idCell.append(el("span", { class: "sub" }, "parent ", el("a", { href: taskURL(t.parent_task), text: short(t.parent_task), title: t.parent_task, "data-route": "task" })));
      const st = el("td", {}, statusBadge(t));
      if (t.cause) st.append(el("span", { class: "sub", text: t.cause }));
      if (t.state === "input-required") st.append(el("a", { href: "/ui/#waiting", "data-route": "waiting", class: "sub waiting", text: "waiting for an answer: answer it" }));
      const tok = (t.usage.tokens_in || 0) + (t.usage.tokens_out || 0);
      return el("tr", { "data-task-id": t.id, "data-state": t.state },
        idCell,
        el("td", {}, el("span", { class: "objective text", text: t.objective })),
        st,
        el("td", { class: "nowrap", text: when(t.started), title: t.started || "" }),
        el("td", { class: "num", text: span(t.duration_ms) }),
        el("td", { class: "num", text: String(tok), title: `${t.usage.tokens_in || 0} in, ${t.usage.tokens_out || 0} out, ${t.usage.steps || 0} steps` }),
        el("td", { class: "mono", text: t.caller || "(anonymous)" }));
    }));
    $("history").hidden = page.tasks.length === 0;
    const from = hist.at * page.page_size + 1;
    $("history-status").textContent = page.tasks.length === 0 ? "No stored task matches." :
      `Tasks ${from}–${from + page.tasks.length - 1} of ${page.total}, newest first.`;
    $("history-pos").textContent = `page ${hist.at + 1} of ${Math.max(1, Math.ceil(page.total / page.page_size))}`;
    hist.tokens.length = hist.at + 1;
    if (page.next_page) hist.tokens.push(page.next_page);
    $("history-older").disabled = !page.next_page;
    $("history-newer").disabled = hist.at === 0;
  }

  // ---- a task's page ----
  const task = { id: "", seq: 0, data: null, timer: 0, tick: 0 };
  async function openTask(id) {
    if (task.id === id && task.data) return;
    task.id = id;
    task.data = null;
    $("task-h").textContent = `Task ${id}`;
    $("task-body").hidden = true;
    $("task-status").textContent = id ? "Loading…" : "No task id in the address.";
    if (id) await loadTask(true);
  }
  async function loadTask(focus) {
    const id = task.id;
    if (!id) return;
    const seq = ++task.seq;
    try {
      const data = await getJSON("/ui/api/task?id=" + encodeURIComponent(id));
      // Steps past the first page, read on while there are more (bounded).
      for (let n = 0; data.next_after && n < 20; n++) {
        const more = await getJSON(`/ui/api/task?id=${encodeURIComponent(id)}&after=${data.next_after}`);
        data.steps.push(...more.steps);
        data.next_after = more.next_after;
      }
      if (seq !== task.seq || id !== task.id) return;
      task.data = data;
      renderTask(data);
      if (focus) $("task-h").focus();
    } catch (err) {
      if (seq !== task.seq) return;
      $("task-body").hidden = true;
      $("task-status").textContent = err.status === 404 ?
        `No task ${id} here: it is unknown, expired, or not yours to see.` :
        `The task could not be read: ${err.message}`;
      $("task-h").textContent = "Task not found";
    }
  }
  // taskSnapshot reloads the open task's page while its tree runs: on a
  // snapshot that shows one of its subagents, or while it is not ended.
  function taskSnapshot(s) {
    if (view !== "task" || !task.data) return;
    const ids = new Set(task.data.steps.map((st) => st.task_id));
    ids.add(task.data.task.id);
    const running = (s.nodes || []).some((n) => ids.has(n.task_id)) || !terminal(task.data.task.state);
    if (!running && task.data.live === false) return;
    task.data.live = running;
    clearTimeout(task.timer);
    task.timer = setTimeout(() => loadTask(false), 250);
  }
  function terminal(state) { return ["completed", "canceled", "failed", "rejected"].includes(state); }

  function renderTask(d) {
    const t = d.task;
    $("task-status").textContent = terminal(t.state) ? "" : "Running: the page follows it live.";
    $("task-h").textContent = `Task ${t.agent_path ? t.agent_path + " " : ""}${t.id}`;
    const dl = $("task-fields");
    dl.replaceChildren();
    const field = (k, v, node) => {
      if (!node && (v === undefined || v === null || v === "")) return;
      dl.append(el("dt", { text: k }), node ? el("dd", {}, node) : el("dd", { text: String(v) }));
    };
    field("State", null, statusBadge(t));
    field("Cause", t.cause);
    field("Started", when(t.started));
    field("Duration", span(t.duration_ms));
    field("Tokens", `${(t.usage.tokens_in || 0) + (t.usage.tokens_out || 0)} (${t.usage.tokens_in || 0} in, ${t.usage.tokens_out || 0} out), ${t.usage.steps || 0} steps`);
    field("Caller", t.caller || "(anonymous)");
    field("Context", t.context_id);
    if (t.parent_task) field("Parent", null, el("a", { href: taskURL(t.parent_task), text: t.parent_task, "data-route": "task", class: "mono" }));
    if (d.root_id !== t.id) field("Tree's root", null, el("a", { href: taskURL(d.root_id), text: d.root_id, "data-route": "task", class: "mono" }));
    $("task-objective").textContent = t.objective || "(none)";
    renderTimeline(d);
    renderSteps(d);
    const arts = $("task-artifacts");
    arts.replaceChildren(...d.artifacts.map((a) => el("div", {}, el("h4", { text: a.role || "artifact" }), el("pre", { class: "text", text: a.text }))));
    if (!d.artifacts.length) arts.append(el("p", { class: "empty", text: "No artifact." }));
    $("task-history").replaceChildren(...d.history.map((m) => el("li", {}, el("strong", { text: `${m.role}:` }), el("pre", { class: "text", text: m.text }))));
    $("task-body").hidden = false;
    clearInterval(task.tick);
    if (!terminal(t.state)) task.tick = setInterval(() => { if (task.data === d) renderTimeline(d); }, 1000);
  }

  // subagents gathers the tree's subagents from its steps: start and end,
  // path, parent, status; in tree order (by path).
  function subagents(steps) {
    const by = new Map();
    for (const st of steps) {
      if (!st.task_id) continue;
      let a = by.get(st.task_id);
      if (!a) {
        a = { id: st.task_id, path: st.agent_path, parent: st.parent_id, depth: st.depth || 0, start: null, end: null, status: "running", steps: [], children: [] };
        by.set(st.task_id, a);
      }
      if (st.kind === "start") { a.start = Date.parse(st.at); a.objective = st.objective; }
      if (st.kind === "end") { a.end = Date.parse(st.at); a.status = st.status; a.cause = st.cause; }
      if (a.start === null) a.start = Date.parse(st.at);
      a.steps.push(st);
    }
    for (const a of by.values()) {
      const p = by.get(a.parent);
      if (p) p.children.push(a);
    }
    const key = (p) => (p || "").split(".").map((x) => x.padStart(6, "0")).join(".");
    return [...by.values()].sort((x, y) => (key(x.path) < key(y.path) ? -1 : key(x.path) > key(y.path) ? 1 : 0));
  }
  function renderTimeline(d) {
    const box = $("timeline");
    const subs = subagents(d.steps);
    if (!subs.length) {
      box.replaceChildren(el("p", { class: "empty", text: "No step of this tree is stored (a store that keeps none, or the task ran before steps were kept)." }));
      return;
    }
    const now = Date.now() + skew;
    const t0 = Math.min(...subs.map((a) => a.start));
    const t1 = Math.max(...subs.map((a) => a.end || now), t0 + 1);
    box.replaceChildren(el("div", { class: "tl-scale", "aria-hidden": "true" },
      el("span", { text: new Date(t0).toLocaleTimeString() }), el("span", { text: `${span(t1 - t0) || "0 ms"}` })));
    for (const a of subs) {
      const end = a.end || now;
      const bar = el("a", { class: `tl-bar s-${a.status}${a.end ? "" : " live"}`, href: `#sub-${a.id}`,
        "aria-label": `${a.path}: ${a.status}, ${span(end - a.start) || "0 ms"}` });
      bar.style.left = `${((a.start - t0) / (t1 - t0)) * 100}%`;
      bar.style.width = `${Math.max(0.6, ((end - a.start) / (t1 - t0)) * 100)}%`;
      bar.title = `${a.path} ${a.status} · ${span(end - a.start) || "0 ms"}`;
      bar.addEventListener("click", (e) => { e.preventDefault(); const s = document.getElementById(`sub-${a.id}`); if (s) s.scrollIntoView(); });
      box.append(el("div", { class: "tl-row", role: "listitem", "data-task-id": a.id, "data-status": a.status },
        el("span", { class: `tl-label mono d${Math.min(a.depth, 8)}`, text: a.path }),
        el("span", { class: "tl-track" }, bar)));
    }
  }
  // clipped shows a long text cut, with a control to see it all.
  const CLIP = 400;
  function clipped(text, cls) {
    const pre = el("pre", { class: `text ${cls || ""}`, text: text.length > CLIP ? text.slice(0, CLIP) + "…" : text });
    if (text.length <= CLIP) return pre;
    const btn = el("button", { type: "button", class: "link", text: `Show all ${text.length} characters`, "aria-expanded": "false" });
    btn.addEventListener("click", () => {
      const open = btn.getAttribute("aria-expanded") === "true";
      pre.textContent = open ? text.slice(0, CLIP) + "…" : text;
      btn.setAttribute("aria-expanded", String(!open));
      btn.textContent = open ? `Show all ${text.length} characters` : "Show less";
    });
    return el("div", {}, pre, btn);
  }
  function stepItem(st) {
    const li = el("li", { class: `step k-${st.kind}`, "data-kind": st.kind });
    const at = el("span", { class: "sub", text: new Date(st.at).toLocaleTimeString() });
    switch (st.kind) {
      case "start":
        li.append(el("strong", { text: "started" }), at);
        break;
      case "model":
        li.append(el("strong", { text: `model call${st.step ? " · step " + st.step : ""}` }), " ",
          el("span", { text: `${st.tokens_in || 0} in / ${st.tokens_out || 0} out tokens · ${span(st.duration_ms) || "0 ms"}` }),
          st.endpoint ? el("span", { class: "sub mono", text: st.endpoint }) : null, at);
        break;
      case "tool": {
        const name = st.tool || "";
        const what = /spawn/.test(name) ? "spawn" : /await/.test(name) ? "await" : "tool call";
        li.append(el("strong", { text: `${what} ${name}` }), " ", el("span", { text: span(st.duration_ms) || "0 ms" }), at);
        if (st.args) li.append(el("span", { class: "sub", text: "arguments" }), clipped(st.args));
        li.append(el("span", { class: "sub", text: st.is_error ? "error" : "result" }), clipped(st.result || "", st.is_error ? "error" : ""));
        break;
      }
      case "end":
        li.append(el("strong", { text: "ended " }), badge(`s-${st.status}`, st.status), st.cause ? ` ${st.cause}` : "", at);
        if (st.usage) li.append(el("span", { class: "sub", text: `${(st.usage.tokens_in || 0) + (st.usage.tokens_out || 0)} tokens, ${st.usage.steps || 0} steps` }));
        li.append(el("span", { class: "sub", text: "distillate" }), clipped(st.distillate || ""));
        break;
      case "dropped":
        li.append(el("strong", { text: "The tree's step budget ran out here: later steps were not kept." }));
        break;
      default:
        li.append(el("strong", { text: st.kind }), at);
    }
    if (st.cut) li.append(el("span", { class: "sub", text: `${st.cut} bytes were cut when it was stored.` }));
    return li;
  }
  function renderSteps(d) {
    const box = $("task-steps");
    const subs = subagents(d.steps);
    $("steps-note").textContent = d.steps.length ? `${d.steps.length} steps of the tree of ${d.root_id}, in the order the supervisor heard them.` : "";
    box.replaceChildren(...subs.map((a) => {
      const sec = el("section", { class: "subagent", id: `sub-${a.id}`, "aria-label": `Subagent ${a.path}` });
      const h = el("h4", {}, el("span", { class: "mono", text: a.path }), " ", badge(`s-${a.status}`, a.status), " ",
        el("a", { href: taskURL(a.id), text: "its page", "data-route": "task" }));
      sec.append(h);
      if (a.parent) sec.append(el("p", { class: "sub" }, "parent ", el("a", { href: `#sub-${a.parent}`, text: (subs.find((x) => x.id === a.parent) || {}).path || short(a.parent) })));
      if (a.children.length) {
        sec.append(el("p", { class: "sub" }, "children ", ...a.children.flatMap((c, i) => [i ? ", " : "", el("a", { href: `#sub-${c.id}`, text: c.path })])));
      }
      if (a.objective) sec.append(el("pre", { class: "text objective", text: a.objective }));
      sec.append(el("ol", { class: "steps" }, ...a.steps.map(stepItem)));
      return sec;
    }));
  }

  // ---- the audit trail (a2a.Audit) ----
  const audit = { next: "", seq: 0 };
  async function loadAudit(more) {
    const params = { limit: 50 };
    const m = $("a-method").value.trim();
    const c = $("a-caller").value.trim();
    if (m) params.method = m;
    if (c) params.caller = c;
    if (more && audit.next) params.before = audit.next;
    const seq = ++audit.seq;
    $("audit-status").textContent = "Loading…";
    try {
      const res = await rpc("a2a.Audit", params);
      if (seq !== audit.seq) return;
      const recs = (res && res.records) || [];
      const rows = recs.map((r) => el("tr", { "data-method": r.method, "data-outcome": r.outcome },
        el("td", { class: "nowrap", text: when(r.time), title: r.time }),
        el("td", { class: "mono", text: r.caller || "(anonymous)" }),
        el("td", { class: "mono", text: r.method }),
        el("td", { class: "mono", text: r.target || "" }),
        el("td", {}, badge(r.outcome === "ok" ? "s-completed" : "s-crashed", r.outcome), r.detail ? el("span", { class: "sub", text: r.detail }) : ""),
        el("td", { class: "mono", text: r.instance ? short(r.instance) : "" })));
      const tbody = $("audit").tBodies[0];
      if (more) tbody.append(...rows); else tbody.replaceChildren(...rows);
      audit.next = (res && res.next) || "";
      $("audit-more").hidden = !audit.next;
      $("audit").hidden = tbody.rows.length === 0;
      $("audit-status").textContent = tbody.rows.length ? `${tbody.rows.length} operator actions, newest first.` : "No operator action is recorded.";
    } catch (err) {
      if (seq !== audit.seq) return;
      $("audit").hidden = true;
      $("audit-status").textContent = `The audit trail could not be read: ${err.message}`;
    }
  }

  function wireViews() {
    $("history-form").addEventListener("submit", (e) => { e.preventDefault(); loadHistory(false); });
    $("history-form").addEventListener("reset", () => setTimeout(() => loadHistory(false), 0));
    $("history-older").addEventListener("click", () => { if (hist.tokens[hist.at + 1] !== undefined) { hist.at++; loadHistory(true); } });
    $("history-newer").addEventListener("click", () => { if (hist.at > 0) { hist.at--; loadHistory(true); } });
    $("audit-form").addEventListener("submit", (e) => { e.preventDefault(); loadAudit(false); });
    $("audit-more").addEventListener("click", () => loadAudit(true));
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
  wireViews();
  route();
  connect();
  setInterval(tick, 1000);
})();
