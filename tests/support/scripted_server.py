"""A scripted OpenAI-compatible HTTP server on 127.0.0.1: the test double of a provider.

Endpoints: ``POST /v1/chat/completions`` (honours ``n``, ``seed``, ``temperature``; returns
usage summed over the choices, as OpenAI does), ``POST /v1/embeddings`` (deterministic unit
vectors from a hash of each text) and ``GET /v1/models``; the Files and Batches API
(``POST /v1/files``, ``GET /v1/files/{id}/content``, ``POST /v1/batches``,
``GET /v1/batches/{id}``, ``POST /v1/batches/{id}/cancel``, ``GET /v1/batches``): a batch's
chat requests are answered as ``/v1/chat/completions`` would, once its
:class:`BatchScript` says (after a delay; some requests failed; expired or cancelled with
part answered; the batch failed).

What a prompt answers is a list of :class:`Rule`: the first rule whose ``contains`` is a
substring of the last user message gives weighted outputs. Choice ``j`` of a request with
seed ``s`` is drawn from ``Random(f"{s}/{j}")``, so the same seeds give the same texts in
any order and at any concurrency (a ``rotate`` rule answers its outputs in turn instead);
``temperature=0`` always picks the heaviest output; a
request without a seed, or any request with ``ignore_seed`` (as most hosted APIs, which do
not guarantee seeds), draws its ``i``-th choice for one conversation from
``Random(f"{server seed}/{messages}/{i}")``: random across calls, yet the same for a
conversation whatever the arrival order of the others (a test of no change cannot alarm by
the luck of the scheduler).

Faults (:class:`Fault`) come from a scripted queue (``script``, consumed one per request, in
arrival order; ``None`` entries pass) or at random (``fault_rates``, with its own seeded
RNG). ``max_n`` caps ``n`` (more: a 400, like llama.cpp); ``ignore_n`` answers one choice
whatever ``n`` says (like some OpenAI-compatible servers). Counters are thread-safe;
``max_in_flight`` is the most requests handled at once.

Usage::

    with ScriptedServer(rules=[Rule("flu", [("rest", 3), ("see a doctor", 1)])]) as server:
        litellm.completion(model="openai/scripted", api_base=server.api_base, api_key="k", ...)
"""

from __future__ import annotations

import collections
import email.parser
import email.policy
import hashlib
import json
import math
import random
import sys
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

FaultKind = Literal["429", "500", "503", "timeout", "malformed", "401", "400"]
_STATUS = {"429": 429, "500": 500, "503": 503, "401": 401, "400": 400}
_ERROR_TYPE = {
    "429": "rate_limit_exceeded",
    "500": "server_error",
    "503": "service_unavailable",
    "401": "invalid_api_key",
    "400": "invalid_request_error",
}


@dataclass(frozen=True)
class Output:
    """One possible completion: its text (None: no content) and finish reason."""

    text: str | None
    weight: float = 1.0
    finish_reason: str = "stop"


@dataclass(frozen=True)
class Rule:
    """Outputs for prompts whose last user message contains ``contains`` ("" matches all)."""

    contains: str
    outputs: Sequence[Output | tuple[str, float]]
    rotate: bool = False
    """Answer the outputs in turn (weights and seeds ignored), counted per distinct list of
    messages: an arm of k requests holds each of m outputs k / m times, in any order and at
    any concurrency, so its tests' decisions do not depend on the arms' seeds."""

    def choices(self) -> list[Output]:
        return [o if isinstance(o, Output) else Output(o[0], o[1]) for o in self.outputs]


@dataclass(frozen=True)
class Fault:
    """A failure served instead of a normal response."""

    kind: FaultKind
    retry_after: float | None = None
    """Seconds sent in a ``Retry-After`` header (429 and 503)."""
    endpoint: str | None = None
    """Only requests to this path consume the fault (None: any endpoint)."""


@dataclass
class Counts:
    """Requests seen, by endpoint and by prompt (the last user message)."""

    total: int = 0
    by_endpoint: collections.Counter[str] = field(default_factory=collections.Counter)
    by_prompt: collections.Counter[str] = field(default_factory=collections.Counter)
    faults: collections.Counter[str] = field(default_factory=collections.Counter)
    max_in_flight: int = 0
    embedded_texts: list[str] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    """Bodies of the chat requests, in arrival order."""
    batch_requests: list[dict[str, Any]] = field(default_factory=list)
    """Bodies of the chat requests answered inside batches, as they were answered."""


