import { CircuitOpenError } from './errors.js';

export interface BreakerOptions {
  /** Consecutive timeouts or 5xx that open the circuit (default 3). */
  failureThreshold?: number;
  /** How long it stays open before one probe is let through (default 30 s). */
  openMs?: number;
}

/**
 * The client circuit breaker (the spec's "after 3 consecutive timeouts or 5xx stop 30 seconds, then
 * one probe"). Each call ends as exactly one of:
 *
 *   failure    no answer (timeout, connection refused or reset) or a 5xx answer
 *   answered   any answer below 500 (2xx, 3xx, 4xx including 429): the server is up, so the run of
 *              consecutive failures is broken and counting starts again at 0
 *   cancelled  the caller aborted it (its own AbortSignal): says nothing about the server
 *
 * After `failureThreshold` consecutive failures calls fail at once with CircuitOpenError for
 * `openMs`; then exactly one call goes through as a probe (others still fail fast): answered
 * closes the circuit, failure opens it for another `openMs`, cancelled leaves it half-open (the
 * next call is the probe).
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

  /** The server answered with a status below 500: the run of failures is over (a probe closes it). */
  answered(ticket: { probe: boolean }): void {
    if (ticket.probe) this.probing = false;
    this.failures = 0;
  }

  /** No answer, or a 5xx. */
  failure(ticket: { probe: boolean }): void {
    if (ticket.probe) this.probing = false;
    this.failures++;
    if (this.failures >= this.threshold) this.openUntil = this.now() + this.openMs;
  }

  /** The caller aborted the call: neither success nor failure; a probe's turn passes to the next call. */
  cancelled(ticket: { probe: boolean }): void {
    if (ticket.probe) this.probing = false;
  }
}
