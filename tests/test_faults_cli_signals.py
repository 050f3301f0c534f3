"""Bad input and faults, CLI output paths, signals, hostile inputs (issue 22): each case of the issue reproduced for real and answered by one
clear line naming the file, clip or field, or by the right behaviour."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

from harness import results as res
from harness.cli import main as harness
from tests.helpers.folder_source import fbuild, tiny_folder
from tests.helpers.runner import FakeModel, make_release
from tests.helpers.user_errors import assert_one_error_line, without_root_override
from vocalgrad_dataset.build.export import build
from vocalgrad_dataset.build.info import BuildMismatchError

ROOT = Path(__file__).resolve().parents[1]
DATASET_ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def _wait_for(cond, timeout: float = 300.0) -> None:
    """Poll a condition, with a bound generous enough for a loaded machine (no fixed sleeps)."""
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def _one_line(capsys: pytest.CaptureFixture[str], code: int, *needles: str) -> str:
    """A user error printed to the captured stderr (see assert_one_error_line)."""
    return assert_one_error_line(code, capsys.readouterr().err, *needles)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """volume and noise of 3 source clips, one clip per shard: 3 shards and 72 rows per config."""
    root = tmp_path_factory.mktemp("built")
    data = tiny_folder(root / "src", n=3)
    fbuild(data, root / "C", clips_per_shard=1)
    build("noise", ["test"], root / "C", source="folder", data_dir=str(data), clips_per_shard=1, progress=False)
    return root / "C"


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_release(tmp_path_factory.mktemp("release"))


def _copy(built: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(built, tmp_path / "C"))


def _eval(dataset: Path, out: Path, *extra: str) -> int:
    return harness(["eval", "--model", "always-increase", "--dataset", str(dataset), "--configs", "volume",
                    "--out", str(out), "--no-preflight", *extra])


# ---- 1. a deleted shard ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("manifest", [False, True])
def test_a_deleted_shard_is_named_not_evaluated_around(built: Path, tmp_path: Path, capsys, manifest: bool) -> None:
    c = _copy(built, tmp_path)
    if manifest:
        from vocalgrad_dataset.build.manifest import write_manifest

        write_manifest(c)
    (c / "volume" / "test-00001-of-00003.parquet").unlink()
    _one_line(capsys, _eval(c, tmp_path / "run"), "test-00001-of-00003.parquet", "missing")
    assert not (tmp_path / "run" / "results.json").exists()


def test_a_deleted_shard_and_its_record_caught_by_the_manifest(built: Path, tmp_path: Path, capsys) -> None:
    from vocalgrad_dataset.build.info import RECORD_NAME
    from vocalgrad_dataset.build.manifest import write_manifest

    c = _copy(built, tmp_path)
    write_manifest(c)
    (c / "volume" / RECORD_NAME).unlink()
    (c / "volume" / "test-00002-of-00003.parquet").unlink()
    for f in (c / "volume").glob("*.parquet"):  # renumbered as if the set were complete
        f.rename(f.with_name(f.name.replace("-of-00003", "-of-00002")))
    _one_line(capsys, _eval(c, tmp_path / "run"), "manifest.csv", "24 clip(s) of 'volume'")


# ---- 2. a shard of another config under this config's name -----------------------------------------------------
def test_a_shard_of_another_config_is_refused_by_eval_and_by_a_rebuild(built: Path, tmp_path: Path, capsys) -> None:
    c = _copy(built, tmp_path)
    victim = c / "volume" / "test-00001-of-00003.parquet"
    shutil.copyfile(c / "noise" / "test-00001-of-00003.parquet", victim)
    _one_line(capsys, _eval(c, tmp_path / "run"), str(victim), "'noise'", "not 'volume'")
    with pytest.raises(BuildMismatchError, match="test-00001-of-00003.parquet holds rows of config 'noise'"):
        fbuild(built.parent / "src", c, clips_per_shard=1)


# ---- 0-byte shard ------------------------------------------------------------------------------------------------
def test_an_empty_shard_is_named(built: Path, tmp_path: Path, capsys) -> None:
    c = _copy(built, tmp_path)
    victim = c / "volume" / "test-00002-of-00003.parquet"
    victim.write_bytes(b"")
    _one_line(capsys, _eval(c, tmp_path / "run"), str(victim), "0 bytes")
    with pytest.raises(BuildMismatchError, match=f"{victim}: unreadable shard"):  # a rebuild would have skipped it
        fbuild(built.parent / "src", c, clips_per_shard=1)


# ---- 3. a key from the environment echoed by the endpoint; the provider's model echo -----------------------------
ENV_KEY = "sk-env-4c1d9e7a2b3f5068"


class EnvEchoModel(FakeModel):
    """A wrapper that reads its key from the environment (as the API wrappers do) and echoes it in its answers."""

    name = "env-echo"

    def _generate_batch(self, prompts, max_new_tokens):
        return [f"{a} (key {os.environ['GEMINI_API_KEY']})" for a in super()._generate_batch(prompts, max_new_tokens)]


def _files_holding(root: Path, secret: str) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]


def test_a_key_from_the_environment_echoed_in_answers_reaches_no_file(release: Path, tmp_path: Path, capsys,
                                                                       monkeypatch) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", ENV_KEY)
    out = tmp_path / "run"
    assert harness(["eval", "--model", "tests.test_faults_cli_signals:EnvEchoModel", "--dataset", str(release),
                    "--configs", "volume", "--out", str(out), "--batch-size", "8"]) == 0
    rows = res.read_jsonl(res.samples_path(out, "volume"))
    assert len(rows) == 72 and all(r["raw"].endswith("(key ***)") for r in rows)  # scrubbed, not dropped
    from harness.leaderboard.submit import make_submission, write_submission

    write_submission(make_submission(out, model_name="Echo"), tmp_path / "sub.json")
    seen = capsys.readouterr()
    assert _files_holding(tmp_path, ENV_KEY) == [] and ENV_KEY not in seen.out + seen.err


class _Echo(BaseHTTPRequestHandler):
    """An OpenAI-style endpoint that echoes the bearer key in its answer and names a model of its choosing."""

    model_echo = "gpt-4o-audio-preview-2024-12-17"

    def do_POST(self) -> None:  # noqa: N802 - http.server naming
        self.rfile.read(int(self.headers["Content-Length"]))
        key = self.headers["Authorization"].removeprefix("Bearer ")
        body = json.dumps({"model": self.model_echo, "system_fingerprint": "fp_1a2b",
                           "choices": [{"message": {"content": f"increase (you sent {key})"}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.mark.parametrize("echo, recorded", [
    ("gpt-4o-audio-preview-2024-12-17", "model=gpt-4o-audio-preview-2024-12-17"),
    ("gpt-3.5-turbo", "model=gpt-3.5-turbo (asked for gpt-4o-audio-preview)"),
    ("x" * 200_000, "model=<not an identifier: dropped>"),
    (f"[{ENV_KEY}](http://evil)\x00", "model=<not an identifier: dropped>"),
])
def test_the_openai_wrapper_scrubs_an_env_key_and_checks_the_model_echo(release: Path, tmp_path: Path, capsys,
                                                                         monkeypatch, echo: str, recorded: str) -> None:
    handler = type("Echo", (_Echo,), {"model_echo": echo})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("OPENAI_API_KEY", ENV_KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{server.server_address[1]}")
    try:
        out = tmp_path / "run"
        assert harness(["eval", "--model", "gpt-4o-audio", "--dataset", str(release), "--configs", "volume",
                        "--out", str(out), "--limit", "8"]) == 0
    finally:
        server.shutdown()
        server.server_close()
    info = json.loads((out / "results.json").read_text())["model_info"]
    assert info["api_model_versions"] == [f"{recorded}, system_fingerprint=fp_1a2b"]
    assert _files_holding(tmp_path, ENV_KEY) == [] and ENV_KEY not in capsys.readouterr().err


# ---- 4. a WAV cut short mid-sample -------------------------------------------------------------------------------
def _truncate(path: Path, frames: int) -> None:
    """Cut a PCM16 mono WAV after `frames` frames and one more byte (mid-sample), keeping its header."""
    data = path.read_bytes()
    path.write_bytes(data[: 44 + 2 * frames + 1])


def test_a_truncated_wav_is_refused_by_eval_naming_the_file(release: Path, tmp_path: Path, capsys) -> None:
    import soundfile as sf

    rel = Path(shutil.copytree(release, tmp_path / "rel"))
    victim = sorted((rel / "audio").glob("volume__*.wav"))[0]
    frames = sf.info(str(victim)).frames
    _truncate(victim, frames * 6 // 10)
    assert sf.read(str(victim))[0].shape[0] == frames * 6 // 10  # what soundfile alone would have used
    code = harness(["eval", "--model", "always-increase", "--dataset", str(rel), "--configs", "volume",
                    "--out", str(tmp_path / "run")])
    _one_line(capsys, code, str(victim), "truncated WAV", f"{frames:,} frames", f"{frames * 6 // 10:,} are present")


def test_a_truncated_source_wav_is_refused_by_the_build(tmp_path: Path) -> None:
    from vocalgrad_dataset.sources import SourceError

    data = tiny_folder(tmp_path / "src", n=1)
    _truncate(data / "utt0.wav", 9000)
    with pytest.raises(SourceError, match=r"utt0.wav: truncated WAV: its header says 16,000 frames but only 9,000"):
        fbuild(data, tmp_path / "C")


# ---- 5. clarity on an 8 kHz source ---------------------------------------------------------------------------------
def test_clarity_on_an_8_khz_source_is_announced_like_distortion(tmp_path: Path) -> None:
    import warnings

    import numpy as np
    import soundfile as sf

    from vocalgrad_dataset import generate
    from vocalgrad_dataset.categories import CATEGORIES
    from vocalgrad_dataset.sources import SourceClip

    # the clarity tiers' lowest cutoffs are 5000 / 2500 / 1200 Hz (voice_clarity_benchmark.json): at 8 kHz
    # (Nyquist 4000 Hz) only the low tier's lies at or above Nyquist; at 16 kHz none does
    assert generate.noop_tiers(CATEGORIES["clarity"], 8000) == ["low"]
    assert generate.noop_tiers(CATEGORIES["clarity"], 16000) == []
    sr = 8000
    x = (0.3 * np.sin(2 * np.pi * 300 * np.arange(sr) / sr) * 32767).astype(np.int16)
    sf.write(str(tmp_path / "a.wav"), x, sr)
    clip = SourceClip("s1_01", "a", "s1", "", str(tmp_path / "a.wav"), 0.1, 0.9)
    conds = [c for c in generate.conditions() if c.tier == "low" and c.curve == "linear"]
    generate._WARNED_NOOP.clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        list(generate.iter_clip_rows(CATEGORIES["clarity"], clip, x, sr, conds))
    msgs = [str(w.message) for w in caught if "no-ops at 8000 Hz" in str(w.message)]
    assert len(msgs) == 1 and msgs[0].startswith("clarity: tier(s) low ") and "Nyquist" in msgs[0]


# ---- 6. probing.extract --layers out of range --------------------------------------------------------------------
@pytest.mark.slow  # a tiny random-weight model: ~30 s on a loaded machine
def test_extract_refuses_a_layer_the_model_lacks_before_writing_a_shard(release: Path, tmp_path: Path, capsys) -> None:
    from probing.extract import main as extract

    out = tmp_path / "feat"
    args = ["--model", "tiny-qwen2-audio", "--dataset", str(release), "--split", "test", "--configs", "volume",
            "--out", str(out), "--limit-units", "1"]
    _one_line(capsys, extract([*args, "--layers", "99"]), "--layers: layer 99 is outside 0..2")
    assert not list(out.rglob("*.npz")) and not list(out.rglob("*.safetensors"))
    assert all(not json.loads(m.read_text()).get("complete") for m in out.rglob("manifest.json"))
    assert extract([*args, "--layers", "0,-1"]) == 0  # the same folder then takes a valid run


# ---- the suite: mutations no test used to catch --------------------------------------------------------------------
def test_merge_keeps_the_first_copy_of_a_clip(tmp_path: Path) -> None:
    """Two shards holding one clip (a rank that died after writing, then a rerun): rank order, then line order
    decides, so the merged answer is the earliest one."""
    from harness.runner import merge_config

    first = {"benchmark_clip_id": "a__b__linear__low__up", "raw": "first"}
    ids = [first["benchmark_clip_id"], "a__b__linear__low__down"]
    with res.ShardWriter(res.shard_path(tmp_path, "volume", 0)) as w:
        w.write_batch([first, {"benchmark_clip_id": ids[1], "raw": "only"}, {**first, "raw": "later line"}])
    with res.ShardWriter(res.shard_path(tmp_path, "volume", 1)) as w:
        w.write_batch([{**first, "raw": "rank 1"}])
    merge_config(tmp_path, "volume", ids)
    assert [r["raw"] for r in res.read_jsonl(res.samples_path(tmp_path, "volume"))] == ["first", "only"]


def test_a_two_rank_resume_splits_what_is_left_by_what_is_left(release: Path, tmp_path: Path) -> None:
    """Source clips p901 (0.05 s), p902 (0.15 s), p903 (0.10 s) x 24 rows; 21 of p902's rows are done. Weighted
    by what is left (by hand): p903 2.4 s -> rank 0; p901 1.2 s -> rank 1; p902 3 x 0.15 = 0.45 s -> rank 1, the
    less loaded. (Weighted by whole units, p902 3.6 s would go to rank 0 and p903 to rank 1.)"""
    from harness.data import open_source
    from harness.prompts import get_variant
    from harness.runner import EvalSettings, run_config
    from tests.helpers.runner import FakeDist

    ref = tmp_path / "ref"
    settings = EvalSettings("fake", ["volume"], str(ref), dataset=str(release), batch_size=5)
    source = open_source(dataset=str(release))
    run_config(FakeModel(), source, "volume", settings, FakeDist(0, 1, True), get_variant("default"))
    want = res.read_jsonl(res.samples_path(ref, "volume"))
    done = [r for r in want if r["source_clip_id"] == "p902_205"][:21]
    out = tmp_path / "run"
    with res.ShardWriter(res.shard_path(out, "volume", 0)) as w:
        w.write_batch(done)
    settings = EvalSettings("fake", ["volume"], str(out), dataset=str(release), batch_size=5)
    for rank in (1, 0):  # rank 1 first: rank 0 merges once every shard is written
        run_config(FakeModel(), source, "volume", settings, FakeDist(rank, 2, rank == 0), get_variant("default"))
    by_rank = [[r["benchmark_clip_id"] for r in res.read_jsonl(res.shard_path(out, "volume", k))] for k in (0, 1)]
    ids_of = {clip: [r["benchmark_clip_id"] for r in want if r["source_clip_id"] == clip]
              for clip in ("p901_101", "p902_205", "p903_307")}
    assert by_rank[0] == [r["benchmark_clip_id"] for r in done] + ids_of["p903_307"]
    assert sorted(by_rank[1]) == sorted(ids_of["p901_101"] + ids_of["p902_205"][21:])
    assert res.read_jsonl(res.samples_path(out, "volume")) == want  # nothing evaluated twice, nothing lost


def test_probe_cross_validation_never_puts_a_speaker_on_both_sides(release: Path, tmp_path: Path,
                                                                   monkeypatch) -> None:
    """Speaker p901 reads two source clips (p901_101 and p902_205), p903 one: grouped by clip, fold 2 would hold
    out p902_205 and train on p901_101, the same voice on both sides of the split."""
    from probing import extract as ex
    from probing import train
    from probing.probes import ProbeSettings
    from probing.store import Extraction
    from tests.helpers.probing import FakeEncoder

    rel = Path(shutil.copytree(release, tmp_path / "rel"))
    meta = (rel / "metadata.csv").read_text().replace(",p902_205,p902,", ",p902_205,p901,")
    train_rows = "\n".join(line.replace(",test", ",train") for line in meta.splitlines()[1:] if ",test" in line)
    (rel / "metadata.csv").write_text(meta.rstrip("\n") + "\n" + train_rows + "\n")
    root = tmp_path / "feat"
    for split in ("train", "test"):
        ex.run_extract(ex.ExtractSettings(model="fake-encoder", configs=["volume"], split=split, out=str(root),
                                          dataset=str(rel)), model=FakeEncoder())
    seen: list[list[np.ndarray]] = []
    real = train.grouped_folds
    monkeypatch.setattr(train, "grouped_folds", lambda groups, k: seen.append(real(groups, k)) or seen[-1])
    out = train.train_run(root, ProbeSettings(epochs=2), representations=["encoder/1"], cv_folds=2, progress=False)
    speakers = np.array(Extraction(root).open("train", "volume").rows["speaker_id"])
    assert sorted(set(speakers)) == ["p901", "p903"] and out["cross_validation"]["group_by"]["volume"] == "speaker_id"
    (folds,) = seen
    for held in folds:
        rest = np.setdiff1d(np.arange(len(speakers)), held)
        assert len(held) and not set(speakers[held]) & set(speakers[rest])


# ---- SIGTERM / kill -9 to a build with worker processes; --num-proc capped --------------------------------------------
def _workers(pid: int) -> set[int]:
    """Live pool workers of `pid`: its children started by multiprocessing's spawn (not its resource tracker,
    which writes nothing and leaves when its parent's pipe closes)."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
            cmdline = (stat.parent / "cmdline").read_bytes()
        except OSError:  # exited meanwhile
            continue
        if int(fields[1]) == pid and fields[0] != "Z" and b"spawn_main" in cmdline:
            found.add(int(stat.parent.name))
    return found


