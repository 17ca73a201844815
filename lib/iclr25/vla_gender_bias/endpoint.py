"""The protocol against an OpenAI-compatible multimodal chat endpoint (chapter 19, notebook 02).

A user points the protocol at their own assistant: :func:`score_endpoint` sends one
``/v1/chat/completions`` request per (prompt, image) pair, the image as an ``image_url`` content
part (a ``data:`` URL) before the text part, asks for one token with ``logprobs`` and
``top_logprobs``, and reads the options' log-probabilities from the first token's
``top_logprobs`` (an option missing from them is an error that names it: raise
``top_logprobs``). :func:`serve` serves a toy VLA behind that API on a loopback port, so the
client can be checked against in-process scoring (registry entry ``endpoint-matches-in-process``).

Images travel as ``data:application/x-npy;base64,...`` (the array's ``.npy`` bytes: exact) for
the toy server; for a real assistant pass ``encode=`` a function that returns a PNG or JPEG
``data:`` URL of the photograph.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import threading
import urllib.request
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import torch

__all__ = ["encode_npy", "decode_data_url", "serve", "score_endpoint", "chat_request"]


def encode_npy(image) -> str:
    """A ``data:`` URL holding ``image``'s ``.npy`` bytes, in its own float dtype (lossless)."""
    buf = io.BytesIO()
    a = np.asarray(image)
    np.save(buf, a if a.dtype in (np.float32, np.float64) else a.astype(np.float32), allow_pickle=False)
    return "data:application/x-npy;base64," + base64.b64encode(buf.getvalue()).decode()


def decode_data_url(url: str) -> np.ndarray:
    """The array of an :func:`encode_npy` URL (other media types are refused with a message)."""
    head, _, data = url.partition(",")
    if not head.startswith("data:application/x-npy;base64"):
        raise ValueError(f"the toy server reads data:application/x-npy;base64 images, got {head[:40]!r}")
    return np.load(io.BytesIO(base64.b64decode(data)), allow_pickle=False)


def chat_request(body: str, image_url: str, *, model: str = "toy-vla", top_logprobs: int = 20) -> dict:
    """The request of one (prompt, image) pair: a user turn whose content is the image part then
    the text part; one token, greedy, with its ``top_logprobs``."""
    return {"model": model, "max_tokens": 1, "temperature": 0, "logprobs": True,
            "top_logprobs": int(top_logprobs),
            "messages": [{"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": image_url}},
                {"type": "text", "text": body}]}]}


def _handler(vla, tok):
    from .toy_vla import _prompt_batch

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):          # quiet
            pass

        def _send(self, code, obj):
            data = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self):
            if self.path.rstrip("/") != "/v1/chat/completions":
                return self._send(404, {"error": {"message": f"no route {self.path}"}})
            try:
                req = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                parts = req["messages"][-1]["content"]
                text = "".join(p["text"] for p in parts if p.get("type") == "text")
                imgs = [p["image_url"]["url"] for p in parts if p.get("type") == "image_url"]
                if len(imgs) != 1:
                    raise ValueError(f"one image part per request, got {len(imgs)}")
                dtype = next(vla.parameters()).dtype
                image = torch.as_tensor(decode_data_url(imgs[0]))[None].to(dtype)
                ids, last = _prompt_batch(vla, tok, [text])
                with torch.no_grad():
                    lp = torch.log_softmax(vla(ids, image)[0, int(last[0])].double(), -1)
                k = max(1, min(int(req.get("top_logprobs", 20)), len(tok)))
                top = torch.topk(lp, k)
                entries = [{"token": tok.vocab[int(i)], "logprob": float(v)}
                           for v, i in zip(top.values, top.indices)]
            except (KeyError, ValueError, TypeError) as e:
                return self._send(400, {"error": {"message": str(e)}})
            self._send(200, {"object": "chat.completion", "model": req.get("model", "toy-vla"),
                             "choices": [{"index": 0, "finish_reason": "length",
                                          "message": {"role": "assistant", "content": entries[0]["token"]},
                                          "logprobs": {"content": [{**entries[0], "top_logprobs": entries}]}}]})

    return Handler


@contextlib.contextmanager
def serve(vla, tok, *, host: str = "127.0.0.1", port: int = 0):
    """Serve ``vla`` (a :class:`~iclr25.vla_gender_bias.toy_vla.ToyVLA` with its tokenizer) at
    ``http://host:port/v1/chat/completions`` in a background thread; yields the base URL
    (``http://127.0.0.1:<port>/v1``). ``port=0`` picks a free port."""
    vla.eval()
    server = ThreadingHTTPServer((host, port), _handler(vla, tok))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://{host}:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _post(url: str, payload: dict, timeout: float, api_key: str | None) -> dict:
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    req = urllib.request.Request(url, data=json.dumps(payload).encode(), headers=headers)
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def score_endpoint(base_url: str, bodies: Sequence[str], images, options: Sequence[str], *,
                   model: str = "toy-vla", encode: Callable = encode_npy, top_logprobs: int = 20,
                   timeout: float = 60.0, api_key: str | None = None) -> np.ndarray:
    """Option log-probabilities ``(n_prompts, n_images, n_options)`` from an OpenAI-compatible
    endpoint at ``base_url`` (``.../v1``): the first generated token's ``top_logprobs`` entry of
    each option (matched after stripping whitespace; case-insensitively when no exact match), for every (prompt, image) pair. The same
    layout as :func:`~iclr25.vla_gender_bias.toy_vla.score_images`. Chapter 19, notebook
    ``02-toy-vla``."""
    url = base_url.rstrip("/") + "/chat/completions"
    urls = [encode(im) for im in images]
    out = np.full((len(bodies), len(urls), len(options)), -np.inf)
    for t, body in enumerate(bodies):
        for i, u in enumerate(urls):
            resp = _post(url, chat_request(body, u, model=model, top_logprobs=top_logprobs), timeout, api_key)
            top = resp["choices"][0]["logprobs"]["content"][0]["top_logprobs"]
            got, low = {}, {}
            for e in top:
                got.setdefault(e["token"].strip(), e["logprob"])
                low.setdefault(e["token"].strip().lower(), e["logprob"])
            got = {o: got[o] if o in got else low[o.lower()] for o in options
                   if o in got or o.lower() in low}
            missing = [o for o in options if o not in got]
            if missing:
                raise ValueError(f"option(s) {missing} not among the endpoint's top {len(top)} "
                                 f"logprobs for prompt {t}, image {i}: raise top_logprobs")
            out[t, i] = [got[o] for o in options]
    return out
