#!/usr/bin/env python3
"""An independent OpenAPI-driven fuzzer for pixgate (hypothesis + jsonschema; no server code).

Reads the server's /openapi.json, creates setup data through the operator and sandbox APIs, then for
every operation sends FUZZ_EXAMPLES generated requests — valid ones drawn from the request schemas
and invalid ones (wrong types, missing required fields, extra fields, boundary numbers, huge strings,
odd unicode, malformed JSON, bad parameters, bad credentials) — signed as docs/signing.md says, and
checks every answer: no 5xx (a 503 only where the document declares it), the status declared for the
operation, the Content-Type declared for that status, and the body valid against the declared schema
(jsonschema, Draft 2020-12). Prints the figures; exits 1 when it found a problem.

    python3 fuzz.py --base-url http://127.0.0.1:8080 --admin-token TOKEN [--examples 100] [--only REGEX]

`npm run fuzz:openapi` (bench/openapi-fuzz/run.mjs) starts a server on a fresh database and runs this.
"""
import argparse
import faulthandler
import signal
import base64
import collections
import http.client
import http.server
import json
import os
import random
import re
import secrets
import socket
import string
import sys
import threading
import time
import urllib.parse

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import signing  # noqa: E402
from schema_strategies import ANY_JSON, Converter  # noqa: E402

ALL_PERMISSIONS = ["pix:write", "pix:read", "transfer:write", "transfer:read", "payment:write", "payment:read", "account:write", "account:read", "statement:read"]
SIGNATURE_HEADERS = {"x-signature-version", "x-request-timestamp", "x-request-nonce", "idempotency-key", "hmac"}
WEIRD_STRINGS = [
    "", " ", "\u0000", "\ud800", "\udfff", "\ufeff", "\u202e\u202d", "e\u0301" * 50, "😀" * 40, "\U0010ffff",
    "null", "true", "0", "-1", "1e309", "NaN", "../../etc/passwd", "%00", "%", "%zz", "'; DROP TABLE x;--",
    "<script>", "a" * 300, "\r\n\r\nX-Injected: 1", "ﷺ" * 20, "\u2028\u2029", "１２３", "٣٤٥",
]
BOUNDARY_NUMBERS = [0, -1, 1, -0.0, 0.5, 1.0, 2 ** 31, 2 ** 31 - 1, 2 ** 53, 2 ** 53 + 1, 2 ** 63, -(2 ** 63), 10 ** 30, 1e308, -1e308, 9007199254740993, 100000000001, 99999999999]
NUMBER_SPELLINGS = ["1e2", "1.0", "-0", "1E+2", "0.1e1", "100000000000000000000000000", "1.5e3", "0e0", "-0.0"]


# ---------------------------------------------------------------------------------------------------
# HTTP


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


# ---------------------------------------------------------------------------------------------------


def _cpf(digits):
    d = list(digits)
    for n in (9, 10):
        total = sum(x * (n + 1 - i) for i, x in enumerate(d[:n]))
        d.append((total * 10 % 11) % 10)
    return "".join(map(str, d))


def _cnpj(digits):
    d = list(digits)
    for weights in ([5, 4, 3, 2, 9, 8, 7, 6, 5, 4, 3, 2], [6, 5, 4, 3, 2, 9, 8, 7, 6, 5, 4, 3, 2]):
        r = sum(x * w for x, w in zip(d, weights)) % 11
        d.append(0 if r < 2 else 11 - r)
    return "".join(map(str, d))


VALID_DOCUMENT = st.one_of(
    st.lists(st.integers(0, 9), min_size=9, max_size=9).map(_cpf).filter(lambda x: len(set(x)) > 1),
    st.lists(st.integers(0, 9), min_size=12, max_size=12).map(_cnpj).filter(lambda x: len(set(x)) > 1),
)
# Field name → strategies of values a schema cannot express (valid check digits, real dates).
GENERATED_HINTS = {
    "document": [VALID_DOCUMENT],
    "payer_document": [VALID_DOCUMENT],
    "due_date": [st.dates(min_value=__import__("datetime").date(2027, 1, 1), max_value=__import__("datetime").date(2035, 12, 31)).map(lambda d: d.isoformat())],
    "amount": [st.integers(1, 100_000)],
    "amount_cents": [st.integers(1, 100_000)],
    "pix_key_type": [st.none()],
}


