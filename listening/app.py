"""The listening-test web app: FastAPI serving a static page and a small JSON API over the study database.

Annotators authenticate with a bearer token (kept in the page's sessionStorage, never in a URL, so it
reaches no access log). Audio is fetched by sequence number and nonce, never by clip id (the id names the
direction). See `listening.store` for the answer protocol.
"""

from __future__ import annotations

import csv
import io
import wave
from importlib.resources import files
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from pydantic import BaseModel

from harness.results import dumps_row, samples_name
from harness.tables import csv_cell
from listening.store import QUESTIONNAIRE, Annotator, Rejected, Store
from listening.study import AudioProvider, item_labels, item_view

NO_STORE = {"Cache-Control": "no-store"}
CSP = ("default-src 'self'; media-src 'self' blob:; img-src 'self' data:; style-src 'self' 'unsafe-inline'; "
       "frame-ancestors 'none'")


class AnswerIn(BaseModel):
    """An answer as the page posts it."""

    seq: int
    nonce: str
    answer: str
    client_ms: float | None = None
    plays: int | None = None
    listen_ms: float | None = None


class HeadphoneIn(BaseModel):
    """A headphone-screen answer: the trial and the tone (0-2) heard as softest."""

    trial: int
    answer: int


def _token(request: Request) -> str | None:
    auth = request.headers.get("authorization", "")
    scheme, _, value = auth.partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None




def _wav(data: bytes) -> Response:
    return Response(data, media_type="audio/wav", headers=NO_STORE)


def _wav_ms(data: bytes) -> float:
    """Duration of WAV bytes in milliseconds."""
    with wave.open(io.BytesIO(data)) as w:
        return 1000 * w.getnframes() / w.getframerate()


