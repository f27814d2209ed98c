"""HTTP for the OpenAPI fuzzer: a keep-alive client that sends hostile but sendable requests, and the local webhook receiver."""
import http.client
import http.server
import json
import re
import socket
import threading
import time
import urllib.parse


def _header_bytes(v):
    """Header values as bytes: latin-1 where possible, else raw UTF-8 (a hostile but sendable value)."""
    try:
        return v.encode("latin-1")
    except UnicodeEncodeError:
        return v.encode("utf-8", "surrogatepass")


class Response:
    def __init__(self, status, headers, body):
        self.status, self.headers, self.body = status, headers, body

    def json(self):
        return json.loads(self.body.decode("utf-8"))


class Client:
    """One keep-alive connection; reconnects when the server closes it."""

    def __init__(self, base_url, timeout=30):
        u = urllib.parse.urlsplit(base_url)
        self.host, self.port, self.timeout = u.hostname, u.port or 80, timeout
        self.conn = None
        self.want_event = False

    def _connect(self, timeout=None):
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout or self.timeout)

    def request(self, method, target, body=None, headers=None, stream=False):
        headers = dict(headers or {})
        if stream:
            conn = self._connect(timeout=0.5)
            try:
                conn.putrequest(method, target, skip_accept_encoding=True)
                for k, v in headers.items():
                    conn.putheader(k, _header_bytes(v))
                conn.endheaders()
                r = conn.getresponse()
                hdrs = {k.lower(): v for k, v in r.getheaders()}
                # Read what arrives within 2 s (an event stream never ends): up to the first event
                # after the opening comment, or the whole body of any other answer.
                data, deadline = b"", time.time() + 2
                try:
                    while time.time() < deadline and len(data) < 1 << 20:
                        chunk = r.read1(65536)
                        if not chunk:
                            break
                        data += chunk
                        if "text/event-stream" in hdrs.get("content-type", ""):
                            if data.count(b"\n\n") >= 2:
                                break
                            if data.count(b"\n\n") == 1:  # the opening comment: an event follows at once if there is one
                                deadline = min(deadline, time.time() + 0.5)
                except socket.timeout:
                    pass
                return Response(r.status, hdrs, data)
            finally:
                conn.close()
        for attempt in range(3):
            if self.conn is None:
                self.conn = self._connect()
            try:
                self.conn.putrequest(method, target, skip_accept_encoding=True)
                for k, v in headers.items():
                    self.conn.putheader(k, _header_bytes(v))
                if body is not None:
                    self.conn.putheader("Content-Length", str(len(body)))
                self.conn.endheaders(body)
                r = self.conn.getresponse()
                data = r.read()
                hdrs = {k.lower(): v for k, v in r.getheaders()}
                if hdrs.get("connection", "").lower() == "close":
                    self.conn.close()
                    self.conn = None
                return Response(r.status, hdrs, data)
            except (http.client.HTTPException, ConnectionError, BrokenPipeError, socket.timeout) as e:
                if self.conn:
                    self.conn.close()
                self.conn = None
                if attempt == 2:
                    raise RuntimeError(f"{method} {target}: {e!r}") from e
                time.sleep(0.2)


def snake_keys(v):
    if isinstance(v, dict):
        return {re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", k).lower() if re.fullmatch(r"[a-z][A-Za-z0-9]*", k) else k: snake_keys(x) for k, x in v.items()}
    if isinstance(v, list):
        return [snake_keys(x) for x in v]
    return v


# ---------------------------------------------------------------------------------------------------
# A local webhook receiver: fuzzed webhooks are pointed here, never at another host.


class _Receiver(http.server.BaseHTTPRequestHandler):
    count = 0

    def do_POST(self):  # noqa: N802
        self.rfile.read(int(self.headers.get("content-length") or 0))
        _Receiver.count += 1
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *a):
        pass


def start_receiver(port=0):
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", port), _Receiver)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv
