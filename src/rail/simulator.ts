import type { Database } from '../db/db.js';
import { UNIQUE_VIOLATION, sqlState } from '../db/db.js';
import { bankName } from '../lib/banks.js';
import type { PixKeyType } from '../pix/keys.js';
import { KeyAlreadyRegisteredError, type DirectoryEntry, type KeyDirectory, type KeyRegistration, type Rail } from './rail.js';

export interface SimulatorOptions {
  db: Database;
  institutionIspb: string;
  institutionName: string;
}

interface DictRow {
  key: string;
  type: PixKeyType;
  name: string;
  document: string;
  ispb: string;
  bank_name: string | null;
  account_id: number | null;
  behavior: string;
  fraud_flagged: boolean;
}

/**
 * The simulated central bank. Its state lives in `sim_*` tables of the same database, so pending
 * work survives a restart; nothing outside this folder reads those tables.
 */
export class SimulatedRail implements Rail {
  readonly directory: KeyDirectory;

  constructor(private readonly options: SimulatorOptions) {
    this.directory = {
      registerKey: (r) => this.registerKey(r),
      removeKey: (key) => this.removeKey(key),
      lookupKey: (key) => this.lookupKey(key),
    };
  }

  private async registerKey(r: KeyRegistration): Promise<void> {
    try {
      await this.options.db.query(
        `INSERT INTO sim_dict_entries (key, type, name, document, ispb, bank_name, account_id)
         VALUES ($1, $2, $3, $4, $5, $6, $7)`,
        [r.key, r.type, r.name, r.document, this.options.institutionIspb, this.options.institutionName, r.accountId],
      );
    } catch (err) {
      if (sqlState(err) === UNIQUE_VIOLATION) throw new KeyAlreadyRegisteredError(`key ${r.key} is already registered`);
      throw err;
    }
  }

  private async removeKey(key: string): Promise<void> {
    await this.options.db.query('DELETE FROM sim_dict_entries WHERE key = $1 AND ispb = $2', [key, this.options.institutionIspb]);
  }

  private async lookupKey(key: string): Promise<DirectoryEntry | null> {
    const [row] = await this.options.db.query<DictRow>('SELECT * FROM sim_dict_entries WHERE key = $1', [key]);
    if (!row) return null;
    return {
      key: row.key,
      type: row.type,
      name: row.name,
      document: row.document,
      ispb: row.ispb,
      bankName: row.bank_name ?? bankName(row.ispb),
      accountId: row.account_id,
      fraudFlagged: row.fraud_flagged,
    };
  }
}
