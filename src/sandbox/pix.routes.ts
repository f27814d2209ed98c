import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../context.js';
import { badRequest } from '../http/errors.js';
import { parseOrThrow } from '../http/validation.js';
import { mount } from '../http/routeSpec.js';
import { dictKey, explain, inbound, pay, returnBody, sandboxApi as api, transactionIdParam } from './sandbox.api.js';
import { explainBrCode } from '../lib/brcodeExplain.js';
import { brCodeKey, normalizePixKey } from '../pix/keys.js';
import { SimulatedRail } from '../rail/sim/simulatedRail.js';
import { decidePayout, receiveInbound, returnPayout } from './actions.js';
import { unwrap } from './outcome.js';
import { payBrCode } from './payerBank.js';

/**
 * Rail simulator controls of contract section 4: the directory of other institutions, decisions on
 * payouts, returns by receivers, incoming PIX and BR Code payments. Each call answers after the service applied its
 * effect (the simulator delivers the resulting notification before answering).
 */
export async function pixSandboxRoutes(app: FastifyInstance, ctx: AppContext) {
  const sim = ctx.rail;
  if (!(sim instanceof SimulatedRail)) return;

  mount(app, api.explainBrCode, async (req) => {
    const body = parseOrThrow(explain, req.body);
    return explainBrCode(body.emv, {
      keyProblem: (key) => (brCodeKey(key) === null ? `field 26.01 "${key}" is not a valid PIX key (CPF, CNPJ, e-mail, +55 phone or random key)` : null),
    });
  });
  directoryRoutes(app, sim);
  payoutRoutes(app, ctx, sim);
  incomingRoutes(app, ctx, sim);
}

/** The directory of other institutions: a foreign PIX key and how its bank behaves. */
function directoryRoutes(app: FastifyInstance, sim: SimulatedRail) {
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
}

/** Decisions on payouts (settle, reject) and returns by their receivers. */
function payoutRoutes(app: FastifyInstance, ctx: AppContext, sim: SimulatedRail) {
  for (const decision of ['settle', 'reject'] as const) {
    mount(app, api[decision], async (req) => {
      const { transaction_id } = parseOrThrow(transactionIdParam, req.params);
      return decidePayout(ctx, sim, transaction_id, decision);
    });
  }

  mount(app, api.returnPayout, async (req, reply) => {
    const { transaction_id } = parseOrThrow(transactionIdParam, req.params);
    const body = parseOrThrow(returnBody, req.body ?? undefined);
    const result = await returnPayout(ctx, sim, transaction_id, body?.amount);
    return reply.code(result.returned ? 201 : 200).send(result);
  });
}

/** Incoming PIX and BR Code payments from other banks. */
function incomingRoutes(app: FastifyInstance, ctx: AppContext, sim: SimulatedRail) {
  mount(app, api.inbound, async (req, reply) => {
    const body = parseOrThrow(inbound, req.body);
    const credited = await receiveInbound(ctx, sim, {
      accountId: body.account_id,
      amountCents: body.amount,
      payerName: body.payer_name,
      payerDocument: body.payer_document,
      payerIspb: body.payer_ispb,
      description: body.description,
    });
    return reply.code(201).send(credited);
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
