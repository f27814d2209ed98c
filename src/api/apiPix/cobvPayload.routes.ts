import type { FastifyInstance } from 'fastify';
import { centsToDecimal } from '../../apiPix/amount.js';
import { amountDue } from '../../apiPix/cobv/amountDue.js';
import { cobvOfLocationToken } from '../../apiPix/cobv/cobvs.js';
import { cobvValueOf } from '../../apiPix/cobv/types.js';
import type { AppContext } from '../../context.js';
import { DomainError, invalidFields } from '../../errors/catalog.js';
import { brasiliaDate, isCalendarDate } from '../../lib/businessDays.js';
import { isoZ } from '../../lib/clock.js';
import type { JwsSigner } from '../../lib/jws.js';
import { findMerchant } from '../../merchants/repository.js';
import { recebedorOf } from './cobvViews.js';

/** The Fastify route of a cobv's payload read (the standard's `GET /cobv/{pixUrlAccessToken}`). */
export const COBV_PAYLOAD_ROUTE = '/qr/v2/cobv/:pixUrlAccessToken';

/**
 * A cobv's payload read: `GET /qr/v2/cobv/<token>?DPP=&codMun=`, unauthenticated, a JWS
 * (`application/jose`, the same signer and key set as cob's) of the standard's cobv payload with
 * `valor.final` the amount due on `DPP` (the intended payment date; default today in Brasília) and
 * the parts of it (`abatimento`, `desconto`, `multa`, `juros`) when not zero. 400
 * CobPayloadOperacaoInvalida: `codMun` not 7 digits, `DPP` not a date, before today, or after the
 * last payable day; 404 CobPayloadNaoEncontrado: no ATIVA cobv at the location. `codMun` is read and
 * not used (pixgate knows national holidays only).
 */
export async function cobvPayloadRoutes(app: FastifyInstance, ctx: AppContext, jws: () => Promise<JwsSigner>) {
  app.get(
    COBV_PAYLOAD_ROUTE,
    { config: { errorShape: 'api_pix', pixProblems: { invalid: 'CobPayloadOperacaoInvalida', notFound: 'CobPayloadNaoEncontrado' } } },
    async (req, reply) => {
      const { pixUrlAccessToken } = req.params as { pixUrlAccessToken: string };
      const query = (req.query ?? {}) as { codMun?: unknown; DPP?: unknown };
      const cobv = /^[0-9a-f]{32}$/.test(pixUrlAccessToken) ? await cobvOfLocationToken(ctx, pixUrlAccessToken) : undefined;
      if (!cobv || cobv.status !== 'ATIVA') throw new DomainError('not_found', { message: 'A location não apresenta uma cobrança ativa' });
      if (query.codMun !== undefined && (typeof query.codMun !== 'string' || !/^\d{7}$/.test(query.codMun))) throw invalidFields({ codMun: ['deve ter 7 dígitos (código IBGE)'] });
      if (query.DPP !== undefined && (typeof query.DPP !== 'string' || !isCalendarDate(query.DPP))) throw invalidFields({ DPP: ['deve ser uma data AAAA-MM-DD'] });
      const now = ctx.clock.now();
      const today = brasiliaDate(now);
      const dpp = (query.DPP as string | undefined) ?? today;
      if (dpp < today) throw invalidFields({ DPP: [`é anterior a hoje (${today})`] });
      const due = amountDue(cobvValueOf(cobv.valor), { dueDate: cobv.due_date, daysAfterDue: cobv.days_after_due }, dpp);
      if (!due.payable) throw invalidFields({ DPP: [`é posterior ao último dia em que a cobrança pode ser paga (${due.lastPayable})`] });
      const merchant = await findMerchant(ctx.db, cobv.merchant_id);
      const r = cobv.request;
      const part = (name: string, cents: number) => (cents > 0 ? { [name]: centsToDecimal(cents) } : {});
      const body = {
        calendario: { criacao: isoZ(cobv.created_at)!, apresentacao: isoZ(now)!, dataDeVencimento: cobv.due_date, validadeAposVencimento: cobv.days_after_due },
        devedor: r.devedor,
        recebedor: recebedorOf({ name: merchant?.name ?? '', document: merchant?.document ?? '' }),
        txid: cobv.txid,
        revisao: cobv.revisao,
        status: cobv.status,
        valor: {
          original: centsToDecimal(due.originalCents),
          ...part('multa', due.multaCents),
          ...part('juros', due.jurosCents),
          ...part('abatimento', due.abatimentoCents),
          ...part('desconto', due.descontoCents),
          final: centsToDecimal(due.finalCents),
        },
        chave: cobv.chave,
        ...(r.solicitacaoPagador !== undefined ? { solicitacaoPagador: r.solicitacaoPagador } : {}),
        ...(r.infoAdicionais !== undefined ? { infoAdicionais: r.infoAdicionais } : {}),
      };
      return reply.type('application/jose').header('cache-control', 'no-store').send((await jws()).sign(body, { typ: 'JOSE' }));
    },
  );
}
