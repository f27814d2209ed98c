#!/usr/bin/env python3
"""Verifies a pixgate webhook delivery by the Standard Webhooks specification, with the Python
standard library only (no package to install; written from the specification, not from pixgate).

    echo '{"secret": "whsec_...", "body": "<raw body>", "headers": {...}}' | python3 scripts/verify-standard-webhooks.py

The headers: `webhook-id`, `webhook-timestamp` (Unix seconds) and `webhook-signature`, a
space-separated list of `v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<raw body>">` (other versions
are ignored). A secret `whsec_<standard base64 of at least 16 bytes>` (what pixgate generates) is
keyed with the decoded bytes; any other secret (one the merchant chose) with its UTF-8 bytes.
The timestamp must be within 5 minutes of now (either way); signatures are compared in constant time.
Optional input fields: `now` (Unix seconds, for tests), `tolerance` (seconds, default 300).
Prints the verified payload as JSON; exits 1 (and says why on stderr) when verification fails.
"""
import base64
import binascii
import hashlib
import hmac
import json
import re
import sys
import time

TOLERANCE_SECONDS = 5 * 60
_B64 = re.compile(r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?")


class VerificationError(Exception):
    pass


def secret_key(secret: str) -> bytes:
    if secret.startswith("whsec_") and _B64.fullmatch(secret[6:]):
        try:
            key = base64.b64decode(secret[6:], validate=True)
            # Canonical only (re-encoding gives the same text), as pixgate derives the key.
            if len(key) >= 16 and base64.b64encode(key).decode("ascii") == secret[6:]:
                return key
        except binascii.Error:
            pass
    return secret.encode("utf-8")


def verify(secret: str, body: bytes, headers: dict, now: float = None, tolerance: int = TOLERANCE_SECONDS) -> dict:
    h = {k.lower(): v for k, v in headers.items()}
    msg_id, ts, sigs = h.get("webhook-id"), h.get("webhook-timestamp"), h.get("webhook-signature")
    if not msg_id or not ts or not sigs:
        raise VerificationError("missing webhook-id, webhook-timestamp or webhook-signature")
    if not re.fullmatch(r"\d{1,15}", ts):
        raise VerificationError("webhook-timestamp is not Unix seconds")
    now = time.time() if now is None else now
    if abs(now - int(ts)) > tolerance:
        raise VerificationError("webhook-timestamp is outside the tolerance")
    signed = msg_id.encode() + b"." + ts.encode() + b"." + body
    expected = base64.b64encode(hmac.new(secret_key(secret), signed, hashlib.sha256).digest())
    for entry in sigs.split(" "):
        version, _, sig = entry.partition(",")
        if version == "v1" and hmac.compare_digest(sig.encode(), expected):
            return json.loads(body)
    raise VerificationError("no matching v1 signature")


def main() -> int:
    data = json.load(sys.stdin)
    try:
        payload = verify(data["secret"], data["body"].encode("utf-8"), data["headers"], data.get("now"), data.get("tolerance", TOLERANCE_SECONDS))
    except VerificationError as e:
        print(f"verification failed: {e}", file=sys.stderr)
        return 1
    print(json.dumps(payload))
    return 0


if __name__ == "__main__":
    sys.exit(main())
