import { createHash } from 'node:crypto';
import { existsSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { loadMigrations, migrate } from '../../src/db/migrate.js';
import { openPglite } from '../../src/db/pglite.js';

/**
 * Builds, once per run, a migrated PGlite data folder as a tarball; each test database starts from
 * it (about 0.5 s instead of 2-3 s of initdb + migrations).
 */
export default async function setup(project: TestProject) {
  const migrations = loadMigrations();
  const hash = createHash('sha256')
    .update(migrations.map((m) => m.name + '\0' + m.sql).join('\0'))
    .digest('hex')
    .slice(0, 16);
  const path = join(tmpdir(), `pixgate-pglite-template-${hash}.tar`);
  if (!existsSync(path)) {
    const db = await openPglite({ dataDir: 'memory://' });
    await migrate(db, migrations);
    const blob = await db.dump();
    await db.close();
    const tmp = `${path}.${process.pid}`;
    writeFileSync(tmp, Buffer.from(await blob.arrayBuffer()));
    const { renameSync } = await import('node:fs');
    renameSync(tmp, path);
  }
  project.provide('pgliteTemplate', path);
  const backends = process.env.TEST_DATABASE_URL && process.env.TEST_PGBOUNCER_URL ? ['postgres through pgbouncer'] : ['pglite', ...(process.env.TEST_DATABASE_URL ? ['postgres'] : [])];
  const stores = ['memory', ...(process.env.TEST_REDIS_URL ? ['redis'] : [])];
  console.log(`pixgate tests: storage backends [${backends.join(', ')}], rate-limit/nonce stores [${stores.join(', ')}]`);
}

declare module 'vitest' {
  export interface ProvidedContext {
    pgliteTemplate: string;
  }
}