BatchOutcome = Literal["completed", "expired", "cancelled", "failed"]


@dataclass(frozen=True)
class BatchScript:
    """How the server runs one batch (``batch_script``: one per batch created, in order;
    then the default)."""

    delay_s: float = 0.0
    """Seconds the batch stays ``in_progress`` after it is created."""
    outcome: BatchOutcome = "completed"
    """``expired``/``cancelled``: only the first ``answered`` requests are in the output
    file (expired: the rest as ``batch_expired`` errors in the error file; cancelled: the
    rest nowhere); ``failed``: nothing answered (the input was refused)."""
    answered: int = 0
    """Requests answered before an ``expired`` or ``cancelled`` batch ended."""
    fail_every: int = 0
    """Every ``fail_every``-th request of the batch (1-based) fails with a 500 in the error
    file (0: none)."""
    window_s: float = 24 * 3600
    """Seconds from creation to the batch's ``expires_at`` (the end of its window)."""


@dataclass
class _Batch:
    """A batch the server holds: its object, its requests, when it is due."""

    obj: dict[str, Any]
    lines: list[dict[str, Any]]
    script: BatchScript
    due: float
    cancelled: bool = False


DEFAULT_RULES = (Rule("", [("The answer is yes.", 1.0), ("The answer is no.", 1.0)]),)


