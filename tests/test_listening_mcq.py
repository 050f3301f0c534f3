"""The listening app serves VoxParadox-lite multiple-choice items (issue 20: a human check of the tasks): the
study draws items from the item builder or a build, the page shows the question and lettered option buttons
(keys 1-4), answers are stored as the option's text, and the analysis and export score them as accuracy
against the true label and agreement with the adversarial one (ALA)."""

from __future__ import annotations

import csv
import io
import json
from collections import Counter
from pathlib import Path

import pytest

from listening.analysis import analyze
from listening.export import export_run
from listening.items import balanced_items, builder_pool
from listening.study import create_study
from tests.helpers.listening_server import CHROMIUM, CHROMIUM_ARGS, Client, Server

BARE = {"headphone_trials": 0, "catch_per_config": 0, "min_listen": 0.0}  # the answer protocol alone


def _ready(c: Client) -> dict:
    status, state = c.call("POST", "/api/consent")
    assert status == 200
    for ex in state["training"]:
        assert c.call("GET", f"/api/training/{ex['index']}/audio")[0] == 200
    return state


def test_balanced_items_spread_the_true_labels_and_voices() -> None:
    pool = builder_pool("voxparadox-gender", "test", 24)
    items = balanced_items(pool, "voxparadox-gender", 8, seed=3)
    assert Counter(it.answer for it in items) == {"Male": 4, "Female": 4}
    assert len({it.benchmark_clip_id for it in items}) == 8
    assert items == balanced_items(pool, "voxparadox-gender", 8, seed=3)  # same seed, same items
    assert items != balanced_items(pool, "voxparadox-gender", 8, seed=4)
    assert all(it.adversarial != it.answer and sorted(it.options) == ["Female", "Male"] for it in items)
    with pytest.raises(ValueError, match="only 24 are left in the pool"):
        balanced_items(pool, "voxparadox-gender", 25)


def test_study_from_the_item_builder(tmp_path: Path) -> None:
    store = create_study(tmp_path / "s.sqlite", "voxparadox-pitch", 4, 0, headphone_trials=0, catch_per_config=2)
    s = store.study
    assert (s["source"], s["item_pool"], s["kind"]) == ("voxparadox-lite", {"voxparadox-pitch": 24}, "mcq")
    test, training, catch = store.items(), store.items("training"), store.items("catch")
    assert (len(test), len(training), len(catch)) == (4, 2, 2)
    ids = [it["benchmark_clip_id"] for it in [*test, *training, *catch]]
    assert len(set(ids)) == 8 and all(i.startswith("vpl-pitch-test-") for i in ids)
    assert training[0]["gold"] != training[1]["gold"]  # two examples with different answers
    for it in test:
        record = s["items"]["voxparadox-pitch"][it["benchmark_clip_id"]]
        assert it["gold"] in record["options"] and record["adversarial"] in record["options"]
        assert record["adversarial"] != it["gold"] and len(record["options"]) == 4
        assert (it["tier"], it["curve"], it["direction"]) == ("none", "none", "none")
    with pytest.raises(ValueError, match="separate studies"):
        create_study(tmp_path / "t.sqlite", "voxparadox-pitch,volume", 4, 0, **BARE)


