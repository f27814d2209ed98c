import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../context.js';
import { badRequest } from '../http/errors.js';
import { parseOrThrow } from '../http/validation.js';
import { mount } from '../http/routeSpec.js';
import { dictKey, inbound, pay, returnBody, sandboxApi as api, transactionIdParam } from './sandbox.api.js';
import { centsToBaseUnits } from '../lib/money.js';
import * as merchants from '../merchants/repository.js';
import { normalizePixKey } from '../pix/keys.js';
import * as pix from '../pix/repository.js';
import { SimulatedRail } from '../rail/simulator.js';
import { transactionRecord } from '../transactions/views.js';
import { findRefusalByEndToEndId } from '../pix/railRefusals.js';
import { creditedOrRefused, unwrap } from './outcome.js';
import { payBrCode } from './payerBank.js';

/**
 * Rail simulator controls of contract section 4: the directory of other institutions, decisions on
 * payouts, returns by receivers, incoming PIX and BR Code payments. Each call answers after the service applied its
 * effect (the simulator delivers the resulting notification before answering).
 */
export async function pixSandboxRoutes(app: FastifyInstance, ctx: AppContext) {
  const sim = ctx.rail;
  if (!(sim instanceof SimulatedRail)) return;

  const payoutView = async (transactionId: string) => {
    const [row] = await ctx.db.query<pix.OwnedTransaction>('SELECT * FROM transactions WHERE transaction_id = $1', [transactionId]);
    return transactionRecord(row!);
  };

  mount(app, api.dictKey, async (req, reply) => {
    const body = parseOrThrow(dictKey, req.body);
    const key = normalizePixKey(body.type, body.key);
    if (key === null) throw badRequest({ key: [`is not a valid ${body.type} key`] });
    const { row, created } = unwrap(
      await sim.registerForeignKey({
        key,
        type: body.type,
        name: body.name,
        document: body.document,
        ispb: body.ispb,
        bankName: body.bank_name ?? null,
        behavior: body.behavior ?? 'settle',
        fraudFlagged: body.fraud_flagged ?? false,
      }),
    );
    return reply.code(created ? 201 : 200).send({
      key: row.key,
      type: row.type,
      name: row.name,
      document: row.document,
      ispb: row.ispb,
      bank_name: row.bank_name,
      behavior: row.behavior,
      fraud_flagged: row.fraud_flagged,
    });
  });

  for (const decision of ['settle', 'reject'] as const) {
    mount(app, api[decision], async (req) => {
      const { transaction_id } = parseOrThrow(transactionIdParam, req.params);
      unwrap(await sim.decidePayment(transaction_id, decision));
      return payoutView(transaction_id);
    });
  }

  mount(app, api.returnPayout, async (req, reply) => {
    const { transaction_id } = parseOrThrow(transactionIdParam, req.params);
    const body = parseOrThrow(returnBody, req.body ?? undefined);
    const amount = body?.amount === undefined ? undefined : centsToBaseUnits(body.amount);
    const result = unwrap(await sim.returnPayment(transaction_id, amount));
    const payout = await payoutView(transaction_id);
    if (!result.returned) {
      return reply.code(200).send({ returned: false, end_to_end_id: result.endToEndId, detail: 'The central bank refused the return: the amount exceeds what remains of the payout', payout });
    }
    const [back] = await ctx.db.query<{ transaction_id: string; amount: number }>(
      'SELECT transaction_id, amount FROM transactions WHERE end_to_end_id = $1',
      [result.endToEndId],
    );
    const refused = back ? undefined : await findRefusalByEndToEndId(ctx.db, result.endToEndId);
    if (refused) {
      return reply.code(200).send({ returned: false, end_to_end_id: result.endToEndId, detail: `This institution refused the return (${refused.reason_code}): ${refused.reason}`, payout });
    }
    return reply.code(201).send({ returned: true, transaction_id: back?.transaction_id ?? null, end_to_end_id: result.endToEndId, amount: back?.amount ?? amount ?? null, payout });
  });

  mount(app, api.inbound, async (req, reply) => {
    const body = parseOrThrow(inbound, req.body);
    if (!(await merchants.findAccount(ctx.db, body.account_id))) throw badRequest({ account_id: ['does not exist'] });
    const endToEndId = await sim.simulateInboundPayment({
      accountId: body.account_id,
      amount: centsToBaseUnits(body.amount),
      payerName: body.payer_name,
      payerDocument: body.payer_document,
      payerIspb: body.payer_ispb,
      description: body.description,
    });
    const row = await creditedOrRefused(ctx, endToEndId);
    return reply.code(201).send({ transaction_id: row.transaction_id, end_to_end_id: row.end_to_end_id, amount: row.amount });
  });

  mount(app, api.pay, async (req, reply) => {
    const body = parseOrThrow(pay, req.body);
    const paid = await payBrCode(ctx, sim, {
      emv: body.emv,
      amountCents: body.amount,
      payerName: body.payer_name,
      payerDocument: body.payer_document,
      payerIspb: body.payer_ispb,
    });
    return reply.code(201).send(paid);
  });
}