class ScriptedServer:
    """A scripted provider in a background thread; a context manager (``close()`` stops it)."""

    def __init__(
        self,
        rules: Sequence[Rule] = DEFAULT_RULES,
        *,
        script: Sequence[Fault | None] = (),
        fault_rates: Mapping[FaultKind, float] | None = None,
        fault_seed: int = 0,
        latency: float | Callable[[dict[str, Any]], float] = 0.0,
        timeout_sleep: float = 5.0,
        embedding_dimension: int = 8,
        models: Sequence[str] = ("scripted",),
        max_n: int = 128,
        ignore_n: bool = False,
        ignore_seed: bool = False,
        seed: int = 0,
        batch_script: Sequence[BatchScript] = (),
    ) -> None:
        self.rules = list(rules)
        self.latency = latency
        self.timeout_sleep = timeout_sleep
        self.embedding_dimension = embedding_dimension
        self.models = list(models)
        self.max_n = max_n
        self.ignore_n = ignore_n
        self.ignore_seed = ignore_seed
        self.counts = Counts()
        self._script: collections.deque[Fault | None] = collections.deque(script)
        self._fault_rates = dict(fault_rates or {})
        self._fault_rng = random.Random(fault_seed)
        self._seed = seed
        self._turns: collections.Counter[str] = collections.Counter()  # choices answered
        self._batch_script: collections.deque[BatchScript] = collections.deque(batch_script)
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, _Batch] = {}
        self._lock = threading.Lock()
        self._in_flight = 0
        self._stopping = threading.Event()
        self._httpd = _QuietHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def api_base(self) -> str:
        """OpenAI-style base URL, ``http://127.0.0.1:PORT/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    def push_faults(self, *faults: Fault | None) -> None:
        """Append faults to the scripted queue."""
        with self._lock:
            self._script.extend(faults)

    def close(self) -> None:
        """Stop serving and wake handlers that are sleeping (latency, timeouts)."""
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()

    def __enter__(self) -> ScriptedServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- used by the handler -------------------------------------------------------------

    def _enter(self, path: str, body: dict[str, Any]) -> Fault | None:
        """Count the request and pick its fault, if any."""
        with self._lock:
            self._in_flight += 1
            self.counts.max_in_flight = max(self.counts.max_in_flight, self._in_flight)
            self.counts.total += 1
            self.counts.by_endpoint[path] += 1
            if path.endswith("/chat/completions"):
                self.counts.by_prompt[_last_user_message(body)] += 1
                self.counts.requests.append(body)
            fault = self._next_fault(path)
            if fault is not None:
                self.counts.faults[fault.kind] += 1
            return fault

    def _next_fault(self, path: str) -> Fault | None:
        if self._script:
            head = self._script[0]
            if head is not None and head.endpoint not in (None, path):
                return None  # the head waits for a request to its endpoint
            return self._script.popleft()
        for kind, rate in self._fault_rates.items():
            if self._fault_rng.random() < rate:
                return Fault(kind)
        return None

    def _leave(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def _sleep(self, seconds: float) -> None:
        self._stopping.wait(seconds)

    def _turn(self, key: str) -> int:
        """The number of choices conversation ``key`` was answered before this one."""
        with self._lock:
            turn = self._turns[key]
            self._turns[key] += 1
        return turn

    def _chat(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        n = 1 if self.ignore_n else int(body.get("n") or 1)
        if not 1 <= n <= self.max_n:
            return 400, _error(f"n must be between 1 and {self.max_n}", "invalid_request_error")
        prompt = _last_user_message(body)
        rule = next((r for r in self.rules if r.contains in prompt), None)
        if rule is None:
            return 400, _error("no scripted rule matches the prompt", "invalid_request_error")
        outputs = rule.choices()
        seed = None if self.ignore_seed else body.get("seed")
        greedy = body.get("temperature") == 0
        weights = [o.weight for o in outputs]
        choices: list[dict[str, Any]] = []
        key = json.dumps([rule.contains, body["messages"]], sort_keys=True)
        for j in range(n):
            if rule.rotate:
                out = outputs[self._turn(key) % len(outputs)]
            elif greedy:
                out = max(outputs, key=lambda o: o.weight)
            elif seed is not None:
                out = random.Random(f"{seed}/{j}").choices(outputs, weights=weights)[0]
            else:
                rng = random.Random(f"{self._seed}/{key}/{self._turn(key)}")
                out = rng.choices(outputs, weights=weights)[0]
            choices.append(
                {
                    "index": j,
                    "message": {"role": "assistant", "content": out.text},
                    "finish_reason": out.finish_reason,
                }
            )
        prompt_tokens = sum(len(str(m.get("content", "")).split()) for m in body["messages"])
        completion_tokens = sum(len((c["message"]["content"] or "").split()) for c in choices)
        request_id = f"chatcmpl-{uuid.uuid4().hex[:24]}"
        return 200, {
            "id": request_id,
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "scripted"),
            "choices": choices,
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }

    # -- Files and Batches ---------------------------------------------------------------

    def push_batch_script(self, *scripts: BatchScript) -> None:
        """Append to the scripts of the batches still to be created."""
        with self._lock:
            self._batch_script.extend(scripts)

    def _add_file(self, data: bytes, purpose: str, filename: str) -> dict[str, Any]:
        file_id = f"file-{uuid.uuid4().hex[:24]}"
        with self._lock:
            self.files[file_id] = data
        return {
            "id": file_id,
            "object": "file",
            "bytes": len(data),
            "created_at": int(time.time()),
            "filename": filename,
            "purpose": purpose,
            "status": "processed",
        }

    def _create_batch(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        data = self.files.get(str(body.get("input_file_id")))
        if data is None:
            return 404, _error("no such file", "not_found")
        lines = [json.loads(line) for line in data.decode().splitlines() if line.strip()]
        now = int(time.time())
        batch_id = f"batch_{uuid.uuid4().hex[:24]}"
        with self._lock:
            script = self._batch_script.popleft() if self._batch_script else BatchScript()
        obj = {
            "id": batch_id,
            "object": "batch",
            "endpoint": body.get("endpoint"),
            "input_file_id": body["input_file_id"],
            "completion_window": body.get("completion_window", "24h"),
            "status": "in_progress",
            "created_at": now,
            "in_progress_at": now,
            "expires_at": now + int(script.window_s),
            "metadata": body.get("metadata"),
            "request_counts": {"total": len(lines), "completed": 0, "failed": 0},
        }
        with self._lock:
            self.batches[batch_id] = _Batch(obj, lines, script, time.monotonic() + script.delay_s)
        return 200, dict(obj)

    def _batch(self, batch_id: str, cancel: bool = False) -> tuple[int, dict[str, Any]]:
        with self._lock:
            batch = self.batches.get(batch_id)
        if batch is None:
            return 404, _error(f"no batch {batch_id}", "not_found")
        if cancel and batch.obj["status"] in ("validating", "in_progress"):
            batch.cancelled = True
            batch.due = time.monotonic()
        if batch.obj["status"] in ("validating", "in_progress") and time.monotonic() >= batch.due:
            self._finish(batch)
        return 200, dict(batch.obj)

    def _finish(self, batch: _Batch) -> None:
        """Answer the batch's requests as its script says and set its files and status."""
        script = batch.script
        outcome: BatchOutcome = "cancelled" if batch.cancelled else script.outcome
        now = int(time.time())
        if outcome == "failed":
            batch.obj.update(
                status="failed",
                failed_at=now,
                errors={"data": [{"code": "invalid_file", "message": "scripted failure"}]},
            )
            return
        answered = len(batch.lines) if outcome == "completed" else script.answered
        if batch.cancelled:
            answered = 0
        output: list[dict[str, Any]] = []
        errors: list[dict[str, Any]] = []
        for n, line in enumerate(batch.lines, start=1):
            custom_id = line["custom_id"]
            if n > answered:
                if outcome == "expired":
                    error = {"code": "batch_expired", "message": "not executed in the window"}
                    errors.append({"id": f"batch_req_{n}", "custom_id": custom_id,
                                   "response": None, "error": error})  # fmt: skip
                continue
            if script.fail_every and n % script.fail_every == 0:
                failure = {"status_code": 500, "request_id": f"req_{n}",
                           "body": _error("scripted 500", "server_error")}  # fmt: skip
                errors.append({"id": f"batch_req_{n}", "custom_id": custom_id,
                               "response": failure, "error": None})  # fmt: skip
                continue
            status, body = self._chat(line["body"])
            with self._lock:
                self.counts.batch_requests.append(line["body"])
            target = output if status == 200 else errors
            target.append({"id": f"batch_req_{n}", "custom_id": custom_id, "error": None,
                           "response": {"status_code": status, "request_id": f"req_{n}",
                                        "body": body}})  # fmt: skip
        files: dict[str, Any] = {}
        for key, rows in (("output_file_id", output), ("error_file_id", errors)):
            if rows:
                data = "".join(json.dumps(r) + "\n" for r in rows).encode()
                files[key] = self._add_file(data, "batch_output", f"{key}.jsonl")["id"]
        counts = {"total": len(batch.lines), "completed": len(output), "failed": len(errors)}
        stamp = {"completed": "completed_at", "expired": "expired_at", "cancelled": "cancelled_at"}
        batch.obj.update(status=outcome, request_counts=counts, **files, **{stamp[outcome]: now})

    def _embeddings(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        texts = body["input"]
        texts = [texts] if isinstance(texts, str) else list(texts)
        with self._lock:
            self.counts.embedded_texts.extend(texts)
        data = [
            {"object": "embedding", "index": i, "embedding": self.vector(t)}
            for i, t in enumerate(texts)
        ]
        tokens = sum(len(t.split()) for t in texts)
        return 200, {
            "object": "list",
            "data": data,
            "model": body.get("model", "scripted"),
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }

    def vector(self, text: str) -> list[float]:
        """The unit vector served for ``text``."""
        rng = random.Random(hashlib.sha256(text.encode()).digest())
        raw = [rng.gauss(0.0, 1.0) for _ in range(self.embedding_dimension)]
        norm = math.sqrt(sum(x * x for x in raw))
        return [x / norm for x in raw]


class _QuietHTTPServer(ThreadingHTTPServer):
    """Daemon handler threads; clients hanging up (after a timeout) are not an error."""

    daemon_threads = True
    request_queue_size = 256  # the default backlog of 5 drops bursts of new connections

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def _last_user_message(body: dict[str, Any]) -> str:
    users = [m for m in body.get("messages", []) if m.get("role") == "user"]
    content = users[-1].get("content", "") if users else ""
    return content if isinstance(content, str) else json.dumps(content)


def _form(content_type: str, raw: bytes) -> dict[str, Any]:
    """The fields of a multipart/form-data upload: ``purpose``, ``file`` (bytes), ``filename``."""
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        f"Content-Type: {content_type}\r\n\r\n".encode() + raw
    )
    fields: dict[str, Any] = {"purpose": None, "file": b"", "filename": "upload"}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True) or b""
        if name == "file":
            fields["file"] = payload
            fields["filename"] = part.get_filename() or "upload"
        elif name is not None:
            fields[str(name)] = payload.decode()
    return fields