def _gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] == "Z"
    except (FileNotFoundError, ProcessLookupError):
        return True


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_a_stopped_parallel_build_leaves_no_worker_behind(tmp_path: Path, sig: signal.Signals) -> None:
    data = tiny_folder(tmp_path / "src", n=24)  # enough shards that a signal after the first lands mid-build
    out = tmp_path / "C"
    args = [sys.executable, "-m", "vocalgrad_dataset.cli", "build", "--config", "volume", "--source", "folder",
            "--data-dir", str(data), "--out", str(out), "--clips-per-shard", "1", "--quiet"]
    build_ = subprocess.Popen([*args, "--num-proc", "2"], env=DATASET_ENV, cwd=ROOT, stderr=subprocess.PIPE, text=True)
    _wait_for(lambda: len(_workers(build_.pid)) == 2)
    workers = _workers(build_.pid)
    _wait_for(lambda: len(list((out / "volume").glob("*.parquet"))) >= 1)  # mid-build: a shard is done
    build_.send_signal(sig)
    err = build_.communicate(timeout=300)[1]
    if sig == signal.SIGTERM:  # one line; the workers were stopped before the build (and its lock) ended
        assert build_.returncode == 130 and "Traceback" not in err and err.strip() == "vocalgrad-dataset: interrupted"
        assert all(_gone(w) for w in workers)
    else:  # kill -9 runs no handler: the workers follow their parent by themselves
        _wait_for(lambda: all(_gone(w) for w in workers))
    shards = sorted(p.name for p in (out / "volume").glob("*.parquet"))
    assert len(shards) < 24
    done = subprocess.run([*args, "--num-proc", "16"], env=DATASET_ENV, cwd=ROOT, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr
    assert len(list((out / "volume").glob("*.parquet"))) == 24


def test_num_proc_is_capped_by_the_shards_to_write(tmp_path: Path, monkeypatch) -> None:
    import multiprocessing as mp

    sizes = []
    real = mp.get_context("spawn").Pool

    class Ctx:
        def Pool(self, n, **kw):  # noqa: N802 - multiprocessing's name
            sizes.append(n)
            return real(n, **kw)

    from vocalgrad_dataset.build import export
    monkeypatch.setattr(export.mp, "get_context", lambda kind: Ctx())
    data = tiny_folder(tmp_path / "src", n=3)
    fbuild(data, tmp_path / "C", clips_per_shard=1, num_proc=16)
    assert sizes == [3]  # three shards, three workers


# ---- tracebacks that became one line ------------------------------------------------------------------------------
def test_out_paths_that_are_files_are_one_line(release: Path, tmp_path: Path, capsys) -> None:
    from probing.extract import main as extract

    afile = tmp_path / "afile"
    afile.write_text("x")
    base = ["eval", "--model", "always-increase", "--dataset", str(release), "--configs", "volume", "--out"]
    _one_line(capsys, harness([*base, str(afile)]), f"cannot use {afile}: File exists")
    _one_line(capsys, harness([*base, str(afile / "sub")]), f"cannot use {afile / 'sub'}: Not a directory")
    code = extract(["--model", "tests.helpers.probing:FakeEncoder", "--dataset", str(release), "--split", "test",
                    "--configs", "volume", "--out", str(afile), "--limit-units", "1"])
    _one_line(capsys, code, f"cannot use {afile}: File exists")
    assert afile.read_text() == "x"


READ_ONLY_SCRIPT = """
import contextlib, io, json, sys
from harness.cli import main as harness
from listening.cli import main as listen
from probing.extract import main as extract
release, ro, sub, subs = sys.argv[1:5]
cases = {
    "eval": (harness, ["eval", "--model", "always-increase", "--dataset", release, "--configs", "volume",
                       "--out", ro]),
    "extract": (extract, ["--model", "tests.helpers.probing:FakeEncoder", "--dataset", release, "--split",
                          "test", "--configs", "volume", "--out", ro + "/feat", "--limit-units", "1"]),
    "listen": (listen, ["init", "--db", ro + "/s.sqlite", "--config", "volume", "--source", "demo", "--n", "4"]),
    "submit": (harness, ["leaderboard", "submit", sub, "--model-name", "Coin", "--out", ro + "/sub.json"]),
    "build": (harness, ["leaderboard", "build", subs, "--out", ro + "/site"]),
}
seen = {}
for name, (main, args) in cases.items():
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(args)
    seen[name] = [code, err.getvalue()]
print(json.dumps(seen))
"""


@pytest.mark.slow
def test_read_only_output_folders_are_one_line(release: Path, tmp_path: Path) -> None:
    """As a user without root's override: --out / --db in a read-only folder, for every command that writes."""
    from harness.runner import EvalSettings, run_eval

    run = tmp_path / "run"
    run_eval(EvalSettings("random", ["volume"], str(run), source="demo", batch_size=24))
    subs = tmp_path / "subs"
    subs.mkdir()
    assert harness(["leaderboard", "submit", str(run), "--model-name", "Coin", "--out", str(subs / "a.json")]) == 0
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    prefix = without_root_override()
    try:
        proc = subprocess.run([*prefix, sys.executable, "-c", READ_ONLY_SCRIPT, str(release), str(ro), str(run),
                               str(subs)], env=DATASET_ENV, cwd=ROOT, capture_output=True, text=True, timeout=600)
    finally:
        ro.chmod(0o755)
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    where = {"eval": ro / ".locks", "extract": ro / "feat", "listen": ro / "s.sqlite", "submit": ro, "build": ro / "site"}
    for name, (code, err) in seen.items():
        lines = [x for x in err.splitlines() if x.startswith("error:")]
        assert code == 2 and "Traceback" not in err and len(lines) == 1, (name, err)
        assert str(where[name]) in lines[0] and ("Permission denied" in lines[0] or "writable?" in lines[0]), (name, err)
    assert list(ro.iterdir()) == []


def test_a_module_attr_that_is_not_a_model_factory_is_refused_uncalled(release: Path, tmp_path: Path, capsys) -> None:
    for target in ("os:system", "subprocess:run", "builtins:print", "tests.helpers.runner:CONFIGS"):
        code = harness(["eval", "--model", target, "--model-arg", "command=touch pwned", "--dataset", str(release),
                        "--configs", "volume", "--out", str(tmp_path / "run")])
        _one_line(capsys, code, f"--model {target!r} is not a model factory")
    assert not (tmp_path / "pwned").exists() and not (ROOT / "pwned").exists()


def test_ctrl_c_in_finetune_is_one_line(monkeypatch, capsys) -> None:
    import finetune.train as ft

    def interrupted(settings: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(ft, "train", interrupted)
    code = ft.main(["--model", "tiny-qwen2-audio", "--category", "volume", "--scope", "lm_head", "--out", "unused"])
    err = capsys.readouterr().err
    assert code == 130 and err == "vocalgrad-finetune: interrupted\n"


def test_a_failed_first_run_leaves_a_reusable_folder(release: Path, tmp_path: Path, capsys) -> None:
    """The first run names a source that is not there (settings recorded, no answer stored); the corrected
    rerun into the same --out is accepted. A folder that holds answers still refuses other settings."""
    out = tmp_path / "run"
    bad = harness(["eval", "--model", "always-increase", "--source", "folder", "--data-dir", str(tmp_path / "none"),
                   "--configs", "volume", "--out", str(out), "--no-preflight"])
    capsys.readouterr()
    from harness.runner import RUN_SETTINGS

    assert bad == 2 and (out / RUN_SETTINGS).is_file()  # recorded once the model was up, then the source failed
    assert _eval(release, out) == 0
    other = harness(["eval", "--model", "always-decrease", "--dataset", str(release), "--configs", "volume",
                     "--out", str(out)])
    _one_line(capsys, other, "holds answers made with other settings")


# ---- ragged metadata rows, an offset past the end ----------------------------------------------------------------------
def test_ragged_metadata_rows_are_refused_naming_the_line(release: Path, tmp_path: Path, capsys) -> None:
    from vocalgrad_dataset.sources import SourceError

    data = tiny_folder(tmp_path / "src", n=2)
    lines = (data / "metadata.csv").read_text().splitlines()
    (data / "metadata.csv").write_text("\n".join([lines[0], lines[1] + ",extra", lines[2]]) + "\n")
    with pytest.raises(SourceError, match=r"metadata.csv line 2: 5 fields, the header has 4"):
        fbuild(data, tmp_path / "C")
    (data / "metadata.csv").write_text("\n".join([lines[0], lines[1], lines[2].rpartition(",")[0]]) + "\n")
    with pytest.raises(SourceError, match=r"metadata.csv line 3: 3 fields, the header has 4 \(no 'offset_sec'\)"):
        fbuild(data, tmp_path / "C")
    # the release's metadata.csv (16 columns, tests/test_runner.make_release): a row without its last field, the
    # split, must not be read as "test"
    rel = Path(shutil.copytree(release, tmp_path / "rel"))
    meta = (rel / "metadata.csv").read_text().splitlines()
    meta[5] = meta[5].removesuffix(",test")
    (rel / "metadata.csv").write_text("\n".join(meta) + "\n")
    code = harness(["eval", "--model", "always-increase", "--dataset", str(rel), "--configs", "volume",
                    "--out", str(tmp_path / "run")])
    _one_line(capsys, code, "metadata.csv line 6: 15 fields, the header has 16 (no 'split')")


def test_an_offset_past_the_end_of_the_clip_is_refused(tmp_path: Path) -> None:
    from vocalgrad_dataset.sources import SourceError

    data = tiny_folder(tmp_path / "src", n=2)  # one-second clips
    text = (data / "metadata.csv").read_text().replace("utt1.wav,s1,0.1,0.9", "utt1.wav,s1,0.1,3.5")
    (data / "metadata.csv").write_text(text)
    with pytest.raises(SourceError, match=r"clip utt1: offset_sec 3.500 is past the end of the clip \(1.000 s\)"):
        fbuild(data, tmp_path / "C")
