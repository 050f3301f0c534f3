"""The listening-test web app: FastAPI serving a static page and a small JSON API over the study database.

Annotators authenticate with a bearer token (kept in the page's sessionStorage, never in a URL, so it
reaches no access log). Audio is fetched by sequence number and nonce, never by clip id (the id names the
direction). See `listening.store` for the answer protocol.
"""

from __future__ import annotations

import csv
import io
from importlib.resources import files
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from pydantic import BaseModel

from harness.results import dumps_row
from listening.store import Rejected, Store
from listening.study import AudioProvider, answer_options, question

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


def _token(request: Request) -> str | None:
    auth = request.headers.get("authorization", "")
    scheme, _, value = auth.partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


def _item_view(config: str) -> dict[str, Any]:
    return {"config": config, "question": question(config),
            "options": [{"label": lab, "text": word.capitalize()} for lab, word in answer_options(config)]}


def _wav(data: bytes) -> Response:
    return Response(data, media_type="audio/wav", headers=NO_STORE)


def export_csv(store: Store) -> str:
    """Every answer as CSV (one row per annotator x item)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    cols = ["annotator", "seq", "config", "benchmark_clip_id", "tier", "curve", "direction", "gold", "answer",
            "correct", "speaker_id", "source_item_id", "issued", "answered", "server_ms", "client_ms", "plays"]
    w.writerow(cols)
    for a in store.answers():
        w.writerow([a["annotator"], a["seq"] + 1, a["config"], a["benchmark_clip_id"], a["tier"], a["curve"],
                    a["direction"], a["gold"], a["answer"], int(a["answer"] == a["gold"]), a["speaker_id"],
                    a["source_item_id"], f"{a['issued']:.3f}", f"{a['answered']:.3f}",
                    f"{1000 * (a['answered'] - a['issued']):.0f}",
                    "" if a["client_ms"] is None else f"{a['client_ms']:.0f}", "" if a["plays"] is None else a["plays"]])
    return buf.getvalue()


def create_app(store: Store, audio: AudioProvider | None = None) -> FastAPI:
    """The app for one study."""
    audio = audio or AudioProvider(store)
    app = FastAPI(title="VocalGrad listening test", docs_url=None, redoc_url=None, openapi_url=None)
    static = files("listening").joinpath("static")
    training = store.items("training")

    @app.exception_handler(Rejected)
    def _rejected(request: Request, exc: Rejected) -> JSONResponse:
        return JSONResponse({"error": exc.reason}, status_code=exc.status, headers=NO_STORE)

    @app.middleware("http")
    async def _headers(request: Request, call_next: Any) -> Response:
        response = await call_next(request)
        response.headers.setdefault("Content-Security-Policy", CSP)
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        response.headers.setdefault("Referrer-Policy", "no-referrer")
        return response

    def page(name: str) -> HTMLResponse:
        return HTMLResponse(static.joinpath(name).read_text(encoding="utf-8"), headers=NO_STORE)

    @app.get("/", response_class=HTMLResponse)
    def index() -> HTMLResponse:
        return page("index.html")

    @app.get("/admin", response_class=HTMLResponse)
    def admin_page() -> HTMLResponse:
        return page("admin.html")

    @app.get("/static/{name}")
    def static_file(name: str) -> Response:
        types = {".js": "text/javascript", ".css": "text/css"}
        kind = next((t for ext, t in types.items() if name.endswith(ext)), None)
        if kind is None or "/" in name or not static.joinpath(name).is_file():
            raise Rejected(404, "not found")
        return Response(static.joinpath(name).read_text(encoding="utf-8"), media_type=kind)

    def state(request: Request) -> dict[str, Any]:
        ann = store.annotator(_token(request))
        done = store.progress_of(ann)
        out: dict[str, Any] = {"annotator": ann.name, "total": len(ann.order), "done": done}
        if not ann.consented:
            out["phase"] = "consent"
        elif not ann.trained:
            out["phase"] = "training"
            out["training"] = [{**_item_view(t["config"]), "index": k,
                                "answer": dict(answer_options(t["config"]))[t["gold"]].capitalize()}
                               for k, t in enumerate(training)]
        else:
            cur = store.current(ann)
            if cur is None:
                out["phase"] = "done"
            else:
                item = store.item(cur.position)
                out.update(phase="test", item={**_item_view(item["config"]), "seq": cur.seq, "nonce": cur.nonce})
        return out

    @app.get("/api/state")
    def get_state(request: Request) -> JSONResponse:
        return JSONResponse(state(request), headers=NO_STORE)

    @app.post("/api/consent")
    def consent(request: Request) -> JSONResponse:
        store.mark(store.annotator(_token(request)), "consented")
        return JSONResponse(state(request), headers=NO_STORE)

    @app.post("/api/training/done")
    def training_done(request: Request) -> JSONResponse:
        ann = store.annotator(_token(request))
        if not ann.consented:
            raise Rejected(409, "give your consent first")
        store.mark(ann, "trained")
        return JSONResponse(state(request), headers=NO_STORE)

    @app.get("/api/training/{index}/audio")
    def training_audio(index: int, request: Request) -> Response:
        store.annotator(_token(request))
        if not 0 <= index < len(training):
            raise Rejected(404, "no such example")
        return _wav(audio.wav(training[index]["config"], training[index]["benchmark_clip_id"]))

    @app.get("/api/item/{seq}/audio")
    def item_audio(seq: int, nonce: str, request: Request) -> Response:
        ann = store.annotator(_token(request))
        item = store.item(store.serve_audio(ann, seq, nonce))
        return _wav(audio.wav(item["config"], item["benchmark_clip_id"]))

    @app.post("/api/answer")
    def answer(body: AnswerIn, request: Request) -> JSONResponse:
        ann = store.annotator(_token(request))
        if not 0 <= body.seq < len(ann.order):
            raise Rejected(409, f"item {body.seq + 1} does not exist")
        config = store.item(ann.order[body.seq])["config"]
        labels = [lab for lab, _ in answer_options(config)]
        store.answer(ann, body.seq, body.nonce, body.answer, labels, body.client_ms, body.plays)
        return JSONResponse(state(request), headers=NO_STORE)

    # ---- admin ------------------------------------------------------------------------------------------
    @app.get("/api/admin/progress")
    def admin_progress(request: Request) -> JSONResponse:
        from listening.analysis import analyze

        store.check_admin(_token(request))
        body = {"study": store.study, "annotators": store.progress(), "analysis": analyze(store.answers())}
        return Response(dumps_row(body), media_type="application/json", headers=NO_STORE)  # NaN -> null

    @app.get("/api/admin/answers.csv")
    def admin_csv(request: Request) -> Response:
        store.check_admin(_token(request))
        return Response(export_csv(store), media_type="text/csv",
                        headers={**NO_STORE, "Content-Disposition": 'attachment; filename="answers.csv"'})

    @app.get("/api/admin/samples/{config}.jsonl")
    def admin_samples(config: str, request: Request) -> Response:
        from listening.export import samples_rows

        store.check_admin(_token(request))
        rows = samples_rows(store).get(config)
        if rows is None:
            raise Rejected(404, f"the study has no config {config!r}")
        return Response("".join(dumps_row(r) + "\n" for r in rows), media_type="application/jsonl",
                        headers={**NO_STORE, "Content-Disposition": f'attachment; filename="samples_{config}.jsonl"'})

    return app
