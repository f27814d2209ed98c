import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    pool: 'forks',
    // Files run in parallel (one fork per core); each test builds its own database or schema.
    testTimeout: 30_000,
    hookTimeout: 60_000,
    globalSetup: ['test/helpers/global-setup.ts'],
    // The OpenAPI contract check (test/helpers/contract.ts) fails a test whose exchanges leave the document.
    setupFiles: ['test/helpers/contract-setup.ts'],
    reporters: ['default'],
  },
});
