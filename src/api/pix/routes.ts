import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../../context.js';
import { transactionRoutes } from '../transactions/routes.js';
import { cashOutRoutes } from './cashOut.routes.js';
import { refundRoutes } from './refund.routes.js';

/** The external routes of sending and returning money and of reading what moved. */
export async function pixOutRoutes(app: FastifyInstance, ctx: AppContext) {
  await cashOutRoutes(app, ctx);
  await refundRoutes(app, ctx);
  await transactionRoutes(app, ctx);
}
