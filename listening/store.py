"""The study database (SQLite, WAL): items, annotators, issued item nonces and answers.

Every answer is one committed transaction (WAL, synchronous=FULL) before the server replies, so a crash or a
reload loses nothing. Tokens are stored as sha256 digests only. The answer protocol: the server issues one
random nonce per (annotator, sequence number) when it hands out the annotator's current item; an answer is
accepted only for that current item, with that nonce, after its audio was served and had time to play to
its end (the study's `min_listen` share of the clip's duration, wall clock), and only once. The last answer
may be taken back once (`undo`); the answer it removes stays in the `undone` table.

The listening protocol around the items (webMUSHRA / BeaqleJS conventions): consent, a headphone screen
(`listening.screen`), two training examples that must be heard, the items with catch trials mixed in
(items of kind "catch" with a clear answer, reported per annotator and left out of every score), and a
closing questionnaire, each stored on the annotator.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import random
import secrets
import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from listening.sampler import SampleItem
from vocalgrad_dataset import grid

SCHEMA_VERSION = "2"  # 2: catch items, headphone screen, questionnaire, listening time, undo
SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS items (
  position INTEGER PRIMARY KEY, kind TEXT NOT NULL, benchmark_clip_id TEXT NOT NULL, config TEXT NOT NULL,
  tier TEXT NOT NULL, curve TEXT NOT NULL, direction TEXT NOT NULL, gold TEXT NOT NULL,
  source_item_id TEXT NOT NULL, source_clip_id TEXT NOT NULL, speaker_id TEXT NOT NULL,
  UNIQUE (kind, config, benchmark_clip_id));
CREATE TABLE IF NOT EXISTS annotators (
  id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, token_sha256 TEXT NOT NULL UNIQUE, item_order TEXT NOT NULL,
  created REAL NOT NULL, consented REAL, trained REAL, training_heard TEXT NOT NULL DEFAULT '[]',
  headphone TEXT NOT NULL DEFAULT '[]', questionnaire TEXT);
CREATE TABLE IF NOT EXISTS issued (
  annotator_id INTEGER NOT NULL REFERENCES annotators(id), seq INTEGER NOT NULL, nonce TEXT NOT NULL,
  issued REAL NOT NULL, audio_served REAL, audio_ms REAL, PRIMARY KEY (annotator_id, seq));
CREATE TABLE IF NOT EXISTS answers (
  annotator_id INTEGER NOT NULL REFERENCES annotators(id), seq INTEGER NOT NULL, position INTEGER NOT NULL
  REFERENCES items(position), answer TEXT NOT NULL, issued REAL NOT NULL, answered REAL NOT NULL,
  client_ms REAL, plays INTEGER, listen_ms REAL, PRIMARY KEY (annotator_id, seq), UNIQUE (annotator_id, position));
CREATE TABLE IF NOT EXISTS undone (
  annotator_id INTEGER NOT NULL REFERENCES annotators(id), seq INTEGER NOT NULL, position INTEGER NOT NULL,
  answer TEXT NOT NULL, answered REAL NOT NULL, undone REAL NOT NULL, PRIMARY KEY (annotator_id, seq));
"""
QUESTIONNAIRE = {  # field -> allowed answers (the closing questions; `comments` is free text)
    "device": ("closed headphones", "open headphones", "earbuds", "loudspeakers", "laptop or phone speakers"),
    "hearing": ("no known hearing problem", "some hearing loss", "prefer not to say"),
    "environment": ("quiet room", "some background noise", "noisy"),
}
MAX_COMMENT = 1000


