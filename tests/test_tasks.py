"""Task kinds (harness/kinds/) and task configs declared as YAML (vocalgrad_dataset/tasks.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.kinds import KINDS, get_kind, task_kind
from harness.kinds.ternary import TERNARY_VOCABULARY
from harness.kinds.yesno import YESNO_VOCABULARY
from harness.parsing import MAIN_VOCABULARY
from harness.prompts import get_variant
from vocalgrad_dataset import tasks as dtasks
from vocalgrad_dataset.tasks import TaskError, config_names, read_task_file, resolve

# SPEC §4: each config name's suffix and the kind of question it asks.
KIND_OF_SUFFIX = {"": "direction", "-source": "direction", "-yesno": "yesno", "-ternary": "ternary",
                  "-conflict": "conflict", "-conflict-reversed": "conflict"}


def test_every_vocalgrad_config_is_declared_with_its_formats_kind() -> None:
    for name in config_names():
        cfg = resolve(name)
        assert cfg.name == name and cfg.family == "vocalgrad"
        suffix = name.removeprefix("beep-").removeprefix(cfg.spec.category.name)
        assert cfg.kind == KIND_OF_SUFFIX[suffix], name
    assert resolve("voice_pitch-ternary").name == "pitch-ternary"  # published aliases still resolve
    assert resolve("beep-pitch").decl.source == "beep"


def test_kinds_hold_the_spec_vocabularies_and_questions() -> None:
    assert task_kind("volume-yesno").vocabulary is YESNO_VOCABULARY
    assert task_kind("volume-ternary").vocabulary is TERNARY_VOCABULARY
    assert task_kind("volume").vocabulary is None  # the variant decides: main words or a paraphrase's
    assert get_variant("default").vocabulary("volume") is MAIN_VOCABULARY
    # SPEC §4 questions, written out here independently of the code
    assert get_variant("audio_first").text("volume-yesno") == (
        'Does the volume vary with time?\n\nAnswer with only one word: "yes" or "no".')
    assert get_variant("default").text("pitch-ternary", "voice pitch") == (
        'How does the voice pitch vary with time?\n\nAnswer with only one word: "increase", "decrease" or "constant".')


def test_a_fixed_question_kind_refuses_other_variants() -> None:
    with pytest.raises(ValueError, match="fixes its question .*default or audio_first, not 'swap_order'"):
        get_variant("swap_order").vocabulary("echo-yesno")


def test_unknown_kind_and_config_say_did_you_mean() -> None:
    with pytest.raises(ValueError, match="did you mean 'ternary'"):
        get_kind("ternery")
    with pytest.raises(ValueError, match="did you mean 'pitch'"):
        resolve("pich")
    assert set(KINDS) >= {"direction", "yesno", "ternary"}


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_include_merges_and_overrides(tmp_path: Path) -> None:
    _write(tmp_path / "base.yaml", "task: '{category}'\nfamily: vocalgrad\nkind: direction\nquestion: 'Q {attribute}?'\n"
           "answers: [up, down]\nrecipe: {name: a, labels: [down, up]}\ndescription: base\n")
    decl = read_task_file(_write(tmp_path / "child.yaml", "include: base.yaml\ntask: '{category}-yesno'\nkind: yesno\n"
                                                           "recipe: {name: b, labels: [n, y], sources: true, unchanged: n}\n"))
    assert (decl.task, decl.kind, decl.recipe.name, decl.description) == ("{category}-yesno", "yesno", "b", "base")
    assert decl.recipe.sources and decl.recipe.unchanged == "n" and decl.answers == ("up", "down")


@pytest.mark.parametrize(("text", "message"), [
    ("task: x\nfamily: f\nknd: mcq\n", r"x.yaml: knd: unknown field; did you mean 'kind'\?"),
    ("include: x.yaml\ntask: x\nfamily: f\n", "x.yaml: include: 'x.yaml' includes itself"),
    ("task: '{category}-x'\nfamily: mine\nkind: k\n", "patterns are for the vocalgrad family"),
    ("task: x\nfamily: f\n", "kind: missing"),
    ("task: x\nfamily: f\nkind: k\nrecipe: {name: r, labels: [a], sources: true}\n", "unchanged is required"),
    ("task: x\nfamily: f\nkind: k\nrecipe: {name: r, labels: [a], sorces: true}\n", "did you mean 'sources'"),
    ("task: [a]\nfamily: f\n", "task: expected text"),
    ("family: f\n", "task: missing"),
    ("task: x\nfamily: f\nkind: k\nparams: 3\n", "params: expected a mapping"),
    ("- a\n", "expected a mapping of task file fields"),
])
def test_bad_declarations_are_one_line_errors(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(TaskError, match=message) as err:
        read_task_file(_write(tmp_path / "x.yaml", text))
    assert "\n" not in str(err.value)


def test_a_new_config_is_a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for p in dtasks.TASKS_DIR.glob("*.yaml"):
        _write(tmp_path / p.name, p.read_text(encoding="utf-8"))
    _write(tmp_path / "my-task.yaml", "task: my-task\nfamily: mine\nkind: ternary\nparams: {labels: [a, b]}\n")
    monkeypatch.setattr(dtasks, "TASKS_DIR", tmp_path)
    dtasks.declarations.cache_clear()
    try:
        assert resolve("my-task").params == {"labels": ["a", "b"]}
        assert task_kind("my-task").name == "ternary"
        assert "my-task" in dtasks.declared_names()
    finally:
        dtasks.declarations.cache_clear()
