import { describe, expect, it } from 'vitest';
import { API_PIX_STANDARD_MISSING, apiPixStandard } from '../helpers/apiPixStandard.js';
import { standardPath } from '../helpers/apiPixContract.js';

const standard = apiPixStandard();

/** The standard's document as the façade's tests read it (never a copy in this repository). */
describe.skipIf(!standard)(`the API Pix standard read at run time${standard ? '' : ` (skipped: ${API_PIX_STANDARD_MISSING})`}`, () => {
  it('is version 2.9.0 and has the operations the façade serves', () => {
    expect(standard!.version).toBe('2.9.0');
    const paths = standard!.doc.paths as Record<string, Record<string, unknown>>;
    for (const [path, method] of [
      ['/cob/{txid}', 'put'],
      ['/cob/{txid}', 'patch'],
      ['/cob/{txid}', 'get'],
      ['/cob', 'post'],
      ['/cob', 'get'],
      ['/loc', 'post'],
      ['/loc', 'get'],
      ['/loc/{id}', 'get'],
      ['/loc/{id}/txid', 'delete'],
      ['/{pixUrlAccessToken}', 'get'],
    ] as const) {
      expect(paths[path]?.[method], `${method} ${path}`).toBeDefined();
    }
  });

  it('still has the three slips the contract check corrects (drop a correction once the standard fixes its slip)', () => {
    const schemas = standard!.doc.components.schemas as Record<string, any>;
    expect(schemas.PixConsultados.required).toContain('cobs');
    expect(schemas.WebhookCompleto.required).toContain('cnpj');
    expect(schemas.WebhookCompleto.properties.chave).toBeUndefined();
    expect(schemas.Pix.properties.txid.allOf).toEqual([{ $ref: '#/components/schemas/TxId' }, { pattern: '[a-zA-Z0-9]{1,35}' }]);
    expect(schemas.TxId.pattern).toBe('[a-zA-Z0-9]{26,35}');
  });

  it('maps the façade’s routes to the standard’s paths', () => {
    expect(standardPath('/api/pix/v2/cob/:txid')).toBe('/cob/{txid}');
    expect(standardPath('/api/pix/v2/loc/:id/txid')).toBe('/loc/{id}/txid');
    expect(standardPath('/qr/v2/:pixUrlAccessToken')).toBe('/{pixUrlAccessToken}');
    expect(standardPath('/api/external/balance')).toBeUndefined();
  });
});