class Rejected(Exception):
    """A request the server refuses: HTTP status and a one-line reason."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status, self.reason = status, reason


@dataclass(frozen=True)
class Annotator:
    """A logged-in annotator."""

    id: int
    name: str
    order: tuple[int, ...]  # item positions in this annotator's presentation order
    consented: bool
    trained: bool
    training_heard: tuple[int, ...] = ()  # training examples whose audio was fetched
    headphone: tuple[int, ...] = ()  # the headphone-screen answers so far (tone 0-2 per trial)
    questionnaire: bool = False  # the closing questionnaire is answered


@dataclass(frozen=True)
class Current:
    """The item an annotator must answer next."""

    seq: int
    position: int
    nonce: str


def token_digest(token: str) -> str:
    """sha256 hex of a token (the only form a token is stored in)."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def new_token() -> str:
    """A fresh random login token."""
    return secrets.token_urlsafe(18)


def presentation_order(items: Sequence[dict[str, Any]], seed: int, name: str) -> list[int]:
    """Item positions for one annotator: configs in study order, test items shuffled within each by
    sha256(seed:name), and the config's catch items (kind "catch") inserted at random places in its block,
    so annotators hear the items in different orders and cannot tell a catch trial by its place."""
    rng = random.Random(grid.seed_from(f"vocalgrad-listen-order:{seed}:{name}"))
    out: list[int] = []
    configs = list(dict.fromkeys(it["config"] for it in items))
    for config in configs:
        block = [it["position"] for it in items if it["config"] == config and it.get("kind", "test") == "test"]
        rng.shuffle(block)
        for it in items:
            if it["config"] == config and it.get("kind") == "catch":
                block.insert(rng.randint(1, len(block)), it["position"])
        out += block
    return out


