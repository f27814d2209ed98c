import { CircuitOpenError } from './errors.js';

export interface BreakerOptions {
  /** Consecutive timeouts or 5xx that open the circuit (default 3). */
  failureThreshold?: number;
  /** How long it stays open before one probe is let through (default 30 s). */
  openMs?: number;
}

/**
 * The client circuit breaker: after `failureThreshold` consecutive timeouts or 5xx answers (or
 * connection failures) calls fail at once with CircuitOpenError for `openMs`; then exactly one call
 * goes through as a probe: success closes the circuit, failure opens it again.
 */
export class CircuitBreaker {
  private failures = 0;
  private openUntil = 0;
  private probing = false;
  readonly threshold: number;
  readonly openMs: number;

  constructor(
    options: BreakerOptions = {},
    private readonly now: () => number = Date.now,
  ) {
    this.threshold = options.failureThreshold ?? 3;
    this.openMs = options.openMs ?? 30_000;
  }

  get state(): 'closed' | 'open' | 'half-open' {
    if (this.failures < this.threshold) return 'closed';
    return this.now() < this.openUntil ? 'open' : 'half-open';
  }

  /** Call before a request; throws while open (and while a probe is in flight). Returns a ticket. */
  enter(): { probe: boolean } {
    const state = this.state;
    if (state === 'closed') return { probe: false };
    if (state === 'open' || this.probing) throw new CircuitOpenError(new Date(Math.max(this.openUntil, this.now())));
    this.probing = true;
    return { probe: true };
  }

  success(ticket: { probe: boolean }): void {
    if (ticket.probe) this.probing = false;
    this.failures = 0;
  }

  failure(ticket: { probe: boolean }): void {
    if (ticket.probe) this.probing = false;
    this.failures++;
    if (this.failures >= this.threshold) this.openUntil = this.now() + this.openMs;
  }

  /** The request ended without telling anything about the server (4xx, aborted by the caller). */
  neutral(ticket: { probe: boolean }): void {
    if (ticket.probe) {
      this.probing = false;
      this.failures = 0;
    }
  }
}
