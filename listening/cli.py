"""`vocalgrad-listen`: sample items, create a study, add annotators, serve the app, export and analyse."""

from __future__ import annotations

import argparse
import json
import socket
import sys
import threading
from pathlib import Path

from listening.analysis import ATTENTION_THRESHOLD
from vocalgrad_dataset.cli.argtypes import fraction, int_range, nonnegative_int, positive_int, share
from vocalgrad_dataset.cli.info import console_script, run_command
from vocalgrad_dataset.generate import SPLITS

DEFAULT_DB = "listening-study.sqlite"


def _add_data_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", help="config(s): volume, pitch-ternary, volume,pitch, all, voxparadox-pitch, ...")
    p.add_argument("--n", type=positive_int, default=48,
                   help="items per config (48 = 2 per tier x curve x direction; even for direction configs)")
    p.add_argument("--seed", type=nonnegative_int, default=0, help="sampling seed (same seed, same items)")
    p.add_argument("--split", default="test", choices=list(SPLITS), help="split the items come from")
    p.add_argument("--source", default=None,
                   help="generator source: vctk (default; beep configs: beep), demo, folder, loquacious, "
                        "commonvoice-spontaneous, pkg.mod:Factory")
    p.add_argument("--data-dir", default=None, help="corpus root for the source (vctk, folder, ...)")
    p.add_argument("--dataset", default=None, help="a Parquet build (or release folder) to read instead of generating")


def _add_protocol_args(p: argparse.ArgumentParser) -> None:
    from listening.study import PROTOCOL

    p.add_argument("--headphone-trials", type=nonnegative_int, default=PROTOCOL["headphone_trials"],
                   help="trials of the Woods et al. (2017) headphone screen (pass: 5 of 6 right; 0: no screen)")
    p.add_argument("--catch", type=nonnegative_int, default=PROTOCOL["catch_per_config"],
                   help="catch trials per config (clear items with a known answer; reported, never scored)")
    p.add_argument("--catch-threshold", type=share, default=PROTOCOL["catch_threshold"],
                   help="catch accuracy below which an annotator is left out of the scores")
    p.add_argument("--min-listen", type=share, default=PROTOCOL["min_listen"],
                   help="share of a clip's duration that must pass before the server takes an answer "
                        "(the page also waits for the clip's end)")
    p.add_argument("--min-annotators", type=positive_int, default=PROTOCOL["min_annotators"],
                   help="the design: complete, included annotators an export needs to be unmarked")


def _protocol(ns: argparse.Namespace) -> dict[str, object]:
    return {"headphone_trials": ns.headphone_trials, "catch_per_config": ns.catch,
            "catch_threshold": ns.catch_threshold, "min_listen": ns.min_listen, "min_annotators": ns.min_annotators}


def _sample(ns: argparse.Namespace) -> int:
    from harness.kinds import task_kind
    from listening.items import balanced_items, builder_pool, built_pool, pool_size
    from listening.sampler import draw
    from listening.study import configs_of

    if not ns.config:
        raise ValueError("--config is required")
    for config in configs_of(ns.config):
        if task_kind(config).per_row:  # multiple-choice items: balanced over their true label (listening.items)
            pool = (built_pool(config, ns.split, ns.dataset) if ns.dataset else
                    builder_pool(config, ns.split, pool_size(ns.n, 0)))
            for mcq_item in balanced_items(pool, config, ns.n, ns.seed):
                print(json.dumps({**mcq_item.sample_item().as_dict(), **mcq_item.record()}))
            continue
        for item in draw(config, ns.n, ns.seed, split=ns.split, source=ns.source, data_dir=ns.data_dir,
                         dataset=ns.dataset):
            print(json.dumps(item.as_dict()))
    return 0


def _print_logins(pairs: list[tuple[str, str]], url: str) -> None:
    print("annotator logins (shown once; tokens are stored hashed):")
    for name, token in pairs:
        print(f"  {name}: {url}/#token={token}")


def _init(ns: argparse.Namespace) -> int:
    from listening.study import create_study

    if not ns.config:
        raise ValueError("--config is required to create a study")
    store = create_study(ns.db, ns.config, ns.n, ns.seed, split=ns.split, source=ns.source, data_dir=ns.data_dir,
                         dataset=ns.dataset, **_protocol(ns))
    print(f"created {ns.db}: {len(store.items())} items ({', '.join(store.study['configs'])}), "
          f"{len(store.items('training'))} training examples, {len(store.items('catch'))} catch trials")
    if ns.annotators:
        _print_logins(store.add_annotators(store.next_names(ns.annotators)), f"http://{ns.host}:{ns.port}")
    return 0