class Store:
    """Access to one study database; every method opens its own connection (safe across threads)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise FileNotFoundError(f"no study database {self.path} (create it with `vocalgrad-listen init`)")
        try:
            with self.connect() as con:
                meta = dict(con.execute("SELECT key, value FROM meta").fetchall())
        except sqlite3.DatabaseError as err:
            raise ValueError(f"{self.path}: not a listening-study database ({err})") from None
        if meta.get("schema_version") != SCHEMA_VERSION:
            raise ValueError(f"{self.path}: study schema version {meta.get('schema_version')!r}, "
                             f"this app reads {SCHEMA_VERSION}")
        self.study: dict[str, Any] = json.loads(meta["study"])

    @staticmethod
    def _open(path: Path) -> sqlite3.Connection:
        con = sqlite3.connect(path, timeout=60, isolation_level=None, check_same_thread=False)
        con.row_factory = sqlite3.Row
        con.execute("PRAGMA journal_mode=WAL")
        con.execute("PRAGMA synchronous=FULL")  # an answer is on disk before the reply
        con.execute("PRAGMA foreign_keys=ON")
        return con

    @contextmanager
    def connect(self) -> Iterator[sqlite3.Connection]:
        """A connection in autocommit mode (use `transaction` for writes)."""
        con = self._open(self.path)
        try:
            yield con
        finally:
            con.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """BEGIN IMMEDIATE ... COMMIT (rolled back on any error): writers never interleave."""
        with self.connect() as con:
            con.execute("BEGIN IMMEDIATE")
            try:
                yield con
            except BaseException:
                con.execute("ROLLBACK")
                raise
            con.execute("COMMIT")

    @classmethod
    def create(cls, path: str | Path, study: dict[str, Any], items: Sequence[SampleItem],
               training: Sequence[SampleItem], catch: Sequence[SampleItem] = ()) -> Store:
        """A new study database with its items; refuses to overwrite an existing file."""
        path = Path(path)
        if path.exists():
            raise FileExistsError(f"{path} exists; serve it, or choose another --db")
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
        try:
            con = cls._open(tmp)
        except sqlite3.OperationalError as err:  # a read-only folder, say
            tmp.unlink(missing_ok=True)
            raise ValueError(f"cannot create the study database {path}: {err} (is {path.parent} writable?)") from None
        try:
            con.executescript(SCHEMA)
            con.execute("BEGIN")
            con.executemany("INSERT INTO meta VALUES (?, ?)", [("schema_version", SCHEMA_VERSION),
                                                               ("study", json.dumps(study, sort_keys=True))])
            rows = [("test", it) for it in items] + [("training", it) for it in training] + [("catch", it) for it in catch]
            con.executemany(
                "INSERT INTO items VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [(i, kind, it.benchmark_clip_id, it.config, it.tier, it.curve, it.direction, it.gold,
                  it.source_item_id, it.source_clip_id, it.speaker_id) for i, (kind, it) in enumerate(rows)])
            con.execute("COMMIT")
            con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            con.close()
        for suffix in ("-wal", "-shm"):
            Path(f"{tmp}{suffix}").unlink(missing_ok=True)
        tmp.replace(path)  # the study appears complete or not at all
        return cls(path)

    # ---- items and annotators -------------------------------------------------------------------------
    def items(self, kind: str = "test") -> list[dict[str, Any]]:
        """Items of a kind ("test" or "training") in position order."""
        with self.connect() as con:
            return [dict(r) for r in con.execute("SELECT * FROM items WHERE kind = ? ORDER BY position", (kind,))]

    def item(self, position: int) -> dict[str, Any]:
        with self.connect() as con:
            row = con.execute("SELECT * FROM items WHERE position = ?", (position,)).fetchone()
        if row is None:
            raise Rejected(404, f"no item {position}")
        return dict(row)

    def add_annotators(self, names: Sequence[str]) -> list[tuple[str, str]]:
        """Create annotators; returns (name, token) pairs. The tokens are shown once and stored hashed."""
        items = self.items() + self.items("catch")
        out = []
        with self.transaction() as con:
            taken = {r[0] for r in con.execute("SELECT name FROM annotators")}
            for name in names:
                if not name.strip() or name in taken:
                    raise ValueError(f"annotator name {name!r} is empty or already taken")
                token = new_token()
                order = presentation_order(items, int(self.study["seed"]), name)
                con.execute("INSERT INTO annotators (name, token_sha256, item_order, created) VALUES (?, ?, ?, ?)",
                            (name, token_digest(token), json.dumps(order), time.time()))
                taken.add(name)
                out.append((name, token))
        return out

    def next_names(self, k: int) -> list[str]:
        """k unused default names A01, A02, ..."""
        with self.connect() as con:
            taken = {r[0] for r in con.execute("SELECT name FROM annotators")}
        names, i = [], 1
        while len(names) < k:
            if f"A{i:02d}" not in taken:
                names.append(f"A{i:02d}")
            i += 1
        return names

    def annotator(self, token: str | None) -> Annotator:
        """The annotator a token belongs to; Rejected(401) for a missing or unknown token."""
        if not token:
            raise Rejected(401, "log in with your token")
        with self.connect() as con:
            row = con.execute("SELECT * FROM annotators WHERE token_sha256 = ?", (token_digest(token),)).fetchone()
        if row is None:
            raise Rejected(401, "unknown token")
        return Annotator(row["id"], row["name"], tuple(json.loads(row["item_order"])), row["consented"] is not None,
                         row["trained"] is not None, tuple(json.loads(row["training_heard"])),
                         tuple(a["answer"] for a in json.loads(row["headphone"])), row["questionnaire"] is not None)

    def mark(self, annotator: Annotator, what: str) -> None:
        """Record consent ("consented") or the end of training ("trained"), once."""
        if what not in ("consented", "trained"):
            raise ValueError(what)
        with self.transaction() as con:
            con.execute(f"UPDATE annotators SET {what} = COALESCE({what}, ?) WHERE id = ?", (time.time(), annotator.id))

    def protocol(self) -> dict[str, Any]:
        """The study's protocol settings (see `listening.study.PROTOCOL` for their meaning)."""
        return dict(self.study.get("protocol") or {})

    def heard_training(self, annotator: Annotator, index: int) -> None:
        """Note that training example `index` was sent to the annotator (training ends only after all were)."""
        with self.transaction() as con:
            row = con.execute("SELECT training_heard FROM annotators WHERE id = ?", (annotator.id,)).fetchone()
            heard = sorted(set(json.loads(row[0])) | {index})
            con.execute("UPDATE annotators SET training_heard = ? WHERE id = ?", (json.dumps(heard), annotator.id))

    def finish_training(self, annotator: Annotator, n_examples: int) -> None:
        """End training: consent given, headphone screen passed and every example heard, else Rejected."""
        if not annotator.consented:
            raise Rejected(409, "give your consent first")
        if self.headphone_status(annotator)["passed"] is not True:
            raise Rejected(409, "finish the headphone check first")
        missing = [k + 1 for k in range(n_examples) if k not in annotator.training_heard]
        if missing:
            raise Rejected(409, f"listen to example {missing[0]} first")
        self.mark(annotator, "trained")

    def headphone_status(self, annotator: Annotator) -> dict[str, Any]:
        """Trials, answers so far, trials right, and passed (None while unfinished)."""
        from listening import screen

        n = int(self.protocol().get("headphone_trials", 0))
        want = screen.trials(int(self.study["seed"]), annotator.name, n)
        right = sum(a == t["soft"] for a, t in zip(annotator.headphone, want, strict=False))
        passed = None if len(annotator.headphone) < n else right >= screen.pass_mark(n)
        return {"trials": n, "answered": len(annotator.headphone), "correct": right, "passed": passed,
                "pass_mark": screen.pass_mark(n)}

    def headphone_answer(self, annotator: Annotator, trial: int, answer: int) -> None:
        """Store the answer (softest tone, 0-2) to the annotator's current headphone trial, once."""
        from listening import screen

        if not annotator.consented:
            raise Rejected(409, "give your consent first")
        status = self.headphone_status(annotator)
        if trial != status["answered"] or trial >= status["trials"]:
            raise Rejected(409, f"headphone trial {trial + 1} is not the current one ({status['answered'] + 1})")
        if answer not in range(screen.CHOICES):
            raise Rejected(422, f"answer must be a tone number 1-{screen.CHOICES}")
        with self.transaction() as con:
            row = con.execute("SELECT headphone FROM annotators WHERE id = ?", (annotator.id,)).fetchone()
            done = json.loads(row[0])
            if len(done) != trial:
                raise Rejected(409, f"headphone trial {trial + 1} is already answered")
            done.append({"answer": answer, "answered": time.time()})
            con.execute("UPDATE annotators SET headphone = ? WHERE id = ?", (json.dumps(done), annotator.id))

    def save_questionnaire(self, annotator: Annotator, answers: dict[str, Any]) -> None:
        """Store the closing questionnaire (once, after the last item), each field checked against its choices."""
        if self.current(annotator) is not None:
            raise Rejected(409, "answer every item first")
        out: dict[str, Any] = {}
        for field, allowed in QUESTIONNAIRE.items():
            if answers.get(field) not in allowed:
                raise Rejected(422, f"{field} must be one of: {', '.join(allowed)}")
            out[field] = answers[field]
        comments = answers.get("comments") or ""
        if not isinstance(comments, str) or len(comments) > MAX_COMMENT:
            raise Rejected(422, f"comments must be text of at most {MAX_COMMENT} characters")
        out["comments"], out["answered"] = comments, time.time()
        with self.transaction() as con:
            cur = con.execute("UPDATE annotators SET questionnaire = ? WHERE id = ? AND questionnaire IS NULL",
                              (json.dumps(out), annotator.id))
            if cur.rowcount == 0:
                raise Rejected(409, "the questionnaire is already answered")

    def can_undo(self, annotator: Annotator) -> bool:
        """True when the last answer exists, neither it nor a later one was taken back (one step back, once per
        item), and the questionnaire is still open."""
        with self.connect() as con:
            seq = self._n_answered(con, annotator.id) - 1
            undone = con.execute("SELECT 1 FROM undone WHERE annotator_id = ? AND seq >= ?", (annotator.id, seq)).fetchone()
        return seq >= 0 and undone is None and not annotator.questionnaire

    def undo(self, annotator: Annotator) -> None:
        """Take back the last answer (once per item): it moves to `undone` and its item is current again."""
        if not self.can_undo(annotator):
            raise Rejected(409, "there is no answer to take back (one undo per answer)")
        with self.transaction() as con:
            seq = self._n_answered(con, annotator.id) - 1
            row = con.execute("SELECT * FROM answers WHERE annotator_id = ? AND seq = ?", (annotator.id, seq)).fetchone()
            con.execute("INSERT INTO undone VALUES (?, ?, ?, ?, ?, ?)",
                        (annotator.id, seq, row["position"], row["answer"], row["answered"], time.time()))
            con.execute("DELETE FROM answers WHERE annotator_id = ? AND seq = ?", (annotator.id, seq))

    # ---- the answer protocol ------------------------------------------------------------------------
    @staticmethod
    def _n_answered(con: sqlite3.Connection, annotator_id: int) -> int:
        return con.execute("SELECT COUNT(*) FROM answers WHERE annotator_id = ?", (annotator_id,)).fetchone()[0]

    def progress_of(self, annotator: Annotator) -> int:
        """How many items the annotator has answered."""
        with self.connect() as con:
            return self._n_answered(con, annotator.id)

    def current(self, annotator: Annotator) -> Current | None:
        """The annotator's next item with its nonce (issued on first request, the same one after a reload);
        None when every item is answered."""
        with self.transaction() as con:
            seq = self._n_answered(con, annotator.id)
            if seq >= len(annotator.order):
                return None
            row = con.execute("SELECT nonce FROM issued WHERE annotator_id = ? AND seq = ?",
                              (annotator.id, seq)).fetchone()
            if row is None:
                nonce = secrets.token_urlsafe(16)
                con.execute("INSERT INTO issued (annotator_id, seq, nonce, issued) VALUES (?, ?, ?, ?)",
                            (annotator.id, seq, nonce, time.time()))
            else:
                nonce = row["nonce"]
        return Current(seq, annotator.order[seq], nonce)

    def _check_current(self, con: sqlite3.Connection, annotator: Annotator, seq: int, nonce: str) -> sqlite3.Row:
        done = self._n_answered(con, annotator.id)
        if seq < done:
            raise Rejected(409, f"item {seq + 1} is already answered")
        if seq > done:
            raise Rejected(409, f"item {seq + 1} is not the current item ({done + 1})")
        row = con.execute("SELECT * FROM issued WHERE annotator_id = ? AND seq = ?", (annotator.id, seq)).fetchone()
        if row is None or not hmac.compare_digest(str(row["nonce"]), str(nonce)):
            raise Rejected(403, "this item was not issued to you (bad nonce)")
        return row

    def serve_audio(self, annotator: Annotator, seq: int, nonce: str, audio_ms: float | None = None) -> int:
        """Check that (seq, nonce) is the annotator's current item, note that its audio (of audio_ms) went out;
        its position."""
        with self.transaction() as con:
            self._check_current(con, annotator, seq, nonce)
            con.execute("UPDATE issued SET audio_served = COALESCE(audio_served, ?), audio_ms = COALESCE(audio_ms, ?) "
                        "WHERE annotator_id = ? AND seq = ?", (time.time(), audio_ms, annotator.id, seq))
        return annotator.order[seq]

    def answer(self, annotator: Annotator, seq: int, nonce: str, answer: str, labels: Sequence[str],
               client_ms: float | None = None, plays: int | None = None, listen_ms: float | None = None) -> None:
        """Store one answer (one committed transaction) or raise Rejected naming why not."""
        if not (annotator.consented and annotator.trained):
            raise Rejected(409, "read the instructions and the examples first")
        min_listen = float(self.protocol().get("min_listen", 0.0))
        with self.transaction() as con:
            row = self._check_current(con, annotator, seq, nonce)
            if row["audio_served"] is None:
                raise Rejected(409, "play the clip before answering")
            if row["audio_ms"] and 1000 * (time.time() - row["audio_served"]) < min_listen * row["audio_ms"]:
                raise Rejected(409, "listen to the whole clip before answering")
            if answer not in labels:
                raise Rejected(422, f"answer must be one of {', '.join(labels)}")
            client_ms, listen_ms = (float(x) if isinstance(x, int | float) and 0 <= x < 1e8 else None
                                    for x in (client_ms, listen_ms))
            plays = int(plays) if isinstance(plays, int) and 0 <= plays < 10_000 else None
            con.execute("INSERT INTO answers (annotator_id, seq, position, answer, issued, answered, client_ms, plays, "
                        "listen_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        (annotator.id, seq, annotator.order[seq], answer, row["issued"], time.time(), client_ms, plays,
                         listen_ms))

    # ---- reading results -----------------------------------------------------------------------------
    def answers(self, kinds: Sequence[str] = ("test",)) -> list[dict[str, Any]]:
        """Every answer to items of these kinds ("test", "catch") joined with its item and annotator, by
        annotator name then sequence (a multiple-choice item's also with its `adversarial` label). Catch
        answers are asked for explicitly, so no score counts them."""
        marks = ", ".join("?" * len(kinds))
        with self.connect() as con:
            rows = con.execute(
                "SELECT a.name AS annotator, s.seq, s.answer, s.issued, s.answered, s.client_ms, s.plays, s.listen_ms, "
                f"i.* FROM answers s JOIN annotators a ON a.id = s.annotator_id JOIN items i ON i.position = s.position "
                f"WHERE i.kind IN ({marks}) ORDER BY a.name, s.seq", tuple(kinds)).fetchall()
        records = self.study.get("items")
        if records:  # multiple-choice items: the label the transcript asserts, to score agreement with it (ALA)
            return [{**dict(r), "adversarial": records[r["config"]][r["benchmark_clip_id"]]["adversarial"]}
                    for r in rows]
        return [dict(r) for r in rows]

    def progress(self) -> list[dict[str, Any]]:
        """Per annotator: answered count, total, consent/training times (no tokens)."""
        with self.connect() as con:
            rows = con.execute(
                "SELECT a.*, COUNT(s.seq) AS answered, MAX(s.answered) AS last, "
                "(SELECT COUNT(*) FROM undone u WHERE u.annotator_id = a.id) AS undos "
                "FROM annotators a LEFT JOIN answers s ON s.annotator_id = a.id GROUP BY a.id ORDER BY a.name").fetchall()
        return [{"annotator": r["name"], "answered": r["answered"], "total": len(json.loads(r["item_order"])),
                 "consented": r["consented"], "trained": r["trained"], "last_answer": r["last"], "undos": r["undos"],
                 "headphone": json.loads(r["headphone"]),
                 "questionnaire": json.loads(r["questionnaire"]) if r["questionnaire"] else None} for r in rows]

    def headphone_results(self) -> dict[str, dict[str, Any]]:
        """Per annotator name: the headphone screen's status (see `headphone_status`)."""
        with self.connect() as con:
            rows = con.execute("SELECT id, name, headphone FROM annotators ORDER BY name").fetchall()
        return {r["name"]: self.headphone_status(Annotator(r["id"], r["name"], (), True, True, (), tuple(
            a["answer"] for a in json.loads(r["headphone"])))) for r in rows}

    def set_admin_token(self) -> str:
        """A new admin token (stored hashed; any earlier one stops working)."""
        token = new_token()
        with self.transaction() as con:
            con.execute("INSERT OR REPLACE INTO meta VALUES ('admin_token_sha256', ?)", (token_digest(token),))
        return token

    def check_admin(self, token: str | None) -> None:
        """Rejected(401) unless token is the admin token."""
        with self.connect() as con:
            row = con.execute("SELECT value FROM meta WHERE key = 'admin_token_sha256'").fetchone()
        if not token or row is None or not hmac.compare_digest(row[0], token_digest(token)):
            raise Rejected(401, "admin token required")
