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
import collections
import faulthandler
import json
import os
import random
import signal
import sys
import time

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import signing  # noqa: E402
from fuzz_checks import ResponseChecks  # noqa: E402
from fuzz_http import Client, _Receiver, start_receiver  # noqa: E402
from fuzz_requests import RequestGeneration  # noqa: E402
from fuzz_setup import SetupData  # noqa: E402
from fuzz_standard import prepare_standard  # noqa: E402
from schema_strategies import Converter  # noqa: E402


class Fuzzer(ResponseChecks, SetupData, RequestGeneration):
    """The run's state; checking (fuzz_checks.py), setup data (fuzz_setup.py) and drawing requests (fuzz_requests.py) are its mixins."""

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
                res = self.client.request(method.upper(), getattr(self, "prefix", "") + target, body, headers, stream=stream)
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
    ap.add_argument("--standard", help="drive the run with this JSON document (the API Pix standard, fuzz_standard.py) instead of /openapi.json")
    ap.add_argument("--standard-prefix", default="/api/pix/v2")
    ap.add_argument("--tolerate", default="", help="with --standard: method:status pairs allowed though undeclared (get:400,*:401)")
    ap.add_argument("--receiver-port", type=int, default=int(os.environ.get("FUZZ_RECEIVER_PORT", "0")), help="the server's WEBHOOK_ALLOWED_HOSTS must list 127.0.0.1:<port>")
    args = ap.parse_args()

    if os.path.exists(args.signing_doc):
        signing.check_worked_example(open(args.signing_doc, encoding="utf-8").read())
    receiver = start_receiver(args.receiver_port)
    started = time.time()
    f = Fuzzer(args.base_url, args.admin_token, f"http://127.0.0.1:{receiver.server_address[1]}", args.examples, args.seed)
    f.receiver_port = receiver.server_address[1]
    f.setup()
    if args.standard:
        prepare_standard(f, args.standard, args.standard_prefix, args.tolerate)
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