def _annotators(ns: argparse.Namespace) -> int:
    from listening.store import Store

    store = Store(ns.db)
    names = ns.name or store.next_names(ns.add)
    _print_logins(store.add_annotators(names), f"http://{ns.host}:{ns.port}")
    return 0


def _serve(ns: argparse.Namespace) -> int:
    import uvicorn

    from listening.app import create_app
    from listening.store import Store
    from listening.study import AudioProvider, configs_of, create_study

    url = f"http://{ns.host}:{ns.port}"
    sock = listening_socket(ns.host, ns.port)  # a busy port fails here, before a study is made or "serving" shown
    if Path(ns.db).exists():
        store = Store(ns.db)
        if ns.config and configs_of(ns.config) != store.study["configs"]:
            raise ValueError(f"{ns.db} is a study of {', '.join(store.study['configs'])}, not {ns.config}; "
                             "use another --db")
        print(f"resuming {ns.db}")
    else:
        if not ns.config:
            raise ValueError(f"no study database {ns.db}: pass --config (and --source, --n) to create one")
        store = create_study(ns.db, ns.config, ns.n, ns.seed, split=ns.split, source=ns.source,
                             data_dir=ns.data_dir, dataset=ns.dataset, **_protocol(ns))
        print(f"created {ns.db}: {len(store.items())} items ({', '.join(store.study['configs'])})")
        _print_logins(store.add_annotators(store.next_names(ns.annotators)), url)
    print(f"admin page: {url}/admin  (admin token for this server run: {store.set_admin_token()})")
    audio = AudioProvider(store)
    stop = threading.Event()
    if not ns.no_prerender:
        threading.Thread(target=audio.warm, args=(stop,), daemon=True, name="prerender").start()
    print(f"serving {url}  (Ctrl-C stops; answers are saved as they come)", flush=True)
    try:
        config = uvicorn.Config(create_app(store, audio), host=ns.host, port=ns.port, log_level=ns.log_level)
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        stop.set()
        sock.close()
    return 0


def listening_socket(host: str, port: int) -> socket.socket:
    """A socket bound to host:port (ValueError naming them when the port is taken or the host unknown)."""
    try:
        family, kind, proto, _, addr = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        sock = socket.socket(family, kind, proto)
    except OSError as err:
        raise ValueError(f"cannot serve on {host}:{port}: {err.strerror or err}") from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does: a restart reuses the port
        sock.bind(addr)
        sock.listen(128)
    except OSError as err:
        sock.close()
        raise ValueError(f"cannot serve on {host}:{port}: {err.strerror or err} (another server on that port? "
                         "choose another --port)") from None
    sock.set_inheritable(True)
    return sock


def _export(ns: argparse.Namespace) -> int:
    from harness.results import samples_name, task_metrics
    from listening.analysis import analyze, careless
    from listening.app import export_csv
    from listening.export import export_run, study_status, write_submission
    from listening.store import Store
    from vocalgrad_dataset.fileio import atomic_write_text

    store = Store(ns.db)
    exclude = set(ns.exclude)
    if ns.drop_careless:
        exclude |= set(careless(analyze(store.answers(), ns.attention_threshold)))
    status = study_status(store, ns.attention_threshold, exclude)
    if status["problems"] and not ns.allow_incomplete:
        raise ValueError(f"{ns.db} is below its design: {'; '.join(status['problems'])} (--allow-incomplete exports "
                         "it marked as below its design)")
    exclude |= set(status["excluded"])
    results = export_run(store, ns.out, exclude, status)
    atomic_write_text(Path(ns.out) / "answers.csv", export_csv(store))
    acc = ", ".join(f"{c} {100 * r['accuracy']:.1f} %" for c, r in task_metrics(results).items())
    print(f"wrote {', '.join(samples_name(c) for c in task_metrics(results))}, results.json and answers.csv "
          f"to {ns.out}: {acc}")
    print(f"{status['annotators']} annotators, {100 * status['completeness']:.0f} % of the answers, "
          f"{len(status['complete'])} complete and included")
    for name, why in sorted(status["excluded"].items()):
        print(f"left out: {name} ({why})")
    if status["problems"]:
        print(f"MARKED below its design: {'; '.join(status['problems'])}")
    if ns.submission:
        write_submission(ns.out, ns.submission, ns.model_name, notes=ns.notes)
        print(f"wrote {ns.submission} ({ns.model_name})")
    return 0