def _error(message: str, kind: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "code": kind}}


def _handler_for(server: ScriptedServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body go out at once, no 40 ms ACK wait

        def log_message(self, format: str, *args: Any) -> None:  # silence stderr
            pass

        def do_GET(self) -> None:
            path = self.path.split("?")[0].rstrip("/")
            if path.startswith("/v1/batches") or path.startswith("/v1/files"):
                fault = server._enter(path, {})
                try:
                    if fault is not None:
                        self._fault(fault)
                    else:
                        self._get_batches(path)
                finally:
                    server._leave()
                return
            if path != "/v1/models":
                self._send(404, _error(f"no route {self.path}", "not_found"))
                return
            data = [{"id": m, "object": "model", "owned_by": "scripted"} for m in server.models]
            self._send(200, {"object": "list", "data": data})

        def _get_batches(self, path: str) -> None:
            parts = path.split("/")  # "", "v1", "batches"|"files", id, "content"
            if parts[2] == "files" and len(parts) == 5 and parts[4] == "content":
                data = server.files.get(parts[3])
                if data is None:
                    self._send(404, _error("no such file", "not_found"))
                else:
                    self._send_raw(200, data, content_type="application/octet-stream")
            elif parts[2] == "batches" and len(parts) == 4:
                self._send(*server._batch(parts[3]))
            elif parts[2] == "batches" and len(parts) == 3:
                data = [dict(b.obj) for b in list(server.batches.values())]
                self._send(200, {"object": "list", "data": data, "has_more": False})
            else:
                self._send(404, _error(f"no route {self.path}", "not_found"))

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            if self.path == "/v1/files":
                body = _form(self.headers.get("Content-Type", ""), raw)
            else:
                body = json.loads(raw or b"{}")
            fault = server._enter(self.path, body)
            try:
                self._serve(body, fault)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (timeout): nothing to answer
            finally:
                server._leave()

        def _serve(self, body: dict[str, Any], fault: Fault | None) -> None:
            latency = server.latency(body) if callable(server.latency) else server.latency
            server._sleep(latency)
            if fault is None:
                self._answer(body)
            else:
                self._fault(fault)

        def _fault(self, fault: Fault) -> None:
            if fault.kind == "timeout":
                server._sleep(server.timeout_sleep)
                self._send(504, _error("scripted timeout", "timeout"))
            elif fault.kind == "malformed":
                self._send_raw(200, b'{"id": "chatcmpl-broken", "choices": [{"ind')
            else:
                message = f"scripted {fault.kind}"
                if fault.kind == "401":
                    # Real providers echo (part of) the key: the client must not repeat it.
                    message = f"Incorrect API key provided: {self._bearer()}"
                headers = {}
                if fault.retry_after is not None:
                    headers["Retry-After"] = f"{fault.retry_after:g}"
                self._send(_STATUS[fault.kind], _error(message, _ERROR_TYPE[fault.kind]), headers)

        def _answer(self, body: dict[str, Any]) -> None:
            if self.path == "/v1/chat/completions":
                self._send(*server._chat(body))
            elif self.path == "/v1/embeddings":
                self._send(*server._embeddings(body))
            elif self.path == "/v1/files":
                self._send(200, server._add_file(body["file"], body["purpose"], body["filename"]))
            elif self.path == "/v1/batches":
                self._send(*server._create_batch(body))
            elif self.path.startswith("/v1/batches/") and self.path.endswith("/cancel"):
                self._send(*server._batch(self.path.split("/")[3], cancel=True))
            else:
                self._send(404, _error(f"no route {self.path}", "not_found"))

        def _bearer(self) -> str:
            return self.headers.get("Authorization", "").removeprefix("Bearer ")

        def _send(
            self, status: int, payload: dict[str, Any], headers: Mapping[str, str] | None = None
        ) -> None:
            self._send_raw(status, json.dumps(payload).encode(), headers)

        def _send_raw(
            self,
            status: int,
            data: bytes,
            headers: Mapping[str, str] | None = None,
            content_type: str = "application/json",
        ) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

    return Handler
