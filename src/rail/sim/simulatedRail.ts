import type { BackgroundWorker } from '../../lib/worker.js';
import type {
  InfractionDecision,
  NotificationHandler,
  PaymentAck,
  PaymentOrder,
  Rail,
  ReturnAck,
  ReturnOrder,
} from '../rail.js';
import { SimDelivery } from './delivery.js';
import { SimDirectory } from './directory.js';
import { SimEngine } from './engine.js';
import { SpiIntake } from './intake.js';
import { SimInfractions } from './med.js';
import type { SandboxOutcome, SimulatorOptions } from './options.js';
import { SeededRandom } from './random.js';
import { SandboxControls } from './sandbox.js';
import type * as store from './store.js';

export type { SandboxOutcome, SimulatorOptions } from './options.js';

/**
 * The simulated central bank. It keeps its own books in `sim_*` tables of the same database:
 * the directory (DICT), every payment and return it has seen, and the notifications it still has to
 * deliver to this institution. This class is its face — the Rail port plus the sandbox controls —
 * over its parts, one concern each:
 *
 *   directory.ts  the key directory (DICT)
 *   intake.ts     SPI intake: payment and return orders, the stall switch on their answers
 *   engine.ts     the engine: due work advanced, the background loop, clock steps
 *   delivery.ts   notifications queued, claimed and delivered to the service's handler
 *   sandbox.ts    sandbox controls (contract section 4): stall, foreign keys, payouts, inbound PIX
 *   med.ts        MED infractions reported and resolved
 *
 * Its state is in the database, so it survives restarts and any number of processes can run the
 * engine (see engine.ts).
 */
export class SimulatedRail implements Rail {
  readonly directory: SimDirectory;
  readonly random: SeededRandom;
  private readonly delivery: SimDelivery;
  private readonly engine: SimEngine;
  private readonly intake: SpiIntake;
  private readonly sandbox: SandboxControls;
  private readonly infractions: SimInfractions;

  constructor(private readonly options: SimulatorOptions) {
    this.random = new SeededRandom(options.seed);
    this.directory = new SimDirectory(options);
    this.delivery = new SimDelivery(options, (at) => this.engine.wakeAt(at));
    this.engine = new SimEngine(options, this.delivery);
    this.intake = new SpiIntake(options, this.engine);
    this.sandbox = new SandboxControls(options, this.engine, this.delivery, this.random);
    this.infractions = new SimInfractions(options, this.engine, this.delivery);
  }

  get ispb(): string {
    return this.options.institutionIspb;
  }

  // ---- the Rail port ----

  onNotification(handler: NotificationHandler): void {
    this.delivery.setHandler(handler);
  }

  workers(): BackgroundWorker[] {
    return [this.engine.worker()];
  }

  async sendPayment(order: PaymentOrder): Promise<PaymentAck> {
    return this.intake.sendPayment(order);
  }

  async sendReturn(order: ReturnOrder): Promise<ReturnAck> {
    return this.intake.sendReturn(order);
  }

  // ---- the engine across processes (src/lib/clusterWakes.ts) ----

  /** For a process that does not run the engine: its wake-ups go to `forward` (SimEngine.forwardWakes). */
  forwardWakes(forward: (at: number) => void): void {
    this.engine.forwardWakes(forward);
  }

  /** A wake-up from another process for work it queued (`forwardWakes`); nothing if the engine does not run here. */
  wake(at: number): void {
    this.engine.wakeAt(at);
  }

  /** One pass of the engine (SimEngine.tick). */
  tick(options: { claim?: boolean } = {}): Promise<void> {
    return this.engine.tick(options);
  }

  /** Runs the engine until the given notifications are delivered (SimEngine.deliverNow). */
  deliverNow(notificationIds: string[]): Promise<void> {
    return this.engine.deliverNow(notificationIds);
  }

  // ---- sandbox controls (contract section 4; sandbox.ts, med.ts) ----

  readStall(): Promise<store.RailStall> {
    return this.sandbox.readStall();
  }

  setStall(stall: store.RailStall): Promise<store.RailStall> {
    return this.sandbox.setStall(stall);
  }

  registerForeignKey(entry: Parameters<SandboxControls['registerForeignKey']>[0]): Promise<SandboxOutcome<{ row: store.DictRow; created: boolean }>> {
    return this.sandbox.registerForeignKey(entry);
  }

  decidePayment(transactionId: string, decision: 'settle' | 'reject'): Promise<SandboxOutcome<{ endToEndId: string }>> {
    return this.sandbox.decidePayment(transactionId, decision);
  }

  returnPayment(transactionId: string, amount: number | undefined): Promise<SandboxOutcome<{ returned: boolean; endToEndId: string }>> {
    return this.sandbox.returnPayment(transactionId, amount);
  }

  simulateInboundPayment(input: Parameters<SandboxControls['simulateInboundPayment']>[0]): Promise<string> {
    return this.sandbox.simulateInboundPayment(input);
  }

  reportInfraction(input: { endToEndId: string; amount: number | undefined; reason: string }): Promise<SandboxOutcome<{ id: string }>> {
    return this.infractions.report(input);
  }

  resolveInfraction(id: string, decision: InfractionDecision): Promise<SandboxOutcome> {
    return this.infractions.resolve(id, decision);
  }
}
