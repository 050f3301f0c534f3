// The annotator page: login by token, consent, headphone check, two worked examples that must be heard,
// one item at a time (answers unlock when the clip has played to its end), then a short questionnaire.
// The token lives in sessionStorage and travels only in the Authorization header (never in a URL).
"use strict";
const KEY = "vocalgrad-listen-token";
const $ = (id) => document.getElementById(id);
let current = null;      // {seq, nonce, ...} of the item on screen
let shownAt = 0;         // when its audio was ready (client response time starts here)
let plays = 0;
let listenMs = 0;        // time the clip was actually playing, summed over plays
let playingSince = null;
let audioUrl = null;
let hpTrial = null;      // the headphone trial on screen
let phase = null;

function token() { return sessionStorage.getItem(KEY); }

function show(section) {
  phase = section;
  for (const id of ["login", "consent", "headphone", "screened_out", "training", "test", "questionnaire", "done"]) {
    $(id).hidden = id !== section;
  }
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
  $("undo-btn").hidden = $("q-undo").hidden = !state.can_undo;
  if (state.phase === "consent") { show("consent"); return; }
  if (state.phase === "headphone") { renderHeadphone(state.headphone); return; }
  if (state.phase === "training") { renderTraining(state.training); return; }
  if (state.phase === "questionnaire") { renderQuestionnaire(state.questions); return; }
  if (state.phase === "test") { renderItem(state.item); return; }
  show(state.phase);  // done, screened_out
}

async function renderHeadphone(hp) {
  hpTrial = hp.answered;
  $("hp-count").textContent = `sound ${hp.answered + 1} of ${hp.trials}`;
  for (const b of $("hp-options").querySelectorAll("button")) b.disabled = true;
  show("headphone");
  const player = $("hp-player");
  player.pause();
  const url = await audioBlobUrl(`/api/headphone/${hp.answered}/audio`);
  if (player.src.startsWith("blob:")) URL.revokeObjectURL(player.src);
  player.src = url;
  player.dataset.trial = String(hp.answered);
}

$("hp-player").addEventListener("ended", () => {
  for (const b of $("hp-options").querySelectorAll("button")) b.disabled = false;
});

async function submitHeadphone(tone) {
  const buttons = $("hp-options").querySelectorAll("button");
  if (hpTrial === null || buttons[tone].disabled) return;
  for (const b of buttons) b.disabled = true;
  try { render(await (await api("POST", "/api/headphone", { trial: hpTrial, answer: tone })).json()); }
  catch (e) { say(e.message); refresh(); }
}
for (const b of $("hp-options").querySelectorAll("button")) {
  b.addEventListener("click", () => submitHeadphone(Number(b.dataset.tone)));
}

function renderQuestionnaire(questions) {
  for (const [field, choices] of Object.entries(questions)) {
    const sel = $(`q-${field}`);
    if (sel.options.length) continue;
    sel.append(new Option("— choose —", ""));
    for (const c of choices) sel.append(new Option(c, c));
  }
  show("questionnaire");
}

async function renderTraining(examples) {
  const box = $("examples");
  box.textContent = "";
  $("start-btn").disabled = true;
  for (const ex of examples) {
    const div = document.createElement("div");
    div.className = "example";
    const q = document.createElement("p");
    q.textContent = `Example ${ex.index + 1}: ${ex.question}`;
    const audio = document.createElement("audio");
    audio.controls = true;
    audio.className = "example-audio";
    audio.addEventListener("ended", () => {  // training is mandatory: every example heard to its end
      audio.dataset.heard = "1";
      $("start-btn").disabled = ![...document.querySelectorAll(".example-audio")].every(a => a.dataset.heard);
    });
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
  listenMs = 0;
  playingSince = null;
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
  let url;
  try {
    url = await audioBlobUrl(`/api/item/${item.seq}/audio?nonce=${encodeURIComponent(item.nonce)}`);
  } catch (e) {
    if (current === item) say(e.message);  // else an undo took this item away while its audio loaded
    return;
  }
  if (current !== item) { URL.revokeObjectURL(url); return; }  // a newer state took over meanwhile
  if (audioUrl) URL.revokeObjectURL(audioUrl);
  audioUrl = url;
  player.src = url;
  player.dataset.seq = String(item.seq);
  shownAt = performance.now();
}

function stopClock() {
  if (playingSince !== null) listenMs += performance.now() - playingSince;
  playingSince = null;
}

$("player").addEventListener("play", () => {
  if (!current || $("player").dataset.seq !== String(current.seq)) return;
  plays += 1;
  playingSince = performance.now();
});
$("player").addEventListener("pause", stopClock);
$("player").addEventListener("ended", () => {
  stopClock();
  if (!current || $("player").dataset.seq !== String(current.seq)) return;
  for (const b of $("options").querySelectorAll("button")) b.disabled = false;  // heard to the end
  $("hint").hidden = true;
});

async function submit(label) {
  const buttons = $("options").querySelectorAll("button");
  if (!buttons.length || buttons[0].disabled) return;
  for (const b of buttons) b.disabled = true;
  $("player").pause();
  stopClock();
  const body = { seq: current.seq, nonce: current.nonce, answer: label,
                 client_ms: Math.round(performance.now() - shownAt), plays, listen_ms: Math.round(listenMs) };
  try {
    const res = await api("POST", "/api/answer", body);
    say("");
    render(await res.json());
  } catch (e) {
    say(e.message);
    refresh();
  }
}

async function undo() {
  current = null;  // its item comes back and must be heard to its end again
  try { render(await (await api("POST", "/api/undo")).json()); } catch (e) { say(e.message); refresh(); }
}
$("undo-btn").addEventListener("click", undo);
$("q-undo").addEventListener("click", undo);

function playFromStart(player) {
  if (player.ended) player.currentTime = 0;
  // play() rejects with AbortError when a pause() or the next item's source interrupts it before playback
  // starts (an answer or undo right after space): that is the intended outcome, not an error
  player.play().catch((e) => { if (e.name !== "AbortError") say(e.message); });
}

// Keys: space plays, 1-4 (or left/right for the first two) answer, U takes the last answer back.
document.addEventListener("keydown", (ev) => {
  if (ev.ctrlKey || ev.metaKey || ev.altKey || ["INPUT", "TEXTAREA", "SELECT"].includes(ev.target.tagName)) return;
  const index = { "1": 0, "2": 1, "3": 2, "4": 3, "ArrowLeft": 0, "ArrowRight": 1 }[ev.key];
  if (ev.key === " " && document.activeElement !== document.body) document.activeElement.blur();  // no double click
  if (phase === "test") {
    if (ev.key === " ") { ev.preventDefault(); playFromStart($("player")); }
    else if (index !== undefined) {
      const b = $("options").querySelectorAll("button")[index];
      if (b) { ev.preventDefault(); submit(b.dataset.label); }
    } else if ((ev.key === "u" || ev.key === "U") && !$("undo-btn").hidden) { ev.preventDefault(); undo(); }
  } else if (phase === "headphone") {
    if (ev.key === " ") { ev.preventDefault(); playFromStart($("hp-player")); }
    else if (index !== undefined && ev.key.length === 1) { ev.preventDefault(); submitHeadphone(index); }
  }
});

$("q-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const body = Object.fromEntries(new FormData($("q-form")).entries());
  try { render(await (await api("POST", "/api/questionnaire", body)).json()); } catch (e) { say(e.message); }
});

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
