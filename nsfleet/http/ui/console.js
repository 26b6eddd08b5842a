// The read-only fleet console: reads the worker's JSON API and redraws in place. It waits on
// GET /v1/changes?since= (a long-poll of the fleet's change counter) and also redraws every 5 s,
// since a broker's deadline passing moves no counter. Sized for 10,000 topics and 500 brokers:
// the topic table comes in one request (GET /v1/topics/summary, fetched again only when the
// counter moved), each table is filtered, sorted and paged here, and only one page is drawn.
"use strict";

const $ = (id) => document.getElementById(id);
const PAGE_SIZE = 100;
const TOKEN_KEY = "nsfleetToken";
const KIND_CHOICES = [["normal", "application topics"], ["all", "all topics"],
                      ["system", "system topics"], ["retry", "%RETRY% topics"],
                      ["dlq", "%DLQ% topics"]];
// Measured by bench/console_bench.py: when the first full page was drawn, and the last filter.
window.nsfleetConsole = {firstRenderMs: null, lastFilterMs: null};

// --- access: a worker with HTTP tokens (docs/security.md) takes a read token -----------------
// Given once as /ui#token=TOKEN (dropped from the address bar) or typed into the form shown on
// a 401; kept for this tab only (sessionStorage).
if (location.hash.startsWith("#token=")) {
  sessionStorage.setItem(TOKEN_KEY, decodeURIComponent(location.hash.slice(7)));
  history.replaceState(null, "", location.pathname);
}

class Unauthorized extends Error {}

async function get(path) {
  const token = sessionStorage.getItem(TOKEN_KEY);
  const resp = await fetch(path, {cache: "no-store",
                                  headers: token ? {Authorization: `Bearer ${token}`} : {}});
  if (resp.status === 401) throw new Unauthorized(path);
  if (!resp.ok) {
    let why = "";
    try { why = ` ${(await resp.json()).error}`; } catch { /* not JSON */ }
    throw new Error(`${path}: ${resp.status}${why}`);
  }
  return resp.json();
}

let askedForToken = null;  // resolves once a token was entered

function askForToken() {
  if (!askedForToken) {
    const hadToken = sessionStorage.getItem(TOKEN_KEY) !== null;
    $("console").hidden = true;
    $("login").hidden = false;
    $("login-error").textContent = hadToken ? "The worker refused this token." : "";
    $("summary").textContent = "a read token is needed";
    $("token-input").focus();
    askedForToken = new Promise((resolve) => {
      $("login").onsubmit = (event) => {
        event.preventDefault();
        sessionStorage.setItem(TOKEN_KEY, $("token-input").value.trim());
        $("token-input").value = "";
        $("login").hidden = true;
        $("console").hidden = false;
        askedForToken = null;
        resolve();
      };
    });
  }
  return askedForToken;
}

// --- formatting -----------------------------------------------------------------------------

const pad = (n, width = 2) => String(n).padStart(width, "0");
const seconds = (ms) => `${(ms / 1000).toFixed(1)} s`;

