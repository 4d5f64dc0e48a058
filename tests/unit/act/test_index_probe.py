"""index_probe.py against real sockets on this machine: a server that answers (with a 404: an answer), one that
speaks no TLS to an https request (a server is there), a port nobody listens on, and one that accepts connections and
never answers (with a short timeout: the real one is 15 s); all asked at once (a server that answers only once it
has two connections open). The URLs asked carry no credentials."""

import http.server
import socket
import threading
from contextlib import contextmanager

from sagemaker_mxnet_horovod.act.index_probe import probe_url, unreachable, unreachable_reason, without_credentials


@contextmanager
def http_server():
    class NotFound(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - the handler's name
            self.send_error(404)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), NotFound)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def listener(reply: bytes | None = None):
    """A TCP port that accepts connections: it sends `reply` and closes, or, without one, never says anything."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    held = []

    def serve():
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            if reply is None:
                held.append(conn)
            else:
                conn.sendall(reply)
                conn.close()

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield sock.getsockname()[1]
    finally:
        sock.close()
        for conn in held:
            conn.close()


def closed_port() -> int:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


def test_a_server_that_answers_at_all_is_reached():
    with http_server() as url:
        assert unreachable_reason(url + "/simple/pip/", 5) is None


def test_a_server_that_speaks_no_tls_to_https_is_there_all_the_same():
    with listener(b"HTTP/1.0 400 plain text\r\n\r\n") as port:
        assert unreachable_reason(f"https://127.0.0.1:{port}/simple/pip/", 5) is None


def test_a_port_nobody_listens_on_is_refused():
    assert unreachable_reason(f"http://127.0.0.1:{closed_port()}/simple/pip/", 5) == "Connection refused"


def test_a_server_that_never_answers_is_not_waited_for_past_the_timeout():
    with listener() as port:
        assert unreachable_reason(f"http://127.0.0.1:{port}/simple/pip/", 0.3) == "no answer within 0.3 s"


@contextmanager
def answers_once_both_asked():
    """A server that answers nobody until two connections are open: asked one after the other, the first would get
    no answer."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)

    def serve():
        conns = [sock.accept()[0], sock.accept()[0]]
        for conn in conns:
            conn.sendall(b"HTTP/1.0 404 Not Found\r\nContent-Length: 0\r\n\r\n")
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        sock.close()


def test_all_are_asked_at_once():
    with answers_once_both_asked() as url:
        assert unreachable([url + "/a/", url + "/b/"], timeout_s=10) == {}


def test_only_the_unreachable_are_returned_with_why():
    with http_server() as answering, listener() as silent:
        silent_url, refused_url = f"http://127.0.0.1:{silent}/", f"http://127.0.0.1:{closed_port()}/"
        failed = unreachable([answering + "/", silent_url, refused_url], timeout_s=0.3)
    assert failed == {silent_url: "no answer within 0.3 s", refused_url: "Connection refused"}


def test_credentials_never_leave_the_url_and_an_index_is_asked_for_its_pip_page():
    assert without_credentials("https://aws:TOKEN@d-1.d.codeartifact.us-west-2.amazonaws.com/pypi/r/simple/") == (
        "https://d-1.d.codeartifact.us-west-2.amazonaws.com/pypi/r/simple/")
    assert without_credentials("http://user@index.example:8080/simple") == "http://index.example:8080/simple"
    assert probe_url("https://u:p@index.example/simple/", index=True) == "https://index.example/simple/pip/"
    assert probe_url("https://index.example/wheels.html", index=False) == "https://index.example/wheels.html"