class Fuzzer:
    def __init__(self, base_url, admin_token, receiver_url, examples, seed):
        self.base_url = base_url.rstrip("/")
        self.client = Client(self.base_url)
        self.admin_token = admin_token
        self.receiver_url = receiver_url
        self.examples = examples
        self.rng = random.Random(seed)
        self.doc = self.client.request("GET", "/openapi.json").json()
        self.conv = Converter(self.doc)
        self.registry = Registry().with_resource("urn:pixgate:openapi", Resource.from_contents(self.doc, default_specification=DRAFT202012))
        self.validators = {}
        self.pools = collections.defaultdict(list)  # name → known values
        self.hints = collections.defaultdict(list)  # body field → known good values
        self.status_counts = collections.Counter()
        self.per_op = {}
        self.problems = collections.OrderedDict()  # signature → [count, example]
        self.requests = 0

    # -- checking -----------------------------------------------------------------------------------
    def validator(self, pointer):
        v = self.validators.get(pointer)
        if v is None:
            v = Draft202012Validator({"$ref": "urn:pixgate:openapi#" + pointer}, registry=self.registry, format_checker=Draft202012Validator.FORMAT_CHECKER)
            self.validators[pointer] = v
        return v

    def problem(self, op_key, kind, detail, req):
        sig = f"{op_key} | {kind}"
        entry = self.problems.setdefault(sig, [0, None])
        entry[0] += 1
        if entry[1] is None:
            entry[1] = {"detail": detail, "request": req}

    def check(self, op_key, path, method, op, req, res):
        status = str(res.status)
        self.status_counts[res.status] += 1
        self.per_op[op_key][res.status] += 1
        responses = op.get("responses", {})
        declared = responses.get(status) or responses.get(f"{status[0]}XX") or responses.get("default")
        if res.status >= 500 and not (res.status == 503 and declared):
            self.problem(op_key, f"{res.status} answer", res.body[:500].decode("utf-8", "replace"), req)
        if declared is None:
            self.problem(op_key, f"undeclared status {status}", res.body[:500].decode("utf-8", "replace"), req)
            return
        content = declared.get("content") or {}
        ctype = res.headers.get("content-type", "").split(";")[0].strip().lower()
        if not content:
            if res.body and ctype == "application/json":
                self.problem(op_key, f"{status}: a body where the document declares none", res.body[:300].decode("utf-8", "replace"), req)
            return
        if ctype not in content:
            self.problem(op_key, f"{status}: Content-Type {ctype or 'none'} not in {sorted(content)}", res.body[:300].decode("utf-8", "replace"), req)
            return
        media = content[ctype]
        esc = path.replace("~", "~0").replace("/", "~1")
        pointer = f"/paths/{esc}/{method}/responses/{status}/content/{ctype.replace('/', '~1')}/schema"
        if ctype == "application/json":
            try:
                body = res.json()
            except ValueError:
                self.problem(op_key, f"{status}: body is not JSON", res.body[:300].decode("utf-8", "replace"), req)
                return
            if str(req["headers"].get("X-Key-Case", "")).strip().lower() == "camelcase":
                body = snake_keys(body)  # the document: a camelCase exchange is the same with keys renamed
            if "schema" in media:
                errors = sorted(self.validator(pointer).iter_errors(body), key=lambda e: list(e.absolute_path))
                if errors:
                    e = errors[0]
                    self.problem(op_key, f"{status}: body outside the schema at /{'/'.join(map(str, e.absolute_path))}", f"{e.message[:400]} — body {res.body[:400].decode('utf-8', 'replace')}", req)
        elif ctype == "text/event-stream" and res.body:
            self.check_sse(op_key, path, method, status, media, res.body, req)

    def check_sse(self, op_key, path, method, status, media, raw, req):
        """Each event's `data` must validate against the schema the document gives for it (x-itemSchema)."""
        item = media.get("x-itemSchema")
        if not item:
            return
        data_schema = self.conv.resolve(item).get("properties", {}).get("data", {})
        target = data_schema.get("contentSchema")
        for block in raw.decode("utf-8", "replace").split("\n\n"):
            lines = [l for l in block.split("\n") if l and not l.startswith(":")]
            data = "\n".join(l[5:].lstrip(" ") for l in lines if l.startswith("data:"))
            if not data or not target:
                continue
            try:
                value = json.loads(data)
            except ValueError:
                self.problem(op_key, f"{status}: SSE data is not JSON", data[:300], req)
                continue
            esc = path.replace("~", "~0").replace("/", "~1")
            pointer = f"/paths/{esc}/{method}/responses/{status}/content/text~1event-stream/x-itemSchema/properties/data/contentSchema"
            errors = list(self.validator(pointer).iter_errors(value))
            if errors:
                self.problem(op_key, f"{status}: SSE event outside the schema", errors[0].message[:300], req)

    # -- sending ------------------------------------------------------------------------------------
    def _setup_call(self, method, path, body, headers, sign=None):
        """One setup request: JSON body, optional v2 signature over it; a non-2xx stops the run."""
        data = None
        if body is not None:
            text = json.dumps(body)
            data = text.encode()
            headers["Content-Type"] = "application/json"
            if sign is not None:
                headers.update(signing.v2_headers(sign, path, text, "setup-" + secrets.token_hex(8)))
        self.requests += 1
        r = self.client.request(method, path, data, headers)
        if r.status >= 300:
            raise RuntimeError(f"setup {method} {path} → {r.status} {r.body[:300]!r}")
        return r.json() if r.body else None

    def admin(self, method, path, body=None, headers=None):
        return self._setup_call(method, path, body, {"Authorization": f"Bearer {self.admin_token}", **(headers or {})})

    def merchant(self, method, path, body=None, key=None):
        key = key or self.key
        h = {"Authorization": f"ApiKey {key['client_id']}:{key['client_secret']}"}
        return self._setup_call(method, path, body, h, sign=key["client_secret"])

    def central(self, method, path, body=None):
        return self._setup_call(method, path, body, {"X-API-Key": self.central_key})

    # -- setup --------------------------------------------------------------------------------------
    def setup(self):
        P, H = self.pools, self.hints
        run = secrets.token_hex(3)  # setup names unique per run (a server may be fuzzed twice)
        m = self.admin("POST", "/api/admin/merchants", {"name": "Fuzz Merchant", "document": "11222333000181"})
        self.merchant_id, self.account_id = m["merchant_id"], m["account_id"]
        victim = self.admin("POST", "/api/admin/merchants", {"name": "Fuzz Victim", "document": "52998224725"})
        P["account_id"] += [self.account_id]
        P["victim_account_id"] += [victim["account_id"]]
        self.key = self.admin("POST", "/api/admin/api-keys", {"merchant_id": self.merchant_id, "permissions": ALL_PERMISSIONS, "ip_whitelist": ["127.0.0.1"], "hmac": True})
        self.victim_key = self.admin("POST", "/api/admin/api-keys", {"merchant_id": victim["merchant_id"], "permissions": ALL_PERMISSIONS, "ip_whitelist": ["127.0.0.1"], "hmac": True})
        for _ in range(3):
            k = self.admin("POST", "/api/admin/api-keys", {"merchant_id": victim["merchant_id"], "permissions": ["account:read"], "ip_whitelist": ["127.0.0.1"]})
            P["sacrificial_client_id"].append(k["client_id"])
        own = self.admin("POST", "/api/admin/pix-keys", {"account_id": self.account_id, "type": "email", "key": f"fuzz-{run}@example.com"})
        vk = self.admin("POST", "/api/admin/pix-keys", {"account_id": victim["account_id"], "type": "evp"})
        H["pix_key"] += [own["key"], vk["key"]]
        self.admin("POST", f"/api/admin/accounts/{self.account_id}/deposits", {"amount": 10_000_000_000}, {"Idempotency-Key": f"fuzz-deposit-{run}-1"})
        self.admin("POST", f"/api/admin/accounts/{victim['account_id']}/deposits", {"amount": 1_000_000}, {"Idempotency-Key": f"fuzz-deposit-{run}-2"})
        self.central_key = self.admin("POST", "/api/admin/central-keys", {"name": "fuzz", "account_id": self.account_id})["api_key"]
        # External keys in the simulated DICT, one per behaviour.
        for i, behavior in enumerate(["settle", "reject", "hold", "settle"]):
            key = f"dest{i}-{run}@fuzz.example"
            self.admin("POST", "/api/sandbox/dict/keys", {"key": key, "type": "email", "name": f"Dest {i}", "document": "39053344705", "ispb": "12345678", "behavior": behavior})
            H["pix_key"].append(key)
        # Webhooks: the main one and sacrificial ones for DELETE, all to the local receiver.
        hook = self.merchant("POST", "/api/external/webhooks", {"url": self.receiver_url + "/main", "events": ["webhook.test", "pix.payout.confirmed", "pix.charge.paid"], "allow_insecure": True})
        P["webhook_id"].append(hook["id"])
        for i in range(3):
            P["sacrificial_webhook_id"].append(self.merchant("POST", "/api/external/webhooks", {"url": f"{self.receiver_url}/s{i}", "events": ["webhook.test"], "allow_insecure": True})["id"])
        self.admin("POST", f"/api/admin/webhooks/{hook['id']}/test")
        # Charges (one paid by the sandbox), payouts, a refund, an infraction, boletos, a settlement.
        for i in range(3):
            c = self.merchant("POST", "/api/external/pix/cash-in", {"amount": 1000 + i, "description": f"fuzz charge {i}", "external_id": f"fuzz-charge-{run}-{i}", "tag": f"fuzz-tag-{run}-{i}"})
            P["charge_id"].append(c["id"])
            P["transaction_id"].append(c["transaction_id"])
            P["tag"].append(f"fuzz-tag-{run}-{i}")
            P["external_id"].append(f"fuzz-charge-{run}-{i}")
            H["emv"].append(c["emv"])
        paid = self.admin("POST", "/api/sandbox/pix/pay", {"emv": H["emv"][0], "payer_name": "Payer", "payer_document": "39053344705"})
        inbound = self.admin("POST", "/api/sandbox/pix/inbound", {"account_id": self.account_id, "amount": 5000})
        for v in (paid, inbound):
            for k in ("transaction_id", "end_to_end_id"):
                if isinstance(v, dict) and v.get(k):
                    P[k if k != "end_to_end_id" else "e2e_id"].append(v[k])
        for i in range(4):
            o = self.merchant("POST", "/api/external/pix/cash-out", {"amount": 500 + i, "pix_key": f"dest{i}-{run}@fuzz.example", "external_id": f"fuzz-payout-{run}-{i}"})
            P["transaction_id"].append(o["transaction_id"])
            P["payout_id"].append(o["transaction_id"])
            P["external_id"].append(f"fuzz-payout-{run}-{i}")
            if o.get("end_to_end_id"):
                P["e2e_id"].append(o["end_to_end_id"])
        time.sleep(0.5)
        # MED: an infraction on the inbound PIX.
        for e2e in list(P["e2e_id"])[:2]:
            try:
                med = self.admin("POST", "/api/sandbox/infractions", {"end_to_end_id": e2e, "reason": "fuzz"})
                P["med_id"].append(med["id"])
            except RuntimeError:
                pass
        H["end_to_end_id"] += P["e2e_id"]
        H["url"] += [f"{self.receiver_url}/hook{i}" for i in range(5)]
        H["transaction_id"] += P["transaction_id"]
        H["account_id"] += [self.account_id, victim["account_id"]]
        H["merchant_id"] += [self.merchant_id, victim["merchant_id"]]
        for i in range(3):
            nn = str(int(run, 16) * 10 + i)
            b = self.central("POST", "/api/v1/central/boletos", {"boleto": {"nosso_numero": nn, "amount_cents": 10000 + i, "due_date": "2031-12-31", "payer_document": "39053344705", "payer_name": "Pagador", "beneficiary_ispb": "12345678", "beneficiary_name": "Beneficiário"}})
            P["nosso_numero"].append(b["data"]["nosso_numero"])
            H["nosso_numero"].append(nn)
        # A paid boleto, settled: a settlement to read.
        try:
            self.central("POST", f"/api/v1/central/boletos/{P['nosso_numero'][-1]}/pay", {})
            s = self.central("POST", "/api/v1/central/settlements/trigger", {})
            P["settlement_id"] += [x["id"] for x in (s.get("data") or {}).get("settlements", [])]
        except RuntimeError as e:
            print(f"setup: no settlement ({e})", file=sys.stderr)
        # Inbound PIX to refund, and refunds to read.
        for i in range(3):
            v = self.admin("POST", "/api/sandbox/pix/inbound", {"account_id": self.account_id, "amount": 20_000 + i})
            P["inbound_id"].append(v["transaction_id"])
            if v.get("end_to_end_id"):
                P["e2e_id"].append(v["end_to_end_id"])
        H["original_transaction_id"] += P["inbound_id"]
        time.sleep(0.3)
        try:
            r = self.merchant("POST", "/api/external/pix/refund", {"original_transaction_id": P["inbound_id"][0], "amount": 100})
            P["refund_id"] += [r[k] for k in ("id", "refund_id", "transaction_id") if isinstance(r.get(k), str)]
        except RuntimeError as e:
            print(f"setup: no refund ({e})", file=sys.stderr)
        H["end_to_end_id"] = list(dict.fromkeys(H["end_to_end_id"] + P["e2e_id"]))
        # Deliveries of the main webhook.
        time.sleep(1.0)
        d = self.admin("GET", f"/api/admin/webhooks/{hook['id']}/deliveries")
        for x in (d.get("deliveries") or d.get("data") or []) if isinstance(d, dict) else []:
            if isinstance(x, dict) and x.get("id"):
                P["delivery_id"].append(x["id"])

    def pool_for(self, path, method, name):
        P = self.pools
        if name == "client_id":
            return P["sacrificial_client_id"]
        if name == "account_id":
            return P["victim_account_id"] if method == "patch" else P["account_id"] + P["victim_account_id"]
        if name == "id":
            if path.startswith("/api/external/webhooks/"):
                return P["sacrificial_webhook_id"]
            if "/webhooks/" in path:
                return P["webhook_id"]
            if "/cash-in/" in path:
                return P["charge_id"]
            if "/med/" in path or "/infractions/" in path:
                return P["med_id"]
            if "/settlements/" in path:
                return P["settlement_id"]
            if "/refund/" in path:
                return P["refund_id"] + P["transaction_id"]
            return P["transaction_id"]
        if name == "transaction_id":
            return P["payout_id"]
        return P.get(name, [])

    # -- generation ---------------------------------------------------------------------------------
    def operations(self, only):
        for path, item in self.doc["paths"].items():
            for method, op in item.items():
                if method not in ("get", "post", "put", "patch", "delete"):
                    continue
                key = f"{method.upper()} {path}"
                if only and not re.search(only, key):
                    continue
                yield key, path, method, op

    def params_of(self, op, where):
        return [p for p in op.get("parameters", []) if p.get("in") == where]

    def body_schema(self, op):
        rb = op.get("requestBody")
        if not rb:
            return None
        return rb.get("content", {}).get("application/json", {}).get("schema")

    @staticmethod
    def text_of(v):
        if isinstance(v, bool):
            return "true" if v else "false"
        if v is None:
            return ""
        if isinstance(v, (dict, list)):
            return json.dumps(v)
        return str(v)

    def safe_body(self, body):
        """Points every webhook `url` at the local receiver (keeping the generated path)."""
        if isinstance(body, dict) and isinstance(body.get("url"), str):
            u = body["url"]
            try:
                parts = urllib.parse.urlsplit(u)
                ok = parts.hostname in ("127.0.0.1",) and parts.port == self.receiver_port
            except ValueError:
                ok = False
            if not ok and ("://" in u or "." in u):
                body["url"] = self.receiver_url + "/" + urllib.parse.quote(u[-40:], safe="")
        return body

    def draw_request(self, data, path, method, op):
        """A request: (mode, target, headers, body bytes or None, description)."""
        mode = data.draw(st.sampled_from(["valid"] * 11 + ["invalid"] * 9), label="mode")
        kind = "valid"
        values = {}
        for p in self.params_of(op, "path"):
            pool = self.pool_for(path, method, p["name"])
            if pool and data.draw(st.integers(0, 9)) < 9:
                values[p["name"]] = data.draw(st.sampled_from(pool))
            else:
                values[p["name"]] = data.draw(self.conv.strategy(p.get("schema", {})))
        query = []
        for p in self.params_of(op, "query"):
            if p.get("required") or data.draw(st.booleans()):
                query.append((p["name"], self.text_of(data.draw(self.conv.strategy(p.get("schema", {}))))))
        extra_headers = {}
        for p in self.params_of(op, "header"):
            if p["name"].lower() in SIGNATURE_HEADERS and path.startswith("/api/external"):
                continue
            if p.get("required") or data.draw(st.booleans()):
                v = self.text_of(data.draw(self.conv.strategy(p.get("schema", {}))))
                if all(32 <= ord(c) < 127 for c in v):
                    extra_headers[p["name"]] = v
        schema = self.body_schema(op)
        body_value, body_text, content_type = None, None, None
        if schema is not None:
            body_value = data.draw(self.conv.strategy(schema), label="body")
            if isinstance(body_value, dict):
                self.apply_hints(data, body_value)
            body_value = self.safe_body(body_value)
            content_type = "application/json"
        elif method in ("post", "put", "patch") and data.draw(st.booleans()):
            body_value, content_type = {}, "application/json"
        auth = "good"
        if mode == "invalid":
            kind = data.draw(st.sampled_from(["body", "body", "body", "path", "query", "header", "auth"] if schema is not None else ["path", "query", "query", "header", "auth", "body"]))
            if kind == "path" and values:
                name = data.draw(st.sampled_from(sorted(values)))
                values[name] = data.draw(st.one_of(st.sampled_from(WEIRD_STRINGS), st.sampled_from([str(x) for x in BOUNDARY_NUMBERS]), st.text(min_size=1, max_size=40), st.text(min_size=1000, max_size=5000)))
            elif kind == "query":
                ps = self.params_of(op, "query")
                choice = data.draw(st.integers(0, 3))
                if choice == 0 or not ps:
                    query.append((data.draw(st.text(string.ascii_letters + "_[]", min_size=1, max_size=10)), data.draw(st.sampled_from(WEIRD_STRINGS))))
                else:
                    p = data.draw(st.sampled_from(ps))
                    bad = data.draw(st.one_of(st.sampled_from(WEIRD_STRINGS), st.sampled_from([str(x) for x in BOUNDARY_NUMBERS] + NUMBER_SPELLINGS), st.text(max_size=30), st.text(min_size=3000, max_size=9000)))
                    query = [q for q in query if q[0] != p["name"]] + [(p["name"], bad)] * (2 if choice == 3 else 1)
            elif kind == "header":
                hname = data.draw(st.sampled_from(["Content-Type", "Accept", "X-Key-Case", "Idempotency-Key", "Last-Event-ID", "X-Forwarded-For", "Content-Encoding"] + [p["name"] for p in self.params_of(op, "header")]))
                extra_headers[hname] = data.draw(st.sampled_from(["", "x" * 300, "text/plain", "application/json; charset=latin1", "camelCase", "-1", "99999999999999999999", "gzip", "1.2.3.4, 5.6.7.8", "application/x-www-form-urlencoded"]))
            elif kind == "auth":
                auth = data.draw(st.sampled_from(["none", "wrong-secret", "bad-hmac", "no-hmac", "stale-v2", "bad-version", "basic", "garbage"]))
            else:
                body_value, body_text, content_type = self.mutate_body(data, schema, body_value)
                kind = "body"
        if body_value is not None and body_text is None:
            body_text = json.dumps(body_value, ensure_ascii=data.draw(st.booleans()))
        qs = urllib.parse.urlencode(query, quote_via=lambda v, safe, enc, err: urllib.parse.quote(v, safe, "utf-8", "surrogatepass")) if query else ""
        target_path = path
        for name, v in values.items():
            target_path = target_path.replace("{" + name + "}", urllib.parse.quote(self.text_of(v), safe="", errors="surrogatepass") or "%20")
        target = target_path + ("?" + qs if qs else "")
        headers = self.auth_headers(path, target_path, body_text, auth, data)
        if content_type and "Content-Type" not in extra_headers:
            headers["Content-Type"] = content_type
        headers.update(extra_headers)
        body = None if body_text is None else body_text.encode("utf-8", "surrogatepass")
        return mode, kind, target, headers, body

    def apply_hints(self, data, body):
        """Known-good values for fields whose rules a schema cannot state (check digits, existing keys,
        dates), drawn two times in three, so that valid requests reach the business logic."""
        for k in list(body):
            if isinstance(body[k], dict):
                self.apply_hints(data, body[k])
            strategies = ([st.sampled_from(self.hints[k])] if self.hints.get(k) else []) + GENERATED_HINTS.get(k, [])
            if strategies and data.draw(st.integers(0, 2)) > 0:
                body[k] = data.draw(st.one_of(*strategies))
        if "type" in body and "key" in body and data.draw(st.integers(0, 2)) > 0:
            body["type"], body["key"] = "email", f"k-{secrets.token_hex(6)}@fuzz.example"
        if "url" in body:
            body["allow_insecure"] = True

    def mutate_body(self, data, schema, value):
        s = self.conv.resolve(schema) if schema is not None else {}
        props = s.get("properties", {}) if isinstance(s, dict) else {}
        v = dict(value) if isinstance(value, dict) else {}
        how = data.draw(st.sampled_from(["drop-required", "wrong-type", "extra-field", "boundary", "huge-string", "unicode", "not-object", "malformed", "number-spelling", "duplicate-key", "deep", "empty", "form", "any"]))
        ct = "application/json"
        if how == "drop-required" and s.get("required"):
            v.pop(data.draw(st.sampled_from(s["required"])), None)
        elif how == "wrong-type" and props:
            k = data.draw(st.sampled_from(sorted(props)))
            v[k] = data.draw(st.one_of(st.just([]), st.just({}), st.just(None), st.booleans(), st.integers(), st.text(max_size=8), st.floats(allow_nan=False, allow_infinity=False)))
        elif how == "extra-field":
            v[data.draw(st.text(min_size=1, max_size=12))] = data.draw(ANY_JSON)
        elif how == "boundary" and props:
            k = data.draw(st.sampled_from(sorted(props)))
            v[k] = data.draw(st.sampled_from(BOUNDARY_NUMBERS))
        elif how == "huge-string" and props:
            k = data.draw(st.sampled_from(sorted(props)))
            v[k] = data.draw(st.sampled_from(["x" * 5000, "é" * 100_000, "😀" * 20_000, "a" * 1_100_000]))
        elif how == "unicode" and props:
            k = data.draw(st.sampled_from(sorted(props)))
            v[k] = data.draw(st.one_of(st.sampled_from(WEIRD_STRINGS), st.text(min_size=1, max_size=50)))
        elif how == "not-object":
            return None, json.dumps(data.draw(st.one_of(st.just([]), st.just("x"), st.just(1), st.just(None), st.just(True), st.lists(ANY_JSON, max_size=3)))), ct
        elif how == "malformed":
            text = json.dumps(v)
            cut = data.draw(st.integers(0, max(0, len(text) - 1)))
            return None, data.draw(st.sampled_from([text[:cut], text + "}", "{'a': 1}", "{\"a\":}", "\ufeff" + text, text.replace("{", "[", 1), "{\"a\":1,}", "NaN"])), ct
        elif how == "number-spelling" and props:
            k = data.draw(st.sampled_from(sorted(props)))
            text = json.dumps({**{x: y for x, y in v.items() if x != k}, k: "__N__"}).replace('"__N__"', data.draw(st.sampled_from(NUMBER_SPELLINGS)))
            return None, text, ct
        elif how == "duplicate-key" and v:
            k = data.draw(st.sampled_from(sorted(v)))
            text = json.dumps(v)
            return None, text[:-1] + ("," if len(v) else "") + json.dumps(k) + ":" + json.dumps(data.draw(ANY_JSON)) + "}", ct
        elif how == "deep":
            return None, "[" * 5000 + "]" * 5000, ct
        elif how == "empty":
            return None, "", data.draw(st.sampled_from(["application/json", None]))
        elif how == "form":
            return None, urllib.parse.urlencode({k: self.text_of(x) for k, x in v.items()}), "application/x-www-form-urlencoded"
        else:
            v = data.draw(ANY_JSON)
        return self.safe_body(v), None, ct

    def auth_headers(self, path, target_path, body_text, auth, data):
        if path.startswith("/api/admin") or path.startswith("/api/sandbox") or path == "/metrics":
            if auth in ("none",):
                return {}
            if auth != "good":
                return {"Authorization": "Bearer wrong-" + secrets.token_hex(4)}
            return {"Authorization": f"Bearer {self.admin_token}"}
        if path.startswith("/api/v1/central"):
            if auth == "none":
                return {}
            return {"X-API-Key": self.central_key if auth == "good" else "ck_wrong_" + secrets.token_hex(8)}
        if not path.startswith("/api/external"):
            return {}
        key = self.key
        secret = key["client_secret"]
        if auth == "none":
            return {}
        if auth == "garbage":
            return {"Authorization": data.draw(st.sampled_from(["ApiKey", "ApiKey :", "ApiKey a:b", "Bearer x", "Basic !!!", "ApiKey " + key["client_id"]]))}
        if auth == "wrong-secret":
            secret = "wrong-" + secrets.token_hex(8)
        if auth == "basic" or data.draw(st.integers(0, 4)) == 0:
            h = {"Authorization": "Basic " + base64.b64encode(f"{key['client_id']}:{secret}".encode()).decode()}
        else:
            h = {"Authorization": f"ApiKey {key['client_id']}:{secret}"}
        if body_text is None:
            return h
        try:
            signing.canonical_json(body_text)
            signable = True
        except (ValueError, RecursionError):
            signable = False
        if auth == "no-hmac":
            return h
        if auth == "bad-hmac" or not signable:
            h["hmac"] = secrets.token_hex(64)
            return h
        if auth == "bad-version":
            h["X-Signature-Version"] = data.draw(st.sampled_from(["3", "0", "v2", "", "２"]))
            h["hmac"] = signing.sign_v1(secret, body_text)
            return h
        if auth == "stale-v2":
            h.update(signing.v2_headers(secret, signing.normalize_path(target_path), body_text, "fuzz-" + secrets.token_hex(8), timestamp=int(time.time()) - 301))
            return h
        if data.draw(st.booleans()):
            h["hmac"] = signing.sign_v1(secret, body_text)
        else:
            h.update(signing.v2_headers(secret, signing.normalize_path(target_path), body_text, "fuzz-" + secrets.token_hex(8)))
        return h

    # -- running ------------------------------------------------------------------------------------
    def run_operation(self, op_key, path, method, op):
        self.per_op[op_key] = collections.Counter()
        stream = "text/event-stream" in json.dumps(op.get("responses", {}).get("200", {}).get("content", {}))

        @settings(max_examples=self.examples, deadline=None, database=None, phases=[Phase.generate], suppress_health_check=list(HealthCheck), derandomize=False)
        @given(st.data())
        def one(data):
            mode, kind, target, headers, body = self.draw_request(data, path, method, op)
            self.requests += 1
            try:
                res = self.client.request(method.upper(), target, body, headers, stream=stream)
            except RuntimeError as e:
                self.problem(op_key, "no answer (connection failed)", str(e)[:300], {"target": target[:300]})
                return
            req = {"mode": f"{mode}/{kind}", "target": target[:300], "headers": {k: v[:120] for k, v in headers.items()}, "body": (body or b"")[:600].decode("utf-8", "replace")}
            self.check(op_key, path, method, op, req, res)
            if os.environ.get("FUZZ_DEBUG") and mode == "valid":
                print(f"    {res.status} {req['body'][:200]} → {res.body[:200]!r}", flush=True)
            if path == "/api/sandbox/rail/stall" and method == "put":
                self.admin("PUT", "/api/sandbox/rail/stall", {"delay_ms": 0, "drop": False})

        one()


