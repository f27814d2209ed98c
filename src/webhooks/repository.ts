/**
 * SQL of the webhooks domain, split by statement family (each file its own):
 *   endpointsRepo.ts   registrations: create, list, delete, pause and resume
 *   fanoutRepo.ts      the fan-out of outbox events to deliveries
 *   deliveriesRepo.ts  delivery claims, attempt results, the operator view
 *   queueSql.ts        the wake-up channels and the subject-order check they share
 */
export * from './queueSql.js';
export * from './endpointsRepo.js';
export * from './fanoutRepo.js';
export * from './deliveriesRepo.js';
