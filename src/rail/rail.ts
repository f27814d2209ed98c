import type { BackgroundWorker } from '../lib/worker.js';
import type { BatchOutcome } from '../lib/batcher.js';

/**
 * The boundary between pixgate and the central bank's instant-payment rail (SPI for settlement,
 * DICT for the key directory). Service code talks only to this interface; `SimulatedRail`
 * implements it for the sandbox, and a real rail adapter would implement it too.
 *
 * Calls go one way (sendPayment, sendReturn, directory look-ups) and answer with the rail's
 * acknowledgement only. Outcomes — and what other participants start: incoming PIX, MED
 * infractions and their decisions — come back the other way, asynchronously, as notifications: the
 * service registers one handler (`onNotification`); the rail delivers each notification at least
 * once (so the handler must be idempotent) and, for one subject, in the order they happened.
 */
export interface DirectoryEntry {
  key: string;
  type: PixKeyType;
  /** Holder's name and document (CPF/CNPJ digits). */
  name: string;
  document: string;
  /** ISPB of the institution that holds the key. */
  ispb: string;
  bankName: string | null;
  /** Set when the key belongs to one of this institution's accounts. */
  accountId: number | null;
  /** The directory's anti-fraud marker: protection applies to payments to this key. */
  fraudFlagged: boolean;
}

/** PIX key types of the directory (DICT); src/pix/keys.ts validates and normalizes keys of each. */
export const PIX_KEY_TYPES = ['cpf', 'cnpj', 'email', 'phone', 'evp'] as const;
export type PixKeyType = (typeof PIX_KEY_TYPES)[number];

export interface KeyRegistration {
  key: string;
  type: PixKeyType;
  name: string;
  document: string;
  accountId: number;
}

export class KeyAlreadyRegisteredError extends Error {
  override name = 'KeyAlreadyRegisteredError';
}

export interface KeyDirectory {
  /** Registers a key of one of this institution's accounts. Throws KeyAlreadyRegisteredError. */
  registerKey(registration: KeyRegistration): Promise<void>;
  /** Removes a key of this institution (compensation when local bookkeeping fails). */
  removeKey(key: string): Promise<void>;
  lookupKey(key: string): Promise<DirectoryEntry | null>;
}

/** This institution's side of a payment: the merchant's account. */
export interface Party {
  name: string;
  document: string;
  ispb: string;
  accountId: number;
}

/** A PIX payment this institution sends (cash-out). Amounts in base units. */
export interface PaymentOrder {
  /** The order's identity at the rail: sending the same end-to-end id again is the same order. */
  endToEndId: string;
  transactionId: string;
  amount: number;
  payer: Party;
  receiverKey: string;
  description: string | null;
  /** The receiver's charge id, when the order pays a BR Code that carries one. */
  txid: string | null;
}

/**
 * The rail's answer to a payment order:
 *   accepted  taken for settlement; the outcome arrives as a notification
 *   queued    held by a protection rule; the rail reprocesses it by itself (payment.accepted later)
 *   timeout   the rail did not take the order; nothing happened and it may be sent again
 */
export type PaymentAck = { status: 'accepted' } | { status: 'queued' } | { status: 'timeout' };

/** A return (devolução) of a payment this institution received: a refund. Amounts in base units. */
export interface ReturnOrder {
  /** The return's own end-to-end id (`D…`); sending it again is the same return. */
  endToEndId: string;
  transactionId: string;
  originalEndToEndId: string;
  amount: number;
  /** Return reason code (MD06, BE08, …), forwarded as sent. */
  returnCode: string;
  description: string;
}

/** accepted: the outcome arrives as a notification; settled: the rail settled it before answering. */
export type ReturnAck = { status: 'accepted' } | { status: 'settled'; settledAt: Date };

/** Notifications from the rail. `id` is unique per notification and the same on every redelivery. */
export type RailNotification = { id: string; at: Date } & (
  /** A payment queued by protection left the queue and is being settled. */
  | { kind: 'payment.accepted'; endToEndId: string }
  /** The receiving side holds the payment: no outcome yet. */
  | { kind: 'payment.held'; endToEndId: string }
  | { kind: 'payment.settled'; endToEndId: string; settledAt: Date }
  | { kind: 'payment.rejected'; endToEndId: string; reasonCode: string; reason: string }
  /** The receiver returned (part of) a settled payment: money comes back. */
  | {
      kind: 'payment.returned';
      endToEndId: string;
      returnEndToEndId: string;
      amount: number;
      returnCode: string;
      reason: string;
      returnedAt: Date;
    }
  /** The receiver's attempt to return a payment was refused by the rail: no money comes back. */
  | { kind: 'payment.return_rejected'; endToEndId: string; attemptId: string; amount: number; reasonCode: string; reason: string }
  | { kind: 'return.settled'; endToEndId: string; settledAt: Date }
  | { kind: 'return.rejected'; endToEndId: string; reasonCode: string; reason: string }
  /** A PIX sent to one of this institution's accounts, already settled at the rail. */
  | {
      kind: 'inbound.payment';
      endToEndId: string;
      amount: number;
      receiverAccountId: number;
      payer: { name: string; document: string; ispb: string };
      description: string | null;
      txid: string | null;
      receivedAt: Date;
    }
  /**
   * MED: the payer's side reported an infraction against a PIX this institution received
   * (`endToEndId`), claiming `amount` back; this institution places a precautionary block.
   */
  | { kind: 'infraction.reported'; infractionId: string; endToEndId: string; amount: number; reason: string; reportedAt: Date }
  /**
   * MED: the final decision on an infraction. `accepted`: this institution returns the blocked funds
   * to the payer (a return, `sendReturn`); `rejected`: the block is released; `cancelled`: the
   * reporting side withdrew it, the block is released.
   */
  | { kind: 'infraction.resolved'; infractionId: string; endToEndId: string; decision: InfractionDecision; resolvedAt: Date }
);

