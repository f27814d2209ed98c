"""Request signing for pixgate's merchant API, written from docs/signing.md (not from the server's code).

canonical_json(text): the canonical body of the exact JSON text sent — keys sorted by code point at
every depth, compact, strings as raw UTF-8 with JSON's minimal escapes, numbers kept as written, a
repeated key keeps its last value.
"""
import hashlib
import hmac as _hmac
import json
import secrets
import time


class _Number(str):
    """A JSON number, kept as the text it was written with."""


def canonical_json(text):
    return _write(json.loads(text, parse_int=_Number, parse_float=_Number))


def _write(v):
    if isinstance(v, _Number):
        return str(v)
    if isinstance(v, dict):
        return "{" + ",".join(_string(k) + ":" + _write(v[k]) for k in sorted(v)) + "}"
    if isinstance(v, list):
        return "[" + ",".join(_write(x) for x in v) + "]"
    if isinstance(v, str):
        return _string(v)
    return json.dumps(v)  # true, false, null


def _string(s):
    # JSON's required escapes only; everything else raw UTF-8. A lone surrogate is written \udxxx.
    out = json.dumps(s, ensure_ascii=False)
    return "".join("\\u%04x" % ord(c) if 0xD800 <= ord(c) <= 0xDFFF else c for c in out)


def _mac(secret, message):
    return _hmac.new(secret.encode("utf-8"), message.encode("utf-8", "surrogatepass"), hashlib.sha512).hexdigest()


def sign_v1(secret, text):
    """The v1 `hmac` header: hex HMAC-SHA512 of the canonical body."""
    return _mac(secret, canonical_json(text))


def v2_headers(secret, path, text, idempotency_key, timestamp=None, nonce=None):
    """Headers of a v2 signature: the seven fields joined by LF, HMAC-SHA512, hex."""
    ts = str(int(time.time()) if timestamp is None else timestamp)
    nonce = nonce or secrets.token_hex(16)
    msg = "\n".join(["v2", ts, nonce, "POST", path, idempotency_key, canonical_json(text)])
    return {
        "X-Signature-Version": "2",
        "X-Request-Timestamp": ts,
        "X-Request-Nonce": nonce,
        "Idempotency-Key": idempotency_key,
        "hmac": _mac(secret, msg),
    }


_UNRESERVED = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


def normalize_path(path):
    """The signed form of a path (RFC 3986 6.2.2): no query; %XX of an unreserved character decoded,
    every other escape kept with upper-case hex."""
    path = path.split("?", 1)[0]
    out, i = [], 0
    while i < len(path):
        c = path[i]
        if c == "%" and i + 2 < len(path) + 0 and all(x in "0123456789abcdefABCDEF" for x in path[i + 1:i + 3]) and len(path[i + 1:i + 3]) == 2:
            ch = chr(int(path[i + 1:i + 3], 16))
            out.append(ch if ch in _UNRESERVED else "%" + path[i + 1:i + 3].upper())
            i += 3
        else:
            out.append(c)
            i += 1
    return "".join(out)


def check_worked_example(signing_md):
    """Signs the worked example of docs/signing.md and compares with the values it states."""
    import re
    blocks = dict(re.findall(r"<!-- example:([a-z0-9-]+) -->\n```text\n(.*?)\n```", signing_md, re.S))
    secret, body = blocks["secret"], blocks["body"]
    assert canonical_json(body) == blocks["canonical"], "canonical body differs from docs/signing.md"
    assert sign_v1(secret, body) == blocks["v1"], "v1 signature differs from docs/signing.md"
    h = v2_headers(secret, "/api/external/pix/cash-out", body, "order-42-payout", 1795000000, "4f1c2a9e8b7d6c5e4f3a2b1c")
    assert h["hmac"] == blocks["v2"], "v2 signature differs from docs/signing.md"
