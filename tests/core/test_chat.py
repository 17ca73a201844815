"""iclr25.chat: backends, the OpenAI-compatible server and client on loopback."""

from __future__ import annotations

import json
import socket
import time
import urllib.request

import pytest

from iclr25 import chat, lm


def _echo(messages):
    return f"echo({len(messages)}): {messages[-1]['content']}"


def _conv(text, system=None):
    return ([{"role": "system", "content": system}] if system else []) + \
        [{"role": "user", "content": text}]


def test_scripted_backend_replies_records_and_stops():
    b = chat.ScriptedBackend(_echo)
    assert isinstance(b, chat.Backend)
    out = b.chat([_conv("hi"), _conv("yo", "sys")], stop=["1)"])
    assert out == ["echo(", "echo(2): yo"]
    assert len(b.calls) == 2 and b.calls[1][0]["role"] == "system"
    with pytest.raises(TypeError, match="batch"):
        b.chat(_conv("hi")[0])
    with pytest.raises(TypeError, match="role"):
        b.chat([[{"role": "robot", "content": "x"}]])


def test_server_and_client_round_trip_on_loopback():
    backend = chat.ScriptedBackend(_echo)
    with chat.serve(backend, port=0) as server:
        assert server.url.startswith("http://127.0.0.1:") and server.port > 0
        client = chat.OpenAICompatibleBackend(server.url, "iclr25-local", api_key="k",
                                              timeout=10)
        assert isinstance(client, chat.Backend)
        out = client.chat([_conv("hello"), _conv("again", "be brief")], max_new_tokens=5,
                          stop=["again"])
        assert out == ["echo(1): hello", "echo(2): "]
        assert backend.calls[1] == _conv("again", "be brief")
        with urllib.request.urlopen(server.url + "/models", timeout=5) as r:
            assert json.loads(r.read())["data"][0]["id"] == "iclr25-local"
        # a malformed request is a 400 that the client reports with the URL
        bad = chat.OpenAICompatibleBackend(server.url, "m", timeout=5, retries=0)
        with pytest.raises(chat.ChatServerError, match=r"HTTP 400.*max_tokens"):
            bad.chat([_conv("x")], max_new_tokens=10**6)
    # a backend that fails gives a 500, retried, then a clear error
    with chat.serve(chat.ScriptedBackend(lambda m: 1 / 0)) as server:
        client = chat.OpenAICompatibleBackend(server.url, "m", timeout=5, retries=1, backoff=0.01)
        with pytest.raises(chat.ChatServerError, match="ZeroDivisionError"):
            client.chat([_conv("x")])


def test_a_server_that_is_down_is_a_quick_clear_error():
    with socket.socket() as s:       # a free port with nobody listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    client = chat.OpenAICompatibleBackend(url, "m", timeout=0.5, retries=1, backoff=0.05)
    t0 = time.perf_counter()
    with pytest.raises(chat.ChatServerError) as err:
        client.chat([_conv("x")])
    assert time.perf_counter() - t0 < 5
    assert f"{url}/chat/completions" in str(err.value) and "did not answer" in str(err.value)
    with pytest.raises(ValueError, match="http"):
        chat.OpenAICompatibleBackend("127.0.0.1:8000", "m")
    with pytest.raises(ValueError, match="loopback"):
        chat.serve(chat.ScriptedBackend(_echo), host="0.0.0.0")


def test_local_backend_is_generate_batch_and_serves(tiny):
    model, tok = tiny
    backend = chat.LocalBackend(model, tok, batch_size=2)
    convs = [_conv("Hi"), _conv("What is two plus two?", "Be brief.")]
    out = backend.chat(convs, max_new_tokens=6)
    assert out == lm.generate_batch(model, tok, convs, max_new_tokens=6).texts
    with chat.serve(backend) as server:
        client = chat.OpenAICompatibleBackend(server.url, "tiny", timeout=30)
        assert client.chat(convs, max_new_tokens=6) == out
    sampled = backend.chat(convs, max_new_tokens=6, temperature=1.0, seed=1)
    assert sampled == backend.chat(convs, max_new_tokens=6, temperature=1.0, seed=1)
