"""The listening protocol of issue 23 (webMUSHRA / BeaqleJS conventions): answers only after the clip has
played to its end, play count and listening time per answer, hotkeys, one undo, mandatory training, the
Woods et al. (2017) headphone screen, catch trials (reported, left out of the scores), a closing
questionnaire, and an export that refuses (or marks) a study below its design, on the command line and on
the leaderboard page.

The store-level test runs everywhere; the browser test drives Debian chromium through Playwright on
127.0.0.1, with generous timeouts for a busy machine."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile as sf

from listening import screen
from listening.cli import main as listen
from listening.export import study_status
from listening.store import QUESTIONNAIRE, Rejected, Store
from listening.study import answer_options, create_study
from tests.helpers.listening_server import CHROMIUM, CHROMIUM_ARGS, Server

QUESTIONS = {"device": "closed headphones", "hearing": "no known hearing problem", "environment": "quiet room"}


def test_headphone_screen_stimulus_follows_woods_2017() -> None:
    """Three 200 Hz tones of 1 s; one 6 dB softer, one with the right channel sign-flipped; 5 of 6 to pass."""
    trial = {"soft": 2, "antiphase": 0}
    pcm, sr = sf.read(__import__("io").BytesIO(screen.trial_wav(trial)))
    assert pcm.shape[1] == 2 and len(pcm) == sr * (3 * 1.0 + 2 * 0.5)
    tones = [pcm[int(sr * 1.5 * k): int(sr * 1.5 * k) + sr] for k in range(3)]
    rms = [float(np.sqrt(np.mean(t[:, 0] ** 2))) for t in tones]
    assert 20 * np.log10(rms[2] / rms[1]) == pytest.approx(-6.0, abs=0.05)
    assert np.allclose(tones[0][:, 0], -tones[0][:, 1], atol=1e-4)  # antiphase
    assert np.allclose(tones[1][:, 0], tones[1][:, 1])  # in phase
    spectrum = np.abs(np.fft.rfft(tones[1][:, 0]))
    assert np.argmax(spectrum) * sr / sr == pytest.approx(200, abs=1)  # 1 s of audio: bin k is k Hz
    assert screen.pass_mark(6) == 5 and screen.pass_mark(2) == 2
    draws = screen.trials(0, "A01")
    assert len(draws) == 6 and all(d["soft"] != d["antiphase"] for d in draws)


def _ready(store: Store, token: str, right: int = 6) -> None:
    """Consent, the headphone screen with `right` of 6 right, and both examples heard."""
    ann = store.annotator(token)
    store.mark(ann, "consented")
    for k, t in enumerate(screen.trials(0, ann.name)):
        store.headphone_answer(store.annotator(token), k, t["soft"] if k < right else (t["soft"] + 1) % 3)


def test_protocol_in_the_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = create_study(tmp_path / "s.sqlite", "volume", 6, 0, source="demo", catch_per_config=2)
    assert len(store.items("catch")) == 2 and store.protocol()["headphone_trials"] == 6
    (_, good), (_, deaf), (_, idle) = store.add_annotators(["good", "deaf", "idle"])
    ann = store.annotator(good)
    kinds = [store.item(p)["kind"] for p in ann.order]
    assert kinds.count("catch") == 2 and kinds[0] == "test" and len(kinds) == 8  # mixed in, never first
    with pytest.raises(Rejected, match="give your consent"):
        store.headphone_answer(ann, 0, 0)
    _ready(store, deaf, right=4)  # 4 of 6: below Woods et al.'s 5
    assert store.headphone_status(store.annotator(deaf))["passed"] is False
    _ready(store, good, right=5)
    assert store.headphone_status(store.annotator(good)) == {"trials": 6, "answered": 6, "correct": 5, "passed": True,
                                                             "pass_mark": 5}
    with pytest.raises(Rejected, match="listen to example 1"):
        store.finish_training(store.annotator(good), 2)
    store.heard_training(ann, 0)
    store.heard_training(ann, 1)
    store.finish_training(store.annotator(good), 2)
    ann = store.annotator(good)
    clock = [time.time()]
    monkeypatch.setattr("listening.store.time.time", lambda: clock[0])
    for seq, position in enumerate(ann.order):
        item = store.item(position)
        cur = store.current(ann)
        assert cur is not None and cur.seq == seq
        store.serve_audio(ann, seq, cur.nonce, 3000.0)
        labels = [lab for lab, _ in answer_options("volume")]
        clock[0] += 2.9  # 2.9 s of a 3 s clip: too early
        with pytest.raises(Rejected, match="listen to the whole clip"):
            store.answer(ann, seq, cur.nonce, item["gold"], labels, 2900, 1, 2900)
        clock[0] += 0.2
        store.answer(ann, seq, cur.nonce, item["gold"], labels, 3100, 1, 3050)
        if seq == 2:
            store.undo(ann)  # take it back once: the item is current again, the old answer kept aside
            with pytest.raises(Rejected, match="no answer to take back"):
                store.undo(ann)
            store.answer(ann, seq, cur.nonce, item["gold"], labels, 4000, 2, 6100)
            with pytest.raises(Rejected, match="one undo per answer"):
                store.undo(ann)
    assert len(store.answers()) == 6 and {a["kind"] for a in store.answers()} == {"test"}  # catch trials apart
    assert len(store.answers(("catch",))) == 2 and store.answers()[2]["plays"] == 2
    assert store.answers()[2]["listen_ms"] == 6100
    with pytest.raises(Rejected, match="device must be one of"):
        store.save_questionnaire(ann, {**QUESTIONS, "device": "a tin can"})
    store.save_questionnaire(ann, {**QUESTIONS, "comments": "fine"})
    with pytest.raises(Rejected, match="already answered"):
        store.save_questionnaire(ann, QUESTIONS)
    progress = {p["annotator"]: p for p in store.progress()}
    assert progress["good"]["undos"] == 1 and progress["good"]["questionnaire"]["device"] == "closed headphones"
    status = study_status(store, 0.75)
    # 'deaf' answered nothing, so only an unfinished annotator; 'idle' never started; one complete of two wanted
    assert status["problems"] == ["deaf answered 0 of 8 items", "idle answered 0 of 8 items",
                                  "1 complete annotator(s) left after exclusions; the design needs 2"]
    assert status["completeness"] == pytest.approx(8 / 24) and not status["meets_design"]
    assert set(QUESTIONNAIRE) == set(QUESTIONS)


def _gold_label(store: Store, token: str, seq: int) -> str:
    return store.item(store.annotator(token).order[seq])["gold"]


def _play_to_end(page: Any, player: str, key: bool = True) -> None:
    """Start the player (the space key, or a script) and wait for its `ended` event."""
    if key:
        page.keyboard.press(" ")
    else:
        page.evaluate(f"document.getElementById('{player}').play()")
    page.wait_for_function(f"document.getElementById('{player}').ended")


def test_browser_protocol_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    if not CHROMIUM.exists():
        pytest.skip("Debian chromium is not installed (scripts/setup.sh installs it)")
    sync_api = pytest.importorskip("playwright.sync_api")
    store = create_study(tmp_path / "s.sqlite", "volume", 4, 0, source="demo", catch_per_config=1,
                         headphone_trials=2)
    (name, token), _ = store.add_annotators(["P01", "P02"])  # P02 never starts: the study stays incomplete
    total = len(store.annotator(token).order)
    assert total == 5
    with Server(store) as server, sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_context(bypass_csp=True).new_page()
            page.set_default_timeout(90_000)
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(f"{server.base}/#token={token}")
            page.wait_for_selector("#consent:not([hidden])")
            page.check("#agree")
            page.click("#consent-btn")
            for k, trial in enumerate(screen.trials(0, name, 2)):  # the headphone screen, with the keys
                page.wait_for_function(f"document.getElementById('hp-player').dataset.trial === '{k}' && "
                                       "document.getElementById('hp-player').src.startsWith('blob:')")
                assert page.is_disabled("#hp-options button >> nth=0")
                _play_to_end(page, "hp-player")
                page.wait_for_selector("#hp-options button:enabled")
                page.keyboard.press(str(trial["soft"] + 1))
            page.wait_for_selector("#training:not([hidden])")
            page.wait_for_function("[...document.querySelectorAll('.example-audio')].every(a => a.src.startsWith('blob:'))")
            assert page.is_disabled("#start-btn")  # examples cannot be skipped
            for i in range(2):
                page.evaluate(f"document.querySelectorAll('.example-audio')[{i}].play()")
            page.wait_for_selector("#start-btn:enabled")
            page.click("#start-btn")
            keys = {"increase": ["1", "ArrowLeft"], "decrease": ["2", "ArrowRight"]}
            seq = 0
            undone = False
            while seq < total:
                page.wait_for_function(f"document.getElementById('player').dataset.seq === '{seq}'")
                page.wait_for_function(f"document.getElementById('count').textContent === '{seq} / {total} answered'")
                page.keyboard.press(" ")  # space plays
                page.wait_for_function("document.getElementById('player').currentTime > 0")
                page.keyboard.press("1")  # before `ended`: the key does nothing
                page.click("#options button >> nth=0", force=True, timeout=5_000)  # nor does a click
                assert page.is_disabled("#options button >> nth=1")
                page.wait_for_function("document.getElementById('player').ended")
                assert page.locator("#count").inner_text() == f"{seq} / {total} answered"
                page.keyboard.press(keys[_gold_label(store, token, seq)][seq % 2])
                page.wait_for_function(f"document.getElementById('count').textContent === '{seq + 1} / {total} answered'")
                if seq == 1 and not undone:  # one undo (key U): the item returns and must be heard again
                    page.wait_for_selector("#undo-btn:not([hidden])")
                    page.keyboard.press("u")
                    undone = True
                    continue
                if seq == 1:
                    assert page.is_hidden("#undo-btn")  # its answer was taken back once already
                seq += 1
            page.wait_for_selector("#questionnaire:not([hidden])")
            for field, value in QUESTIONS.items():
                page.select_option(f"#q-{field}", value)
            page.fill("#q-comments", "clear enough")
            page.click("#q-submit")
            page.wait_for_selector("#done:not([hidden])")
            admin = browser.new_context(bypass_csp=True).new_page()
            admin.set_default_timeout(90_000)
            admin.on("pageerror", lambda e: errors.append(str(e)))
            admin.goto(f"{server.base}/admin")
            admin.fill("#admin-token", store.set_admin_token())
            admin.click("#admin-login button")
            admin.wait_for_selector("#design.below-design")
            assert "BELOW ITS DESIGN: P02 answered 0 of 5 items" in admin.locator("#design").inner_text()
            assert not errors, errors
        finally:
            browser.close()
    answers = store.answers(("test", "catch"))
    assert len(answers) == total and all(a["answer"] == a["gold"] for a in answers)
    durations = {a["seq"]: a for a in answers}
    assert all(a["plays"] >= 1 and a["listen_ms"] >= 2500 for a in answers)  # every clip is >= 3 s
    assert durations[1]["plays"] == 1  # the undone item was played again for its new answer
    progress = {r["annotator"]: r for r in store.progress()}[name]
    assert progress["undos"] == 1 and [h["answer"] for h in progress["headphone"]] == [
        t["soft"] for t in screen.trials(0, name, 2)]
    assert {k: progress["questionnaire"][k] for k in QUESTIONS} == QUESTIONS
    assert progress["questionnaire"]["comments"] == "clear enough"
    assert len(store.answers()) == 4 and len(store.answers(("catch",))) == 1  # the catch trial is scored apart
    # P02 never started: export refuses, or marks the study, and the leaderboard page says so on the row
    out, sub = tmp_path / "run", tmp_path / "subs" / "human.json"
    assert listen(["export", "--db", str(store.path), "--out", str(out)]) == 2
    assert "below its design: P02 answered 0 of 5 items" in capsys.readouterr().err
    assert listen(["export", "--db", str(store.path), "--out", str(out), "--allow-incomplete",
                   "--submission", str(sub)]) == 0
    printed = capsys.readouterr().out
    assert "2 annotators, 50 % of the answers, 1 complete and included" in printed
    design = json.loads((out / "results.json").read_text())["config"]["listening"]["design"]
    assert design["meets_design"] is False and design["complete"] == ["P01"]
    from harness.leaderboard.build import build

    build(sub.parent, tmp_path / "site")
    page_html = (tmp_path / "site" / "index.html").read_text()
    assert 'class="row human other below-design"' in page_html
    assert "1 of 2 annotators complete and included, 50 % of the answers; excluded: none; BELOW ITS DESIGN" in page_html
