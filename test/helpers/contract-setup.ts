import { afterEach } from 'vitest';
import { takeContractViolations } from './contract.js';

// Every test fails when one of its exchanges with the server was outside the OpenAPI document.
afterEach(() => {
  const found = takeContractViolations();
  if (found.length > 0) throw new Error(`OpenAPI contract violations (${found.length}):\n${found.slice(0, 20).join('\n')}`);
});
