/**
 * The webhook receiver of the fault-injection suite: node:http on loopback. It verifies
 * X-Service-Signature over the raw body with the secret of the webhook the path names, records
 * every receipt (delivery id, attempt, event, body, time, answer) and answers 2xx — or, with a
 * seeded probability, 503, so the retry path is exercised too.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Receipt {
  deliveryId: string;
  attempt: number;
  event: string;
  webhookKey: string;
  body: string;
  signatureOk: boolean;
  at: number;
  answered: number;
}

export class WebhookReceiver {
  readonly receipts: Receipt[] = [];
  /** Secrets by webhook path key (one webhook per merchant: /hook/<merchant>). */
  readonly secrets = new Map<string, string>();
  private server: Server | undefined;
  port = 0;
  constructor(
    private readonly failRate: number,
    private readonly random: () => number,
  ) {}

  async start(): Promise<void> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const raw = Buffer.concat(chunks);
        const key = (req.url ?? '').replace(/^\/hook\//, '');
        const secret = this.secrets.get(key);
        const given = String(req.headers['x-service-signature'] ?? '');
        const expected = secret ? createHmac('sha256', secret).update(raw).digest('hex') : '';
        const signatureOk = !!secret && given.length === expected.length && timingSafeEqual(Buffer.from(given), Buffer.from(expected));
        const answered = signatureOk && this.random() < this.failRate ? 503 : 200;
        this.receipts.push({
          deliveryId: String(req.headers['x-service-delivery'] ?? ''),
          attempt: Number(req.headers['x-service-attempt'] ?? 0),
          event: String(req.headers['x-service-event'] ?? ''),
          webhookKey: key,
          body: raw.toString('utf8'),
          signatureOk,
          at: Date.now(),
          answered,
        });
        res.writeHead(answered, { 'content-type': 'text/plain' }).end(answered === 200 ? 'ok' : 'try later');
      });
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.port = (this.server.address() as AddressInfo).port;
  }

  url(key: string): string {
    return `http://127.0.0.1:${this.port}/hook/${key}`;
  }

  async stop(): Promise<void> {
    const s = this.server;
    if (!s) return;
    s.closeAllConnections();
    await new Promise<void>((resolve) => s.close(() => resolve()));
  }
}
