/** A background loop (rail simulator, webhook delivery, expiry sweeps). */
export interface BackgroundWorker {
  readonly name: string;
  start(): void;
  /** Stops taking new work and resolves when the work in hand is finished. */
  stop(): Promise<void>;
}
