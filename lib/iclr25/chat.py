"""Chat backends: one ``Backend`` protocol for the local model, any OpenAI-compatible server,
and scripted replies; and :func:`serve`, which puts any backend behind an OpenAI-compatible
``/v1/chat/completions`` endpoint on loopback.

Part of the shared core. Chapters 03 (CogMir: multi-agent conversations) and 07 (Cybench: an
agent that runs commands) talk to a model through a :class:`Backend`, so a user can point them
at their own server (``OpenAICompatibleBackend("http://127.0.0.1:8000/v1", "my-model")``: vLLM,
llama.cpp's server, Ollama, ...) instead of the book's SmolLM2; tests use
:class:`ScriptedBackend`.

Only the standard library is used (``urllib``, ``http.server``): no ``openai`` dependency.
"""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol, runtime_checkable

__all__ = ["Backend", "LocalBackend", "OpenAICompatibleBackend", "ScriptedBackend", "Server",
           "serve", "ChatServerError", "Messages"]

#: One conversation: ``[{"role": "system" | "user" | "assistant", "content": str}, ...]``.
Messages = list[dict[str, str]]


class ChatServerError(ConnectionError):
    """A chat server that does not answer, or answers with an error; the message names the URL."""


def _check_batch(batch) -> list[Messages]:
    if isinstance(batch, (str, dict)) or not isinstance(batch, Sequence):
        raise TypeError("chat() takes a batch: a list of conversations, each a list of "
                        "{'role', 'content'} messages")
    out = []
    for i, conv in enumerate(batch):
        if isinstance(conv, (str, dict)) or not isinstance(conv, Sequence) or not conv:
            raise TypeError(f"conversation {i} must be a non-empty list of messages, got {conv!r}")
        for m in conv:
            if not isinstance(m, dict) or not isinstance(m.get("content"), str) or \
                    m.get("role") not in ("system", "user", "assistant"):
                raise TypeError(f"conversation {i}: each message is a dict with role "
                                f"system/user/assistant and a string content, got {m!r}")
        out.append([dict(m) for m in conv])
    return out


@runtime_checkable
class Backend(Protocol):
    """Anything with ``chat(batch, max_new_tokens, temperature, seed, stop) -> list[str]``: one
    reply per conversation of the batch (part of the shared core; chapters 03, 07)."""

    def chat(self, batch: Sequence[Messages], max_new_tokens: int = 256,
             temperature: float = 0.0, seed: int | None = None,
             stop: Sequence[str] | None = None) -> list[str]:
        ...


class LocalBackend:
    """A local ``transformers`` model through :func:`iclr25.lm.generate_batch` (chat template,
    left padding, KV cache). ``temperature=0`` is greedy decoding.

    Part of the shared core (chapters 03, 07).
    """

    def __init__(self, model, tokenizer, *, batch_size: int = 16, system: str | None = None,
                 top_p: float = 1.0) -> None:
        self.model, self.tokenizer = model, tokenizer
        self.batch_size, self.system, self.top_p = batch_size, system, top_p

    def chat(self, batch, max_new_tokens: int = 256, temperature: float = 0.0,
             seed: int | None = None, stop: Sequence[str] | None = None) -> list[str]:
        from .lm import generate_batch

        batch = _check_batch(batch)
        if temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {temperature!r}")
        out = generate_batch(self.model, self.tokenizer, batch, max_new_tokens=max_new_tokens,
                             chat=True, system=self.system, do_sample=temperature > 0,
                             temperature=temperature if temperature > 0 else 1.0,
                             top_p=self.top_p, seed=seed, stop=stop, batch_size=self.batch_size)
        return list(out.texts)


class ScriptedBackend:
    """Replies computed by ``fn(messages) -> str`` (or ``fn(messages, **options)``): a test
    double and a way to script an agent's environment. ``.calls`` records every conversation
    it was asked about.

    Part of the shared core (tests of chapters 03, 07).
    """

    def __init__(self, fn: Callable[..., str]) -> None:
        if not callable(fn):
            raise TypeError("ScriptedBackend needs a callable messages -> reply")
        self.fn = fn
        self.calls: list[Messages] = []

    def chat(self, batch, max_new_tokens: int = 256, temperature: float = 0.0,
             seed: int | None = None, stop: Sequence[str] | None = None) -> list[str]:
        batch = _check_batch(batch)
        out = []
        for conv in batch:
            self.calls.append(conv)
            reply = self.fn(conv)
            if not isinstance(reply, str):
                raise TypeError(f"the scripted reply must be a string, got {type(reply).__name__}")
            for s in stop or []:
                if s and s in reply:
                    reply = reply[:reply.index(s)]
            out.append(reply)
        return out


