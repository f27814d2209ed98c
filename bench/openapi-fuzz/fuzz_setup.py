"""Setup data of a fuzz run, made through the operator, sandbox, external and central APIs: the values path parameters are drawn from."""
import json
import secrets
import sys
import time

import signing
from fuzz_values import ALL_PERMISSIONS


class SetupData:
    """Mixin of the Fuzzer: needs self.client, self.admin_token, self.receiver_url, self.pools, self.hints, self.requests."""

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
        """Makes the data path parameters and body fields are drawn from, phase by phase (each phase a method below)."""
        run = secrets.token_hex(3)  # setup names unique per run (a server may be fuzzed twice)
        victim = self._setup_accounts(run)
        hook = self._setup_webhooks()
        self._setup_payments(run)
        self._setup_med_and_boletos(run, victim)
        self._setup_refunds()
        self._setup_deliveries(hook)

    def _setup_accounts(self, run):
        """The fuzzed merchant and a victim merchant: accounts, API keys, PIX keys, deposits, a central key, external DICT keys."""
        P, H = self.pools, self.hints
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
        return victim

    def _setup_webhooks(self):
        """Webhooks: the main one and sacrificial ones for DELETE, all to the local receiver."""
        P = self.pools
        hook = self.merchant("POST", "/api/external/webhooks", {"url": self.receiver_url + "/main", "events": ["webhook.test", "pix.payout.confirmed", "pix.charge.paid"], "allow_insecure": True})
        P["webhook_id"].append(hook["id"])
        for i in range(3):
            P["sacrificial_webhook_id"].append(self.merchant("POST", "/api/external/webhooks", {"url": f"{self.receiver_url}/s{i}", "events": ["webhook.test"], "allow_insecure": True})["id"])
        self.admin("POST", f"/api/admin/webhooks/{hook['id']}/test")
        return hook

    def _setup_payments(self, run):
        """Charges (one paid by the sandbox), an inbound PIX and payouts."""
        P, H = self.pools, self.hints
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

    def _setup_med_and_boletos(self, run, victim):
        """A MED infraction, hints of ids and URLs, boletos and a settlement."""
        P, H = self.pools, self.hints
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

    def _setup_refunds(self):
        """Inbound PIX to refund, and a refund to read."""
        P, H = self.pools, self.hints
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

    def _setup_deliveries(self, hook):
        """Deliveries of the main webhook (after a second for the fan-out)."""
        P = self.pools
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
            if path.startswith("/loc/"):
                return P["loc_id"]
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
