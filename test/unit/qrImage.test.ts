import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { qrCodeDataUrl } from '../../src/pix/cashin/qrImage.js';
import { expectQrImageOf } from '../helpers/png.js';

describe('QR code image', () => {
  it('shows exactly the QR symbol of any text, from one character to a long BR Code (property)', () => {
    fc.assert(
      fc.property(fc.string({ minLength: 1, maxLength: 300, unit: 'grapheme-ascii' }), (text) => {
        expectQrImageOf(qrCodeDataUrl(text), text);
      }),
      { numRuns: 25 },
    );
  });

  it('is deterministic: the same text gives the same bytes', () => {
    const text = '00020126580014br.gov.bcb.pix0136123e4567-e12b-12d1-a456-4266554400005204000053039865802BR5913Fulano de Tal6008BRASILIA62070503***63041D3D';
    expect(qrCodeDataUrl(text)).toBe(qrCodeDataUrl(text));
  });
});