def test_page_api_answers_store_options_and_export_scores_acc_and_ala(tmp_path: Path) -> None:
    store = create_study(tmp_path / "s.sqlite", "voxparadox-gender", 4, 0, headphone_trials=0, catch_per_config=0,
                         min_listen=0.0)
    (_, token), = store.add_annotators(["x"])
    records = store.study["items"]["voxparadox-gender"]
    with Server(store) as srv:
        c = Client(srv.base, token)
        state = _ready(c)
        for ex, t in zip(state["training"], store.items("training"), strict=True):
            letter = "AB"[records[t["benchmark_clip_id"]]["options"].index(t["gold"])]
            assert ex["answer"] == f"{letter}. {t['gold']}"  # the button's words
        status, state = c.call("POST", "/api/training/done")
        chosen = []
        for k in range(4):
            item = state["item"]
            position = store.item(store.annotator(token).order[k])
            record = records[position["benchmark_clip_id"]]
            assert item["question"] == "What is the speaker's gender?"  # the release's wording
            assert item["options"] == [{"label": o, "text": f"{letter}. {o}"}
                                       for letter, o in zip("AB", record["options"], strict=True)]
            if k == 0:  # not an option: refused; before its audio: refused
                assert c.answer(item, "C", fetch_audio=False)[0] == 409
                assert c.answer(item, "maybe")[0] == 422
            # answers: right, then the adversarial label three times
            answer = position["gold"] if k == 0 else record["adversarial"]
            status, state = c.answer(item, answer, fetch_audio=k != 0)
            assert status == 200, state
            chosen.append(answer)
        admin = Client(srv.base, store.set_admin_token())
        rows = list(csv.DictReader(io.StringIO(admin.call("GET", "/api/admin/answers.csv")[1].decode())))
    assert [a["answer"] for a in store.answers()] == chosen
    assert [r["correct"] for r in rows] == ["1", "0", "0", "0"] and [r["agrees_adversarial"] for r in rows] == [
        "0", "1", "1", "1"]
    pooled = analyze(store.answers())["voxparadox-gender"]["pooled"]
    assert pooled["accuracy"] == 0.25 and pooled["ala"]["ala"] == 0.75 and pooled["ala"]["ala_gap"] == 0.5
    results = export_run(store, tmp_path / "run")
    metrics = results["metrics"]["voxparadox-gender"]
    assert (metrics["acc"], metrics["ala"], metrics["ala_gap"], metrics["n"]) == (0.25, 0.75, 0.5, 4)
    samples = [json.loads(line) for line in (tmp_path / "run" / "samples_voxparadox-gender.jsonl").open()]
    assert [s["pred"] for s in samples] == [s["raw"] for s in samples] and {s["kind"] for s in samples} == {"mcq"}
    first = records[samples[0]["benchmark_clip_id"]]["options"]
    assert samples[0]["prompt"].endswith(f"A. {first[0]}\nB. {first[1]}\n\nAnswer with the letter of the correct option.")


def test_study_from_a_build(tmp_path: Path) -> None:
    from vocalgrad_dataset.voxparadox.export import build_voxparadox

    build_voxparadox("voxparadox-gender", ["test"], tmp_path / "D", limit=12)
    store = create_study(tmp_path / "s.sqlite", "voxparadox-gender", 6, 0, dataset=str(tmp_path / "D"),
                         headphone_trials=0, catch_per_config=2)
    assert store.study["source"] is None and store.study["pool_sizes"] == {"voxparadox-gender": 12}
    assert Counter(it["gold"] for it in store.items()) == {"Male": 3, "Female": 3}
    (_, token), = store.add_annotators(["x"])
    with Server(store) as srv:
        c = Client(srv.base, token)
        _ready(c)
        status, state = c.call("POST", "/api/training/done")
        status, wav = c.call("GET", f"/api/item/0/audio?nonce={state['item']['nonce']}")
        assert status == 200 and wav[:4] == b"RIFF"


def test_browser_answers_mcq_items_with_number_keys(tmp_path: Path) -> None:
    if not CHROMIUM.exists():
        pytest.skip("Debian chromium is not installed (scripts/setup.sh installs it)")
    sync_api = pytest.importorskip("playwright.sync_api")
    store = create_study(tmp_path / "s.sqlite", "voxparadox-pitch", 2, 0, headphone_trials=0, catch_per_config=0)
    (_, token), = store.add_annotators(["browser"])
    with Server(store) as srv, sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_context(bypass_csp=True).new_page()  # the page's CSP forbids Playwright's eval
            page.set_default_timeout(90_000)
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(f"{srv.base}/#token={token}")
            page.wait_for_selector("#consent:not([hidden])")
            page.check("#agree")
            page.click("#consent-btn")
            page.wait_for_selector("#training:not([hidden])")
            shown = page.locator(".example .answer").all_inner_texts()
            assert all(t.startswith("Correct answer: ") and t[16] in "ABCD" and t[17] == "." for t in shown)
            page.wait_for_function("[...document.querySelectorAll('.example-audio')].every(a => a.src.startsWith('blob:'))")
            for k in range(2):
                page.evaluate(f"document.querySelectorAll('.example-audio')[{k}].play()")
            page.wait_for_selector("#start-btn:enabled")
            page.click("#start-btn")
            for k, key in enumerate(["4", "2"]):
                page.wait_for_function(f"document.getElementById('player').dataset.seq === '{k}'")
                texts = page.locator("#options button").all_inner_texts()
                assert [t[:3] for t in texts] == ["A. ", "B. ", "C. ", "D. "]
                page.keyboard.press(key)  # before the clip ended: the buttons are locked
                assert page.is_disabled("#options button >> nth=0") and store.progress_of(
                    store.annotator(token)) == k
                page.evaluate("document.getElementById('player').play()")
                page.wait_for_selector("#options button:enabled")
                page.keyboard.press(key)
                page.wait_for_function(f"document.getElementById('count').textContent === '{k + 1} / 2 answered'")
                assert store.answers()[k]["answer"] == texts[int(key) - 1][3:]  # stored as the option's text
            assert not errors, errors
        finally:
            browser.close()