def export_csv(store: Store) -> str:
    """Every answer as CSV (one row per annotator x item)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    cols = ["annotator", "seq", "kind", "config", "benchmark_clip_id", "tier", "curve", "direction", "gold", "answer",
            "correct", "speaker_id", "source_item_id", "issued", "answered", "server_ms", "client_ms", "plays",
            "listen_ms"]
    mcq = bool(store.study.get("items"))  # multiple choice: also the adversarial label and agreement with it
    w.writerow([*cols, "adversarial", "agrees_adversarial"] if mcq else cols)
    for a in sorted(store.answers(("test", "catch")), key=lambda a: (a["annotator"], a["seq"])):
        row = [a["annotator"], a["seq"] + 1, a["kind"], a["config"], a["benchmark_clip_id"], a["tier"], a["curve"],
               a["direction"], a["gold"], a["answer"], int(a["answer"] == a["gold"]), a["speaker_id"],
               a["source_item_id"], f"{a['issued']:.3f}", f"{a['answered']:.3f}",
               f"{1000 * (a['answered'] - a['issued']):.0f}",
               "" if a["client_ms"] is None else f"{a['client_ms']:.0f}", "" if a["plays"] is None else a["plays"],
               "" if a["listen_ms"] is None else f"{a['listen_ms']:.0f}"]
        if mcq:
            row += [a["adversarial"] or "", "" if a["adversarial"] is None else int(a["answer"] == a["adversarial"])]
        w.writerow([csv_cell(v) for v in row])  # an annotator's name or an answer is outside text: no formula
    return buf.getvalue()


class StudyApi:
    """The request handlers of one study: the annotator's page and answers, and the admin's exports.

    Every handler first checks the bearer token (`_annotator` or `_admin`), so a request that reaches the
    store's data has a known caller; the store raises `Rejected` for an unknown one.
    """

    def __init__(self, store: Store, audio: AudioProvider) -> None:
        self.store, self.audio = store, audio
        self.static = files("listening").joinpath("static")
        self.training = store.items("training")

    # ---- request validation ------------------------------------------------------------------------------
    def _annotator(self, request: Request) -> Annotator:
        return self.store.annotator(_token(request))

    def _admin(self, request: Request) -> None:
        self.store.check_admin(_token(request))

    # ---- pages -------------------------------------------------------------------------------------------
    def _page(self, name: str) -> HTMLResponse:
        return HTMLResponse(self.static.joinpath(name).read_text(encoding="utf-8"), headers=NO_STORE)

    def index(self) -> HTMLResponse:
        return self._page("index.html")

    def admin_page(self) -> HTMLResponse:
        return self._page("admin.html")

    def static_file(self, name: str) -> Response:
        types = {".js": "text/javascript", ".css": "text/css"}
        kind = next((t for ext, t in types.items() if name.endswith(ext)), None)
        if kind is None or "/" in name or not self.static.joinpath(name).is_file():
            raise Rejected(404, "not found")
        return Response(self.static.joinpath(name).read_text(encoding="utf-8"), media_type=kind)

    # ---- the annotator's state ---------------------------------------------------------------------------
    def _training_view(self) -> list[dict[str, Any]]:
        out = []
        for k, t in enumerate(self.training):
            view = item_view(self.store.study, t)
            shown = next(o["text"] for o in view["options"] if o["label"] == t["gold"])  # the button's words
            out.append({**view, "index": k, "answer": shown})
        return out

    def _state(self, request: Request) -> dict[str, Any]:
        ann = self._annotator(request)
        out: dict[str, Any] = {"annotator": ann.name, "total": len(ann.order),
                               "done": self.store.progress_of(ann)}
        screen = self.store.headphone_status(ann)
        if not ann.consented:
            out["phase"] = "consent"
        elif screen["passed"] is None:
            out.update(phase="headphone", headphone=screen)
        elif not screen["passed"]:
            out.update(phase="screened_out", headphone=screen)
        elif not ann.trained:
            out.update(phase="training", training=self._training_view())
        elif (cur := self.store.current(ann)) is not None:
            item = self.store.item(cur.position)
            out.update(phase="test", item={**item_view(self.store.study, item), "seq": cur.seq, "nonce": cur.nonce})
        else:
            out.update(phase="done" if ann.questionnaire else "questionnaire", questions=dict(QUESTIONNAIRE))
        out["can_undo"] = out["phase"] in ("test", "questionnaire") and self.store.can_undo(ann)
        return out

    def _state_response(self, request: Request) -> JSONResponse:
        return JSONResponse(self._state(request), headers=NO_STORE)

    def get_state(self, request: Request) -> JSONResponse:
        return self._state_response(request)

    def consent(self, request: Request) -> JSONResponse:
        self.store.mark(self._annotator(request), "consented")
        return self._state_response(request)

    def training_done(self, request: Request) -> JSONResponse:
        self.store.finish_training(self._annotator(request), len(self.training))
        return self._state_response(request)

    def headphone_audio(self, trial: int, request: Request) -> Response:
        from listening import screen

        ann = self._annotator(request)
        status = self.store.headphone_status(ann)
        if trial != status["answered"] or trial >= status["trials"]:
            raise Rejected(409, f"headphone trial {trial + 1} is not the current one")
        return _wav(screen.trial_wav(screen.trials(int(self.store.study["seed"]), ann.name, status["trials"])[trial]))

    def headphone_answer(self, body: HeadphoneIn, request: Request) -> JSONResponse:
        self.store.headphone_answer(self._annotator(request), body.trial, body.answer)
        return self._state_response(request)

    def questionnaire(self, body: dict[str, Any], request: Request) -> JSONResponse:
        self.store.save_questionnaire(self._annotator(request), body)
        return self._state_response(request)

    def undo(self, request: Request) -> JSONResponse:
        self.store.undo(self._annotator(request))
        return self._state_response(request)

    # ---- audio and answers -------------------------------------------------------------------------------
    def training_audio(self, index: int, request: Request) -> Response:
        ann = self._annotator(request)
        if not 0 <= index < len(self.training):
            raise Rejected(404, "no such example")
        data = self.audio.wav(self.training[index]["config"], self.training[index]["benchmark_clip_id"])
        self.store.heard_training(ann, index)
        return _wav(data)

    def item_audio(self, seq: int, nonce: str, request: Request) -> Response:
        ann = self._annotator(request)
        if not 0 <= seq < len(ann.order):
            raise Rejected(409, f"item {seq + 1} does not exist")
        self.store.serve_audio(ann, seq, nonce)  # checked before any rendering
        item = self.store.item(ann.order[seq])
        data = self.audio.wav(item["config"], item["benchmark_clip_id"])
        self.store.serve_audio(ann, seq, nonce, _wav_ms(data))
        return _wav(data)

    def answer(self, body: AnswerIn, request: Request) -> JSONResponse:
        ann = self._annotator(request)
        if not 0 <= body.seq < len(ann.order):
            raise Rejected(409, f"item {body.seq + 1} does not exist")
        labels = item_labels(self.store.study, self.store.item(ann.order[body.seq]))  # MCQ: the item's options
        self.store.answer(ann, body.seq, body.nonce, body.answer, labels, body.client_ms, body.plays, body.listen_ms)
        return self._state_response(request)

    # ---- admin -------------------------------------------------------------------------------------------
    def admin_progress(self, request: Request) -> Response:
        from listening.analysis import ATTENTION_THRESHOLD, analyze
        from listening.export import study_status

        self._admin(request)
        body = {"study": self.store.study, "annotators": self.store.progress(),
                "analysis": analyze(self.store.answers()), "design": study_status(self.store, ATTENTION_THRESHOLD)}
        return Response(dumps_row(body), media_type="application/json", headers=NO_STORE)  # NaN -> null

    def admin_csv(self, request: Request) -> Response:
        self._admin(request)
        return Response(export_csv(self.store), media_type="text/csv",
                        headers={**NO_STORE, "Content-Disposition": 'attachment; filename="answers.csv"'})

    def admin_samples(self, config: str, request: Request) -> Response:
        from listening.export import samples_rows

        self._admin(request)
        rows = samples_rows(self.store).get(config)
        if rows is None:
            raise Rejected(404, f"the study has no config {config!r}")
        return Response("".join(dumps_row(r) + "\n" for r in rows), media_type="application/jsonl",
                        headers={**NO_STORE, "Content-Disposition": f'attachment; filename="{samples_name(config)}"'})


def _rejected(request: Request, exc: Rejected) -> JSONResponse:
    return JSONResponse({"error": exc.reason}, status_code=exc.status, headers=NO_STORE)


async def _security_headers(request: Request, call_next: Any) -> Response:
    response = await call_next(request)
    response.headers.setdefault("Content-Security-Policy", CSP)
    response.headers.setdefault("X-Content-Type-Options", "nosniff")
    response.headers.setdefault("Referrer-Policy", "no-referrer")
    return response


MAX_BODY = 16 * 1024  # bytes of a request body: an answer is ~100; a 20 MB one would be parsed in memory


class BodyLimit:
    """ASGI middleware refusing (413) a request body over `limit` bytes, declared or streamed, before the app
    sees it (the body, at most `limit` bytes, is read here and handed on)."""

    def __init__(self, app: Any, limit: int = MAX_BODY) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length", b"0")
        refuse = JSONResponse({"error": f"request body over {self.limit} bytes"}, status_code=413, headers=NO_STORE)
        if not declared.isdigit() or int(declared) > self.limit:
            await refuse(scope, receive, send)
            return
        first, body = {"type": "http.request", "more_body": True}, b""
        while first["type"] == "http.request" and first.get("more_body"):  # chunked: no length declared
            first = await receive()
            body += first.get("body", b"")
            if len(body) > self.limit:
                await refuse(scope, receive, send)
                return
        handed = False

        async def replay() -> dict[str, Any]:
            nonlocal handed
            if handed:
                return await receive()
            handed = True
            return {**first, "body": body, "more_body": False} if first["type"] == "http.request" else first

        await self.app(scope, replay, send)


def create_app(store: Store, audio: AudioProvider | None = None) -> FastAPI:
    """The app for one study."""
    api = StudyApi(store, audio or AudioProvider(store))
    app = FastAPI(title="VocalGrad listening test", docs_url=None, redoc_url=None, openapi_url=None)
    app.add_middleware(BodyLimit, limit=MAX_BODY)
    app.add_exception_handler(Rejected, _rejected)
    app.middleware("http")(_security_headers)
    app.get("/", response_class=HTMLResponse)(api.index)
    app.get("/admin", response_class=HTMLResponse)(api.admin_page)
    app.get("/static/{name}")(api.static_file)
    app.get("/api/state")(api.get_state)
    app.post("/api/consent")(api.consent)
    app.post("/api/training/done")(api.training_done)
    app.get("/api/training/{index}/audio")(api.training_audio)
    app.get("/api/item/{seq}/audio")(api.item_audio)
    app.post("/api/answer")(api.answer)
    app.get("/api/headphone/{trial}/audio")(api.headphone_audio)
    app.post("/api/headphone")(api.headphone_answer)
    app.post("/api/questionnaire")(api.questionnaire)
    app.post("/api/undo")(api.undo)
    app.get("/api/admin/progress")(api.admin_progress)
    app.get("/api/admin/answers.csv")(api.admin_csv)
    app.get("/api/admin/samples/{config}.jsonl")(api.admin_samples)
    return app
