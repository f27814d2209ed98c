"""Drawing requests from the document: valid ones from the request schemas, invalid ones by breaking a part (path, query, header, auth, body)."""
import base64
import json
import re
import secrets
import string
import time
import urllib.parse

from hypothesis import strategies as st

import signing
from fuzz_values import BOUNDARY_NUMBERS, GENERATED_HINTS, NUMBER_SPELLINGS, SIGNATURE_HEADERS, WEIRD_STRINGS
from schema_strategies import ANY_JSON


class RequestGeneration:
    """Mixin of the Fuzzer: needs self.doc, self.conv, self.hints, self.key, self.central_key, self.admin_token, self.receiver_url/port and pool_for."""

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
        if getattr(self, "bearer", None) and not path.startswith("/api/"):
            if auth == "none":
                return {}
            if auth != "good":
                return {"Authorization": data.draw(st.sampled_from(["Bearer pxa_wrong" + secrets.token_hex(8), "Bearer", "Basic !!!", "bearer " + self.bearer + "x"]))}
            return {"Authorization": f"Bearer {self.bearer}"}
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
