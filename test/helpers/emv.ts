/**
 * An independent reading of EMV® QRCPS payloads (BR Code) for cross-checking pixgate's encoder:
 * written from the layout (2-digit id, 2-digit length, value) and the CRC-16/CCITT-FALSE definition,
 * sharing no code with src/lib/brcode.ts.
 */
export function emvFields(text: string): Map<string, string> {
  const out = new Map<string, string>();
  let i = 0;
  while (i < text.length) {
    const id = text.substring(i, i + 2);
    const len = parseInt(text.substring(i + 2, i + 4), 10);
    out.set(id, text.substring(i + 4, i + 4 + len));
    i += 4 + len;
  }
  return out;
}

/** CRC-16/CCITT-FALSE (poly 0x1021, init 0xFFFF, no reflection, no final xor), table-driven. */
const TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n << 8;
  for (let k = 0; k < 8; k++) c = (c << 1) ^ (c & 0x8000 ? 0x1021 : 0);
  return c & 0xffff;
});
export function crcCcittFalse(text: string): string {
  let crc = 0xffff;
  for (const b of new TextEncoder().encode(text)) crc = ((crc << 8) ^ TABLE[((crc >> 8) ^ b) & 0xff]!) & 0xffff;
  return crc.toString(16).toUpperCase().padStart(4, '0');
}
