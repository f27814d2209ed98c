import { conflict, notFound, unprocessable } from '../http/errors.js';
import type { SandboxOutcome } from '../rail/simulator.js';

/** The value of a simulator outcome, or its refusal as a business error (404, 409, 422). */
export function unwrap<T>(outcome: SandboxOutcome<T>): T {
  if (outcome.ok) return outcome.value;
  switch (outcome.reason) {
    case 'not_found':
      throw notFound(outcome.detail);
    case 'conflict':
      throw conflict(outcome.detail);
    case 'unprocessable':
      throw unprocessable(outcome.detail);
  }
}