def _analyze(ns: argparse.Namespace) -> int:
    from listening.analysis import analyze, careless, format_analysis
    from listening.store import Store

    result = analyze(Store(ns.db).answers(), ns.attention_threshold)
    if not result:
        raise ValueError(f"{ns.db}: no answers yet")
    print(format_analysis(result))
    flagged = careless(result)
    print(f"careless (high-tier accuracy < {ns.attention_threshold}): {', '.join(flagged) or 'none'}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand (each with a description; --help shows every default)."""
    p, command = console_script("vocalgrad-listen", "A listening test for the human baseline of VocalGrad: balanced sampling, "
                                "a web app for annotators, export beside the models and analysis.")

    def server_args(q: argparse.ArgumentParser) -> None:
        q.add_argument("--host", default="127.0.0.1", help="address the login links (and the server) use")
        q.add_argument("--port", type=int_range(1, 65535), default=8000, help="port the login links (and the server) use")

    s = command("sample", "print a balanced sample, one JSON line per item",
                "Print the items a study of --config would use, one JSON line each (benchmark_clip_id, tier, curve, "
                "direction, gold, speaker, source clip): in every tier x curve cell the directions split evenly.",
                run=_sample)
    _add_data_args(s)
    for name, func, helptext, description in (
            ("init", _init, "create a study database (sample + training examples)",
             "Sample --n items per config plus two training examples into a new SQLite study database and "
             "print login links for the first annotators."),
            ("serve", _serve, "serve the listening test (creates the study if --db is new)",
             "Serve the listening test on --host:--port: creates the study first when --db does not exist, "
             "resumes it otherwise, and prints a fresh admin token for the admin page.")):
        q = command(name, helptext, description, run=func)
        _add_data_args(q)
        _add_protocol_args(q)
        q.add_argument("--db", default=DEFAULT_DB, help="study database")
        q.add_argument("--annotators", type=nonnegative_int, default=2, help="annotators to create with a new study")
        server_args(q)
        if name == "serve":
            q.add_argument("--no-prerender", action="store_true", help="render clips only when first requested")
            q.add_argument("--log-level", default="warning", choices=["critical", "error", "warning", "info", "debug"],
                           help="uvicorn's log level")
    a = command("annotators", "add annotators to a study and print their login links",
                "Add annotators (pseudonyms) to a study; each gets a token, shown once and stored hashed.",
                run=_annotators)
    a.add_argument("--db", default=DEFAULT_DB, help="study database")
    a.add_argument("--add", type=positive_int, default=1, help="how many (named A01, A02, ...) when no --name is given")
    a.add_argument("--name", action="append", default=[], help="explicit pseudonym (repeatable)")
    server_args(a)
    e = command("export", "answers -> harness run dir (samples + results.json), CSV, submission",
                "Write the answers as a harness run (samples_<config>.jsonl + results.json, readable by `harness "
                "report` and `harness leaderboard submit`), as answers.csv, and optionally as a leaderboard submission.",
                run=_export)
    e.add_argument("--db", default=DEFAULT_DB, help="study database")
    e.add_argument("--out", required=True, help="run directory to write")
    e.add_argument("--exclude", action="append", default=[], help="leave an annotator out (repeatable)")
    e.add_argument("--drop-careless", action="store_true", help="leave out annotators the attention check flags")
    e.add_argument("--allow-incomplete", action="store_true",
                   help="export a study below its design (incomplete annotators, too few, careless flags), marked so "
                        "in results.json and on the leaderboard; without it such an export is refused")
    e.add_argument("--attention-threshold", type=fraction, default=ATTENTION_THRESHOLD,
                   help="high-tier accuracy below which an annotator counts as careless")
    e.add_argument("--submission", default=None, help="also write a leaderboard submission here")
    e.add_argument("--model-name", default="Human (our annotators)", help="name of the human row on the leaderboard")
    e.add_argument("--notes", default=None, help="notes for the submission")
    z = command("analyze", "accuracy, breakdowns, agreement and the attention check",
                "Print per-annotator and pooled accuracy (Wilson 95 % intervals) by tier, curve and direction, "
                "pairwise agreement, Fleiss' kappa and the attention check, as Markdown.", run=_analyze)
    z.add_argument("--db", default=DEFAULT_DB, help="study database")
    z.add_argument("--attention-threshold", type=fraction, default=ATTENTION_THRESHOLD,
                   help="high-tier accuracy below which an annotator counts as careless")
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `vocalgrad-listen` console script."""
    return run_command(build_parser(), argv, (ValueError, FileNotFoundError, FileExistsError, KeyError))


if __name__ == "__main__":
    sys.exit(main())
