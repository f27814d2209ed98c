import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

const sdkSource = (file: string) => fileURLToPath(new URL(`./packages/sdk/src/${file}`, import.meta.url));

export default defineConfig({
  // The SDK workspace from its sources (as tsconfig.json's paths): tests need no SDK build.
  resolve: {
    alias: [
      { find: /^@pixgate\/sdk$/, replacement: sdkSource('index.ts') },
      { find: /^@pixgate\/sdk\/canonical-json$/, replacement: sdkSource('canonicalJson.ts') },
    ],
  },
  test: {
    include: ['test/**/*.test.ts'],
    pool: 'forks',
    // Files run in parallel; each test builds its own database or schema. Vitest's default is one
    // fork per core minus one — a single fork, every file in turn, on a 2-core machine — while most
    // of a file's time is spent waiting on sockets, child processes and timers.
    maxWorkers: Number(process.env.TEST_WORKERS ?? 2),
    minWorkers: 1,
    // A safety net against a hang, not a timing assertion: generous, since the forks share two
    // cores and the tests that spawn whole pixgate processes (test/process.test.ts) take 15-25 s then.
    testTimeout: 60_000,
    hookTimeout: 120_000,
    globalSetup: ['test/helpers/global-setup.ts'],
    // The OpenAPI contract check (test/helpers/contract.ts) fails a test whose exchanges leave the document.
    setupFiles: ['test/helpers/contract-setup.ts'],
    reporters: ['default'],
  },
});