export const INFRACTION_DECISIONS = ['accepted', 'rejected', 'cancelled'] as const;
export type InfractionDecision = (typeof INFRACTION_DECISIONS)[number];

export type RailNotificationKind = RailNotification['kind'];

/** Why the receiving institution refused money the rail brought: an ISO reason code and its text. */
export interface Refusal {
  code: string;
  reason: string;
}

/**
 * The service's answer to a notification it handled: nothing (applied), or — for one that brings
 * money in (`inbound.payment`, `payment.returned`) — refused: this institution, as the receiving
 * side, did not take the money and recorded why. The rail then treats the payment or return as
 * rejected by the receiver (the payer keeps the money) and does not deliver it again. A redelivery
 * of a refused notification is answered with the same refusal.
 */
export type NotificationAnswer = void | { refused: Refusal };

/**
 * The service's handler: applies one notification (throws when it could not; the rail delivers it
 * again later). `batch`, when present, applies several at once — the rail's delivery batch, at most
 * one notification per subject — and answers each one on its own; a rail that delivers in batches
 * calls it instead of the handler once per notification.
 */
export interface NotificationHandler {
  (notification: RailNotification): Promise<NotificationAnswer>;
  batch?: (notifications: RailNotification[]) => Promise<BatchOutcome<NotificationAnswer>[]>;
}

export interface Rail {
  readonly directory: KeyDirectory;
  /** Sends a payment. Idempotent on `endToEndId`. Never call it inside a database transaction. */
  sendPayment(order: PaymentOrder): Promise<PaymentAck>;
  /** Sends a return. Idempotent on `endToEndId`. Never call it inside a database transaction. */
  sendReturn(order: ReturnOrder): Promise<ReturnAck>;
  /** Registers the service's handler of notifications (one handler; set before workers start). */
  onNotification(handler: NotificationHandler): void;
  /** Background loops the rail needs (the simulator's engine; a real adapter's message consumer). */
  workers(): BackgroundWorker[];
}

/** A rail call that did not answer within RAIL_TIMEOUT_MS: treated like no answer at all. */
export class RailTimeoutError extends Error {
  override name = 'RailTimeoutError';
}

/** `promise`, or a RailTimeoutError once `ms` have passed (the call itself is abandoned, not undone). */
function within<T>(what: string, ms: number, promise: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new RailTimeoutError(`the rail did not answer ${what} within ${ms} ms`)), ms);
  });
  return Promise.race([promise, expired]).finally(() => clearTimeout(timer));
}

/**
 * The rail as pixgate calls it: every call (payment and return orders, directory look-ups and
 * writes) has a deadline of `timeoutMs` (RAIL_TIMEOUT_MS), kept shorter than the idempotency lease
 * so that a request waiting for the rail never loses its Idempotency-Key to a retry. A call past
 * its deadline rejects with RailTimeoutError: for an order that is "no answer" — the record stays
 * at stage 1 and the recovery worker sends it again (the rail deduplicates on the end-to-end id).
 *
 * The result is the same object seen through a proxy, so everything else the adapter offers (the
 * simulator's sandbox controls) is reached unchanged.
 */
export function withDeadline<R extends Rail>(rail: R, timeoutMs: number): R {
  const directory: KeyDirectory = {
    registerKey: (r) => within('registerKey', timeoutMs, rail.directory.registerKey(r)),
    removeKey: (key) => within('removeKey', timeoutMs, rail.directory.removeKey(key)),
    lookupKey: (key) => within('lookupKey', timeoutMs, rail.directory.lookupKey(key)),
  };
  const sendPayment = (order: PaymentOrder) => within('sendPayment', timeoutMs, rail.sendPayment(order));
  const sendReturn = (order: ReturnOrder) => within('sendReturn', timeoutMs, rail.sendReturn(order));
  const bounded: Record<PropertyKey, unknown> = { directory, sendPayment, sendReturn };
  // No set trap: a method assigned on the rail (tests inject faults this way) lands on the adapter
  // itself, where the bounded wrappers above call it; deleting it restores the adapter's own.
  return new Proxy(rail, {
    get(target, prop, receiver) {
      if (Object.hasOwn(bounded, prop)) return bounded[prop];
      return Reflect.get(target, prop, receiver);
    },
  });
}
