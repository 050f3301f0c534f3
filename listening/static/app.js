// The annotator page: login by token, consent, two worked examples, then one item at a time.
// The token lives in sessionStorage and travels only in the Authorization header (never in a URL).
"use strict";
const KEY = "vocalgrad-listen-token";
const $ = (id) => document.getElementById(id);
let current = null;      // {seq, nonce, ...} of the item on screen
let shownAt = 0;         // when its audio was ready (client response time starts here)
let plays = 0;
let audioUrl = null;

function token() { return sessionStorage.getItem(KEY); }

function show(section) {
  for (const id of ["login", "consent", "training", "test", "done"]) $(id).hidden = id !== section;
}

function say(text) { $("status").textContent = text || ""; }

async function api(method, path, body) {
  const headers = { "Authorization": "Bearer " + token() };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  if (res.status === 401) {
    sessionStorage.removeItem(KEY);
    show("login");
    throw new Error((await res.json()).error || "log in again");
  }
  if (!res.ok) {
    let msg = res.statusText;
    try { msg = (await res.json()).error || msg; } catch (e) { /* not JSON */ }
    throw new Error(msg);
  }
  return res;
}

async function audioBlobUrl(path) {
  const res = await api("GET", path);
  return URL.createObjectURL(await res.blob());
}

function render(state) {
  $("count").textContent = `${state.done} / ${state.total} answered`;
  $("bar").max = state.total;
  $("bar").value = state.done;
  if (state.phase === "consent") { show("consent"); return; }
  if (state.phase === "training") { renderTraining(state.training); return; }
  if (state.phase === "done") { show("done"); return; }
  renderItem(state.item);
}

async function renderTraining(examples) {
  const box = $("examples");
  box.textContent = "";
  for (const ex of examples) {
    const div = document.createElement("div");
    div.className = "example";
    const q = document.createElement("p");
    q.textContent = `Example ${ex.index + 1}: ${ex.question}`;
    const audio = document.createElement("audio");
    audio.controls = true;
    audio.className = "example-audio";
    const a = document.createElement("p");
    a.className = "answer";
    a.textContent = `Correct answer: ${ex.answer}`;
    div.append(q, audio, a);
    box.append(div);
    audio.src = await audioBlobUrl(`/api/training/${ex.index}/audio`);
  }
  show("training");
}

async function renderItem(item) {
  current = item;
  plays = 0;
  show("test");
  const player = $("player");
  player.pause();
  player.removeAttribute("src");  // never let the previous clip be played for this item
  delete player.dataset.seq;
  player.load();
  $("question").textContent = item.question;
  const opts = $("options");
  opts.textContent = "";
  for (const o of item.options) {
    const b = document.createElement("button");
    b.textContent = o.text;
    b.dataset.label = o.label;
    b.disabled = true;
    b.addEventListener("click", () => submit(o.label));
    opts.append(b);
  }
  $("hint").hidden = false;
  const url = await audioBlobUrl(`/api/item/${item.seq}/audio?nonce=${encodeURIComponent(item.nonce)}`);
  if (current !== item) { URL.revokeObjectURL(url); return; }  // a newer state took over meanwhile
  if (audioUrl) URL.revokeObjectURL(audioUrl);
  audioUrl = url;
  player.src = url;
  player.dataset.seq = String(item.seq);
  shownAt = performance.now();
}

$("player").addEventListener("play", () => {
  if (!current || $("player").dataset.seq !== String(current.seq)) return;
  plays += 1;
  for (const b of $("options").querySelectorAll("button")) b.disabled = false;
  $("hint").hidden = true;
});

async function submit(label) {
  for (const b of $("options").querySelectorAll("button")) b.disabled = true;
  $("player").pause();
  const body = { seq: current.seq, nonce: current.nonce, answer: label,
                 client_ms: Math.round(performance.now() - shownAt), plays };
  try {
    const res = await api("POST", "/api/answer", body);
    say("");
    render(await res.json());
  } catch (e) {
    say(e.message);
    refresh();
  }
}

async function refresh() {
  if (!token()) { show("login"); return; }
  try {
    const res = await api("GET", "/api/state");
    render(await res.json());
  } catch (e) { say(e.message); }
}

$("login-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  sessionStorage.setItem(KEY, $("token").value.trim());
  $("token").value = "";
  say("");
  refresh();
});
$("agree").addEventListener("change", () => { $("consent-btn").disabled = !$("agree").checked; });
$("consent-btn").addEventListener("click", async () => {
  try { render(await (await api("POST", "/api/consent")).json()); } catch (e) { say(e.message); }
});
$("start-btn").addEventListener("click", async () => {
  for (const a of document.querySelectorAll(".example-audio")) a.pause();
  try { render(await (await api("POST", "/api/training/done")).json()); } catch (e) { say(e.message); }
});

// A login link may carry the token in the fragment (#token=...), which browsers never send to the server.
const fragment = new URLSearchParams(location.hash.slice(1));
if (fragment.get("token")) {
  sessionStorage.setItem(KEY, fragment.get("token"));
  history.replaceState(null, "", location.pathname);
}
refresh();
