"""The preflight: a model that cannot hear the audio stops within a few clips, with two raw answers shown."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import main as harness
from harness.models.base import BaseAudioLM
from harness.preflight import PREFLIGHT_CLIPS, PreflightError, is_refusal
from harness.runner import EvalSettings, run_eval

REFUSAL = "I'm sorry, but as an AI I cannot listen to audio files. Could you describe the sound?"


class Talker(BaseAudioLM):
    """An 'hf'-kind model answering a fixed text (or per-clip texts from `answers`)."""

    kind = "hf"

    def __init__(self, answer: str = REFUSAL, name: str = "talker", batch_size: int = 8) -> None:
        super().__init__(name, batch_size=batch_size)
        self.answer, self.asked = answer, []

    def _generate_batch(self, prompts, max_new_tokens):
        self.asked += [p.clip_id for p in prompts]
        return [self.answer for _ in prompts]


class Refuser(Talker):
    name = "refuser"


class Mumbler(Talker):
    name = "mumbler"

    def __init__(self, **kw) -> None:
        super().__init__("The audio features a voice speaking a sentence.", **kw)


def settings(out: Path, **kw) -> EvalSettings:
    return EvalSettings("talker", ["volume"], str(out), source="demo", **kw)


@pytest.mark.parametrize("text, refused", [
    (REFUSAL, True), ("I am unable to process audio input.", True), ("I can't hear anything.", True),
    ("There is no audio attached.", True), ("increase", False), ("The volume decreases.", False),
    ("It cannot be said to increase.", False),
])
def test_refusals_are_recognised(text: str, refused: bool) -> None:
    assert is_refusal(text) is refused


def test_a_model_that_refuses_stops_before_the_run(tmp_path: Path) -> None:
    model = Talker()
    with pytest.raises(PreflightError) as err:
        run_eval(settings(tmp_path / "run"), model=model)
    text = str(err.value)
    assert f"{PREFLIGHT_CLIPS} of {PREFLIGHT_CLIPS} answers on high-tier volume clips" in text
    assert "refusals (8)" in text and text.count(repr(REFUSAL[:200])) == 2 and "chat template" in text
    assert len(model.asked) == 2 * PREFLIGHT_CLIPS  # each clip asked once and retried once, as the run would
    assert all("__high__" in cid for cid in model.asked)
    assert not list((tmp_path / "run").glob("samples_*")) and not (tmp_path / "run" / "run_settings.json").exists()
    # the same directory takes a corrected run (nothing was recorded)
    out = run_eval(settings(tmp_path / "run", limit=6, preflight=False), model=Talker("increase"))
    assert out["preflight"] == {"skipped": "--no-preflight"}


def test_unparsed_answers_stop_it_too_and_the_cli_says_so_in_one_message(tmp_path: Path, capsys) -> None:
    args = ["eval", "--model", "tests.test_preflight:Mumbler", "--configs", "volume", "--source", "demo",
            "--out", str(tmp_path / "r")]
    assert harness(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: preflight: 8 of 8 answers") and "unparsed (8)" in err and "Traceback" not in err
    assert harness([*args, "--no-preflight", "--limit", "4"]) == 0


def test_a_model_that_answers_passes_and_the_check_is_recorded(tmp_path: Path) -> None:
    model = Talker("Decrease.")
    out = run_eval(settings(tmp_path / "ok", limit=6), model=model)
    assert out["preflight"] == {"config": "volume", "n": 8, "unparsed": 0, "refusals": 0, "examples": [],
                                "passed": True}
    saved = json.loads((tmp_path / "ok" / "results.json").read_text())
    assert saved["preflight"]["passed"] is True
    # a resumed run does not ask again
    again = run_eval(settings(tmp_path / "ok", limit=6), model=Talker("Decrease."))
    assert again["preflight"] == {"skipped": "resumed run"}


def test_weight_free_and_tiny_models_are_exempt(tmp_path: Path) -> None:
    out = run_eval(EvalSettings("always-increase", ["volume"], str(tmp_path), source="demo", limit=4))
    assert out["preflight"] == {"skipped": "baseline model"}


class Partly(Talker):
    """Refuses on the first `bad` distinct clips it is asked about, answers "increase" on the others."""

    def __init__(self, bad: int) -> None:
        super().__init__("increase")
        self.bad, self.seen = bad, []

    def _generate_batch(self, prompts, max_new_tokens):
        out = []
        for p in prompts:
            if p.clip_id not in self.seen:
                self.seen.append(p.clip_id)
            out.append(REFUSAL if self.seen.index(p.clip_id) < self.bad else "increase")
        return out


@pytest.mark.parametrize("bad, passes", [(4, True), (5, False)])  # the threshold: 4/8 passes, 5/8 stops
def test_the_threshold_is_half_of_the_clips(tmp_path: Path, bad: int, passes: bool) -> None:
    if passes:
        out = run_eval(settings(tmp_path / "r", limit=2), model=Partly(bad))
        assert out["preflight"]["refusals"] == 4 and out["preflight"]["passed"] is True
    else:
        with pytest.raises(PreflightError, match="5 of 8 answers"):
            run_eval(settings(tmp_path / "r", limit=2), model=Partly(bad))


def test_a_refused_connection_is_not_blamed_on_the_chat_template(tmp_path: Path, capsys) -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens on: bound, never listening, so connecting is refused
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        args = ["eval", "--model", "gpt-4o-audio", "--model-arg", f"base_url=http://127.0.0.1:{port}",
                "--model-arg", "max_retries=0", "--model-arg", "api_key=sk-test-0123456789", "--configs", "volume",
                "--source", "demo", "--out", str(tmp_path / "r")]
        assert harness(args) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "Connection refused" in err and "could not be reached" in err
    assert "chat template" not in err and "sk-test-0123456789" not in err
