import type { Rail } from './rail.js';

/** Where the decorator reports each call (the process's Metrics, src/metrics/metrics.ts). */
export interface RailCallObserver {
  railCall(operation: string, outcome: string, seconds: number): void;
}

const TIMED_RAIL_CALLS = new Set(['sendPayment', 'sendReturn']);

/**
 * The rail adapter with its calls timed: sendPayment/sendReturn by their answer's status (or
 * `error`), and the directory's key lookups.
 */
export function instrumentRail(rail: Rail, metrics: RailCallObserver): Rail {
  const time = async <T>(operation: string, call: () => Promise<T>, outcomeOf: (r: T) => string): Promise<T> => {
    const started = process.hrtime.bigint();
    const seconds = () => Number(process.hrtime.bigint() - started) / 1e9;
    try {
      const result = await call();
      metrics.railCall(operation, outcomeOf(result), seconds());
      return result;
    } catch (err) {
      metrics.railCall(operation, 'error', seconds());
      throw err;
    }
  };
  const directory = new Proxy(rail.directory, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver) as unknown;
      if (prop === 'lookupKey' && typeof value === 'function') {
        return (key: string) => time('lookupKey', () => (value as Rail['directory']['lookupKey']).call(target, key), (r) => (r ? 'found' : 'not_found'));
      }
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
  return new Proxy(rail, {
    get(target, prop, receiver) {
      if (prop === 'directory') return directory;
      const value = Reflect.get(target, prop, receiver) as unknown;
      if (typeof prop === 'string' && TIMED_RAIL_CALLS.has(prop) && typeof value === 'function') {
        return (...args: unknown[]) =>
          time(prop, () => (value as (...a: unknown[]) => Promise<{ status: string }>).apply(target, args), (r) => r.status);
      }
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
}
