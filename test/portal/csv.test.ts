import { describe, expect, it } from 'vitest';
import { csvCell } from '../../src/portal/pages/statement.js';

describe('statement CSV cells', () => {
  it('keeps plain values, writes null and undefined as empty', () => {
    expect(csvCell('PIX received')).toBe('PIX received');
    expect(csvCell(12345)).toBe('12345');
    expect(csvCell(null)).toBe('');
    expect(csvCell(undefined)).toBe('');
  });

  it('puts an apostrophe before a value a spreadsheet would run as a formula', () => {
    for (const start of ['=', '+', '-', '@', '\t', '\r']) {
      expect(csvCell(`${start}SUM(A1)`)).toMatch(/^"?'/);
    }
    expect(csvCell('=HYPERLINK("x")')).toBe(`"'=HYPERLINK(""x"")"`);
    expect(csvCell('-5')).toBe("'-5");
    expect(csvCell('a=b')).toBe('a=b');
  });

  it('quotes a value holding a comma, a quote or a line break, doubling its quotes', () => {
    expect(csvCell('Silva, Ana')).toBe('"Silva, Ana"');
    expect(csvCell('say "hi"')).toBe('"say ""hi"""');
    expect(csvCell('two\nlines')).toBe('"two\nlines"');
    expect(csvCell('a\rb')).toBe('"a\rb"');
    expect(csvCell('\rx')).toBe(`"'\rx"`);
  });
});