class OpenAICompatibleBackend:
    """A server with an OpenAI-style ``POST {base_url}/chat/completions`` (vLLM, llama.cpp,
    Ollama, the OpenAI API, or :func:`serve`).

    Part of the shared core (chapters 03, 07). One request per conversation; connection errors,
    timeouts, HTTP 429 and 5xx are retried ``retries`` times with exponential back-off, then
    raise :class:`ChatServerError` naming the URL.

    Parameters
    ----------
    base_url
        E.g. ``"http://127.0.0.1:8000/v1"`` (the part before ``/chat/completions``).
    model
        The model name the server expects.
    api_key
        Sent as ``Authorization: Bearer ...`` when given.
    timeout
        Seconds per request (connect and read).
    """

    def __init__(self, base_url: str, model: str, api_key: str | None = None,
                 timeout: float = 60.0, *, retries: int = 2, backoff: float = 0.5) -> None:
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must start with http:// or https://, got {base_url!r}")
        if timeout <= 0:
            raise ValueError(f"timeout must be > 0 seconds, got {timeout!r}")
        self.base_url = base_url.rstrip("/")
        self.url = self.base_url + "/chat/completions"
        self.model, self.api_key = model, api_key
        self.timeout, self.retries, self.backoff = float(timeout), int(retries), float(backoff)

    def _post(self, payload: dict[str, Any]) -> dict[str, Any]:
        data = json.dumps(payload).encode()
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        last: str = ""
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.backoff * 2 ** (attempt - 1))
            req = urllib.request.Request(self.url, data=data, headers=headers, method="POST")
            try:
                with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                    return json.loads(resp.read().decode())
            except urllib.error.HTTPError as err:
                body = err.read().decode(errors="replace")[:500]
                if err.code == 429 or err.code >= 500:
                    last = f"HTTP {err.code}: {body}"
                    continue
                raise ChatServerError(f"the chat server at {self.url} refused the request "
                                      f"(HTTP {err.code}): {body}") from None
            except (urllib.error.URLError, socket.timeout, TimeoutError, ConnectionError) as err:
                reason = getattr(err, "reason", err)
                last = f"{type(reason).__name__}: {reason}"
            except json.JSONDecodeError as err:
                raise ChatServerError(f"the chat server at {self.url} answered with something "
                                      f"that is not JSON ({err})") from None
        raise ChatServerError(f"the chat server at {self.url} did not answer after "
                              f"{self.retries + 1} attempt(s) (timeout {self.timeout:g} s): "
                              f"{last}. Is it running, and is base_url right (it should end "
                              f"with /v1 for most servers)?")

    def chat(self, batch, max_new_tokens: int = 256, temperature: float = 0.0,
             seed: int | None = None, stop: Sequence[str] | None = None) -> list[str]:
        batch = _check_batch(batch)
        out = []
        for conv in batch:
            payload: dict[str, Any] = {"model": self.model, "messages": conv,
                                       "max_tokens": int(max_new_tokens),
                                       "temperature": float(temperature)}
            if seed is not None:
                payload["seed"] = int(seed)
            if stop:
                payload["stop"] = list(stop)
            reply = self._post(payload)
            try:
                out.append(reply["choices"][0]["message"]["content"] or "")
            except (KeyError, IndexError, TypeError):
                raise ChatServerError(f"the chat server at {self.url} answered without "
                                      f"choices[0].message.content: {str(reply)[:300]}") from None
        return out


# --------------------------------------------------------------------------------------------
# the server
# --------------------------------------------------------------------------------------------

_MAX_BODY = 1 << 20          # 1 MiB per request
_MAX_TOKENS = 4096


