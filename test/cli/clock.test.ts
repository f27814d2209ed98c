import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseDuration } from '../../src/cli/clock.js';
import type { CliIo } from '../../src/cli/io.js';
import { runCli } from '../../src/cli/main.js';
import { startTestServer, TEST_ADMIN_TOKEN, type TestServer } from '../helpers/server.js';

async function cli(argv: string[], env: Record<string, string> = {}) {
  let stdout = '';
  let stderr = '';
  const io: CliIo = {
    stdout: (t) => void (stdout += t),
    stderr: (t) => void (stderr += t),
    env: { HOME: '/nonexistent', DATA_DIR: '/nonexistent', ...env },
    isTTY: false,
    cwd: process.cwd(),
    signal: new AbortController().signal,
  };
  const code = await runCli(argv, io);
  return { code, stdout, stderr };
}

describe('parseDuration', () => {
  it('takes seconds and unit runs; refuses the rest', () => {
    expect(parseDuration('90')).toBe(90);
    expect(parseDuration('2d')).toBe(172_800);
    expect(parseDuration('1h30m')).toBe(5_400);
    expect(parseDuration('1w2d3h4m5s')).toBe(604_800 + 172_800 + 10_800 + 240 + 5);
    expect(parseDuration('2D')).toBe(172_800);
    for (const bad of ['', 'd', '2x', '-5', '1.5h', '2 d', 'h2']) expect(parseDuration(bad), bad).toBeNull();
  });
});

describe('pixgate clock against a real server', () => {
  let s: TestServer;
  let env: Record<string, string>;
  beforeAll(async () => {
    s = await startTestServer({ workers: false });
    env = { PIXGATE_URL: s.url, PIXGATE_ADMIN_TOKEN: TEST_ADMIN_TOKEN };
  });
  afterAll(async () => s?.close());

  it('shows the clock, advances it by 2d, and the server agrees', async () => {
    const shown = await cli(['clock'], env);
    expect(shown).toMatchObject({ code: 0, stderr: '' });
    expect(shown.stdout).toMatch(/^now {5}\d{4}-\d\d-\d\dT.*Z\noffset  0 s \(0s ahead of real time\)\n$/);

    const moved = await cli(['clock', 'advance', '2d'], env);
    expect(moved).toMatchObject({ code: 0, stderr: '' });
    expect(moved.stdout).toContain('Advanced 2d\n');
    expect(moved.stdout).toContain('offset  172800 s (2d ahead of real time)\n');
    expect((s.ctx.clock as unknown as { offsetSeconds(): number }).offsetSeconds()).toBe(172_800);

    const json = await cli(['clock', 'advance', '1h30m', '--json'], env);
    expect(json.code).toBe(0);
    const body = JSON.parse(json.stdout);
    expect(body.offset_seconds).toBe(172_800 + 5_400);
    expect(new Date(body.now).getTime() - Date.now()).toBeGreaterThan((172_800 + 5_400 - 5) * 1000);
  });

  it('refuses a bad duration (exit 2) and needs the admin token', async () => {
    expect(await cli(['clock', 'advance', 'soon'], env)).toMatchObject({ code: 2, stderr: expect.stringContaining('usage: pixgate clock advance <duration>') });
    expect(await cli(['clock', 'advance'], env)).toMatchObject({ code: 2 });
    expect(await cli(['clock', 'rewind', '1d'], env)).toMatchObject({ code: 2, stderr: expect.stringContaining('unknown clock command "rewind"') });
    expect(await cli(['clock'], { PIXGATE_URL: s.url })).toMatchObject({ code: 2, stderr: expect.stringContaining('no admin token') });
  });

  it('reports the server’s 400 (exit 1) for an advance past the bound', async () => {
    const res = await cli(['clock', 'advance', '400d'], env);
    expect(res.code).toBe(1);
    expect(res.stderr).toContain('HTTP 400');
    expect(res.stderr).toContain('must be less than or equal to 31622400');
  });
});

describe('pixgate clock against production', () => {
  it('says the server has no sandbox clock (exit 1)', async () => {
    const s = await startTestServer({ workers: false, env: { APP_ENV: 'production', DATABASE_URL: 'postgres://unused/db' } });
    try {
      const res = await cli(['clock', 'advance', '2d'], { PIXGATE_URL: s.url, PIXGATE_ADMIN_TOKEN: TEST_ADMIN_TOKEN });
      expect(res.code).toBe(1);
      expect(res.stderr).toContain('has no sandbox clock');
    } finally {
      await s.close();
    }
  });
});
