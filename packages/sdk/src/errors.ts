/**
 * Typed errors of the pixgate SDK. Every answer that is not 2xx becomes one of these, after the
 * body's shape (pixgate answers errors in four shapes, one per layer):
 *
 *   PipelineError    {error: {status, message}}      content type, API key, IP whitelist, rate limit, idempotency
 *   PermissionError  {error: 'forbidden', message}   the key lacks the route's permission
 *   SignatureError   {worked: false, detail}         HMAC signature refused (status 400/401/403/409/503)
 *   BusinessError    {errors: {<code>: detail}}      the operation's own refusals (insufficient_balance, …)
 *
 * Each carries `status`, `code`, `message`, `requestId` (the X-Request-Id to quote to support) and
 * the parsed `body`. Failures without an answer are NetworkError, TimeoutError or CircuitOpenError.
 */
export class PixgateError extends Error {
  override name = 'PixgateError';
  constructor(
    message: string,
    readonly status: number | null,
    readonly code: string,
    readonly requestId: string | null = null,
    readonly body: unknown = null,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

export class PipelineError extends PixgateError {
  override name = 'PipelineError';
}

/** 429: the rate limit (Retry-After in seconds). */
export class RateLimitError extends PipelineError {
  override name = 'RateLimitError';
  get retryAfterSeconds(): number | null {
    const v = Number(this.headers['retry-after']);
    return Number.isFinite(v) ? v : null;
  }
}

export class PermissionError extends PixgateError {
  override name = 'PermissionError';
  /** The permission the key lacks (from the message). */
  get permission(): string | null {
    return /permission: (\S+)/.exec(this.message)?.[1] ?? null;
  }
}

export class SignatureError extends PixgateError {
  override name = 'SignatureError';
  /** Outside production pixgate answers the SHA-256 of the canonical string it verified. */
  get serverCanonicalSha256(): string | null {
    return this.headers['x-signature-canonical-sha256'] ?? null;
  }
}

/** A business refusal; `code` is the error atom (`insufficient_balance`, `daily_limit_exceeded`, `bad_request`, …). */
export class BusinessError extends PixgateError {
  override name = 'BusinessError';
  /** The detail: a message, or for `bad_request` a map of field → messages. */
  get detail(): unknown {
    const errors = (this.body as { errors?: Record<string, unknown> } | null)?.errors;
    return errors ? errors[this.code] : null;
  }
}

/** The cash-out refusals (codes of POST /pix/cash-out). */
export const CASH_OUT_CODES = [
  'invalid_amount',
  'unprocessable_entity',
  'pix_key_ambiguous',
  'destination_not_found',
  'self_transfer',
  'same_institution_transfer',
  'amount_limit_exceeded',
  'nighttime_limit_exceeded',
  'daily_limit_exceeded',
  'insufficient_balance',
  'provider_timeout',
  'external_id_conflict',
] as const;
export type CashOutCode = (typeof CASH_OUT_CODES)[number];

export class NetworkError extends PixgateError {
  override name = 'NetworkError';
  constructor(message: string, override readonly cause?: unknown) {
    super(message, null, 'network_error');
  }
}

export class TimeoutError extends PixgateError {
  override name = 'TimeoutError';
  constructor(ms: number) {
    super(`no answer within ${ms} ms`, null, 'timeout');
  }
}

/** The client's circuit breaker is open: calls fail at once until `retryAt`. */
export class CircuitOpenError extends PixgateError {
  override name = 'CircuitOpenError';
  constructor(readonly retryAt: Date) {
    super(`circuit open after repeated timeouts or server errors; next probe at ${retryAt.toISOString()}`, null, 'circuit_open');
  }
}

/** The SDK's error for an HTTP answer (status and parsed body). */
export function errorFromResponse(status: number, body: unknown, headers: Record<string, string>): PixgateError {
  const requestId = headers['x-request-id'] ?? null;
  const b = (body ?? {}) as Record<string, unknown>;
  if (b.error === 'forbidden' && typeof b.message === 'string') return new PermissionError(b.message, status, 'forbidden', requestId, body, headers);
  if (b.error && typeof b.error === 'object') {
    const message = String((b.error as { message?: unknown }).message ?? `HTTP ${status}`);
    const Ctor = status === 429 ? RateLimitError : PipelineError;
    return new Ctor(message, status, pipelineCode(status, message), requestId, body, headers);
  }
  if (b.errors && typeof b.errors === 'object') {
    const [code, detail] = Object.entries(b.errors as Record<string, unknown>)[0] ?? ['error', null];
    const message = typeof detail === 'string' ? detail : Array.isArray(detail) ? detail.join('; ') : JSON.stringify(detail);
    return new BusinessError(message, status, typeof b.code === 'string' ? b.code : code, requestId, body, headers);
  }
  if (b.worked === false && typeof b.detail === 'string') {
    // Shape 3 is the signature layer's, and also the webhook registration's 422 (URL refused).
    if (status === 422) return new BusinessError(b.detail, status, 'unprocessable_entity', requestId, body, headers);
    return new SignatureError(b.detail, status, signatureCode(status, b.detail), requestId, body, headers);
  }
  return new PixgateError(`HTTP ${status}`, status, status >= 500 ? 'server_error' : 'http_error', requestId, body, headers);
}

function pipelineCode(status: number, message: string): string {
  if (status === 415) return 'unsupported_media_type';
  if (status === 401) return 'unauthorized';
  if (status === 429) return 'rate_limited';
  if (status === 403) return /whitelist/i.test(message) ? 'ip_not_allowed' : 'account_inactive';
  if (/Idempotency-Key/.test(message)) return /still being processed/.test(message) ? 'idempotency_in_progress' : 'idempotency_conflict';
  return `http_${status}`;
}

function signatureCode(status: number, detail: string): string {
  if (/Invalid HMAC/.test(detail)) return 'invalid_signature';
  if (/Missing HMAC/.test(detail)) return 'missing_signature';
  if (/timestamp/i.test(detail)) return 'timestamp_out_of_tolerance';
  if (/Nonce was already used/.test(detail)) return 'nonce_reused';
  if (/Replay protection/.test(detail)) return 'replay_protection_unavailable';
  if (/not configured/.test(detail)) return 'hmac_not_configured';
  return status === 400 ? 'signature_bad_request' : 'signature_refused';
}
