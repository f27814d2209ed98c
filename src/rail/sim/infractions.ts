import type { Sql } from '../../db/db.js';
import type { InfractionDecision } from '../rail.js';

/** SQL of the simulated central bank's infractions (table `sim_infractions`, migration 0450). */

export interface SimInfractionRow {
  id: string;
  end_to_end_id: string;
  amount: number;
  reason: string;
  status: 'OPEN' | 'CLOSED' | 'CANCELLED';
  decision: InfractionDecision | null;
  created_at: Date;
  resolved_at: Date | null;
}

export async function insertInfraction(tx: Sql, row: Pick<SimInfractionRow, 'id' | 'end_to_end_id' | 'amount' | 'reason' | 'created_at'>): Promise<void> {
  await tx.query(
    `INSERT INTO sim_infractions (id, end_to_end_id, amount, reason, status, created_at) VALUES ($1, $2, $3, $4, 'OPEN', $5)`,
    [row.id, row.end_to_end_id, row.amount, row.reason, row.created_at],
  );
}

export async function findOpenInfraction(tx: Sql, endToEndId: string): Promise<SimInfractionRow | undefined> {
  const [row] = await tx.query<SimInfractionRow>(`SELECT * FROM sim_infractions WHERE end_to_end_id = $1 AND status = 'OPEN'`, [endToEndId]);
  return row;
}

export async function lockInfraction(tx: Sql, id: string): Promise<SimInfractionRow | undefined> {
  const [row] = await tx.query<SimInfractionRow>('SELECT * FROM sim_infractions WHERE id = $1 FOR UPDATE', [id]);
  return row;
}

export async function resolveInfraction(tx: Sql, id: string, decision: InfractionDecision, at: Date): Promise<void> {
  await tx.query(`UPDATE sim_infractions SET status = $2, decision = $3, resolved_at = $4 WHERE id = $1`, [
    id,
    decision === 'cancelled' ? 'CANCELLED' : 'CLOSED',
    decision,
    at,
  ]);
}