def main():
    faulthandler.register(signal.SIGUSR1)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base-url", required=True)
    ap.add_argument("--admin-token", required=True)
    ap.add_argument("--examples", type=int, default=int(os.environ.get("FUZZ_EXAMPLES", "100")))
    ap.add_argument("--only", default=os.environ.get("FUZZ_ONLY"))
    ap.add_argument("--seed", type=int, default=int(os.environ.get("FUZZ_SEED", "0")) or None)
    ap.add_argument("--signing-doc", default=os.path.join(HERE, "..", "..", "docs", "signing.md"))
    ap.add_argument("--json-out")
    ap.add_argument("--receiver-port", type=int, default=int(os.environ.get("FUZZ_RECEIVER_PORT", "0")), help="the server's WEBHOOK_ALLOWED_HOSTS must list 127.0.0.1:<port>")
    args = ap.parse_args()

    if os.path.exists(args.signing_doc):
        signing.check_worked_example(open(args.signing_doc, encoding="utf-8").read())
    receiver = start_receiver(args.receiver_port)
    started = time.time()
    f = Fuzzer(args.base_url, args.admin_token, f"http://127.0.0.1:{receiver.server_address[1]}", args.examples, args.seed)
    f.receiver_port = receiver.server_address[1]
    f.setup()
    ops = list(f.operations(args.only))
    for i, (key, path, method, op) in enumerate(ops):
        t0 = time.time()
        f.run_operation(key, path, method, op)
        counts = " ".join(f"{s}×{n}" for s, n in sorted(f.per_op[key].items()))
        print(f"[{i + 1:>2}/{len(ops)}] {key:<62} {sum(f.per_op[key].values()):>5} req {time.time() - t0:6.1f}s  {counts}", flush=True)
    elapsed = time.time() - started
    total_ops = sum(1 for _ in f.operations(None))
    print()
    print(f"operations covered: {len(ops)} of {total_ops} (every one answered {sum(1 for k in f.per_op if f.per_op[k])})")
    print(f"requests sent: {f.requests} ({sum(f.status_counts.values())} fuzzed, {f.requests - sum(f.status_counts.values())} setup/reset) in {elapsed:.0f} s; {args.examples} examples per operation")
    print("statuses: " + ", ".join(f"{s}: {n}" for s, n in sorted(f.status_counts.items())))
    print(f"2xx answers: {sum(n for s, n in f.status_counts.items() if 200 <= s < 300)}; operations with a 2xx: {sum(1 for c in f.per_op.values() if any(200 <= s < 300 for s in c))}")
    print(f"webhook deliveries received locally: {_Receiver.count}")
    print(f"problems: {sum(c for c, _ in f.problems.values())} ({len(f.problems)} distinct)")
    for sig, (count, ex) in f.problems.items():
        print(f"  PROBLEM ×{count}: {sig}\n    {json.dumps(ex, ensure_ascii=False)[:1500]}")
    if args.json_out:
        with open(args.json_out, "w") as out:
            json.dump({"operations": len(ops), "requests": f.requests, "statuses": {str(k): v for k, v in sorted(f.status_counts.items())}, "seconds": round(elapsed), "problems": [{"signature": k, "count": c, "example": e} for k, (c, e) in f.problems.items()]}, out, indent=1)
    receiver.shutdown()
    return 1 if f.problems else 0


if __name__ == "__main__":
    sys.exit(main())
