import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Authenticated } from '../../auth/credentials.js';
import type { combinedNonceAndRate, NonceStore } from '../../auth/nonceStore.js';
import type { Permission } from '../../auth/permissions.js';
import type { AppContext } from '../../context.js';
import type { FixedWindowCounter, WindowHit } from '../../ratelimit/fixedWindow.js';
import type { IdempotencyClaim, IdempotencyStore } from '../idempotency.js';

/** What a stage of the external API's request pipeline is (src/external/pipeline.ts lists them in order). */

/** What the pipeline learned about a request, for the stages after it and the handler. */
export interface ExternalState {
  camelCase: boolean;
  clientIp: string;
  auth?: Authenticated;
  canonicalBody?: string;
  rateLimit?: WindowHit;
  /** Stage 6's hit, when stage 5 counted the request with its nonce claim (one Redis round trip). */
  rateLimitCounted?: WindowHit;
  idempotencyKey?: string;
  claim?: IdempotencyClaim;
}

declare module 'fastify' {
  interface FastifyRequest {
    ext: ExternalState;
  }
  interface FastifyContextConfig {
    permission?: Permission | null;
    rateLimit?: boolean;
  }
}

export interface PipelineDeps {
  ctx: AppContext;
  nonces: NonceStore;
  rateLimiter: FixedWindowCounter;
  idempotency: IdempotencyStore;
  /** Set when nonces and rate-limit counters are one Redis (combinedNonceAndRate). */
  nonceAndRate?: ReturnType<typeof combinedNonceAndRate>;
}

/** Stages 1-4 need no body and run as soon as the request arrives; 5-8 once the body is received. */
export type Phase = 'onRequest' | 'preHandler';

export interface Stage {
  n: number;
  name: string;
  phase: Phase;
  applies(req: FastifyRequest): boolean;
  /**
   * Throws an HttpError to answer, returns 'answered' when it sent a reply itself. Stages with
   * nothing to wait for are plain functions: the pipeline awaits only what is a promise.
   */
  run(req: FastifyRequest, reply: FastifyReply, deps: PipelineDeps): void | 'answered' | Promise<void | 'answered'>;
}
