"""The standard-driven mode of the fuzzer: the central bank's API Pix document (v2.9.0) drives the
requests and judges the answers of pixgate's façade (docs/api-pix.md).

`--standard FILE` names the document as JSON (the caller prepares it: test/openapi-fuzz.test.ts
writes the operations pixgate serves, with the standard's JavaScript-literal patterns read as
regular expressions). Every path is sent under `--standard-prefix` (default /api/pix/v2) with a
bearer token granted to the fuzzed merchant's API key by POST /api/pix/oauth/token. `--tolerate`
lists `method:status` pairs the standard's text names but its responses omit (`get:400`, `*:401`):
such an answer must still be an RFC 7807 problem. A 431 (a request head over 16 KiB, refused by
Node's HTTP parser before any route) is the transport's answer, outside every API, and is allowed.
"""
import base64
import collections
import json

from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from schema_strategies import Converter


def _deref(doc, node):
    for _ in range(10):
        if not isinstance(node, dict) or "$ref" not in node:
            return node
        target = doc
        for part in node["$ref"][2:].split("/"):
            target = target[part.replace("~1", "/").replace("~0", "~")]
        node = target
    return node


def _inline_parameters(doc):
    """Each operation's parameters as the fuzzer reads them: the path item's added, `$ref`s followed."""
    for item in doc.get("paths", {}).values():
        shared = [_deref(doc, p) for p in item.get("parameters", [])]
        for method, op in item.items():
            if method in ("get", "post", "put", "patch", "delete"):
                own = [_deref(doc, p) for p in op.get("parameters", [])]
                names = {(p["name"], p["in"]) for p in own}
                op["parameters"] = own + [p for p in shared if (p["name"], p["in"]) not in names]


def prepare_standard(f, doc_path, prefix, tolerate):
    """Switches the Fuzzer `f` (after its setup) to the standard's document and the façade."""
    with open(doc_path, encoding="utf-8") as fh:
        doc = json.load(fh)
    _inline_parameters(doc)
    own_key = f.hints["pix_key"][0]
    f.doc = doc
    f.conv = Converter(doc)
    f.registry = Registry().with_resource("urn:pixgate:openapi", Resource.from_contents(doc, default_specification=DRAFT202012))
    f.validators = {}
    f.prefix = prefix
    f.tolerated = set(t.strip().lower() for t in tolerate.split(",") if t.strip())
    basic = base64.b64encode(f"{f.key['client_id']}:{f.key['client_secret']}".encode()).decode()
    r = f.client.request("POST", "/api/pix/oauth/token", b"grant_type=client_credentials", {"Authorization": f"Basic {basic}", "Content-Type": "application/x-www-form-urlencoded"})
    if r.status != 200:
        raise RuntimeError(f"token: {r.status} {r.body[:300]!r}")
    f.bearer = r.json()["access_token"]
    f.hints = collections.defaultdict(list)
    f.hints["chave"] = [own_key]
    # A charge and a location to read, revise and unlink.
    headers = {"Authorization": f"Bearer {f.bearer}", "Content-Type": "application/json"}
    for i in range(2):
        body = json.dumps({"calendario": {"expiracao": 3600}, "valor": {"original": f"1{i}.00"}, "chave": own_key}).encode()
        c = f.client.request("POST", prefix + "/cob", body, headers)
        if c.status != 201:
            raise RuntimeError(f"setup cob: {c.status} {c.body[:300]!r}")
        cob = c.json()
        f.pools["txid"].append(cob["txid"])
        f.pools["loc_id"].append(str(cob["loc"]["id"]))
    loc = f.client.request("POST", prefix + "/loc", json.dumps({"tipoCob": "cob"}).encode(), headers)
    f.pools["loc_id"].append(str(loc.json()["id"]))


def tolerated(f, method, status):
    t = getattr(f, "tolerated", set())
    return f"{method}:{status}" in t or f"*:{status}" in t


def transport(f, status):
    """431: Node's HTTP parser refused the request head (over 16 KiB) before any route: pixgate's transport body, not the API's."""
    return getattr(f, "bearer", None) is not None and status == 431
