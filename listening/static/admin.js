// The admin page: progress per annotator, accuracy and the attention check, downloads (CSV, samples).
"use strict";
const $ = (id) => document.getElementById(id);
let adminToken = sessionStorage.getItem("vocalgrad-listen-admin");

async function get(path) {
  const res = await fetch(path, { headers: { "Authorization": "Bearer " + adminToken } });
  if (!res.ok) throw new Error((await res.json()).error || res.statusText);
  return res;
}

function pct(x) { return x === null || x === undefined ? "—" : (100 * x).toFixed(1); }

async function download(path, name) {
  const url = URL.createObjectURL(await (await get(path)).blob());
  const a = document.createElement("a");
  a.href = url; a.download = name; a.click();
  URL.revokeObjectURL(url);
}

async function load() {
  try {
    const data = await (await get("/api/admin/progress")).json();
    sessionStorage.setItem("vocalgrad-listen-admin", adminToken);
    $("admin-login").hidden = true;
    $("panel").hidden = false;
    const s = data.study;
    $("study").textContent = `configs ${s.configs.join(", ")}; ${s.n} items each; seed ${s.seed}; split ${s.split}; `
      + `source ${s.dataset || s.source}`;
    const d = data.design;
    $("design").textContent = `${d.complete.length} of ${d.annotators} annotators complete and included, `
      + `${(100 * d.completeness).toFixed(0)} % of the answers; excluded: `
      + (Object.entries(d.excluded).map(([k, v]) => `${k} (${v})`).join(", ") || "none")
      + (d.meets_design ? "" : `. BELOW ITS DESIGN: ${d.problems.join("; ")} (export refuses it without --allow-incomplete)`);
    $("design").className = d.meets_design ? "" : "below-design";
    const body = $("progress").querySelector("tbody");
    body.textContent = "";
    for (const a of data.annotators) {
      const acc = [], high = [], flags = [];
      for (const c of Object.values(data.analysis)) {
        if (c.annotators[a.annotator]) acc.push(pct(c.annotators[a.annotator].accuracy));
        if (c.attention[a.annotator]) {
          high.push(pct(c.attention[a.annotator].accuracy));
          if (c.attention[a.annotator].flagged) flags.push("FLAGGED");
        }
      }
      const tr = document.createElement("tr");
      for (const v of [a.annotator, a.answered, a.total, acc.join(" / ") || "—", high.join(" / ") || "—",
                       flags.length ? "careless?" : "ok"]) {
        const td = document.createElement("td");
        td.textContent = v;
        tr.append(td);
      }
      body.append(tr);
    }
    const links = $("samples");
    links.textContent = "";
    for (const c of s.configs) {
      const b = document.createElement("button");
      b.textContent = `samples_${c}.jsonl`;
      b.addEventListener("click", () => download(`/api/admin/samples/${encodeURIComponent(c)}.jsonl`, `samples_${c}.jsonl`));
      links.append(b, " ");
    }
    $("agreement").textContent = Object.entries(data.analysis).map(([c, v]) =>
      `${c}: pooled ${pct(v.pooled.accuracy)} % (${v.pooled.n} answers), mean pairwise agreement `
      + `${pct(v.agreement.mean_pairwise_agreement)} %, Fleiss' kappa ${v.agreement.fleiss_kappa === null ? "—" : v.agreement.fleiss_kappa.toFixed(3)}`).join("\n");
  } catch (e) { $("status").textContent = e.message; }
}

$("admin-login").addEventListener("submit", (ev) => {
  ev.preventDefault();
  adminToken = $("admin-token").value.trim();
  load();
});
$("csv").addEventListener("click", () => download("/api/admin/answers.csv", "answers.csv"));
if (adminToken) load();
