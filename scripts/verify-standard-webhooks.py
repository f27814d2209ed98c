#!/usr/bin/env python3
"""Verifies one pixgate delivery with the published Python Standard Webhooks verifier.

    pip install standardwebhooks
    echo '{"secret": "...", "body": "<raw body>", "headers": {...}}' | python3 scripts/verify-standard-webhooks.py

A secret of the form whsec_<standard base64> (what pixgate generates) is passed as given; any other
secret (one the merchant chose) is keyed with its UTF-8 bytes, which the library takes as bytes.
Prints the verified payload as JSON; exits 1 when verification fails.
"""
import base64
import binascii
import json
import re
import sys

from standardwebhooks import Webhook


def verifier(secret: str) -> Webhook:
    rest = secret[len("whsec_"):] if secret.startswith("whsec_") else None
    if rest is not None and re.fullmatch(r"(?:[A-Za-z0-9+/]{4})+(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?", rest):
        try:
            if len(base64.b64decode(rest, validate=True)) >= 16:
                return Webhook(secret)
        except binascii.Error:
            pass
    return Webhook(secret.encode("utf-8"))


def main() -> int:
    data = json.load(sys.stdin)
    try:
        payload = verifier(data["secret"]).verify(data["body"], data["headers"])
    except Exception as e:  # the library raises WebhookVerificationError
        print(f"verification failed: {e!r}", file=sys.stderr)
        return 1
    print(json.dumps(payload))
    return 0


if __name__ == "__main__":
    sys.exit(main())
