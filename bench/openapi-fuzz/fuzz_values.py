"""Values the fuzzer sends: permissions, hostile strings and numbers, and valid documents for fields a schema cannot describe."""
import datetime

from hypothesis import strategies as st

ALL_PERMISSIONS = ["pix:write", "pix:read", "transfer:write", "transfer:read", "payment:write", "payment:read", "account:write", "account:read", "statement:read"]
SIGNATURE_HEADERS = {"x-signature-version", "x-request-timestamp", "x-request-nonce", "idempotency-key", "hmac"}
WEIRD_STRINGS = [
    "", " ", "\u0000", "\ud800", "\udfff", "\ufeff", "\u202e\u202d", "e\u0301" * 50, "😀" * 40, "\U0010ffff",
    "null", "true", "0", "-1", "1e309", "NaN", "../../etc/passwd", "%00", "%", "%zz", "'; DROP TABLE x;--",
    "<script>", "a" * 300, "\r\n\r\nX-Injected: 1", "ﷺ" * 20, "\u2028\u2029", "１２３", "٣٤٥",
]
BOUNDARY_NUMBERS = [0, -1, 1, -0.0, 0.5, 1.0, 2 ** 31, 2 ** 31 - 1, 2 ** 53, 2 ** 53 + 1, 2 ** 63, -(2 ** 63), 10 ** 30, 1e308, -1e308, 9007199254740993, 100000000001, 99999999999]
NUMBER_SPELLINGS = ["1e2", "1.0", "-0", "1E+2", "0.1e1", "100000000000000000000000000", "1.5e3", "0e0", "-0.0"]


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
    "due_date": [st.dates(min_value=datetime.date(2027, 1, 1), max_value=datetime.date(2035, 12, 31)).map(lambda d: d.isoformat())],
    "amount": [st.integers(1, 100_000)],
    "amount_cents": [st.integers(1, 100_000)],
    "pix_key_type": [st.none()],
}
