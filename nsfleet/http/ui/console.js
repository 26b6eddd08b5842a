// The read-only fleet console: reads the worker's JSON API and redraws in place. It waits on
// GET /v1/changes (a long-poll of the fleet's change counter) and also redraws every 5 s, since a
// broker's deadline passing moves no counter.
"use strict";

const text = (value) => document.createTextNode(value === undefined || value === null ? "-" :
                                                String(value));

function cell(value, cls) {
  const td = document.createElement("td");
  td.appendChild(text(value));
  if (cls) td.className = cls;
  return td;
}

function fill(id, rows) {
  const body = document.querySelector(`#${id} tbody`);
  const fresh = document.createElement("tbody");
  for (const cells of rows) {
    const tr = document.createElement("tr");
    for (const c of cells) tr.appendChild(Array.isArray(c) ? cell(c[0], c[1]) : cell(c));
    fresh.appendChild(tr);
  }
  body.replaceWith(fresh);
}

// A worker with HTTP tokens (docs/security.md) takes a read token: open /ui#token=TOKEN once; the
// token is kept for this tab only and dropped from the address bar.
if (location.hash.startsWith("#token=")) {
  sessionStorage.setItem("nsfleetToken", decodeURIComponent(location.hash.slice(7)));
  history.replaceState(null, "", location.pathname);
}
const token = sessionStorage.getItem("nsfleetToken");
const fetchOptions = {cache: "no-store", headers: token ? {Authorization: `Bearer ${token}`} : {}};

async function get(path) {
  const resp = await fetch(path, fetchOptions);
  if (!resp.ok) throw new Error(`${path}: ${resp.status}`);
  return resp.json();
}

const seconds = (ms) => `${(ms / 1000).toFixed(1)} s`;

async function drawGroups() {
  const [info, live] = await Promise.all([get("/v1/cluster-info"), get("/v1/brokers")]);
  const beats = new Map(live.brokers.map((b) => [`${b.clusterName}\t${b.brokerAddr}`, b]));
  const now = Date.now();
  const rows = [];
  let members = 0;
  for (const [cluster, names] of Object.entries(info.clusterAddrTable).sort()) {
    for (const name of [...names].sort()) {
      const group = info.brokerAddrTable[name];
      if (!group) continue;
      for (const [id, addr] of Object.entries(group.brokerAddrs).sort()) {
        const beat = beats.get(`${cluster}\t${addr}`) ||
          live.brokers.find((b) => b.brokerAddr === addr && b.brokerName === name);
        members += 1;
        rows.push([cluster, name, id, addr,
          beat ? ["alive", "alive"] : ["past deadline", "dead"],
          beat ? `${seconds(now - beat.lastUpdateTimestamp)} ago` : "-",
          beat ? [seconds(beat.deadline - now), "num"] : "-",
          beat ? `${beat.dataVersion.counter}/${beat.dataVersion.timestamp}` : "-"]);
      }
    }
  }
  fill("groups", rows);
  return {clusters: Object.keys(info.clusterAddrTable).length,
          groups: Object.keys(info.brokerAddrTable).length, members};
}

async function drawTopics() {
  let list;
  try {
    list = (await get("/v1/topics")).topicList;
  } catch (err) {
    fill("topics", [["(topic list disabled by enableAllTopicList)", "", "", ""]]);
    return 0;
  }
  const shown = list.slice(0, 200);
  const routes = await Promise.all(shown.map((t) => fetch(`/v1/routes/${encodeURIComponent(t)}`,
    fetchOptions).then((r) => (r.ok ? r.json() : null))));
  fill("topics", shown.map((topic, i) => {
    const route = routes[i];
    if (!route) return [topic, "no live group", "-", "-"];
    const qs = route.queueDatas;
    return [topic, qs.map((q) => q.brokerName).join(", "),
            qs.map((q) => `${q.readQueueNums}/${q.writeQueueNums}`).join(", "),
            qs.map((q) => q.perm).join(", ")];
  }));
  return list.length;
}

async function drawSide() {
  const [kv, config, status] = await Promise.all([get("/v1/kv"), get("/v1/namesrv-config"),
                                                  get("/v1/status")]);
  const tables = await Promise.all(kv.namespaces.map((ns) =>
    get(`/v1/kv/${encodeURIComponent(ns)}`).then((t) => [ns, t.table])));
  const rows = [];
  for (const [ns, table] of tables) {
    const entries = Object.entries(table).sort();
    if (!entries.length) rows.push([ns, "(empty)", ""]);
    for (const [k, v] of entries) rows.push([ns, k, v]);
  }
  fill("kv", rows);
  fill("config", Object.entries(config.config).sort());
  fill("status", [["worker", status.workerId], ["guard holds (this worker)", status.sweepHeld],
                  ["brokers expired by its sweeps", status.sweepRemovals],
                  ["uptime", `${status.uptimeSeconds} s`]]);
}

async function redraw() {
  try {
    const [counts, topics] = await Promise.all([drawGroups(), drawTopics(), drawSide()]);
    document.getElementById("summary").textContent =
      `${counts.clusters} clusters, ${counts.groups} broker groups, ${counts.members} brokers, ` +
      `${topics} topics`;
    document.getElementById("updated").textContent =
      `updated ${new Date().toLocaleTimeString()}`;
  } catch (err) {
    document.getElementById("updated").textContent = `cannot read the worker: ${err.message}`;
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
        await redraw();
      }
    } catch (err) {
      document.getElementById("updated").textContent = `cannot read the worker: ${err.message}`;
      await new Promise((resolve) => setTimeout(resolve, 2000));
    }
  }
}

follow();