function clock(ms, withDate) {
  const d = new Date(ms);
  const time = `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
  return withDate ? `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${time}`
                  : time;
}

const permText = (perm) => `${perm & 4 ? "R" : "-"}${perm & 2 ? "W" : "-"}${perm & 1 ? "X" : "-"}`;
const dataVersionText = (dv) => `#${dv.counter} at ${clock(dv.timestamp, true)}`;

function node(tag, text, cls) {
  const el = document.createElement(tag);
  if (text !== undefined && text !== null) el.textContent = String(text);
  if (cls) el.className = cls;
  return el;
}

function link(text, onClick) {
  const a = node("a", text, "link");
  a.tabIndex = 0;
  a.addEventListener("click", onClick);
  a.addEventListener("keydown", (e) => { if (e.key === "Enter") onClick(); });
  return a;
}

// rows: arrays of cells, each a value, a [value, class] pair or a DOM node.
function fill(table, rows) {
  let body = table.querySelector("tbody");
  const fresh = document.createElement("tbody");
  for (const cells of rows) {
    const tr = document.createElement("tr");
    for (const c of cells) {
      const td = document.createElement("td");
      if (c instanceof Node) td.appendChild(c);
      else if (Array.isArray(c)) { td.textContent = c[0] ?? "-"; td.className = c[1]; }
      else td.textContent = c ?? "-";
      tr.appendChild(td);
    }
    fresh.appendChild(tr);
  }
  if (body) body.replaceWith(fresh); else table.appendChild(fresh);
}

// --- a filtered, sorted, paged table ----------------------------------------------------------

class Grid {
  // columns: {key, label, width, sort(row) -> string|number, cell(row) -> value|[value, cls]|
  // Node, num}; rows carry `text`, the lower-cased words a filter matches.
  constructor(table, pager, columns, sortKey) {
    Object.assign(this, {table, pager, columns, rows: [], sorted: [], shown: [], page: 0,
                         query: [], keep: () => true, sortKey, descending: false});
    table.classList.add("fixed");
    const tr = document.createElement("tr");
    for (const col of columns) {
      const th = node("th", col.label, `sortable${col.num ? " num" : ""}`);
      th.style.width = col.width;
      th.title = `sort by ${col.label.toLowerCase()}`;
      th.dataset.key = col.key;
      th.addEventListener("click", () => this.sortBy(col.key));
      tr.appendChild(th);
    }
    const head = document.createElement("thead");
    head.appendChild(tr);
    table.replaceChildren(head, document.createElement("tbody"));
  }

  setRows(rows) {
    this.rows = rows;
    this.resort();
  }

  sortBy(key) {
    this.descending = this.sortKey === key ? !this.descending : false;
    this.sortKey = key;
    this.resort();
  }

  resort() {
    const col = this.columns.find((c) => c.key === this.sortKey);
    const keyed = this.rows.map((row) => [col.sort(row), row]);
    const sign = this.descending ? -1 : 1;
    keyed.sort((a, b) => sign * (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
    this.sorted = keyed.map((pair) => pair[1]);
    for (const th of this.table.querySelectorAll("th")) {
      if (th.dataset.key === this.sortKey) {
        th.setAttribute("aria-sort", this.descending ? "descending" : "ascending");
      } else th.removeAttribute("aria-sort");
    }
    this.refilter(false);
  }

  // words: every one must occur in a row's text; keep(row): the other filters. Drawn at once,
  // or with the next setRows when `later`.
  filter(text, keep, later = false) {
    this.query = text.toLowerCase().split(/\s+/).filter(Boolean);
    if (keep) this.keep = keep;
    if (!later) this.refilter(true);
  }

  refilter(toFirstPage) {
    const words = this.query;
    const keep = this.keep;
    this.shown = this.sorted.filter((row) => keep(row) && words.every((w) => row.text.includes(w)));
    if (toFirstPage) this.page = 0;
    this.page = Math.min(this.page, Math.max(0, Math.ceil(this.shown.length / PAGE_SIZE) - 1));
    this.draw();
  }

  draw() {
    const first = this.page * PAGE_SIZE;
    const rows = this.shown.slice(first, first + PAGE_SIZE);
    fill(this.table, rows.map((row) => this.columns.map((col) => col.cell(row))));
    const pages = Math.max(1, Math.ceil(this.shown.length / PAGE_SIZE));
    const prev = node("button", "‹ previous");
    prev.type = "button";
    prev.disabled = this.page === 0;
    prev.onclick = () => { this.page -= 1; this.draw(); };
    const next = node("button", "next ›");
    next.type = "button";
    next.disabled = this.page >= pages - 1;
    next.onclick = () => { this.page += 1; this.draw(); };
    const where = this.shown.length
      ? `${(first + 1).toLocaleString()}–${(first + rows.length).toLocaleString()} of ` +
        `${this.shown.length.toLocaleString()}, page ${this.page + 1} of ${pages}`
      : "nothing matches";
    this.pager.replaceChildren(prev, node("span", where, "muted"), next);
  }
}

// --- the fleet, as last read ------------------------------------------------------------------

const fleet = {rev: null, summaryRev: null, summary: null, info: null, live: [], topicsError: null};

const groupCluster = (name) => fleet.info.brokerAddrTable[name]?.cluster ?? "-";

function liveByAddr() {
  const beats = new Map();
  for (const b of fleet.live) beats.set(`${b.clusterName}\t${b.brokerAddr}`, b);
  return beats;
}

function topicRows() {
  const groups = fleet.info.brokerAddrTable;
  return fleet.summary.topics.map((t) => {
    const names = t.queues.map((q) => q[0]);
    const clusters = [...new Set(names.map(groupCluster))].sort();
    const addrs = names.flatMap((n) => Object.values(groups[n]?.brokerAddrs ?? {}));
    let read = 0;
    let write = 0;
    for (const q of t.queues) { read += q[1]; write += q[2]; }
    const perms = [...new Set(t.queues.map((q) => permText(q[3])))].sort().join(" ");
    return {topic: t.topic, kind: t.kind, queues: t.queues, orderConf: t.orderConf,
            groups: names.join(", "), clusters: clusters.join(", "), read, write, perms,
            text: `${t.topic} ${names.join(" ")} ${clusters.join(" ")} ${addrs.join(" ")}`
              .toLowerCase()};
  });
}

function memberRows() {
  const beats = liveByAddr();
  const topicsOf = topicsByGroup();
  const now = Date.now();
  const rows = [];
  for (const [cluster, names] of Object.entries(fleet.info.clusterAddrTable)) {
    for (const name of names) {
      const group = fleet.info.brokerAddrTable[name];
      if (!group) continue;
      for (const [id, addr] of Object.entries(group.brokerAddrs)) {
        const beat = beats.get(`${cluster}\t${addr}`) ||
          fleet.live.find((b) => b.brokerAddr === addr && b.brokerName === name);
        rows.push({cluster, name, id: Number(id), addr, beat, now,
                   topics: (topicsOf.get(name) || []).length,
                   text: `${cluster} ${name} ${addr}`.toLowerCase()});
      }
    }
  }
  return rows;
}

let topicsByGroupMemo = {summary: null, map: new Map()};

function topicsByGroup() {
  if (topicsByGroupMemo.summary !== fleet.summary) {
    const map = new Map();
    for (const t of fleet.summary?.topics ?? []) {
      for (const q of t.queues) {
        if (!map.has(q[0])) map.set(q[0], []);
        map.get(q[0]).push([t.topic, q]);
      }
    }
    topicsByGroupMemo = {summary: fleet.summary, map};
  }
  return topicsByGroupMemo.map;
}

// --- the tables -------------------------------------------------------------------------------

const topicGrid = new Grid($("topics"), $("topics-pager"), [
  {key: "topic", label: "Topic", width: "21%", sort: (r) => r.topic,
   cell: (r) => link(r.topic, () => showTopic(r.topic))},
  {key: "kind", label: "Kind", width: "9%", sort: (r) => r.kind,
   cell: (r) => node("span", r.kind, "kind")},
  {key: "groups", label: "Groups", width: "20%", sort: (r) => r.groups,
   cell: (r) => r.groups || "-"},
  {key: "clusters", label: "Clusters", width: "19%", sort: (r) => r.clusters,
   cell: (r) => r.clusters || "-"},
  {key: "read", label: "Queues r/w", width: "12%", num: true, sort: (r) => r.read * 1e6 + r.write,
   cell: (r) => [`${r.read}/${r.write}`, "num"]},
  {key: "perms", label: "Perm", width: "7%", sort: (r) => r.perms, cell: (r) => r.perms || "-"},
  {key: "order", label: "Order", width: "12%", sort: (r) => r.orderConf || "",
   cell: (r) => r.orderConf || ""},
], "topic");

const groupGrid = new Grid($("groups"), $("groups-pager"), [
  {key: "cluster", label: "Cluster", width: "11%", sort: (r) => `${r.cluster}\t${r.name}\t${r.id}`,
   cell: (r) => r.cluster},
  {key: "name", label: "Group", width: "11%", sort: (r) => `${r.name}\t${r.id}`,
   cell: (r) => link(r.name, () => showGroup(r.name))},
  {key: "id", label: "Id", width: "4%", num: true, sort: (r) => r.id, cell: (r) => [r.id, "num"]},
  {key: "addr", label: "Address", width: "14%", sort: (r) => r.addr, cell: (r) => r.addr},
  {key: "alive", label: "Alive", width: "10%", sort: (r) => (r.beat ? 1 : 0),
   cell: (r) => (r.beat ? ["alive", "alive"] : ["past deadline", "dead"])},
  {key: "heartbeat", label: "Heartbeat", width: "10%", num: true,
   sort: (r) => (r.beat ? r.now - r.beat.lastUpdateTimestamp : Infinity),
   cell: (r) => [r.beat ? `${seconds(r.now - r.beat.lastUpdateTimestamp)} ago` : "-", "num"]},
  {key: "deadline", label: "Deadline in", width: "10%", num: true,
   sort: (r) => (r.beat ? r.beat.deadline : -Infinity),
   cell: (r) => [r.beat ? seconds(r.beat.deadline - r.now) : "-", "num"]},
  {key: "dataVersion", label: "DataVersion", width: "22%",
   sort: (r) => r.beat?.dataVersion.counter ?? -1,
   cell: (r) => (r.beat ? dataVersionText(r.beat.dataVersion) : "-")},
  {key: "topics", label: "Topics", width: "8%", num: true, sort: (r) => r.topics,
   cell: (r) => [r.topics, "num"]},
], "cluster");

function kindFilter() {
  const kind = $("topic-kind").value || "normal";
  return kind === "all" ? () => true : (row) => row.kind === kind;
}

function drawKindChoices() {
  const counts = {all: fleet.summary.topics.length, normal: 0, system: 0, retry: 0, dlq: 0};
  for (const t of fleet.summary.topics) counts[t.kind] += 1;
  const select = $("topic-kind");
  const chosen = select.value || "normal";
  select.replaceChildren(...KIND_CHOICES.map(([value, label]) => {
    const option = node("option", `${label} (${counts[value].toLocaleString()})`);
    option.value = value;
    option.selected = value === chosen;
    return option;
  }));
}

function filterTopics() {
  const started = performance.now();
  topicGrid.filter($("topic-search").value, kindFilter());
  window.nsfleetConsole.lastFilterMs = performance.now() - started;
}

$("topic-search").addEventListener("input", filterTopics);
$("topic-kind").addEventListener("change", filterTopics);
$("group-search").addEventListener("input", () => groupGrid.filter($("group-search").value));

// --- the topic and broker-group views ---------------------------------------------------------

let detail = null;  // what the detail panel shows: ["topic", name] or ["group", name]

// reveal: scroll the panel into view when it is off screen (a click; not a redraw).
function openDetail(title, parts, reveal) {
  $("detail-title").textContent = title;
  $("detail-body").replaceChildren(...parts);
  $("detail").hidden = false;
  const top = $("detail").getBoundingClientRect().top;
  if (reveal && (top < 0 || top > window.innerHeight - 50)) $("detail").scrollIntoView();
}

$("detail-close").addEventListener("click", () => {
  detail = null;
  $("detail").hidden = true;
});

function smallTable(head, rows) {
  const table = node("table", null, "grid");
  const tr = document.createElement("tr");
  for (const h of head) tr.appendChild(node("th", h));
  const thead = document.createElement("thead");
  thead.appendChild(tr);
  table.appendChild(thead);
  fill(table, rows);
  return table;
}

function showTopic(topic, reveal = true) {
  detail = ["topic", topic];
  const t = fleet.summary.topics.find((x) => x.topic === topic);
  if (!t) {
    openDetail(`Topic ${topic}`, [node("p", "no longer in the route table", "muted")], reveal);
    return;
  }
  const beats = liveByAddr();
  const rows = t.queues.map(([name, read, write, perm, flag]) => {
    const group = fleet.info.brokerAddrTable[name];
    const members = Object.entries(group?.brokerAddrs ?? {}).map(([id, addr]) => {
      const alive = beats.has(`${group.cluster}\t${addr}`);
      return `${id}=${addr}${alive ? "" : " (past deadline)"}`;
    });
    return [link(name, () => showGroup(name)), group?.cluster ?? "-",
            [members.join("\n") || "no member", "lines"], [`${read}/${write}`, "num"],
            permText(perm), [flag, "num"]];
  });
  openDetail(`Topic ${topic}`, [
    node("p", `${t.kind} topic, served by ${t.queues.length} broker group` +
              `${t.queues.length === 1 ? "" : "s"}`, "muted"),
    smallTable(["Group", "Cluster", "Members", "Queues r/w", "Perm", "Sys flag"], rows),
    node("h3", "Order config (ORDER_TOPIC_CONFIG)"),
    node("p", t.orderConf || "none"),
  ], reveal);
}

function showGroup(name, reveal = true) {
  detail = ["group", name];
  const group = fleet.info.brokerAddrTable[name];
  if (!group) {
    openDetail(`Broker group ${name}`, [node("p", "no longer registered", "muted")], reveal);
    return;
  }
  const beats = liveByAddr();
  const now = Date.now();
  const byId = Object.entries(group.brokerAddrs).sort((a, b) => a[0] - b[0]);
  const members = byId.map(([id, addr]) => {
    const beat = beats.get(`${group.cluster}\t${addr}`);
    return [[id, "num"], addr, beat ? ["alive", "alive"] : ["past deadline", "dead"],
            beat ? `${seconds(now - beat.lastUpdateTimestamp)} ago` : "-",
            beat ? clock(beat.deadline, true) : "-",
            beat ? seconds(beat.heartbeatTimeoutMillis) : "-",
            beat ? dataVersionText(beat.dataVersion) : "-"];
  });
  const topics = (topicsByGroup().get(name) || []).slice().sort((a, b) => (a[0] < b[0] ? -1 : 1));
  const shown = topics.slice(0, 500).map(([topic, q]) => [link(topic, () => showTopic(topic)),
    [`${q[1]}/${q[2]}`, "num"], permText(q[3])]);
  openDetail(`Broker group ${name}`, [
    node("p", `cluster ${group.cluster}${group.zoneName ? `, zone ${group.zoneName}` : ""}` +
              `${group.enableActingMaster ? ", acting master enabled" : ""}`, "muted"),
    smallTable(["Id", "Address", "Alive", "Heartbeat", "Deadline", "Timeout", "DataVersion"],
               members),
    node("h3", `Topics (${topics.length.toLocaleString()})` +
               `${topics.length > 500 ? ", the first 500" : ""}`),
    smallTable(["Topic", "Queues r/w", "Perm"], shown),
  ], reveal);
}

// --- the other panels -------------------------------------------------------------------------

function detailText(value) {
  if (value && typeof value === "object") {
    return "counter" in value && "timestamp" in value ? dataVersionText(value)
                                                       : JSON.stringify(value);
  }
  return String(value);
}

function drawChanges(changes) {
  fill($("changes"), changes.map((c) => [
    clock(c.time, false), c.worker, c.action,
    Object.entries(c.detail).map(([k, v]) => `${k}=${detailText(v)}`).join(" ")]));
}

// A replica per line: its id, address, whether it is alive and in the SyncStateSet.
function replicaLines(set) {
  const box = node("div");
  for (const r of set.replicas) {
    const line = node("div", `${r.brokerId} ${r.brokerAddress} `);
    line.appendChild(node("span", r.alive ? "alive" : "not alive", r.alive ? "alive" : "dead"));
    line.appendChild(document.createTextNode(r.inSync ? ", in sync" : ", not in sync"));
    box.appendChild(line);
  }
  return box;
}

// RocketMQ 5's controller: shown once a broker set in controller mode exists.
function drawController(sets) {
  $("controller-section").hidden = sets.length === 0;
  const masterOf = (s) => s.replicas.find((r) => r.brokerId === s.masterBrokerId);
  const masterless = sets.filter((s) => !masterOf(s)?.alive).length;
  $("controller-count").textContent =
    `${sets.length} broker sets, ${masterless} without a live master`;
  fill($("controller"), sets.map((s) => [
    s.brokerName, s.clusterName || "-",
    s.masterBrokerId === null ? ["none", "dead"]
      : [`${s.masterBrokerId} ${s.masterAddress}`, masterOf(s)?.alive ? "" : "dead"],
    [s.masterEpoch, "num"],
    `${s.syncStateSet.join(";") || "-"} (${s.syncStateSetEpoch})`,
    replicaLines(s)]));
}

async function drawSide() {
  const [kv, config, status, changes, controller] = await Promise.all([
    get("/v1/kv"), get("/v1/namesrv-config"), get("/v1/status"), get("/v1/changes?limit=50"),
    get("/v1/controller/broker-sets")]);
  const tables = await Promise.all(kv.namespaces.map((ns) =>
    get(`/v1/kv/${encodeURIComponent(ns)}`).then((t) => [ns, t.table])));
  const rows = [];
  for (const [ns, table] of tables) {
    const entries = Object.entries(table).sort();
    if (!entries.length) rows.push([ns, "(empty)", ""]);
    for (const [k, v] of entries) rows.push([ns, [k, "wrap"], [v, "wrap"]]);
  }
  fill($("kv"), rows);
  fill($("config"), Object.entries(config.config).sort().map(([k, v]) => [k, [v, "wrap"]]));
  fill($("status"), [["worker", status.workerId], ["guard holds (this worker)", status.sweepHeld],
                     ["brokers expired by its sweeps", status.sweepRemovals],
                     ["uptime", `${status.uptimeSeconds} s`]]);
  drawChanges(changes.changes);
  drawController(controller.brokerSets);
}

// --- redrawing --------------------------------------------------------------------------------

async function readTopics(rev) {
  if (fleet.summaryRev === rev && fleet.summary) return false;
  try {
    fleet.summary = await get("/v1/topics/summary");
    fleet.topicsError = null;
  } catch (err) {
    if (err instanceof Unauthorized) throw err;
    fleet.summary = {rev, topics: []};
    fleet.topicsError = err.message.includes("403")
      ? "(topic list disabled by enableAllTopicList)" : err.message;
  }
  fleet.summaryRev = rev;
  return true;
}

async function redraw(rev) {
  const [info, live, topicsRead] = await Promise.all([
    get("/v1/cluster-info"), get("/v1/brokers"), readTopics(rev), drawSide()]);
  fleet.info = info;
  fleet.live = live.brokers;
  if (topicsRead) {
    drawKindChoices();
    topicGrid.filter($("topic-search").value, kindFilter(), true);
    topicGrid.setRows(topicRows());
    if (fleet.topicsError) fill($("topics"), [[fleet.topicsError]]);
  }
  groupGrid.setRows(memberRows());
  const rows = groupGrid.rows;
  const counts = {clusters: Object.keys(info.clusterAddrTable).length,
                  groups: Object.keys(info.brokerAddrTable).length, members: rows.length};
  $("summary").textContent =
    `${counts.clusters} clusters, ${counts.groups} broker groups, ${counts.members} brokers, ` +
    `${fleet.summary.topics.length} topics`;
  $("topic-count").textContent = `${fleet.summary.topics.length.toLocaleString()} in all`;
  $("group-count").textContent = `${rows.filter((r) => r.beat).length} of ${rows.length} alive`;
  if (detail?.[0] === "topic") showTopic(detail[1], false);
  else if (detail?.[0] === "group") showGroup(detail[1], false);
  $("updated").textContent = `updated ${new Date().toLocaleTimeString()}`;
  if (window.nsfleetConsole.firstRenderMs === null) {
    void document.body.offsetHeight;  // the page laid out, not just built
    window.nsfleetConsole.firstRenderMs = performance.now();
  }
}

async function follow() {
  let rev = 0;
  let last = 0;
  for (;;) {
    try {
      const resp = await get(`/v1/changes?since=${rev}&wait=5`);
      if (resp.rev !== rev || Date.now() - last > 5000) {
        rev = resp.rev;
        last = Date.now();
        await redraw(rev);
      }
    } catch (err) {
      if (err instanceof Unauthorized) {
        await askForToken();
        rev = 0;
        fleet.summaryRev = null;
        continue;
      }
      $("updated").textContent = `cannot read the worker: ${err.message}`;
      await new Promise((resolve) => setTimeout(resolve, 2000));
    }
  }
}

follow();