class Server:
    """A running :func:`serve` server: ``.url`` (``http://127.0.0.1:PORT/v1``), ``.port``,
    ``.close()``; also a context manager."""

    def __init__(self, httpd: ThreadingHTTPServer, thread: threading.Thread) -> None:
        self._httpd, self._thread = httpd, thread
        host, port = httpd.server_address[:2]
        self.host, self.port = host, port
        self.url = f"http://{host}:{port}/v1"

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> "Server":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _handler(backend: Backend, model_name: str, lock: threading.Lock):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):  # quiet
            pass

        def _send(self, code: int, obj: dict) -> None:
            body = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _error(self, code: int, message: str) -> None:
            self._send(code, {"error": {"message": message, "type": "invalid_request_error"}})

        def do_GET(self):
            if self.path.rstrip("/") == "/v1/models":
                self._send(200, {"object": "list", "data": [
                    {"id": model_name, "object": "model", "owned_by": "iclr25"}]})
            else:
                self._error(404, f"no route {self.path}; try POST /v1/chat/completions")

        def do_POST(self):
            if self.path.rstrip("/") != "/v1/chat/completions":
                self._error(404, f"no route {self.path}; try POST /v1/chat/completions")
                return
            try:
                n = int(self.headers.get("Content-Length", "0"))
            except ValueError:
                n = -1
            if not 0 < n <= _MAX_BODY:
                self._error(413 if n > _MAX_BODY else 400,
                            f"a request body of 1 to {_MAX_BODY} bytes is expected")
                return
            try:
                req = json.loads(self.rfile.read(n).decode())
                messages = _check_batch([req["messages"]])[0]
                max_tokens = int(req.get("max_tokens") or req.get("max_completion_tokens") or 256)
                temperature = float(req.get("temperature", 0.0) or 0.0)
                seed = req.get("seed")
                stop = req.get("stop")
                stop = [stop] if isinstance(stop, str) else stop
                if int(req.get("n", 1)) != 1:
                    raise ValueError("only n=1 is supported")
                if not 1 <= max_tokens <= _MAX_TOKENS:
                    raise ValueError(f"max_tokens must be in [1, {_MAX_TOKENS}]")
            except (ValueError, KeyError, TypeError) as err:
                self._error(400, f"bad request: {err}")
                return
            try:
                with lock:      # one generation at a time on the model
                    reply = backend.chat([messages], max_new_tokens=max_tokens,
                                         temperature=temperature, seed=seed, stop=stop)[0]
            except Exception as err:  # the backend failed: a 500 with its message
                self._send(500, {"error": {"message": f"{type(err).__name__}: {err}",
                                           "type": "server_error"}})
                return
            self._send(200, {
                "id": f"chatcmpl-{time.time_ns()}", "object": "chat.completion",
                "created": int(time.time()), "model": req.get("model", model_name),
                "choices": [{"index": 0, "message": {"role": "assistant", "content": reply},
                             "finish_reason": "stop"}],
                "usage": {"prompt_tokens": None, "completion_tokens": None}})

    return Handler


def serve(backend: Backend, host: str = "127.0.0.1", port: int = 0, *,
          model_name: str = "iclr25-local", allow_remote: bool = False) -> Server:
    """Serve ``backend`` as an OpenAI-compatible ``/v1/chat/completions`` endpoint, in a
    background thread; returns the :class:`Server` (``.url`` to give a client, ``.close()``).

    Part of the shared core (chapters 03, 07): ``serve(LocalBackend(model, tok))`` puts the
    book's model behind the API a user's own tools speak. ``port=0`` picks a free port.
    Requests are bounded (1 MiB body, at most 4096 new tokens, one generation at a time). It
    binds loopback only unless ``allow_remote=True``.
    """
    if not allow_remote and host not in ("127.0.0.1", "localhost", "::1"):
        raise ValueError(f"serve binds loopback only (127.0.0.1); got host {host!r}; pass "
                         "allow_remote=True to listen on other interfaces")
    if not hasattr(backend, "chat"):
        raise TypeError(f"backend must have a chat(batch, ...) method, got {type(backend).__name__}")
    httpd = ThreadingHTTPServer((host, port), _handler(backend, model_name, threading.Lock()))
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, name="iclr25-chat-server", daemon=True)
    thread.start()
    return Server(httpd, thread)
